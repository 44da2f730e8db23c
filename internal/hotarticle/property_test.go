package hotarticle

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"board/internal/event"
	"board/internal/redisclient/redisclienttest"
	"board/internal/snowflake"
)

var seedFlag = flag.Uint64("seed", 0, "run TestProperty with this seed only (as logged by a failing run)")

// article is the true history of one article, as its producers saw it.
type article struct {
	id      int64
	day     string
	titles  []string // the title at each article version: created at 1, updated at 2.., none if never created
	deleted bool     // deleted at version len(titles)+1
	likes   []int64  // the like count at each like-count version 1, 2..
	comment []int64  // the comment count at each comment-count version 1, 2..
	views   []int64  // the view count after each view, growing
}

func (a *article) live() bool { return len(a.titles) > 0 && !a.deleted }

func (a *article) entry() HotArticle {
	last := func(counts []int64) int64 {
		if len(counts) == 0 {
			return 0
		}
		return counts[len(counts)-1]
	}
	return hot(a.id, a.titles[len(a.titles)-1], last(a.likes), last(a.comment), last(a.views))
}

// history is the truth about the articles of a few days.
type history struct {
	days     []string
	articles []*article
}

// randomHistory makes up about 30 articles of yesterday and a few of the days on either side (today's up to the
// clock's now), with counts that go up and down and many articles that nobody touches, so that equal scores and
// the fight for the tenth place are common.
func randomHistory(rng *rand.Rand, f *fixture) history {
	var h history
	now := f.clock.Now()
	seq := int64(0)
	for _, d := range []struct{ offset, articles int }{{-2, 3}, {-1, 30}, {0, 3}} {
		start := f.dayStart(d.offset)
		span := start.AddDate(0, 0, 1).Sub(start).Milliseconds()
		if d.offset == 0 {
			span = max(1, now.Sub(start).Milliseconds())
		}
		h.days = append(h.days, dayName(start, f.loc))
		for range d.articles {
			seq++
			at := start.Add(time.Duration(rng.Int64N(span)) * time.Millisecond)
			a := &article{id: snowflake.Compose(at, rng.Int64N(snowflake.MaxNode+1), seq), day: dayName(start, f.loc)}
			if rng.IntN(10) > 0 {
				for v := range 1 + rng.IntN(3) {
					a.titles = append(a.titles, fmt.Sprintf("article %d v%d", a.id, v+1))
				}
				a.deleted = rng.IntN(5) == 0
			}
			if rng.IntN(5) >= 2 { // the other 40% are never liked, commented or viewed
				a.likes = walk(rng, rng.IntN(7))
				a.comment = walk(rng, rng.IntN(5))
				c := int64(0)
				for range rng.IntN(4) {
					c += 1 + rng.Int64N(3)
					a.views = append(a.views, c)
				}
			}
			h.articles = append(h.articles, a)
		}
	}
	return h
}

// walk is a count's values after steps changes of one up or down, never below zero.
func walk(rng *rand.Rand, steps int) []int64 {
	var counts []int64
	c := int64(0)
	for range steps {
		if c == 0 || rng.IntN(3) > 0 {
			c++
		} else {
			c--
		}
		counts = append(counts, c)
	}
	return counts
}

