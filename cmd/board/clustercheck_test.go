package main

import (
	"bufio"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/app"
	"board/internal/event"
)

// checkResult is what the cluster run's table reports of the checks.
type checkResult struct {
	lost                 int           // acknowledged writes SQL does not show
	consistentAfter      time.Duration // from the end of the workload to a read side equal to SQL; -1 if never
	consistentAfterFault time.Duration // from the end of the last fault to the same
	duplicates           string        // events published more than once, per topic
	viewSamples          int
	viewsBackwards       []string
}

// checkCluster checks the quiet system against the ledger and against itself.
func checkCluster(t *testing.T, c *cluster, l *ledger, workloadEnded time.Time, f *faultRun) checkResult {
	t.Helper()
	ctx := context.Background()
	l.mu.Lock() // the workers have stopped; the lock only satisfies the race detector
	defer l.mu.Unlock()

	for _, s := range l.surprises {
		t.Errorf("answer contradicting an earlier acknowledgement: %s", s)
	}
	// Requests without an answer and 5xx answers are expected during the faults: the ledger accepts either outcome
	// for them, and the table says how many came outside the faults.

	waitQuiet(t, "every outbox is empty", func() []string {
		var pending []string
		for name, db := range c.dbs {
			if n := queryInt(t, db, "SELECT COUNT(*) FROM outbox"); n > 0 {
				pending = append(pending, fmt.Sprintf("%s: %d outbox rows", name, n))
			}
		}
		return pending
	})
	var consistentAfter, consistentAfterFault time.Duration = -1, -1
	if waitQuiet(t, "the read side equals SQL", func() []string { return readSideDiffs(t, c, l) }) {
		consistentAfter, consistentAfterFault = time.Since(workloadEnded), time.Since(f.lastEnd)
	}

	lost := lostWrites(t, c, l)
	for _, msg := range lost {
		t.Errorf("acknowledged write lost: %s", msg)
	}
	for _, msg := range recountDiffs(t, c) {
		t.Errorf("count row differs from its recount: %s", msg)
	}
	checkDeadLetters(t, c)
	var spread []string
	if waitQuiet(t, "every consumer group spreads over the instances", func() []string {
		var diffs []string
		diffs, spread = groupSpreadDiffs(ctx, t, c)
		return diffs
	}) {
		t.Logf("partitions per member:\n%s", strings.Join(spread, "\n"))
	}
	checkSnowflakeNodes(t, c, l)
	return checkResult{lost: len(lost), consistentAfter: consistentAfter, consistentAfterFault: consistentAfterFault,
		duplicates: duplicateEvents(t, c)}
}

