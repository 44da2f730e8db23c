package user

import (
	"net/http"
	"strings"
	"testing"

	"board/internal/snowflake/snowflaketest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// GET /v1/users?ids= names a page's writers in one call: the users that exist, in the order asked, each once.
func TestGetMany(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		svc := newTestService(t, db, snowflaketest.NewClock(t0), nil)
		c := newClient(t, svc, nil)
		var ids []string
		for _, name := range []string{"ann", "ben", "cat"} {
			status, _, raw := c.do("POST", "/v1/users", creds{name, "correct horse"})
			if status != http.StatusCreated {
				t.Fatalf("sign up %s: %d %s", name, status, raw)
			}
			ids = append(ids, decode[userBody](t, raw).UserID)
		}
		status, _, raw := c.do("GET", "/v1/users?ids="+strings.Join([]string{ids[2], ids[0], "12345", ids[0]}, ","), nil)
		got := decode[[]userBody](t, raw)
		if status != http.StatusOK || len(got) != 2 || got[0].Username != "cat" || got[1].Username != "ann" || got[0].UserID != ids[2] {
			t.Errorf("GET cat,ann,unknown,ann: %d %s", status, raw)
		}
		c.wantError("GET", "/v1/users", nil, http.StatusBadRequest, "MISSING_IDS")
		for _, bad := range []string{"x", "01", "1,,2", "1,-2", ids[0] + ","} {
			c.wantError("GET", "/v1/users?ids="+bad, nil, http.StatusBadRequest, "INVALID_IDS")
		}
		c.wantError("GET", "/v1/users?ids=1"+strings.Repeat(",1", MaxBatch), nil, http.StatusBadRequest, "TOO_MANY_IDS")
		status, _, raw = c.do("GET", "/v1/users?ids=1"+strings.Repeat(",1", MaxBatch-1), nil)
		if status != http.StatusOK || strings.TrimSpace(string(raw)) != "[]" {
			t.Errorf("%d unknown ids: %d %s, want []", MaxBatch, status, raw)
		}
	})
}

// GET /v1/users?usernames= resolves the names of @mentions: the users that exist, in the order asked, each once, in
// any case; ?prefix= suggests the users whose name starts so, by username, at most limit of them.
func TestByUsernamesAndPrefix(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		svc := newTestService(t, db, snowflaketest.NewClock(t0), nil)
		c := newClient(t, svc, nil)
		for _, name := range []string{"anna", "ann", "annette", "bob", "an_x", "anxious"} {
			if status, _, raw := c.do("POST", "/v1/users", creds{name, "correct horse"}); status != http.StatusCreated {
				t.Fatalf("sign up %s: %d %s", name, status, raw)
			}
		}
		names := func(query string) string {
			t.Helper()
			status, _, raw := c.do("GET", "/v1/users?"+query, nil)
			if status != http.StatusOK {
				t.Fatalf("GET %s: %d %s", query, status, raw)
			}
			var out []string
			for _, u := range decode[[]userBody](t, raw) {
				out = append(out, u.Username)
			}
			return strings.Join(out, ",")
		}
		for query, want := range map[string]string{
			"usernames=bob,ANN,nobody,ann": "bob,ann",
			"usernames=nobody":             "",
			"prefix=ann":                   "ann,anna,annette",
			"prefix=Ann&limit=2":           "ann,anna",
			"prefix=an_":                   "an_x", // _ is no wildcard
			"prefix=annettes":              "",
			"prefix=b&limit=100":           "bob",
		} {
			if got := names(query); got != want {
				t.Errorf("GET ?%s: %q, want %q", query, got, want)
			}
		}
		c.wantError("GET", "/v1/users?usernames=ann,a%20b", nil, http.StatusBadRequest, "INVALID_USERNAMES")
		c.wantError("GET", "/v1/users?usernames=", nil, http.StatusBadRequest, "INVALID_USERNAMES")
		c.wantError("GET", "/v1/users?usernames=ann"+strings.Repeat(",ann", MaxBatch), nil, http.StatusBadRequest, "TOO_MANY_USERNAMES")
		for _, bad := range []string{"", "a%25", "a-b", strings.Repeat("a", MaxUsername+1)} {
			c.wantError("GET", "/v1/users?prefix="+bad, nil, http.StatusBadRequest, "INVALID_PREFIX")
		}
		for _, q := range []string{"ids=1&usernames=ann", "usernames=ann&prefix=a", "ids=1&prefix=a"} {
			c.wantError("GET", "/v1/users?"+q, nil, http.StatusBadRequest, "INVALID_QUERY")
		}
		c.wantError("GET", "/v1/users?prefix=a&limit=0", nil, http.StatusBadRequest, "INVALID_LIMIT")
		c.wantError("GET", "/v1/users?prefix=a&limit=101", nil, http.StatusBadRequest, "INVALID_LIMIT")
	})
}
