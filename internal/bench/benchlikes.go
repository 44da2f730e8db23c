package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"board/internal/apijson"
	"board/internal/app"
	"board/internal/event"
	"board/internal/existence"
	"board/internal/like"
	"board/internal/progress"
	"board/internal/sqldb"
)

func benchLikes(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := app.Default()
	fs := app.NewFlagSet("bench likes", `Usage: board bench likes [flags]

For each like strategy, sends --likes likes of one new article, each by a different user, from --workers concurrent
clients, through the HTTP API of a like service started in this process on a loopback port, over a scratch database
(like_bench, on the configured SQL engine; emptied first). Checks that the article's count, its like rows and its
ARTICLE_LIKED events are each exactly --likes, and prints the time, the rate, the transactions the likes took
(concurrent likes of one article share them, up to --batch each: docs/likes.md), and for the optimistic strategy the
retries after version conflicts. --batch 1 gives each like a transaction of its own, as before batching. First,
untimed, every user likes another article once; then, timed, the floor: the same requests with the same tokens,
answered 201 by a handler that stores nothing, which bounds every strategy's rate on the machine as it is at that
moment. The article is known to the like service as a live one, as after its ARTICLE_CREATED was consumed: each like
checks that inside its transaction and asks the article service nothing.

--of article,comment likes, for each strategy, one new article and then one comment of another new article (known
as after its COMMENT_CREATED), the same way, and checks the comment's count, like rows and COMMENT_LIKED events.`, stderr)
	cfg.EngineFlags(fs)
	likes := fs.Int("likes", 3000, "likes per strategy, each by a distinct user")
	workers := fs.Int("workers", 100, "concurrent clients")
	batch := fs.Int("batch", like.DefaultBatching.Max, "most likes of one article per transaction; 1: a transaction per like")
	linger := fs.Duration("linger", like.DefaultBatching.Linger, "how long a like may wait for others to share its transaction when its article has none running")
	strategyList := fs.String("strategies", "pessimistic-lock-1,pessimistic-lock-2,optimistic-lock", "comma-separated strategies to run, in order")
	ofList := fs.String("of", "article", "what each strategy likes, comma-separated, in order: article, comment")
	if err := app.Parse(fs, args, getenv); err != nil {
		return err
	}
	if *likes < 1 || *workers < 1 || *batch < 1 || *linger < 0 {
		return errors.New("--likes, --workers and --batch must be at least 1, --linger not negative")
	}
	var strategies []like.Strategy
	for _, name := range app.SplitList(*strategyList) {
		st, err := like.ParseStrategy(name)
		if err != nil {
			return fmt.Errorf("--strategies: %w", err)
		}
		strategies = append(strategies, st)
	}
	of := app.SplitList(*ofList)
	for _, what := range of {
		if what != "article" && what != "comment" {
			return fmt.Errorf("--of: %q is neither article nor comment", what)
		}
	}
	e := app.NewEngines(&cfg, cfg.NewLogger(stderr))
	defer e.Close()
	db, ob, ids, err := toolDatabase(ctx, e, "like_bench", like.Migrate)
	if err != nil {
		return err
	}
	// Nobody relays this database's events, and old likes would make each run's tables bigger than the last. Behind
	// Vitess each shard deletes its rows by itself (MULTI_SHARD_AUTOCOMMIT; a comment to other engines).
	// (comment_existence keeps its row per run: vtgate deletes a row's lookup row with it, not across shards at once.)
	for _, table := range []string{"outbox", "article_like", "article_like_count", "article_existence", "article_purge",
		"comment_like", "comment_like_count"} {
		if _, err := db.ExecContext(ctx, "DELETE /*vt+ MULTI_SHARD_AUTOCOMMIT=1 */ FROM "+table); err != nil {
			return fmt.Errorf("empty %s: %w", table, err)
		}
	}
	articles := existence.New(db, existence.Config{Service: "like"}) // no article service: every article is made known
	comments := like.NewComments(db, "", time.Now)                   // no comment service: every comment is made known
	svc := like.NewService(like.NewStore(db, ob, articles, comments), ids, time.Now, like.DefaultStrategy).
		WithBatching(like.Batching{Max: *batch, Linger: *linger})

	key, err := newBenchKey()
	if err != nil {
		return err
	}
	base, stop, err := serveLoopback("like", like.Routes(svc, e.Logger), key.guard(), e)
	if err != nil {
		return err
	}
	defer stop()
	// The floor: the same requests, tokens checked the same way, answered 201 at once by a handler that stores
	// nothing. What HTTP and the tokens cost bounds every strategy's rate on this machine as it is now.
	floorAPI := http.NewServeMux()
	floorAPI.HandleFunc("POST /v1/article-likes/articles/{articleId}/users/{userId}/{strategy}",
		func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) })
	floorBase, stopFloor, err := serveLoopback("like", floorAPI, key.guard(), e)
	if err != nil {
		return err
	}
	defer stopFloor()
	// One kept-alive connection per worker: the default keeps 2 and would open a connection per request.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *workers}}
	// Minted before the clock starts: signing is the clients' work, not the service's.
	tokens := make([]string, *likes)
	for i := range tokens {
		if tokens[i], err = key.token(int64(i + 1)); err != nil {
			return err
		}
	}

	fmt.Fprintf(stdout, "%d likes by distinct users per strategy from %d workers, over HTTP, on %s %s, up to %d per transaction\n",
		*likes, *workers, db.Dialect, db.Name, *batch)
	fmt.Fprintf(stdout, "%-30s %-7s %7s %8s %10s %9s %6s %8s %8s %13s\n", "strategy", "engine", "likes", "workers", "elapsed",
		"likes/s", "exact", "txs", "retries", "most attempts")
	// pass has every user like the target at prefix (a base URL and the path up to /users) with strategy st, and
	// times it.
	pass := func(name, prefix string, st like.Strategy) (time.Duration, error) {
		bar := progress.Start(stderr, name, int64(*likes))
		start := time.Now()
		err := likeConcurrently(ctx, client, tokens, prefix, st, *workers, bar)
		elapsed := time.Since(start)
		bar.Finish()
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		return elapsed, nil
	}
	// Untimed first, a pass through each server: the first thousands of requests are slower (connections opened, the
	// runtime's heap and stacks growing, the database purging the rows deleted above) and would count against
	// whatever ran first.
	warm, err := ids.Next()
	if err != nil {
		return err
	}
	if err := recordCreated(ctx, articles, warm); err != nil {
		return err
	}
	if _, err := pass("warm-up", articlePrefix(base, warm), like.DefaultStrategy); err != nil {
		return err
	}
	if _, err := pass("warm-up", articlePrefix(floorBase, 1), like.DefaultStrategy); err != nil {
		return err
	}
	elapsed, err := pass("floor", articlePrefix(floorBase, 1), like.DefaultStrategy)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%-30s %-7s %7d %8d %10s %9.0f %6s %8s %8s %13s\n", "floor (no storage)", "-", *likes, *workers,
		elapsed.Round(time.Millisecond), float64(*likes)/elapsed.Seconds(), "-", "-", "-", "-")
	for _, st := range strategies {
		for _, what := range of {
			t, err := newTarget(ctx, ids, articles, comments, what, base)
			if err != nil {
				return err
			}
			name := string(st)
			if what == "comment" {
				name += " (comment)"
			}
			before := svc.Stats(st)
			elapsed, err := pass(name, t.prefix, st)
			if err != nil {
				return err
			}
			count, err := likeCount(ctx, client, t.prefix)
			if err != nil {
				return err
			}
			rows, events, err := t.stored(ctx, db)
			if err != nil {
				return err
			}
			if count != int64(*likes) || rows != count || events != count {
				return fmt.Errorf("%s: %s counts %d likes, has %d like rows and %d events, after %d accepted", name, t.prefix,
					count, rows, events, *likes)
			}
			after := svc.Stats(st)
			fmt.Fprintf(stdout, "%-30s %-7s %7d %8d %10s %9.0f %6s %8d %8d %13d\n", name, db.Dialect, *likes, *workers,
				elapsed.Round(time.Millisecond), float64(*likes)/elapsed.Seconds(), "yes", after.Transactions-before.Transactions,
				after.Conflicts-before.Conflicts, after.MostAttempts)
		}
	}
	return nil
}

