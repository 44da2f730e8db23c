package view

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"board/internal/existence"
	"board/internal/existence/existencetest"
	"board/internal/fault"
	"board/internal/redisclient/redisclienttest"
	"board/internal/snowflake"
	"board/internal/sqldb/sqldbtest"
)

// A settler settles marks 3 ms old: only once every view it could cover has landed, as in these tests, where views
// run one after another before it settles.
var settlerConfig = Config{FlushEvery: time.Millisecond, SettleAfter: 3 * time.Millisecond}

// settleAfterAMoment lets the marks made so far pass settlerConfig's SettleAfter, then settles them with svc.
func settleAfterAMoment(t *testing.T, svc *Service) {
	t.Helper()
	time.Sleep(10 * time.Millisecond)
	if err := svc.Settle(context.Background()); err != nil {
		t.Fatalf("Settle: %v", err)
	}
}

// markOf returns an article's score in the unsaved index, or false when it is not marked.
func markOf(t *testing.T, svc *Service, articleID int64) (float64, bool) {
	t.Helper()
	score, err := svc.rdb.ZScore(context.Background(), svc.unsavedKey(articleID), strconv.FormatInt(articleID, 10)).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return score, true
}

// An instance that dies between backups leaves its counts ahead of SQL in Redis: any other instance backs them up.
func TestSettleBacksUpTheViewsOfAnInstanceThatDied(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, e env) {
		died := e.service(Config{FlushEvery: time.Hour})
		viewUsers(t, died, article, 1, 150, 1)   // backed up at 100
		viewUsers(t, died, article+1, 1, 100, 1) // backed up at 100: nothing to settle
		viewUsers(t, died, article+2, 1, 7, 1)   // never backed up
		viewUsers(t, died, article+3, 1, 3, 1)   // deleted and purged below
		settler := e.service(settlerConfig)
		applyDeletedAndPurge(t, settler, article+3)
		// died is never flushed: it crashed.
		settleAfterAMoment(t, settler)
		for id, want := range map[int64]int64{article: 150, article + 1: 100, article + 2: 7, article + 3: 0} {
			if got := backupOf(t, e.store, id); got != want {
				t.Errorf("backup of article %d after settling = %d, want %d", id-article, got, want)
			}
			if _, marked := markOf(t, settler, id); marked {
				t.Errorf("article %d still marked after settling", id-article)
			}
		}
		wantCounts(t, "events", []int64{100, 150}, viewedEvents(t, e.db, article))
		wantCounts(t, "events of the article backed up already", []int64{100}, viewedEvents(t, e.db, article+1))
		wantCounts(t, "events of the article never backed up", []int64{7}, viewedEvents(t, e.db, article+2))
		if err := settler.Settle(context.Background()); err != nil { // nothing left: no event
			t.Fatal(err)
		}
		wantCounts(t, "events after settling again", []int64{100, 150}, viewedEvents(t, e.db, article))
	})
}

