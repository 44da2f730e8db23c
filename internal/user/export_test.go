package user

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"board/internal/httpio/httpiotest"
	"board/internal/snowflake/snowflaketest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// faults are what partsServer gets wrong: fail names a part answered 503, cut one whose answer breaks off after its
// first element.
type faults struct{ fail, cut string }

// partsServer stands in for the services that own an export's parts: each answers its path with a two-element array
// naming the part, sent in two flushed writes, and only to the token the export was asked with, but for the faults
// set.
func partsServer(t *testing.T, set *atomic.Pointer[faults]) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := set.Load()
		part, ok := strings.CutPrefix(r.URL.Path, "/v1/exports/")
		if !ok || r.Header.Get("Authorization") != "Bearer the-callers" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		if part == f.fail {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `[{"part":"`+part+`","n":1}`)
		http.NewResponseController(w).Flush()
		if part == f.cut {
			panic(http.ErrAbortHandler)
		}
		_, _ = io.WriteString(w, `,{"part":"`+part+`","n":2}]`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// exportClient returns a server of the user service's routes whose requests act as user, reading the export's parts
// from parts.
func exportClient(t *testing.T, db *sqldb.DB, parts *httptest.Server, user *int64) *httptest.Server {
	t.Helper()
	cfg := Config{Hash: cheap, Now: snowflaketest.NewClock(t0).Now,
		Exports: func(string) string { return parts.URL }}
	svc, err := NewService(context.Background(), db, snowflaketest.NewIDs(firstID), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ids := signUps(t, svc, "exporter", "other")
	if _, err := svc.Block(context.Background(), ids[0], ids[1]); err != nil {
		t.Fatal(err)
	}
	*user = ids[0]
	srv := httptest.NewServer(httpiotest.As(httpiotest.Handler("user", Routes(svc, httpiotest.Logger)), ids[0]))
	t.Cleanup(srv.Close)
	return srv
}

// getExport asks for the export and returns the answer's status, its body and the error that ended its reading.
func getExport(t *testing.T, url string) (int, []byte, error) {
	t.Helper()
	req, err := http.NewRequest("GET", url+ExportPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer the-callers")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// TestExport checks GET /v1/users/me/export: the archive holds the profile, every part as its service sent it (asked
// with the caller's token) and the blocks, in the contract's order; a part's service down from the start is a 503; a
// part that breaks off cuts the archive short, so that no client takes it for whole.
func TestExport(t *testing.T) {
	t.Parallel()
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		var user int64
		var set atomic.Pointer[faults]
		set.Store(&faults{})
		srv := exportClient(t, db, partsServer(t, &set), &user)
		status, body, err := getExport(t, srv.URL)
		if err != nil || status != http.StatusOK {
			t.Fatalf("export: %d, %v: %s", status, err, body)
		}
		dec := json.NewDecoder(strings.NewReader(string(body)))
		var keys []string
		var archive map[string]json.RawMessage
		if err := json.Unmarshal(body, &archive); err != nil {
			t.Fatalf("archive %s: %v", body, err)
		}
		if _, err := dec.Token(); err != nil {
			t.Fatal(err)
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, tok.(string))
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				t.Fatal(err)
			}
		}
		want := []string{"exportedAt", "profile", "articles", "comments", "likes", "bookmarks", "notifications", "watches", "blocks"}
		if strings.Join(keys, " ") != strings.Join(want, " ") {
			t.Errorf("archive keys = %v, want %v", keys, want)
		}
		var profile map[string]any
		if err := json.Unmarshal(archive["profile"], &profile); err != nil || profile["username"] != "exporter" ||
			profile["email"] != nil {
			t.Errorf("profile = %s (%v)", archive["profile"], err)
		}
		for _, part := range want[2:8] {
			wantPart := `[{"part":"` + part + `","n":1},{"part":"` + part + `","n":2}]`
			if string(archive[part]) != wantPart {
				t.Errorf("%s = %s, want %s", part, archive[part], wantPart)
			}
		}
		var blocks []map[string]any
		if err := json.Unmarshal(archive["blocks"], &blocks); err != nil || len(blocks) != 1 || blocks[0]["username"] != "other" {
			t.Errorf("blocks = %s (%v)", archive["blocks"], err)
		}

		// The first part's service is down: nothing is sent yet, so it is a plain 503.
		set.Store(&faults{fail: "articles"})
		if status, body, _ := getExport(t, srv.URL); status != http.StatusServiceUnavailable ||
			!strings.Contains(string(body), "EXPORT_UNAVAILABLE") {
			t.Errorf("export with the article service down: %d %s, want 503 EXPORT_UNAVAILABLE", status, body)
		}

		// A later part's service fails, or breaks off its answer, once the archive has begun: the archive is cut short.
		for _, f := range []faults{{fail: "likes"}, {cut: "comments"}} {
			set.Store(&f)
			status, body, err := getExport(t, srv.URL)
			if status != http.StatusOK || err == nil {
				t.Errorf("export with %+v: %d, %v, want 200 and a body cut short", f, status, err)
			}
			if json.Valid(body) {
				t.Errorf("export with %+v: a whole JSON document %s", f, body)
			}
		}
	})
}
