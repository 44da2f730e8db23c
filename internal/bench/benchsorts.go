package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"board/internal/apijson"
	"board/internal/articleread"
	"board/internal/event"
	"board/internal/progress"
	"board/internal/snowflake"
)

// sortSeedWorkers is how many events the sort seeding applies at once.
const sortSeedWorkers = 64

// sortSeedSpan is how far back the seeded articles' creation times reach: less than the read model's day, so that
// every seeded article has its model from its ARTICLE_CREATED, as a new article does.
const sortSeedSpan = 20 * time.Hour

// seedSorted adds n articles to a board of a running board's article-read, directly in its Redis: it applies, through
// article-read's own event handler (articleread.Service.Apply), the ARTICLE_CREATED of each, and an ARTICLE_LIKED
// and a COMMENT_CREATED carrying its like and comment counts when it has any. The articles exist in article-read
// alone (their ids on the node reserved for seeding, their creation times spread over the last sortSeedSpan, their
// content the bench's, so that their pages weigh what the bench's do), so
// they fill the sorts and the board's list as events would, but the article service never hears of them. The
// events carry board count version 1, older than any the producers wrote, so the board's count stays theirs.
func seedSorted(ctx context.Context, rdb redis.UniversalClient, prefix string, boardID int64, n int, content string, stderr io.Writer) error {
	svc := articleread.NewService(rdb, nil, articleread.Config{KeyPrefix: prefix})
	now := time.Now()
	var seq atomic.Int64
	eventID := func() apijson.ID {
		s := seq.Add(1)
		// 4096 ids a millisecond, from now back: never ahead of the clock, on the node no instance leases.
		return apijson.ID(snowflake.Compose(now.Add(-time.Duration(s/(snowflake.MaxSeq+1))*time.Millisecond),
			snowflake.MaxNode, s%(snowflake.MaxSeq+1)))
	}
	envelope := func(t event.Type, payload any) (event.Envelope, error) {
		raw, err := json.Marshal(payload)
		return event.Envelope{EventID: eventID(), Type: t, Payload: raw}, err
	}
	step := sortSeedSpan / time.Duration(n)
	bar := progress.Start(stderr, "seeded articles", int64(n))
	defer bar.Finish()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, sortSeedWorkers)
	for w := range sortSeedWorkers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 40))
			for i := next.Add(1) - 1; i < int64(n) && ctx.Err() == nil && errs[w] == nil; i = next.Add(1) - 1 {
				created := now.Add(-sortSeedSpan + time.Duration(i)*step)
				id := snowflake.Compose(created, snowflake.MaxNode, i%(snowflake.MaxSeq+1))
				errs[w] = applySeeded(ctx, svc, envelope, boardID, id, created, content, rng)
				bar.Add(1)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// applySeeded applies the events of one seeded article: likes from a long tail (most articles few, some hundreds),
// comments for one article in three.
func applySeeded(ctx context.Context, svc *articleread.Service, envelope func(event.Type, any) (event.Envelope, error),
	boardID, id int64, created time.Time, content string, rng *rand.Rand) error {
	at := apijson.Time(created)
	var envs []event.Envelope
	env, err := envelope(event.ArticleCreated, event.Article{ArticleID: apijson.ID(id), Title: fmt.Sprintf("seeded %d", id),
		Content: content, ContentHTML: "<p>" + content + "</p>\n", ContentText: content, BoardID: apijson.ID(boardID), WriterID: 1,
		CreatedAt: at, ModifiedAt: at, ArticleVersion: 1, BoardArticleCountVersion: 1})
	envs = append(envs, env)
	if likes := int64(rng.ExpFloat64() * 20); err == nil && likes > 0 {
		env, err = envelope(event.ArticleLiked, event.Like{ArticleLikeID: apijson.ID(id), ArticleID: apijson.ID(id),
			UserID: 1, CreatedAt: at, ArticleLikeCount: likes, ArticleLikeCountVersion: likes})
		envs = append(envs, env)
	}
	if comments := rng.Int64N(30); err == nil && comments%3 == 0 && comments > 0 {
		env, err = envelope(event.CommentCreated, event.Comment{CommentID: apijson.ID(id), Content: "seeded",
			ArticleID: apijson.ID(id), WriterID: 1, CreatedAt: at, ArticleCommentCount: comments,
			ArticleCommentCountVersion: comments, CommentVersion: 1, ModifiedAt: at})
		envs = append(envs, env)
	}
	if err != nil {
		return err
	}
	for _, env := range envs {
		if err := svc.Apply(ctx, env); err != nil {
			return fmt.Errorf("seed article %d: %s: %w", id, env.Type, err)
		}
	}
	return nil
}