// A mark younger than SettleAfter may cover a view still on its way to Redis: it is left alone.
func TestSettleLeavesRecentMarks(t *testing.T) {
	t.Parallel()
	runRedis(t, func(t *testing.T, e env) {
		viewUsers(t, e.service(Config{FlushEvery: time.Hour}), article, 1, 7, 1)
		settler := e.service(Config{}) // settles marks older than 20 s
		if err := settler.Settle(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := backupOf(t, e.store, article); got != 0 {
			t.Errorf("backup = %d, want none yet", got)
		}
		if _, marked := markOf(t, settler, article); !marked {
			t.Error("a recent mark was removed")
		}
	})
}

// A view marks its article once per FlushEvery per instance, at the server's time; the marked article stays in the
// index when it is marked again while a settler backs it up, and the next round settles the new mark.
func TestMarks(t *testing.T) {
	t.Parallel()
	runRedis(t, func(t *testing.T, e env) {
		ctx := context.Background()
		quiet := e.service(Config{FlushEvery: time.Hour})
		before := time.Now()
		mustView(t, quiet, article, 1)
		first, marked := markOf(t, quiet, article)
		if !marked || first < float64(before.UnixMilli()-1000) || first > float64(time.Now().UnixMilli()+1000) {
			t.Fatalf("mark after the first view: %v, %v; want about now (%d ms)", first, marked, before.UnixMilli())
		}
		mustView(t, quiet, article, 2)
		if again, _ := markOf(t, quiet, article); again != first {
			t.Errorf("the second view within FlushEvery marked again: %v, then %v", first, again)
		}

		busy := e.service(Config{FlushEvery: time.Second}) // a fresh instance: its first view marks again
		settler := e.service(settlerConfig)
		time.Sleep(10 * time.Millisecond)
		marks, err := settledScript.Run(ctx, e.redis.Client, []string{settler.unsavedKey(article)}, 3, settleBatch).StringSlice()
		if err != nil || len(marks) != 2 {
			t.Fatalf("marks to settle: %v, %v; want one", marks, err)
		}
		mustView(t, busy, article, 3) // while the settler backs up 2
		settled, err := settler.settle(ctx, marks)
		if err != nil {
			t.Fatal(err)
		}
		if err := unmarkScript.Run(ctx, e.redis.Client, []string{settler.unsavedKey(article)}, settled...).Err(); err != nil {
			t.Fatal(err)
		}
		if got := backupOf(t, e.store, article); got != 3 {
			t.Errorf("backup = %d, want 3: settling backs up the count Redis holds then", got)
		}
		if again, marked := markOf(t, settler, article); !marked || again <= first {
			t.Errorf("mark after a view during settling: %v, %v; want one later than %v", again, marked, first)
		}
		mustView(t, busy, article, 4) // then busy dies
		settleAfterAMoment(t, settler)
		if got := backupOf(t, e.store, article); got != 4 {
			t.Errorf("backup after the next round = %d, want 4", got)
		}
		if _, marked := markOf(t, settler, article); marked {
			t.Error("still marked after the next round")
		}
	})
}

// A backup that fails keeps its mark, and a later round backs the count up.
func TestSettleFailureKeepsTheMark(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, e env) {
		ctx := context.Background()
		viewUsers(t, e.service(Config{FlushEvery: time.Hour}), article, 1, 7, 1)
		settler := e.service(settlerConfig)
		rename := func(from, to string) {
			t.Helper()
			if _, err := e.db.ExecContext(ctx, "ALTER TABLE "+from+" RENAME TO "+to); err != nil {
				t.Fatal(err)
			}
		}
		rename("article_view_count", "article_view_count_away")
		time.Sleep(10 * time.Millisecond)
		if err := settler.Settle(ctx); err == nil {
			t.Error("Settle with the backup table gone succeeded")
		}
		rename("article_view_count_away", "article_view_count")
		if _, marked := markOf(t, settler, article); !marked {
			t.Fatal("a failed settle removed the mark")
		}
		settleAfterAMoment(t, settler)
		if got := backupOf(t, e.store, article); got != 7 {
			t.Errorf("backup after the retry = %d, want 7", got)
		}
	})
}

