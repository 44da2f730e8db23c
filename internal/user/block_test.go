package user

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/httpio/httpiotest"
	"board/internal/snowflake/snowflaketest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

type blockBody struct {
	UserID    string `json:"userId"`
	Username  string `json:"username"`
	CreatedAt string `json:"createdAt"`
}

// signUps makes a user of each name and returns their ids.
func signUps(t *testing.T, svc *Service, names ...string) []int64 {
	t.Helper()
	ids := make([]int64, len(names))
	for i, name := range names {
		u, err := svc.SignUp(context.Background(), name, "correct horse")
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = u.ID
	}
	return ids
}

// blockEvents returns the outbox's block events, oldest first, as "TYPE blocker>blocked vN" keyed by the blocker.
func blockEvents(t *testing.T, db *sqldb.DB) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "SELECT event_type, record_key, payload FROM outbox WHERE event_type IN (?, ?) ORDER BY outbox_id",
		string(event.UserBlocked), string(event.UserUnblocked))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var typ, payload string
		var key int64
		if err := rows.Scan(&typ, &key, &payload); err != nil {
			t.Fatal(err)
		}
		b := decode[event.Block](t, []byte(payload))
		if key != int64(b.UserID) || b.Blocked != (typ == string(event.UserBlocked)) || time.Time(b.At).IsZero() {
			t.Errorf("%s keyed %d: %s", typ, key, payload)
		}
		got = append(got, fmt.Sprintf("%s %d>%d v%d", typ, b.UserID, b.BlockedUserID, b.BlockVersion))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// Blocks: PUT blocks (again: the same block, no event), DELETE unblocks (again: nothing), GET lists the caller's own,
// newest first; each change writes its event, with the pair's next version, in its transaction.
func TestBlocks(t *testing.T) {
	t.Parallel()
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		clock := snowflaketest.NewClock(t0)
		svc := newTestService(t, db, clock, nil)
		ids := signUps(t, svc, "ann", "ben", "cat")
		ann, ben, cat := ids[0], ids[1], ids[2]
		api := Routes(svc, httpiotest.Logger)
		as := func(user int64, method, path string) httpiotest.Reply {
			return httpiotest.Call(httpiotest.As(api, user), method, path, "")
		}
		r := as(ann, "PUT", fmt.Sprintf("/v1/blocks/%d", ben))
		httpiotest.WantStatus(t, r, http.StatusOK)
		first := decode[blockBody](t, []byte(r.Body))
		if first.UserID != fmt.Sprint(ben) || first.Username != "ben" || first.CreatedAt != t0.UTC().Format(apijson.TimeLayout) {
			t.Errorf("PUT ben: %s", r.Body)
		}
		clock.Add(time.Second)
		r = as(ann, "PUT", fmt.Sprintf("/v1/blocks/%d", ben))
		if again := decode[blockBody](t, []byte(r.Body)); r.Status != http.StatusOK || again != first {
			t.Errorf("PUT ben again: %d %s, want %+v", r.Status, r.Body, first)
		}
		clock.Add(time.Second)
		httpiotest.WantStatus(t, as(ann, "PUT", fmt.Sprintf("/v1/blocks/%d", cat)), http.StatusOK)
		httpiotest.WantStatus(t, as(cat, "PUT", fmt.Sprintf("/v1/blocks/%d", ann)), http.StatusOK)

		list := func(user int64) string {
			t.Helper()
			r := as(user, "GET", "/v1/blocks")
			httpiotest.WantStatus(t, r, http.StatusOK)
			var names []string
			for _, b := range decode[struct{ Blocks []blockBody }](t, []byte(r.Body)).Blocks {
				names = append(names, b.Username)
			}
			return strings.Join(names, ",")
		}
		if got := list(ann); got != "cat,ben" {
			t.Errorf("ann blocks %q, want cat,ben (newest first)", got)
		}
		if got := list(ben); got != "" {
			t.Errorf("ben blocks %q, want none", got)
		}

		httpiotest.WantStatus(t, as(ann, "DELETE", fmt.Sprintf("/v1/blocks/%d", ben)), http.StatusNoContent)
		httpiotest.WantStatus(t, as(ann, "DELETE", fmt.Sprintf("/v1/blocks/%d", ben)), http.StatusNoContent)
		httpiotest.WantStatus(t, as(ann, "DELETE", "/v1/blocks/12345"), http.StatusNoContent)
		if got := list(ann); got != "cat" {
			t.Errorf("after the unblock, ann blocks %q", got)
		}
		clock.Add(time.Second)
		r = as(ann, "PUT", fmt.Sprintf("/v1/blocks/%d", ben))
		if b := decode[blockBody](t, []byte(r.Body)); b.CreatedAt != t0.Add(3*time.Second).UTC().Format(apijson.TimeLayout) {
			t.Errorf("a block after an unblock begins anew: %s", r.Body)
		}

		want := []string{
			fmt.Sprintf("USER_BLOCKED %d>%d v1", ann, ben),
			fmt.Sprintf("USER_BLOCKED %d>%d v1", ann, cat),
			fmt.Sprintf("USER_BLOCKED %d>%d v1", cat, ann),
			fmt.Sprintf("USER_UNBLOCKED %d>%d v2", ann, ben),
			fmt.Sprintf("USER_BLOCKED %d>%d v3", ann, ben),
		}
		if got := blockEvents(t, db); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("outbox:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}

		httpiotest.WantError(t, as(ann, "PUT", fmt.Sprintf("/v1/blocks/%d", ann)), http.StatusBadRequest, "SELF_BLOCK")
		httpiotest.WantError(t, as(ann, "PUT", "/v1/blocks/12345"), http.StatusNotFound, "USER_NOT_FOUND")
		httpiotest.WantError(t, as(ann, "PUT", "/v1/blocks/x"), http.StatusBadRequest, "INVALID_USER_ID")
		httpiotest.WantError(t, httpiotest.Call(api, "GET", "/v1/blocks", ""), http.StatusUnauthorized, "UNAUTHENTICATED")
		httpiotest.WantError(t, httpiotest.Call(api, "PUT", fmt.Sprintf("/v1/blocks/%d", ben), ""), http.StatusUnauthorized, "UNAUTHENTICATED")
	})
}