// benchTarget is what a strategy's pass likes: a new article, or a comment of a new article.
type benchTarget struct {
	prefix string // the base URL and the like paths up to /users
	// stored counts the target's like rows and the like events its outbox holds (nobody relays the bench's).
	stored func(ctx context.Context, db *sqldb.DB) (rows, events int64, err error)
}

func articlePrefix(base string, articleID int64) string {
	return fmt.Sprintf("%s/v1/article-likes/articles/%d", base, articleID)
}

// newTarget makes a new article known to the like service, and for a comment a new comment of it, as their events
// would.
func newTarget(ctx context.Context, ids like.IDGenerator, articles *existence.Registry, comments *like.Comments,
	what, base string) (benchTarget, error) {
	articleID, err := ids.Next()
	if err != nil {
		return benchTarget{}, err
	}
	if err := recordCreated(ctx, articles, articleID); err != nil {
		return benchTarget{}, err
	}
	if what == "article" {
		return benchTarget{prefix: articlePrefix(base, articleID), stored: func(ctx context.Context, db *sqldb.DB) (int64, int64, error) {
			return likesStored(ctx, db, articleID, event.ArticleLiked, "article_like", "article_id = ?", articleID)
		}}, nil
	}
	commentID, err := ids.Next()
	if err != nil {
		return benchTarget{}, err
	}
	payload, err := json.Marshal(event.Comment{CommentID: apijson.ID(commentID), ArticleID: apijson.ID(articleID)})
	if err != nil {
		return benchTarget{}, err
	}
	if err := comments.Handlers()[event.CommentCreated](ctx, event.Envelope{EventID: apijson.ID(commentID),
		Type: event.CommentCreated, Payload: payload}); err != nil {
		return benchTarget{}, err
	}
	return benchTarget{prefix: fmt.Sprintf("%s/v1/comment-likes/comments/%d", base, commentID),
		stored: func(ctx context.Context, db *sqldb.DB) (int64, int64, error) {
			return likesStored(ctx, db, articleID, event.CommentLiked, "comment_like", "article_id = ? AND comment_id = ?",
				articleID, commentID)
		}}, nil
}