// Run settles as it flushes: what a dead instance counted reaches SQL with no further view.
func TestRunSettles(t *testing.T) {
	t.Parallel()
	runRedis(t, func(t *testing.T, e env) {
		viewUsers(t, e.service(Config{FlushEvery: time.Hour}), article, 1, 7, 1)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- e.service(settlerConfig).Run(ctx) }()
		for deadline := time.Now().Add(time.Minute); backupOf(t, e.store, article) != 7; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("Run did not settle within a minute")
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}

// Articles created one after another land in different shards of the unsaved index, so on Redis Cluster the marks
// spread over the primaries.
func TestUnsavedIndexShardsSpread(t *testing.T) {
	t.Parallel()
	svc := NewService(nil, nil, Config{})
	ids, err := snowflake.New(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	shards := map[string]int{}
	for range 160 {
		id, err := ids.Next()
		if err != nil {
			t.Fatal(err)
		}
		shards[svc.unsavedKey(id)]++
		time.Sleep(time.Millisecond) // a site creates articles milliseconds apart, not in one burst
	}
	if len(shards) < unsavedShards/2 {
		t.Errorf("160 articles marked in %d shards of %d: %v", len(shards), unsavedShards, shards)
	}
}

// A member that is no article id (not written by this package) is removed rather than left to stall its batch.
func TestSettleRemovesAForeignMember(t *testing.T) {
	t.Parallel()
	runRedis(t, func(t *testing.T, e env) {
		ctx := context.Background()
		settler := e.service(settlerConfig)
		key := settler.unsavedShardKey(0)
		if err := e.redis.Client.ZAdd(ctx, key, redis.Z{Score: 1, Member: "not-an-id"}).Err(); err != nil {
			t.Fatal(err)
		}
		settleAfterAMoment(t, settler)
		if n := e.redis.Client.Exists(ctx, key).Val(); n != 0 {
			t.Errorf("the foreign member is still there")
		}
	})
}

// A count read that restores what only this instance remembers (Redis lost the count, and the backup is behind)
// marks the article first, so the restored count reaches SQL even if the instance then dies.
func TestCountRestoringFromMemoryMarks(t *testing.T) {
	t.Parallel()
	runRedis(t, func(t *testing.T, e env) {
		svc := e.service(Config{FlushEvery: time.Hour})
		viewUsers(t, svc, article, 1, 7, 1) // never backed up: the flushes failed, say
		e.forget(t)                         // Redis lost the count and the mark
		svc.marked.forgetOlder(time.Now().Add(time.Hour))
		if got := mustCount(t, svc, article); got != 7 {
			t.Fatalf("count after Redis lost it = %d, want 7 from the instance's memory", got)
		}
		// svc dies; another instance settles.
		settleAfterAMoment(t, e.service(settlerConfig))
		if got := backupOf(t, e.store, article); got != 7 {
			t.Errorf("backup = %d, want 7", got)
		}
	})
}

// BenchmarkSettle measures settling the marks of b.N articles, each viewed once, on the Redis at
// BOARD_TEST_REDIS_ADDR (miniredis when unset) over SQLite: "flushed" is the usual case, the instance that counted
// the views backed them up before settling (per mark, a share of the shard reads, GETs and SQL read); "crashed" is
// the one settling is for, it died first (each mark also costs a backup with its event).
func BenchmarkSettle(b *testing.B) {
	for _, crashed := range []bool{false, true} {
		b.Run(map[bool]string{false: "flushed", true: "crashed"}[crashed], func(b *testing.B) {
			rb := redisclienttest.Real(b)
			db := sqldbtest.OpenSQLite(b, Migrate)
			origin := existencetest.NewOrigin(b)
			viewer := NewService(testStore(db, origin), rb.Client, Config{KeyPrefix: rb.Prefix, FlushEvery: time.Hour})
			ctx := context.Background()
			for i := range int64(b.N) {
				if _, err := viewer.View(ctx, article+i, 1); err != nil {
					b.Fatal(err)
				}
			}
			if !crashed {
				if err := viewer.Flush(ctx); err != nil {
					b.Fatal(err)
				}
			}
			cfg := settlerConfig
			cfg.KeyPrefix = rb.Prefix
			settler := NewService(testStore(db, origin), rb.Client, cfg)
			time.Sleep(10 * time.Millisecond)
			b.ResetTimer()
			if err := settler.Settle(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if got := backupOf(b, settler.store, article+int64(b.N)-1); got != 1 {
				b.Errorf("backup of the last article = %d, want 1", got)
			}
			if n := len(redisclienttest.Keys(b, rb.Client, rb.Prefix+"view::unsaved-articles::*")); n != 0 {
				b.Errorf("%d index shards left", n)
			}
		})
	}
}

// BenchmarkFlush measures an instance's flush of the counts of b.N articles it counted a view of since its last
// one (a busy site's every FlushEvery), on the Redis at BOARD_TEST_REDIS_ADDR (miniredis when unset) over SQLite.
func BenchmarkFlush(b *testing.B) {
	rb := redisclienttest.Real(b)
	db := sqldbtest.OpenSQLite(b, Migrate)
	svc := NewService(testStore(db, existencetest.NewOrigin(b)), rb.Client, Config{KeyPrefix: rb.Prefix, FlushEvery: time.Hour})
	ctx := context.Background()
	for i := range int64(b.N) {
		if _, err := svc.View(ctx, article+i, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	if err := svc.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if got := backupOf(b, svc.store, article+int64(b.N)-1); got != 1 {
		b.Errorf("backup of the last article = %d, want 1", got)
	}
}

// BackupMany backs up the live articles of a batch in one transaction and skips the others with their reason; a
// flush over such a batch backs up the one the registry had not heard of after looking it up, and drops the deleted.
func TestBackupMany(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, e env) {
		ctx := context.Background()
		live, deleted, unknown := int64(article), int64(article+1), int64(article+2)
		existencetest.Apply(t, e.store.articles, existencetest.Created(live, 1))
		existencetest.Apply(t, e.store.articles, existencetest.Deleted(deleted, 2))
		skipped, err := e.store.BackupMany(ctx, map[int64]int64{live: 5, deleted: 6, unknown: 7})
		if err != nil {
			t.Fatal(err)
		}
		if len(skipped) != 2 || fault.KindOf(skipped[deleted]) != fault.NotFound || !errors.Is(skipped[unknown], existence.ErrUnknown) {
			t.Errorf("skipped %v; want the deleted article as NotFound and the unknown one as ErrUnknown", skipped)
		}
		for id, want := range map[int64]int64{live: 5, deleted: 0, unknown: 0} {
			if got := backupOf(t, e.store, id); got != want {
				t.Errorf("backup of article %d = %d, want %d", id-article, got, want)
			}
		}
		wantCounts(t, "events", []int64{5}, viewedEvents(t, e.db, live))

		svc := NewService(e.store, e.redis.Client, Config{KeyPrefix: e.prefix, FlushEvery: time.Hour})
		for id, count := range map[int64]int64{live: 8, deleted: 9, unknown: 10} {
			svc.unsaved.note(id, count)
		}
		if err := svc.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		for id, want := range map[int64]int64{live: 8, deleted: 0, unknown: 10} {
			if got := backupOf(t, e.store, id); got != want {
				t.Errorf("backup of article %d after Flush = %d, want %d", id-article, got, want)
			}
		}
		if got := svc.unsaved.get(deleted); got != 0 {
			t.Errorf("the deleted article's count is still remembered: %d", got)
		}
	})
}
