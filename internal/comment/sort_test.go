package comment

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"

	"board/internal/event"
	"board/internal/fault"
	"board/internal/httpio/httpiotest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// TestFlatSorts checks that newest and top list every v2 comment of an article, replies too, in their order, by
// offset page and by infinite scroll, without a gap or a repeat, with the capped count of the tree order; top with
// many ties in like counts, which the comment id breaks.
func TestFlatSorts(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := testService(t, db)
		rng := rand.New(rand.NewPCG(4, 0))
		const article, n = 7, 120
		var all []Comment
		for range n {
			var parent string
			if len(all) > 0 && rng.IntN(3) > 0 {
				if p := all[rng.IntN(len(all))]; depth(p.Path) < MaxDepth {
					parent = p.Path
				}
			}
			c, err := svc.CreateV2(ctx, article, 9, parent, "x")
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, c)
		}
		if _, err := svc.CreateV2(ctx, article+1, 9, "", "another article's"); err != nil {
			t.Fatal(err)
		}
		for i := range all {
			all[i].LikeCount = int64(rng.IntN(5)) // ties aplenty
			applyLike(t, svc, event.CommentLiked, article, all[i].ID, all[i].LikeCount, 1)
		}
		want := map[Sort][]int64{}
		for sort, less := range map[Sort]func(a, b Comment) int{
			Newest: func(a, b Comment) int { return cmp.Compare(b.ID, a.ID) },
			Top: func(a, b Comment) int {
				return cmp.Or(cmp.Compare(b.LikeCount, a.LikeCount), cmp.Compare(b.ID, a.ID))
			},
		} {
			sorted := slices.Clone(all)
			slices.SortFunc(sorted, less)
			for _, c := range sorted {
				want[sort] = append(want[sort], c.ID)
			}
		}
		for _, sort := range []Sort{Newest, Top} {
			var scrolled []int64
			for last := int64(0); ; {
				page, err := svc.ScrollFlat(ctx, article, sort, 17, last)
				if err != nil {
					t.Fatal(err)
				}
				if len(page) == 0 {
					break
				}
				for _, c := range page {
					scrolled = append(scrolled, c.ID)
				}
				last = page[len(page)-1].ID
			}
			if !slices.Equal(want[sort], scrolled) {
				t.Errorf("%s: infinite scroll gave %v, want %v", sort, scrolled, want[sort])
			}
			var paged []int64
			for page := int64(1); ; page++ {
				p, err := svc.ListFlat(ctx, article, sort, page, 11)
				if err != nil {
					t.Fatal(err)
				}
				if want := min(n, CountLimit(page, 11)); p.Count != want {
					t.Errorf("%s: page %d count = %d, want %d", sort, page, p.Count, want)
				}
				if len(p.Comments) == 0 {
					break
				}
				for _, c := range p.Comments {
					paged = append(paged, c.ID)
				}
			}
			if !slices.Equal(want[sort], paged) {
				t.Errorf("%s: offset pages gave %v, want %v", sort, paged, want[sort])
			}
		}
		if _, err := svc.ListFlat(ctx, article, Oldest, 1, 10); fault.KindOf(err) != fault.Invalid {
			t.Errorf("ListFlat in tree order: %v, want INVALID_SORT", err)
		}
	})
}