// waitQuiet polls diffs until it returns none, and fails the test with the last ones after quietBound.
func waitQuiet(t *testing.T, what string, diffs func() []string) bool {
	t.Helper()
	start := time.Now()
	for {
		d := diffs()
		if len(d) == 0 {
			t.Logf("%s after %v", what, time.Since(start).Round(time.Millisecond))
			return true
		}
		if time.Since(start) > quietBound {
			t.Errorf("%s: not after %v; %d differences, e.g.:\n%s", what, quietBound, len(d),
				strings.Join(d[:min(len(d), 20)], "\n"))
			return false
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func queryInt(t *testing.T, db *sql.DB, query string, args ...any) int64 {
	t.Helper()
	var n sql.NullInt64
	if err := db.QueryRow(query, args...).Scan(&n); err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("%s: %v", query, err)
	}
	return n.Int64
}

// queryCounts runs a query of (article_id, count) rows and returns them as a map.
func queryCounts(t *testing.T, db *sql.DB, query string, args ...any) map[int64]int64 {
	t.Helper()
	rows, err := db.Query(query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	out := map[int64]int64{}
	for rows.Next() {
		var id, n int64
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sqlArticle is an article as the article database holds it.
type sqlArticle struct {
	board          int64
	title, content string
	day            string // yyyyMMdd of its creation, in UTC (the hot-article zone of the instances)
}

func sqlArticles(t *testing.T, c *cluster) map[int64]sqlArticle {
	t.Helper()
	rows, err := c.dbs["article"].Query("SELECT article_id, board_id, title, content, DATE_FORMAT(created_at, '%Y%m%d') FROM article")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]sqlArticle{}
	for rows.Next() {
		var id int64
		var a sqlArticle
		if err := rows.Scan(&id, &a.board, &a.title, &a.content, &a.day); err != nil {
			t.Fatal(err)
		}
		out[id] = a
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// readSideDiffs compares what the read side serves with SQL: the purge of deleted articles has finished, the view
// backups have caught up with the counts, and the hot-article lists and article-read models equal a recount.
func readSideDiffs(t *testing.T, c *cluster, l *ledger) []string {
	t.Helper()
	var diffs []string
	for _, name := range []string{"comment", "article_like", "article_view"} {
		if n := queryInt(t, c.dbs[name], "SELECT COUNT(*) FROM article_purge"); n > 0 {
			diffs = append(diffs, fmt.Sprintf("%s: %d articles still being purged", name, n))
		}
	}
	articles := sqlArticles(t, c)
	likes := queryCounts(t, c.dbs["article_like"], "SELECT article_id, like_count FROM article_like_count")
	comments := queryCounts(t, c.dbs["comment"], "SELECT article_id, comment_count FROM article_comment_count")
	backups := queryCounts(t, c.dbs["article_view"], "SELECT article_id, view_count FROM article_view_count")
	for id, a := range l.articles {
		if !a.deleted {
			continue
		}
		if likes[id] != 0 || comments[id] != 0 || backups[id] != 0 {
			diffs = append(diffs, fmt.Sprintf("deleted article %d still counts %d likes, %d comments, %d views", id,
				likes[id], comments[id], backups[id]))
		}
		if a := clusterRequest("GET", fmt.Sprintf("%s/v1/articles/%d", c.url("article-read"), id), nil); a.status != 404 {
			diffs = append(diffs, fmt.Sprintf("article-read of deleted article %d: %d %s (%v)", id, a.status, a.body, a.err))
		}
	}

	type ranked struct {
		id                           int64
		score, likes, comments, view int64
		title                        string
	}
	days := map[string][]ranked{}
	for id, a := range articles {
		resp := clusterRequest("GET", fmt.Sprintf("%s/v1/article-views/articles/%d/count", c.url("view"), id), nil)
		if resp.err != nil || resp.status != 200 {
			diffs = append(diffs, fmt.Sprintf("view count of article %d: %d %s (%v)", id, resp.status, resp.body, resp.err))
			continue
		}
		var v int64
		if err := json.Unmarshal(resp.body, &v); err != nil {
			diffs = append(diffs, fmt.Sprintf("view count of article %d: %s: %v", id, resp.body, err))
			continue
		}
		if backups[id] != v {
			diffs = append(diffs, fmt.Sprintf("article %d: view backup %d, count %d", id, backups[id], v))
		}
		days[a.day] = append(days[a.day], ranked{id: id, likes: likes[id], comments: comments[id], view: v,
			score: likes[id]*3 + comments[id]*2 + v, title: a.title})

		var read struct {
			Title, Content                                          string
			ArticleCommentCount, ArticleLikeCount, ArticleViewCount int64
		}
		got := clusterRequest("GET", fmt.Sprintf("%s/v1/articles/%d", c.url("article-read"), id), nil)
		if got.err != nil || got.status != 200 || json.Unmarshal(got.body, &read) != nil {
			diffs = append(diffs, fmt.Sprintf("article-read of article %d: %d %s (%v)", id, got.status, got.body, got.err))
			continue
		}
		if read.Title != a.title || read.Content != a.content || read.ArticleLikeCount != likes[id] ||
			read.ArticleCommentCount != comments[id] || read.ArticleViewCount != v {
			diffs = append(diffs, fmt.Sprintf("article-read of article %d: %q, %d likes, %d comments, %d views; SQL: %q, %d, %d, view count %d",
				id, read.Title, read.ArticleLikeCount, read.ArticleCommentCount, read.ArticleViewCount, a.title, likes[id],
				comments[id], v))
		}
	}

	for day, rs := range days {
		slices.SortFunc(rs, func(a, b ranked) int { return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(b.id, a.id)) })
		want := rs[:min(len(rs), 10)]
		for i, p := range c.instances {
			var got []hotOut
			resp := clusterRequest("GET", p.urls["hot-article"]+"/v1/hot-articles/articles/date/"+day, nil)
			if resp.err != nil || resp.status != 200 || json.Unmarshal(resp.body, &got) != nil {
				diffs = append(diffs, fmt.Sprintf("hot articles of %s on instance %d: %d %s (%v)", day, i, resp.status, resp.body, resp.err))
				continue
			}
			same := len(got) == len(want)
			for j := 0; same && j < len(got); j++ {
				g, w := got[j], want[j]
				same = g.ArticleID == strconv.FormatInt(w.id, 10) && g.Score == w.score && g.LikeCount == w.likes &&
					g.CommentCount == w.comments && g.ViewCount == w.view && g.Title == w.title
			}
			if !same {
				diffs = append(diffs, fmt.Sprintf("hot articles of %s on instance %d: %+v; recount from SQL: %+v", day, i, got, want))
			}
		}
	}
	return diffs
}

// lostWrites returns the acknowledged writes that SQL does not show: an article created, updated or deleted, a
// comment created or deleted, a like or an unlike, a view.
func lostWrites(t *testing.T, c *cluster, l *ledger) []string {
	t.Helper()
	var lost []string
	articles := sqlArticles(t, c)
	for id, want := range l.articles {
		got, found := articles[id]
		switch {
		case want.deleted && found:
			lost = append(lost, fmt.Sprintf("article %d deleted, still in SQL", id))
		case !want.deleted && !found && !want.maybeDeleted:
			lost = append(lost, fmt.Sprintf("article %d created, not in SQL", id))
		case !found || want.deleted:
		case want.maybeTitles[got.title] && got.content == "content "+got.title && got.board == want.board:
		case got.title != want.title || got.content != want.content || got.board != want.board:
			lost = append(lost, fmt.Sprintf("article %d: SQL holds %q in board %d, the last acknowledged write %q in board %d",
				id, got.title, got.board, want.title, want.board))
		}
	}
	// An article whose delete got no answer is live if SQL still holds it.
	live := func(article int64) bool {
		a := l.articles[article]
		if a == nil || a.deleted {
			return false
		}
		_, found := articles[article]
		return !a.maybeDeleted || found
	}

	type commentRow struct {
		article int64
		deleted bool
	}
	stored := map[commentKey]commentRow{}
	for version, table := range map[string]string{"v1": "comment", "v2": "comment_v2"} {
		rows, err := c.dbs["comment"].Query("SELECT comment_id, article_id, deleted FROM " + table)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			var r commentRow
			if err := rows.Scan(&id, &r.article, &r.deleted); err != nil {
				t.Fatal(err)
			}
			stored[commentKey{version, id}] = r
		}
		rows.Close()
	}
	for k, want := range l.comments {
		got, found := stored[k]
		switch {
		case !live(want.article) && found:
			lost = append(lost, fmt.Sprintf("comment %s %d of deleted article %d not purged", k.version, k.id, want.article))
		case !live(want.article):
		case want.maybeDeleted && !want.deleted:
		case want.deleted && found && !got.deleted:
			lost = append(lost, fmt.Sprintf("comment %s %d deleted, still live in SQL", k.version, k.id))
		case !want.deleted && (!found || got.deleted || got.article != want.article):
			lost = append(lost, fmt.Sprintf("comment %s %d created on article %d, SQL has %+v (found %v)", k.version, k.id,
				want.article, got, found))
		}
	}

	likes := map[likeKey]bool{}
	rows, err := c.dbs["article_like"].Query("SELECT article_id, user_id FROM article_like")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k likeKey
		if err := rows.Scan(&k.article, &k.user); err != nil {
			t.Fatal(err)
		}
		likes[k] = true
	}
	rows.Close()
	for k, state := range l.likes {
		switch {
		case !live(k.article) && likes[k]:
			lost = append(lost, fmt.Sprintf("like of deleted article %d by user %d not purged", k.article, k.user))
		case !live(k.article), state == likeUnknown, l.doubtfulLikes[k]:
		case state == liked && !likes[k]:
			lost = append(lost, fmt.Sprintf("like of article %d by user %d acknowledged, not in SQL", k.article, k.user))
		case state == unliked && likes[k]:
			lost = append(lost, fmt.Sprintf("unlike of article %d by user %d acknowledged, the like still in SQL", k.article, k.user))
		}
	}

	backups := queryCounts(t, c.dbs["article_view"], "SELECT article_id, view_count FROM article_view_count")
	for article, users := range l.viewers {
		if !live(article) {
			continue
		}
		// Each user counts once per dedupe window: when it outlasts the run, the count is the number of viewers.
		want := max(int64(len(users)), l.maxViews[article])
		exact := l.unknown["view"] == 0 && l.viewsWithinWindow
		if got := backups[article]; got < want || (exact && got != int64(len(users))) {
			lost = append(lost, fmt.Sprintf("article %d: %d views backed up in SQL; %d users' views acknowledged, the highest count answered %d",
				article, got, len(users), l.maxViews[article]))
		}
	}
	return lost
}

// recountDiffs compares every count row with a count of the rows it counts, and finds rows no count row counts.
func recountDiffs(t *testing.T, c *cluster) []string {
	t.Helper()
	var diffs []string
	compare := func(what string, kept, recounted map[int64]int64) {
		for _, id := range slices.Sorted(maps.Keys(mergeKeys(kept, recounted))) {
			if kept[id] != recounted[id] {
				diffs = append(diffs, fmt.Sprintf("%s %d: count row %d, recount %d", what, id, kept[id], recounted[id]))
			}
		}
	}
	compare("board", queryCounts(t, c.dbs["article"], "SELECT board_id, article_count FROM board_article_count"),
		queryCounts(t, c.dbs["article"], "SELECT board_id, COUNT(*) FROM article GROUP BY board_id"))
	compare("likes of article", queryCounts(t, c.dbs["article_like"], "SELECT article_id, like_count FROM article_like_count"),
		queryCounts(t, c.dbs["article_like"], "SELECT article_id, COUNT(*) FROM article_like GROUP BY article_id"))
	comments := queryCounts(t, c.dbs["comment"], "SELECT article_id, COUNT(*) FROM comment GROUP BY article_id")
	for id, n := range queryCounts(t, c.dbs["comment"], "SELECT article_id, COUNT(*) FROM comment_v2 GROUP BY article_id") {
		comments[id] += n
	}
	compare("comments of article", queryCounts(t, c.dbs["comment"], "SELECT article_id, comment_count FROM article_comment_count"),
		comments)
	return diffs
}

// mergeKeys returns a map holding the keys of both maps (zero counts read as missing rows, and the reverse).
func mergeKeys(a, b map[int64]int64) map[int64]bool {
	keys := map[int64]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	return keys
}

func adminClient(t *testing.T, c *cluster) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.kafka, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// checkDeadLetters checks that no event was dead-lettered: every DLT topic is missing or empty.
func checkDeadLetters(t *testing.T, c *cluster) {
	t.Helper()
	var dlts []string
	for _, topic := range []string{"article", "comment", "like", "view"} {
		dlts = append(dlts, c.topicPrefix+topic+".dlt")
	}
	listed, err := adminClient(t, c).ListEndOffsets(context.Background(), dlts...)
	if err != nil {
		t.Fatalf("end offsets of the DLT topics: %v", err)
	}
	listed.Each(func(o kadm.ListedOffset) {
		switch {
		case errors.Is(o.Err, kerr.UnknownTopicOrPartition): // never created: nothing dead-lettered
		case o.Err != nil:
			t.Errorf("end offset of %s/%d: %v", o.Topic, o.Partition, o.Err)
		case o.Offset > 0:
			t.Errorf("%s/%d holds %d dead-lettered events", o.Topic, o.Partition, o.Offset)
		}
	})
}

// groupSpreadDiffs says which consumer groups do not have one member per instance or, when their topics have a
// partition for each, leave a member without one; and how each group spreads its partitions.
func groupSpreadDiffs(ctx context.Context, t *testing.T, c *cluster) (diffs, spread []string) {
	t.Helper()
	adm := adminClient(t, c)
	var groups []string
	for _, s := range app.Services() {
		if s.Group != "" {
			groups = append(groups, c.topicPrefix+s.Group)
		}
	}
	described, err := adm.DescribeGroups(ctx, groups...)
	if err != nil {
		return []string{fmt.Sprintf("describe the consumer groups: %v", err)}, nil
	}
	for _, g := range described.Sorted() {
		if g.Err != nil {
			diffs = append(diffs, fmt.Sprintf("group %s: %v", g.Group, g.Err))
			continue
		}
		var counts []string
		partitions, empty := 0, 0
		for _, m := range g.Members {
			n := 0
			if a, ok := m.Assigned.AsConsumer(); ok {
				for _, topic := range a.Topics {
					n += len(topic.Partitions)
				}
			}
			partitions += n
			if n == 0 {
				empty++
			}
			counts = append(counts, strconv.Itoa(n))
		}
		spread = append(spread, fmt.Sprintf("group %s: %d members, partitions per member %s", g.Group, len(g.Members),
			strings.Join(counts, "/")))
		if len(g.Members) != clusterInstances {
			diffs = append(diffs, fmt.Sprintf("group %s has %d members, want one per instance (%d)", g.Group, len(g.Members),
				clusterInstances))
		}
		if partitions >= clusterInstances && empty > 0 {
			diffs = append(diffs, fmt.Sprintf("group %s: %d of its members consume nothing of %d partitions", g.Group, empty,
				partitions))
		}
	}
	return diffs, spread
}

// checkSnowflakeNodes checks that no two processes that ran at the same time leased the same Snowflake node id
// (a restarted instance included), and that no two acknowledged writes returned the same id.
func checkSnowflakeNodes(t *testing.T, c *cluster, l *ledger) {
	t.Helper()
	c.mu.Lock()
	incarnations := slices.Clone(c.incarnations)
	c.mu.Unlock()
	nodes := make([]int64, len(incarnations))
	var leased []string
	for i, inc := range incarnations {
		nodes[i] = leasedNode(inc.p)
		if nodes[i] < 0 {
			t.Errorf("instance %d (started %v) logged no leased snowflake node id", inc.instance, inc.started.Format(time.TimeOnly))
		}
		leased = append(leased, fmt.Sprintf("instance %d: node %d", inc.instance, nodes[i]))
	}
	for i, a := range incarnations {
		for j, b := range incarnations[:i] {
			if nodes[i] < 0 || nodes[i] != nodes[j] {
				continue
			}
			if overlap := (a.ended.IsZero() || a.ended.After(b.started)) && (b.ended.IsZero() || b.ended.After(a.started)); overlap {
				t.Errorf("snowflake node id %d leased by instance %d and instance %d while both ran", nodes[i], a.instance, b.instance)
			}
		}
	}
	t.Logf("snowflake node ids leased, in start order: %s", strings.Join(leased, ", "))
	ids := slices.Clone(l.ids)
	slices.Sort(ids)
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			t.Errorf("id %d returned by two acknowledged writes", ids[i])
		}
	}
}

// leasedNode returns the Snowflake node id a process logged it leased, or -1.
func leasedNode(p *process) int64 {
	sc := bufio.NewScanner(strings.NewReader(p.logs.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Msg  string
			Node *int64
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "leased snowflake node id" && line.Node != nil {
			return *line.Node
		}
	}
	return -1
}

// duplicateEvents reads every record of the event topics from the start and counts, per topic, the copies of events
// published more than once (the relay publishes at least once; a consumer must apply a copy as a no-op).
func duplicateEvents(t *testing.T, c *cluster) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var topics []string
	for _, topic := range []string{"article", "comment", "like", "view"} {
		topics = append(topics, c.topicPrefix+topic)
	}
	ends, err := adminClient(t, c).ListEndOffsets(ctx, topics...)
	if err != nil {
		t.Fatalf("end offsets of the event topics: %v", err)
	}
	remaining := map[string]map[int32]int64{} // topic -> partition -> end offset not yet reached
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset > 0 {
			if remaining[o.Topic] == nil {
				remaining[o.Topic] = map[int32]int64{}
			}
			remaining[o.Topic][o.Partition] = o.Offset
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.kafka, ",")...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]map[string]int{} // topic -> event id -> copies
	records := 0
	for len(remaining) > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Errorf("reading the event topics: still missing %v after a minute", remaining)
			break
		}
		fetches.EachError(func(topic string, p int32, err error) { t.Errorf("fetch %s/%d: %v", topic, p, err) })
		fetches.EachRecord(func(r *kgo.Record) {
			records++
			for _, h := range r.Headers {
				if h.Key == event.HeaderEventID {
					if seen[r.Topic] == nil {
						seen[r.Topic] = map[string]int{}
					}
					seen[r.Topic][string(h.Value)]++
				}
			}
			if end, ok := remaining[r.Topic][r.Partition]; ok && r.Offset+1 >= end {
				delete(remaining[r.Topic], r.Partition)
				if len(remaining[r.Topic]) == 0 {
					delete(remaining, r.Topic)
				}
			}
		})
	}
	var parts []string
	for _, topic := range topics {
		copies := 0
		for _, n := range seen[topic] {
			copies += n - 1
		}
		parts = append(parts, fmt.Sprintf("%s %d of %d", strings.TrimPrefix(topic, c.topicPrefix), copies, len(seen[topic])))
	}
	t.Logf("event topics: %d records read", records)
	return strings.Join(parts, ", ")
}
