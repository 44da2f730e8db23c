package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/app"
	"board/internal/polltest"
	"board/internal/sqldb/sqldbtest"
)

// searchPage is the answer of GET /v1/search.
type searchPage struct {
	Results []struct {
		Type, ArticleID, CommentID, BoardID, Title, Fragment, WriterID, CreatedAt string
	}
	Count int
}

// searchFor asks the search service at base for q with the extra query parameters.
func searchFor(t *testing.T, base, q string, params ...string) (searchPage, authAnswer) {
	t.Helper()
	v := url.Values{"q": {q}}
	for i := 0; i+1 < len(params); i += 2 {
		v.Set(params[i], params[i+1])
	}
	var page searchPage
	a := getAs(t, "", base+"/v1/search?"+v.Encode(), &page)
	return page, a
}

// found lists the ids the search found, articles as "a<id>", comments as "c<id>".
func (p searchPage) found() []string {
	var out []string
	for _, r := range p.Results {
		if r.Type == "comment" {
			out = append(out, "c"+r.CommentID)
		} else {
			out = append(out, "a"+r.ArticleID)
		}
	}
	return out
}

// waitFound waits until a search for q finds exactly want (in order).
func waitFound(t *testing.T, base, q string, want []string, params ...string) searchPage {
	t.Helper()
	var page searchPage
	eventually(t, func() string {
		var a authAnswer
		page, a = searchFor(t, base, q, params...)
		if a.status != http.StatusOK {
			return "search " + q + ": " + string(a.body)
		}
		if got := strings.Join(page.found(), " "); got != strings.Join(want, " ") {
			return "search " + q + " " + strings.Join(params, "=") + " found [" + got + "], want [" + strings.Join(want, " ") + "]"
		}
		return ""
	})
	return page
}

// searchEngines are the engines the end-to-end tests of search run on: both, except behind Vitess, where the sql
// engine does not run (docs/search.md).
func searchEngines() []string {
	if os.Getenv(sqldbtest.VitessPrefixesEnv) != "" {
		return []string{"bleve"}
	}
	return []string{"bleve", "sql"}
}

// Search through the running services, on each engine: Korean inside longer words and English stems, comments with
// their article's title, filters, highlights, and moderation and deletion taking documents out of the index and back.
func TestSearchFlow(t *testing.T) {
	t.Parallel()
	for _, engine := range searchEngines() {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			testSearchFlow(t, engine)
		})
	}
}

