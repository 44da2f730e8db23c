package comment

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// likeEvent is the envelope of a COMMENT_LIKED or COMMENT_UNLIKED saying a comment has count likes at version.
func likeEvent(t testing.TB, typ event.Type, articleID, commentID, count, version int64) event.Envelope {
	t.Helper()
	body, err := json.Marshal(event.CommentLike{CommentLikeID: 99, CommentID: apijson.ID(commentID), ArticleID: apijson.ID(articleID),
		UserID: 5, CreatedAt: apijson.Time(t0ms), CommentLikeCount: count, CommentLikeCountVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	return event.Envelope{EventID: 1, Type: typ, Payload: body}
}

// applyLike has svc's handlers apply a like event, as the service's consumer does.
func applyLike(t testing.TB, svc *Service, typ event.Type, articleID, commentID, count, version int64) {
	t.Helper()
	if err := svc.Handlers()[typ](context.Background(), likeEvent(t, typ, articleID, commentID, count, version)); err != nil {
		t.Fatalf("apply %s: %v", typ, err)
	}
}

// TestLikeCountsFromEvents checks that a comment of either version reads with the count of the newest like event
// applied, through every read: an event delivered twice, or older than one applied (out of order), changes nothing,
// and an event naming a comment that is not here (removed, or of another article) changes nothing and is no error.
func TestLikeCountsFromEvents(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := testService(t, db)
		const article = 7
		v1, err := svc.Create(ctx, article, 9, 0, "v1")
		if err != nil {
			t.Fatal(err)
		}
		v2, err := svc.CreateV2(ctx, article, 9, "", "v2")
		if err != nil {
			t.Fatal(err)
		}
		counts := func() (v1Count, v2Count int64) {
			t.Helper()
			c1, err := svc.Get(ctx, v1.ID)
			if err != nil {
				t.Fatal(err)
			}
			c2, err := svc.GetV2(ctx, v2.ID)
			if err != nil {
				t.Fatal(err)
			}
			// Lists read the same column.
			l1, err := svc.List(ctx, article, 1, 10)
			if err != nil {
				t.Fatal(err)
			}
			l2, err := svc.ListV2(ctx, article, 1, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(l1.Comments) != 1 || l1.Comments[0].LikeCount != c1.LikeCount || len(l2.Comments) != 1 || l2.Comments[0].LikeCount != c2.LikeCount {
				t.Errorf("lists read other counts than Get: %+v, %+v", l1.Comments, l2.Comments)
			}
			return c1.LikeCount, c2.LikeCount
		}
		want := func(when string, w1, w2 int64) {
			t.Helper()
			if g1, g2 := counts(); g1 != w1 || g2 != w2 {
				t.Errorf("%s: like counts v1 %d, v2 %d; want %d, %d", when, g1, g2, w1, w2)
			}
		}
		want("before any like", 0, 0)

		applyLike(t, svc, event.CommentLiked, article, v1.ID, 1, 1)
		applyLike(t, svc, event.CommentLiked, article, v2.ID, 1, 1)
		applyLike(t, svc, event.CommentLiked, article, v2.ID, 2, 2)
		want("liked", 1, 2)
		applyLike(t, svc, event.CommentLiked, article, v2.ID, 2, 2)
		applyLike(t, svc, event.CommentLiked, article, v1.ID, 1, 1)
		want("delivered twice", 1, 2)
		applyLike(t, svc, event.CommentUnliked, article, v2.ID, 1, 3)
		applyLike(t, svc, event.CommentLiked, article, v2.ID, 2, 2) // late: older than the unlike
		applyLike(t, svc, event.CommentLiked, article, v1.ID, 3, 5)
		applyLike(t, svc, event.CommentUnliked, article, v1.ID, 2, 4) // late
		want("out of order", 3, 1)
		applyLike(t, svc, event.CommentUnliked, article, v2.ID, 0, 4)
		want("unliked to none", 3, 0)

		applyLike(t, svc, event.CommentLiked, article+1, v1.ID, 9, 9) // the wrong article: not this comment
		applyLike(t, svc, event.CommentLiked, article, 12345, 9, 9)   // no such comment
		want("events of comments not here", 3, 0)
		for _, bad := range []struct{ articleID, commentID, count, version int64 }{
			{0, v2.ID, 1, 9}, {article, 0, 1, 9}, {article, v2.ID, 1, 0}, {article, v2.ID, -1, 9},
		} {
			err := svc.Handlers()[event.CommentLiked](ctx, likeEvent(t, event.CommentLiked, bad.articleID, bad.commentID, bad.count, bad.version))
			if fault.KindOf(err) != fault.Invalid {
				t.Errorf("event %+v: %v, want an Invalid error (dead-lettered at once)", bad, err)
			}
		}
		want("bad events", 3, 0)

		if err := svc.Delete(ctx, v1.ID); err != nil {
			t.Fatal(err)
		}
		applyLike(t, svc, event.CommentLiked, article, v1.ID, 4, 6) // removed: nothing to keep it on
		if n := rowsOf(t, db, "comment", article); n != 0 {
			t.Errorf("a like of a removed comment left %d rows", n)
		}
	})
}

// TestLikeCountOnTheWire checks that both versions' comments carry likeCount in every answer.
func TestLikeCountOnTheWire(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newArticlesFixture(t, db)
		const article = 5
		for _, version := range []string{"v1", "v2"} {
			var c map[string]any
			if version == "v1" {
				c = httpPostV1(t, f.h, article, 9, "", "liked")
			} else {
				c = httpPostV2(t, f.h, article, 9, "", "liked")
			}
			if c["likeCount"] != json.Number("0") {
				t.Errorf("%s: created with likeCount %v, want 0", version, c["likeCount"])
			}
			var id apijson.ID
			if err := id.UnmarshalJSON([]byte(`"` + c["commentId"].(string) + `"`)); err != nil {
				t.Fatal(err)
			}
			applyLike(t, f.svc, event.CommentLiked, article, int64(id), 4, 1)
			base := "/" + version + "/comments"
			one := httpGet(t, f.h, base+"/"+c["commentId"].(string)).(map[string]any)
			page := httpGet(t, f.h, fmt.Sprintf("%s?articleId=%d", base, article)).(map[string]any)["comments"].([]any)
			scroll := httpGet(t, f.h, fmt.Sprintf("%s/infinite-scroll?articleId=%d", base, article)).([]any)
			for what, got := range map[string]any{"GET": one["likeCount"], "page": page[0].(map[string]any)["likeCount"],
				"scroll": scroll[0].(map[string]any)["likeCount"]} {
				if got != json.Number("4") {
					t.Errorf("%s %s: likeCount %v, want 4", version, what, got)
				}
			}
		}
	})
}
