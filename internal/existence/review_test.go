package existence

import (
	"context"
	"encoding/json"
	"testing"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// articleEnvelope is an article event of articleID at version, as the article topic carries it.
func articleEnvelope(t *testing.T, typ event.Type, articleID, version int64) event.Envelope {
	t.Helper()
	payload, err := json.Marshal(event.Article{ArticleID: apijson.ID(articleID), ArticleVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	return event.Envelope{EventID: apijson.ID(version), Type: typ, Payload: payload}
}

// TestALateUpdateDoesNotLetAStaleLiveAnswerHideTheDelete: the memo refuses to replace "deleted" with an answer read
// before the delete was recorded (memo.put), but applyLive forgets the article's entry whatever it holds, so an
// ARTICLE_UPDATED redelivered after the ARTICLE_DELETED (delivery is at least once) removes that guard: a Check
// that read the row live just before the delete then stores "live", and Check answers live for a deleted article
// for liveTTL.
func TestALateUpdateDoesNotLetAStaleLiveAnswerHideTheDelete(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		r := New(db, Config{Service: "review", Origin: "http://127.0.0.1:1"}) // never asked: the article is known
		const id = 42
		handlers := r.Handlers()
		apply := func(typ event.Type, version int64) {
			t.Helper()
			if err := handlers[typ](ctx, articleEnvelope(t, typ, id, version)); err != nil {
				t.Fatalf("apply %s: %v", typ, err)
			}
		}
		apply(event.ArticleCreated, 1)

		// A Check reads the row while the article is live ...
		deleted, err := r.isDeleted(ctx, id)
		if err != nil || deleted {
			t.Fatalf("isDeleted before the delete = %v, %v; want false, nil", deleted, err)
		}
		// ... the delete is recorded, then an older ARTICLE_UPDATED is delivered again ...
		apply(event.ArticleDeleted, 3)
		apply(event.ArticleUpdated, 2)
		// ... and the Check stores what it read, as Check does after its read.
		r.memo.put(id, stateLive, r.cfg.Now().Add(liveTTL))

		if err := r.Check(ctx, id); fault.KindOf(err) != fault.NotFound {
			t.Errorf("Check of a deleted article = %v, want ARTICLE_NOT_FOUND: applyLive forgot the memo's \"deleted\", "+
				"so a live answer read before the delete was remembered over it", err)
		}
	})
}
