package existence_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"board/internal/event"
	"board/internal/existence"
	"board/internal/existence/existencetest"
	"board/internal/fault"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// queuedPurges returns the articles queued for a purge.
func queuedPurges(t *testing.T, db *sqldb.DB) []int64 {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "SELECT article_id FROM article_purge ORDER BY article_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

func wantDeleted(t *testing.T, db *sqldb.DB, articleID, version int64) {
	t.Helper()
	if found, deleted, v := existenceRow(t, db, articleID); !found || !deleted || v != version {
		t.Fatalf("article %d: found %v, deleted %v, version %d; want deleted at version %d", articleID, found, deleted, v, version)
	}
}

func TestCreatedAndUpdatedRaiseTheVersion(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, existence.Migrate, func(t *testing.T, db *sqldb.DB) {
		reg := existencetest.NewOrigin(t).Registry("test", db)
		existencetest.Apply(t, reg, existencetest.Created(1, 1))
		wantLive(t, db, 1, 1)
		existencetest.Apply(t, reg, existencetest.Updated(1, 3))
		wantLive(t, db, 1, 3)
		existencetest.Apply(t, reg, existencetest.Updated(1, 2))
		existencetest.Apply(t, reg, existencetest.Created(1, 1))
		wantLive(t, db, 1, 3)
		if ids := queuedPurges(t, db); len(ids) != 0 {
			t.Errorf("purges queued for a live article: %v", ids)
		}
	})
}

func TestDeletedIsFinal(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, existence.Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		reg := existencetest.NewOrigin(t).Registry("test", db)
		existencetest.Apply(t, reg, existencetest.Created(1, 2))
		existencetest.Apply(t, reg, existencetest.Deleted(1, 3))
		wantDeleted(t, db, 1, 3)
		if ids := queuedPurges(t, db); len(ids) != 1 || ids[0] != 1 {
			t.Fatalf("queued purges %v, want [1]", ids)
		}
		if err := reg.PurgeQueued(ctx, func(context.Context, int64) (bool, error) { return true, nil }); err != nil {
			t.Fatal(err)
		}

		existencetest.Apply(t, reg, existencetest.Deleted(1, 3)) // redelivered
		existencetest.Apply(t, reg, existencetest.Deleted(1, 4))
		if ids := queuedPurges(t, db); len(ids) != 0 {
			t.Errorf("an article deleted again was queued again: %v", ids)
		}
		existencetest.Apply(t, reg, existencetest.Created(1, 5))
		existencetest.Apply(t, reg, existencetest.Updated(1, 6))
		wantDeleted(t, db, 1, 3)
		wantFault(t, "a write after late events", require(db, reg, 1), fault.NotFound, "ARTICLE_NOT_FOUND")
	})
}

func TestDeletedOfAnArticleNeverSeen(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, existence.Migrate, func(t *testing.T, db *sqldb.DB) {
		reg := existencetest.NewOrigin(t).Registry("test", db)
		existencetest.Apply(t, reg, existencetest.Deleted(7, 2))
		wantDeleted(t, db, 7, 2)
		if ids := queuedPurges(t, db); len(ids) != 1 || ids[0] != 7 {
			t.Errorf("queued purges %v, want [7]", ids)
		}
		existencetest.Apply(t, reg, existencetest.Created(7, 1))
		wantDeleted(t, db, 7, 2)
	})
}

// A lookup answered 200 after the article's delete was recorded, here or by another instance of the service,
// vouches for nothing: the article stays deleted, for Require and for Check.
func TestALookupAfterTheDeleteLeavesItDeleted(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, existence.Migrate, func(t *testing.T, db *sqldb.DB) {
		for _, byAnotherInstance := range []bool{false, true} {
			ctx := context.Background()
			origin := newGatedOrigin(t)
			reg := newRegistry(db, origin.URL, existence.Config{LookupTimeout: ceiling})
			deleter, id := reg, int64(1)
			if byAnotherInstance {
				deleter, id = newRegistry(db, origin.URL, existence.Config{}), 2
			}
			var runs atomic.Int64
			written := make(chan error, 1)
			go func() { written <- reg.Write(ctx, id, requiring(db, reg, id, &runs)) }()
			origin.awaitArrivals(t, 1)
			existencetest.Apply(t, deleter, existencetest.Deleted(id, 2))
			origin.open()
			wantFault(t, "the write", within(t, "the write", func() error { return <-written }), fault.NotFound, "ARTICLE_NOT_FOUND")
			wantDeleted(t, db, id, 2)
			wantFault(t, "a check after it", reg.Check(ctx, id), fault.NotFound, "ARTICLE_NOT_FOUND")
		}
	})
}

func TestAMalformedArticleEventIsRefused(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, existence.Migrate, func(t *testing.T, db *sqldb.DB) {
		reg := existencetest.NewOrigin(t).Registry("test", db)
		for _, env := range []event.Envelope{existencetest.Created(0, 1), existencetest.Updated(0, 1), existencetest.Deleted(0, 1)} {
			err := reg.Handlers()[env.Type](context.Background(), env)
			if fault.KindOf(err) != fault.Invalid {
				t.Errorf("%s without an articleId: %v, want an Invalid fault", env.Type, err)
			}
		}
		env := existencetest.Created(1, 1)
		env.Payload = []byte(`{"articleId":`)
		if err := reg.Handlers()[env.Type](context.Background(), env); !errors.Is(err, event.ErrMalformed) {
			t.Errorf("a payload that is not JSON: %v, want event.ErrMalformed", err)
		}
		if ids := queuedPurges(t, db); len(ids) != 0 {
			t.Errorf("queued purges %v after malformed events", ids)
		}
	})
}
