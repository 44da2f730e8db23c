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