func testSearchFlow(t *testing.T, engine string) {
	p := startProgram(t, append(testFlags(t, t.TempDir()), "--report-threshold", "1", "--search-engine", engine))
	_, aliceToken := signUp(t, p, "alice")
	_, bobToken := signUp(t, p, "bob")
	signUp(t, p, "mod")
	modToken := grant(t, p, "mod", "moderator")
	s := p.urls["search"]

	a := sendAs(t, bearer(aliceToken), "POST", p.urls["article"]+"/v1/articles", map[string]any{"boardId": 7,
		"title": "자유게시판에 처음 글을 씁니다", "content": "I liked the <b>new</b> board a lot"})
	var art articleOut
	if a.status != http.StatusCreated || json.Unmarshal(a.body, &art) != nil {
		t.Fatalf("write: %d %s", a.status, a.body)
	}
	other := writeArticle(t, p, aliceToken, 8, "another board likes")
	c := sendAs(t, bearer(bobToken), "POST", p.urls["comment"]+"/v2/comments", map[string]any{"articleId": art.ArticleID, "content": "게시판 최고, like it"})
	var com struct{ CommentID string }
	if c.status != http.StatusCreated || json.Unmarshal(c.body, &com) != nil {
		t.Fatalf("comment: %d %s", c.status, c.body)
	}
	aKey, cKey, otherKey := "a"+art.ArticleID, "c"+com.CommentID, "a"+other

	page := waitFound(t, s, "게시판", []string{cKey, aKey}, "sort", "newest")
	if r := page.Results[0]; r.Title != "자유게시판에 처음 글을 씁니다" || r.BoardID != "7" || r.Fragment != "<mark>게시판</mark> 최고, like it" {
		t.Errorf("the comment's result: %+v", r)
	}
	page = waitFound(t, s, "liked", []string{cKey, otherKey, aKey}, "sort", "newest")
	if f := page.Results[2].Fragment; f != "I <mark>liked</mark> the &lt;b&gt;new&lt;/b&gt; board a lot" {
		t.Errorf("the article's fragment: %q", f)
	}
	waitFound(t, s, "like", []string{cKey, aKey}, "boardId", "7", "sort", "newest")
	waitFound(t, s, "like", []string{aKey}, "boardId", "7", "type", "article")
	waitFound(t, s, "like", []string{cKey}, "type", "comment")
	waitFound(t, s, "처음 씁니다", []string{aKey})

	// A report hides the article pending review (threshold 1): it leaves the search; a dismissal brings it back.
	if a := sendAs(t, bearer(bobToken), "POST", p.urls["moderation"]+"/v1/reports",
		map[string]any{"targetType": "article", "targetId": art.ArticleID, "reason": "spam"}); a.status != http.StatusCreated {
		t.Fatalf("report: %d %s", a.status, a.body)
	}
	page = waitFound(t, s, "게시판", []string{cKey})
	if page.Results[0].Title != "" {
		t.Errorf("a comment of a hidden article shows its title %q", page.Results[0].Title)
	}
	if a := sendAs(t, bearer(modToken), "POST", p.urls["moderation"]+"/v1/reports/resolutions",
		map[string]any{"targetType": "article", "targetId": art.ArticleID, "action": "dismiss", "reason": "fine"}); a.status != http.StatusOK {
		t.Fatalf("dismiss: %d %s", a.status, a.body)
	}
	waitFound(t, s, "게시판", []string{cKey, aKey}, "sort", "newest")

	// Deleting the article takes its comments out with it.
	if a := sendAs(t, bearer(aliceToken), "DELETE", p.urls["article"]+"/v1/articles/"+art.ArticleID, nil); a.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", a.status, a.body)
	}
	waitFound(t, s, "게시판", nil)
	waitFound(t, s, "like", []string{otherKey})

	// Bad input: a clear 400, never a 5xx; a query of syntax characters is text.
	for _, q := range []string{"", strings.Repeat("x", 10<<10), strings.Repeat("가", 201)} {
		if _, a := searchFor(t, s, q); a.status != http.StatusBadRequest || a.code() != "INVALID_QUERY" {
			t.Errorf("q of %d bytes: %d %s", len(q), a.status, a.body)
		}
	}
	for _, params := range [][]string{{"page", "0"}, {"pageSize", "101"}, {"page", "1000", "pageSize", "100"}, {"type", "user"},
		{"sort", "oldest"}, {"boardId", "-1"}} {
		if _, a := searchFor(t, s, "like", params...); a.status != http.StatusBadRequest || a.code() == "" {
			t.Errorf("%v: %d %s", params, a.status, a.body)
		}
	}
	for _, q := range []string{`"`, `*`, `title:x`, `a AND (b OR`, `\`, `%_`, `'; DROP TABLE x; --`} {
		if _, a := searchFor(t, s, q); a.status != http.StatusOK {
			t.Errorf("q %q: %d %s", q, a.status, a.body)
		}
	}
	if page, a := searchFor(t, s, "like", "page", "50"); a.status != http.StatusOK || len(page.Results) != 0 {
		t.Errorf("a page past the end: %d %s", a.status, a.body)
	}
}