// events returns every event of the history, some twice, in an order chosen by rng: shuffled across articles and
// types, newest first, or as they happened.
func (h history) events(rng *rand.Rand) []event.Envelope {
	var evs []event.Envelope
	for _, a := range h.articles {
		for i, title := range a.titles {
			if i == 0 {
				evs = append(evs, created(a.id, 1, title))
			} else {
				evs = append(evs, updated(a.id, int64(i+1), title))
			}
		}
		if a.deleted {
			evs = append(evs, deleted(a.id, int64(len(a.titles)+1)))
		}
		for i, c := range a.likes {
			if i > 0 && c < a.likes[i-1] {
				evs = append(evs, unliked(a.id, c, int64(i+1)))
			} else {
				evs = append(evs, liked(a.id, c, int64(i+1)))
			}
		}
		for i, c := range a.comment {
			if i > 0 && c < a.comment[i-1] {
				evs = append(evs, uncommented(a.id, c, int64(i+1)))
			} else {
				evs = append(evs, commented(a.id, c, int64(i+1)))
			}
		}
		for _, c := range a.views {
			evs = append(evs, viewed(a.id, c))
		}
	}
	for _, env := range evs { // at-least-once delivery: the same envelope again
		if rng.IntN(5) == 0 {
			evs = append(evs, env)
		}
	}
	switch rng.IntN(4) {
	case 0:
		slices.Reverse(evs)
	case 1: // as they happened, duplicates last
	default:
		rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	}
	return evs
}

// ranked returns the live articles of day, best first: higher score, then newer article.
func (h history) ranked(day string) []HotArticle {
	list := []HotArticle{}
	for _, a := range h.articles {
		if a.day == day && a.live() {
			list = append(list, a.entry())
		}
	}
	slices.SortFunc(list, func(x, y HotArticle) int {
		return cmp.Or(cmp.Compare(y.Score, x.Score), cmp.Compare(y.ArticleID, x.ArticleID))
	})
	return list
}

// top is what Day must answer for day.
func (h history) top(day string) []HotArticle {
	list := h.ranked(day)
	return list[:min(len(list), ListSize)]
}

// TestProperty applies random histories, duplicated and reordered, and checks each day's list against the top ten
// computed from the final truth. A failure names its seed; -seed replays it.
func TestProperty(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		zones := []*time.Location{time.UTC}
		for _, name := range []string{"Asia/Seoul", "America/New_York"} {
			loc, err := time.LoadLocation(name)
			if err != nil {
				t.Fatal(err)
			}
			zones = append(zones, loc)
		}
		runs := 200
		if b.Mini == nil {
			runs = 30
		}
		if testing.Short() {
			runs = 20
		}
		base := rand.Uint64()
		if *seedFlag != 0 {
			base, runs = *seedFlag, 1
		}
		t.Logf("seeds %d..%d", base, base+uint64(runs)-1)
		for i := range runs {
			seed := base + uint64(i)
			rng := rand.New(rand.NewPCG(seed, seed))
			f := newFixture(t, b, zones[rng.IntN(len(zones))])
			prefix := fmt.Sprintf("%sseed%d:", b.Prefix, seed)
			f.svc = f.service(prefix)
			h := randomHistory(rng, f)
			events := h.events(rng)
			f.apply(events...)
			for _, day := range h.days {
				if diff := gocmp.Diff(h.top(day), f.day(day)); diff != "" {
					t.Fatalf("seed %d (replay with -run 'TestProperty/%s' -seed %d), zone %s, %d events: Day(%s) (-want +got):\n%s",
						seed, t.Name()[len("TestProperty/"):], seed, f.loc, len(events), day, diff)
				}
				// The day's list holds every live article by its score, not only the ten shown.
				var want []string
				for _, a := range h.ranked(day) {
					want = append(want, fmt.Sprintf("%s=%d", member(a.ArticleID), a.Score))
				}
				if diff := gocmp.Diff(want, listOf(t, b.Client, prefix, day)); diff != "" {
					t.Fatalf("seed %d, zone %s: list of %s (-want +got):\n%s", seed, f.loc, day, diff)
				}
			}
		}
	})
}

// listOf returns a day's sorted set best first, as member=score.
func listOf(t testing.TB, rdb redis.UniversalClient, prefix, day string) []string {
	t.Helper()
	zs, err := rdb.ZRevRangeWithScores(context.Background(), prefix+"hot-article::{"+day+"}::list", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var list []string
	for _, z := range zs {
		list = append(list, fmt.Sprintf("%s=%d", z.Member, int64(z.Score)))
	}
	return list
}