// TestSortRoutes checks the sort and cursor parameters of GET /v2/comments and its infinite scroll: oldest by
// default, INVALID_SORT for another value, each sort's own cursor, and a top scroll after a comment removed since.
func TestSortRoutes(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newArticlesFixture(t, db)
		const article = 5
		root := httpPostV2(t, f.h, article, 9, "", "root")        // likes: 1
		reply := httpPostV2(t, f.h, article, 9, "00000", "reply") // 0
		second := httpPostV2(t, f.h, article, 9, "", "second")    // 1
		gone := httpPostV2(t, f.h, article, 9, "", "gone")        // 2, removed below
		for c, likes := range map[string]int64{root["commentId"].(string): 1, second["commentId"].(string): 1, gone["commentId"].(string): 2} {
			var id int64
			if _, err := fmt.Sscan(c, &id); err != nil {
				t.Fatal(err)
			}
			applyLike(t, f.svc, event.CommentLiked, article, id, likes, 1)
		}
		with := func(c map[string]any, likes string) any {
			c["likeCount"] = json.Number(likes)
			return c
		}
		root, second, gone = with(root, "1").(map[string]any), with(second, "1").(map[string]any), with(gone, "2").(map[string]any)
		list := func(query string) any {
			t.Helper()
			return httpGet(t, f.h, fmt.Sprintf("/v2/comments?articleId=%d&%s", article, query)).(map[string]any)["comments"]
		}
		scroll := func(query string) any {
			t.Helper()
			return httpGet(t, f.h, fmt.Sprintf("/v2/comments/infinite-scroll?articleId=%d&%s", article, query))
		}
		tree := []any{root, reply, second, gone}
		newest := []any{gone, second, reply, root}
		top := []any{gone, second, root, reply}
		httpWantJSON(t, "no sort", any(tree), list("pageSize=10"))
		httpWantJSON(t, "oldest", any(tree), list("sort=oldest"))
		httpWantJSON(t, "newest", any(newest), list("sort=newest"))
		httpWantJSON(t, "top", any(top), list("sort=top&page=1&pageSize=10"))
		httpWantJSON(t, "top page 2", any(top[2:]), list("sort=top&page=2&pageSize=2"))
		httpWantJSON(t, "oldest scroll", any(tree[2:]), scroll("sort=oldest&lastPath=00000"+Segment(0)))
		httpWantJSON(t, "newest scroll", any(newest[1:3]), scroll("sort=newest&pageSize=2&lastCommentId="+gone["commentId"].(string)))
		httpWantJSON(t, "top scroll", any(top[2:]), scroll("sort=top&lastCommentId="+second["commentId"].(string)))
		for _, query := range []string{"sort=best", "sort=Top", "sort=top,newest"} {
			for _, target := range []string{"/v2/comments", "/v2/comments/infinite-scroll"} {
				r := httpiotest.Call(f.h, "GET", fmt.Sprintf("%s?articleId=%d&%s", target, article, query), "")
				httpiotest.WantError(t, r, http.StatusBadRequest, "INVALID_SORT")
			}
		}
		for _, query := range []string{"lastCommentId=" + root["commentId"].(string), "sort=newest&lastPath=00000", "sort=top&lastPath=00000"} {
			r := httpiotest.Call(f.h, "GET", fmt.Sprintf("/v2/comments/infinite-scroll?articleId=%d&%s", article, query), "")
			httpiotest.WantError(t, r, http.StatusBadRequest, "INVALID_CURSOR")
		}

		httpiotest.WantStatus(t, httpiotest.Call(httpiotest.As(f.h, 9), "DELETE", "/v2/comments/"+gone["commentId"].(string), ""), http.StatusNoContent)
		// newest goes on below a removed comment's id; top no longer knows where it stood.
		httpWantJSON(t, "newest after a removed comment", any(newest[1:]), scroll("sort=newest&lastCommentId="+gone["commentId"].(string)))
		r := httpiotest.Call(f.h, "GET", fmt.Sprintf("/v2/comments/infinite-scroll?articleId=%d&sort=top&lastCommentId=%s", article, gone["commentId"]), "")
		httpiotest.WantError(t, r, http.StatusNotFound, "COMMENT_NOT_FOUND")
		r = httpiotest.Call(f.h, "GET", fmt.Sprintf("/v2/comments/infinite-scroll?articleId=%d&sort=top&lastCommentId=%s", article+1, root["commentId"]), "")
		httpiotest.WantError(t, r, http.StatusNotFound, "COMMENT_NOT_FOUND")
	})
}

// TestFlatOrdersReadThroughTheirIndex checks that page 1, an infinite-scroll page deep into a thread, and the
// capped count after page 1 of newest and top read the same through a thread of 100,000 comments as through one of
// 1,000. The scroll's cursor is the tenth last comment of the largest like count, so a query that walked from where
// that count starts (over 33,000 comments before the cursor in the big thread) rather than from the cursor would
// show. On MariaDB ANALYZE
// counts the rows each step of each query read; on SQLite, which counts nothing, each query's plan must search the
// order's index with every bound of the span it reads, and sort nothing but a joined page's rows.
func TestFlatOrdersReadThroughTheirIndex(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		if db.Vitess() {
			t.Skip("vtgate explains its own plan, not the shards'")
		}
		ctx := context.Background()
		_, store, _ := testService(t, db)
		const small, big, pageSize = 1, 2, 30
		sizes := map[int64]int64{small: 1_000, big: 100_000}
		seedFlat(t, store, small, 1, sizes[small])
		seedFlat(t, store, big, 1_000_001, sizes[big])
		cost := map[int64]map[string]string{}
		for article := range sizes {
			cost[article] = map[string]string{}
			measure := func(key, index, query string, args []any) {
				if db.Dialect == sqldb.MySQL {
					cost[article][key] = rowsRead(t, db, query, args)
				} else {
					cost[article][key] = wantIndexSearch(t, db, index, key, query, args)
				}
			}
			for _, sort := range []Sort{Newest, Top} {
				o := flatOrders[sort]
				query, args := o.pageQuery(db, article, 0, pageSize)
				measure(string(sort)+" page 1", o.index, query, args)
				// What ScrollFlat and CountAfterFlat run, span after span.
				runSpans := func(what string, last *Comment, limit int64, run func(span, int64) (string, []any, int64)) {
					for i, sp := range o.after(article, last) {
						query, args, n := run(sp, limit)
						measure(fmt.Sprintf("%s %s, span %d", sort, what, i+1), o.index, query, args)
						if limit -= n; limit == 0 {
							return
						}
					}
				}
				var top int64 // comments with the largest like count
				if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM comment_v2 WHERE article_id = ? AND like_count = 2", article).Scan(&top); err != nil {
					t.Fatal(err)
				}
				cursor, err := store.PageFlat(ctx, article, sort, top-10, 1)
				if err != nil || len(cursor) != 1 {
					t.Fatalf("%s cursor: %v, %v", sort, cursor, err)
				}
				runSpans("scroll", &cursor[0], pageSize, func(sp span, limit int64) (string, []any, int64) {
					query, args := o.scrollQuery(db, sp, limit)
					cs, err := list(ctx, db, scanV2, query, args...)
					if err != nil {
						t.Fatal(err)
					}
					return query, args, int64(len(cs))
				})
				page1, err := store.PageFlat(ctx, article, sort, 0, pageSize)
				if err != nil {
					t.Fatal(err)
				}
				runSpans("count after page 1", &page1[pageSize-1], CountLimit(1, pageSize)-pageSize, func(sp span, limit int64) (string, []any, int64) {
					query, args := o.countQuery(db, sp, limit)
					var n int64
					if err := db.QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
						t.Fatal(err)
					}
					return query, args, n
				})
			}
		}
		for _, key := range slices.Sorted(maps.Keys(cost[big])) {
			if c := cost[big][key]; c != cost[small][key] {
				t.Errorf("%s: reads %s through 100,000 comments, %s through 1,000", key, c, cost[small][key])
			} else {
				t.Logf("%s: %s", key, c)
			}
		}
		if len(cost[big]) != len(cost[small]) {
			t.Errorf("queries through 100,000 comments: %v; through 1,000: %v", cost[big], cost[small])
		}
	})
}