// The index survives kill -9: articles acknowledged before the kill, whether or not the search consumer had indexed
// them yet, are all found after the restart, which resumes from the committed offsets.
func TestSearchSurvivesKill9(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	args := allServicesArgs(t)
	p := startProcess(t, args...)
	// At most 800 writes: the count is capped at 1001 for the page size the check below asks for.
	var next, acked atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for next.Add(1) <= 800 {
				req := jsonRequest(t, "POST", p.urls["article"]+"/v1/articles",
					map[string]any{"title": "survivor 생존자들", "content": "written under fire", "writerId": 1, "boardId": 1})
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return // killed
				}
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					return
				}
				acked.Add(1)
			}
		})
	}
	// Kill once some are searchable and more are on their way.
	eventually(t, func() string {
		if page, _ := searchFor(t, p.urls["search"], "생존자", "pageSize", "100"); page.Count < 50 {
			return "fewer than 50 articles found before the kill"
		}
		return ""
	})
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.wait()
	wg.Wait()
	waitGone(t, p.redisPid)

	p = startProcess(t, args...)
	want := acked.Load()
	polltest.Until(t, time.Minute, func() (bool, string) {
		page, _ := searchFor(t, p.urls["search"], "생존자", "pageSize", "100", "page", "1")
		return int64(page.Count) >= want, "found " + strconv.Itoa(page.Count) + " of the " + strconv.Itoa(int(want)) + " articles acknowledged before the kill"
	})
}

// board search reindex builds a new index from the services' APIs while the old one answers and writes go on; the
// service then switches to it: every acknowledged article is found, hidden ones stay hidden (and come back with
// their text when restored), deleted ones stay gone, and the old index is dropped.
func TestSearchReindex(t *testing.T) {
	t.Parallel()
	for _, engine := range searchEngines() {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			testSearchReindex(t, engine)
		})
	}
}

func testSearchReindex(t *testing.T, engine string) {
	p := startProgram(t, append(testFlags(t, t.TempDir()), "--report-threshold", "1", "--search-engine", engine))
	_, aliceToken := signUp(t, p, "alice")
	_, bobToken := signUp(t, p, "bob")
	signUp(t, p, "mod")
	modToken := grant(t, p, "mod", "moderator")
	s := p.urls["search"]
	var written []string
	for i := range 30 {
		written = append(written, writeArticle(t, p, aliceToken, 1+i%3, "rebuilt 재건축 "+strconv.Itoa(i)))
	}
	for _, a := range written[:5] {
		if c := sendAs(t, bearer(bobToken), "POST", p.urls["comment"]+"/v2/comments", map[string]any{"articleId": a, "content": "rebuilt comment"}); c.status != http.StatusCreated {
			t.Fatalf("comment: %d %s", c.status, c.body)
		}
	}
	hidden, deleted := written[5], written[6]
	if a := sendAs(t, bearer(bobToken), "POST", p.urls["moderation"]+"/v1/reports",
		map[string]any{"targetType": "article", "targetId": hidden, "reason": "spam"}); a.status != http.StatusCreated {
		t.Fatalf("report: %d %s", a.status, a.body)
	}
	if a := sendAs(t, bearer(aliceToken), "DELETE", p.urls["article"]+"/v1/articles/"+deleted, nil); a.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", a.status, a.body)
	}
	eventually(t, func() string {
		if page, _ := searchFor(t, s, "재건축", "pageSize", "100"); page.Count != 28 {
			return "before the rebuild: " + strconv.Itoa(page.Count) + " articles found, want 28"
		}
		return ""
	})
	// bleve's current index, in the first instance's slot
	searchDir := filepath.Join(flagValue(p.flags, "--data-dir"), "search", "0")
	before, _ := os.ReadFile(filepath.Join(searchDir, "current"))
	// What a rebuild killed midway leaves: an index older than the one it would have made current is dropped at the
	// switch; a newer one may be a rebuild in progress, and stays.
	stale, inProgress := filepath.Join(searchDir, "20000101t000000_00000000"), filepath.Join(searchDir, "29990101t000000_00000000")
	if engine == "bleve" {
		for _, dir := range []string{stale, inProgress} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Writes go on during the rebuild.
	stop := make(chan struct{})
	var during []string
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			during = append(during, writeArticle(t, p, aliceToken, 2, "rebuilt 재건축 meanwhile"))
			time.Sleep(5 * time.Millisecond)
		}
	})
	var out, errOut strings.Builder
	args := append([]string{"search", "reindex", "--search-engine", engine, "--kafka-brokers", strings.Join(p.logs.kafkaAddrs(), ","),
		"--article-origin", p.urls["article"], "--comment-origin", p.urls["comment"]}, engineArgs(p.flags)...)
	err := run(context.Background(), args, noEnv, &out, &errOut)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("board search reindex: %v\n%s", err, errOut.String())
	}
	t.Logf("%s%s", errOut.String(), out.String())
	if !strings.Contains(errOut.String(), "articles [") || !strings.Contains(out.String(), "5 comments") {
		t.Errorf("no progress bar, or not 5 comments:\n%s%s", errOut.String(), out.String())
	}
	eventually(t, func() string {
		if !strings.Contains(p.logs.String(), "now answering from the rebuilt index") {
			return "the service has not switched to the rebuilt index"
		}
		return ""
	})
	if engine == "bleve" {
		for _, dir := range []string{filepath.Join(searchDir, string(before)), stale} {
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the old index %s is still there: %v", dir, err)
			}
		}
		if _, err := os.Stat(inProgress); err != nil {
			t.Errorf("a newer index was dropped: %v", err)
		}
	}
	want := 28 + len(during)
	eventually(t, func() string {
		if page, _ := searchFor(t, s, "재건축", "pageSize", "100"); page.Count != want {
			return "after the rebuild: " + strconv.Itoa(page.Count) + " articles found, want " + strconv.Itoa(want)
		}
		return ""
	})
	waitFound(t, s, "rebuilt comment", nil, "type", "article")
	if page, _ := searchFor(t, s, "rebuilt comment", "type", "comment"); page.Count != 5 {
		t.Errorf("after the rebuild, %d comments found, want 5", page.Count)
	}
	if a := sendAs(t, bearer(modToken), "POST", p.urls["moderation"]+"/v1/reports/resolutions",
		map[string]any{"targetType": "article", "targetId": hidden, "action": "dismiss", "reason": "fine"}); a.status != http.StatusOK {
		t.Fatalf("dismiss: %d %s", a.status, a.body)
	}
	waitFound(t, s, "재건축 5", []string{"a" + hidden})
}