// likeConcurrently has users 1..len(tokens) like the target at prefix (see benchTarget) with strategy, from workers
// goroutines, user u with tokens[u-1]. Every like must be accepted (201); the first failure stops the run.
func likeConcurrently(ctx context.Context, client *http.Client, tokens []string, prefix string, st like.Strategy,
	workers int, bar *progress.Bar) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for user := next.Add(1); user <= int64(len(tokens)) && ctx.Err() == nil; user = next.Add(1) {
				url := fmt.Sprintf("%s/users/%d/%s", prefix, user, st)
				if err := post(ctx, client, url, tokens[user-1]); err != nil {
					cancel(err)
					return
				}
				bar.Add(1)
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

func post(ctx context.Context, client *http.Client, url, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("POST %s: %s %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// likeCount reads the count of the target at prefix (see benchTarget).
func likeCount(ctx context.Context, client *http.Client, prefix string) (int64, error) {
	url := prefix + "/count"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	return readCount(client.Do(req))
}

// readCount reads the plain number a count endpoint (or a view) answers with 200.
func readCount(resp *http.Response, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s %s: %s %s", resp.Request.Method, resp.Request.URL, resp.Status, strings.TrimSpace(string(body)))
	}
	return strconv.ParseInt(strings.TrimSpace(string(body)), 10, 64)
}

// likesStored counts the like rows of table where (with args) says, and the events of type liked that the outbox
// holds under the article's key (nobody relays the bench's).
func likesStored(ctx context.Context, db *sqldb.DB, articleID int64, liked event.Type, table, where string, args ...any) (rows, events int64, err error) {
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table+" WHERE "+where, args...).Scan(&rows); err != nil {
		return 0, 0, err
	}
	err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox WHERE record_key = ? AND event_type = ?", articleID,
		string(liked)).Scan(&events)
	return rows, events, err
}

// recordCreated has articles apply the ARTICLE_CREATED of articleID, as the service's consumer would.
func recordCreated(ctx context.Context, articles *existence.Registry, articleID int64) error {
	payload, err := json.Marshal(event.Article{ArticleID: apijson.ID(articleID), ArticleVersion: 1})
	if err != nil {
		return err
	}
	return articles.Handlers()[event.ArticleCreated](ctx, event.Envelope{EventID: apijson.ID(articleID), Type: event.ArticleCreated,
		Payload: payload})
}