// seedFlat bulk-loads n root v2 comments of an article with ids from firstID and like counts from 0 to 2, a third
// of them each, in an order that is neither the ids' nor the paths'.
func seedFlat(t *testing.T, store *Store, articleID, firstID, n int64) {
	t.Helper()
	ctx := context.Background()
	var chunk []Comment
	for i := range n {
		chunk = append(chunk, Comment{ID: firstID + i, Path: Segment(n - i), CreatedAt: t0ms})
		if len(chunk) == 2000 || i == n-1 {
			if err := store.SeedChunk(ctx, articleID, chunk); err != nil {
				t.Fatal(err)
			}
			chunk = chunk[:0]
		}
	}
	if _, err := store.db.ExecContext(ctx, "UPDATE comment_v2 SET like_count = (comment_id * 7) % 3 WHERE article_id = ?", articleID); err != nil {
		t.Fatal(err)
	}
}

// rowsRead runs query under MariaDB's ANALYZE and returns, for each table access, the index it used and the rows
// it read (r_rows, per loop, with the loops), which a query that walks its index from the start keeps to the page
// it returns.
func rowsRead(t *testing.T, db *sqldb.DB, query string, args []any) string {
	t.Helper()
	var plan string
	if err := db.QueryRowContext(context.Background(), "ANALYZE FORMAT=JSON "+query, args...).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	var tree any
	if err := json.Unmarshal([]byte(plan), &tree); err != nil {
		t.Fatal(err)
	}
	var reads []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if name, ok := v["table_name"]; ok {
				if key, ok := v["key"]; ok {
					name = fmt.Sprintf("%v by %v", name, key)
				}
				reads = append(reads, fmt.Sprintf("%v: %v rows x %v loops", name, v["r_rows"], v["r_loops"]))
			}
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				walk(v[k])
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(tree)
	if len(reads) == 0 {
		t.Fatalf("no table in the plan: %s", plan)
	}
	return strings.Join(reads, "; ")
}

// wantIndexSearch checks that SQLite plans query as a search of index within all the bounds of its span's
// condition (which the plan writes without spaces), with no sort at the level of that search, and returns the plan.
// A sort of a page's joined rows sits a level above it.
func wantIndexSearch(t *testing.T, db *sqldb.DB, index, what, query string, args []any) string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type step struct {
		parent int
		detail string
	}
	var plan []step
	for rows.Next() {
		var id, unused int
		var st step
		if err := rows.Scan(&id, &st.parent, &unused, &st.detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, st)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	where := query[strings.Index(query, "WHERE ")+len("WHERE "):]
	where = where[:strings.IndexAny(where, "OL")-1] // up to its ORDER BY or, in a count, its LIMIT
	bounds := strings.NewReplacer(" = ", "=", " < ", "<").Replace(where)
	var details []string
	searched, level := false, -1
	for _, st := range plan {
		details = append(details, st.detail)
		if st.detail == "SEARCH comment_v2 USING COVERING INDEX "+index+" ("+bounds+")" ||
			st.detail == "SEARCH comment_v2 USING INDEX "+index+" ("+bounds+")" {
			searched, level = true, st.parent
		}
	}
	for _, st := range plan {
		if strings.Contains(st.detail, "TEMP B-TREE") && st.parent == level {
			t.Errorf("%s: plan %q sorts at the level of the index search", what, details)
		}
	}
	if !searched {
		t.Errorf("%s: plan %q, want a search of %s (%s)", what, details, index, bounds)
	}
	return strings.Join(details, "; ")
}