// Search scales out by instances that each keep a full index of their own, consuming in a group of its own: two
// search-only processes on their own data directories both find everything, and each has its own group.
func TestSearchInstancesEachKeepAFullIndex(t *testing.T) {
	t.Parallel()
	p := startProgram(t, testFlags(t, t.TempDir()))
	_, token := signUp(t, p, "alice")
	var bases []string
	for range 2 {
		args := append(slices.Clone(testServeDefaults), "search", "--search-addr", "127.0.0.1:0", "--data-dir", t.TempDir(),
			"--embedded-redis-addr", "127.0.0.1:0", "--kafka-brokers", strings.Join(p.logs.kafkaAddrs(), ","), "--log-format", "json")
		cfg, err := app.ParseServe(args, noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		logs := newLogWatcher()
		a, err := app.Run(context.Background(), cfg, cfg.NewLogger(logs))
		if err != nil {
			t.Fatalf("a search instance did not start: %v\n%s", err, logs)
		}
		instance := &program{t: t, app: a, logs: logs}
		t.Cleanup(instance.shutdown)
		bases = append(bases, a.URL("search"))
	}
	id := writeArticle(t, p, token, 1, "scaled out 검색엔진")
	for _, base := range append(bases, p.urls["search"]) {
		waitFound(t, base, "검색", []string{"a" + id})
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.logs.kafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	listed, err := kadm.NewClient(cl).ListGroups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	search := 0
	for _, g := range listed.Groups() {
		if strings.HasPrefix(g, "board-search-") {
			search++
		}
	}
	if search != 3 {
		t.Errorf("%d search consumer groups, want one per instance (3): %v", search, listed.Groups())
	}
}