// A user blocks at most MaxBlocks users at once: one more is 409 BLOCK_LIMIT, until one is unblocked.
func TestBlockLimit(t *testing.T) {
	t.Parallel()
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		svc := newTestService(t, db, snowflaketest.NewClock(t0), nil)
		ids := signUps(t, svc, "ann", "ben")
		ann, ben := ids[0], ids[1]
		ctx := context.Background()
		// The blocked users are rows of their own: the limit counts blocks, not accounts.
		if err := db.Transact(ctx, func(tx *sql.Tx) error {
			for i := int64(1); i <= MaxBlocks; i++ {
				if _, err := tx.ExecContext(ctx, "INSERT INTO block (user_id, blocked_user_id, blocked, version, created_at) VALUES (?, ?, TRUE, 1, ?)",
					ann, 1_000_000+i, t0); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		api := httpiotest.As(Routes(svc, httpiotest.Logger), ann)
		httpiotest.WantError(t, httpiotest.Call(api, "PUT", fmt.Sprintf("/v1/blocks/%d", ben), ""), http.StatusConflict, "BLOCK_LIMIT")
		if err := svc.Unblock(ctx, ann, 1_000_001); err != nil {
			t.Fatal(err)
		}
		httpiotest.WantStatus(t, httpiotest.Call(api, "PUT", fmt.Sprintf("/v1/blocks/%d", ben), ""), http.StatusOK)
		// Blocking someone blocked already is no new block: allowed at the limit.
		httpiotest.WantStatus(t, httpiotest.Call(api, "PUT", fmt.Sprintf("/v1/blocks/%d", ben), ""), http.StatusOK)

		// One place left, five blocks at once: one gets it.
		if err := svc.Unblock(ctx, ann, 1_000_002); err != nil {
			t.Fatal(err)
		}
		others := signUps(t, svc, "cat", "dan", "eve", "fay", "gus")
		statuses := make(chan int, len(others))
		var wg sync.WaitGroup
		for _, o := range others {
			wg.Go(func() { statuses <- httpiotest.Call(api, "PUT", fmt.Sprintf("/v1/blocks/%d", o), "").Status })
		}
		wg.Wait()
		close(statuses)
		counts := map[int]int{}
		for s := range statuses {
			counts[s]++
		}
		if counts[http.StatusOK] != 1 || counts[http.StatusConflict] != len(others)-1 {
			t.Errorf("five blocks at once for one place: %v", counts)
		}
	})
}
