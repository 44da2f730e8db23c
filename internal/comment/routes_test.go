package comment

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"board/internal/event"
	"board/internal/httpio"
	"board/internal/httpio/httpiotest"
	"board/internal/snowflake/snowflaketest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// httpHandler is the comment service's whole port over db, with fake ids (from firstID) and a fake clock (at t0).
func httpHandler(t testing.TB, db *sqldb.DB) (http.Handler, *snowflaketest.Clock) {
	t.Helper()
	svc, _, clock := testService(t, db)
	return httpiotest.Handler("comment", Routes(svc, httpiotest.Logger)), clock
}

// httpCreatedAt is t0ms on the wire.
const httpCreatedAt = "2026-01-02T03:04:05.006Z"

// httpMaxPage is the largest page a list accepts.
const httpMaxPage = 1<<31 - 1

func httpStr(id int64) string { return strconv.FormatInt(id, 10) }

// httpV1 and httpV2 are the exact JSON objects a comment of each version is written as, its content a paragraph
// of plain words.
func httpV1(id int64, content string, articleID, writerID, parentID int64, deleted bool, createdAt string) map[string]any {
	return map[string]any{"commentId": httpStr(id), "content": content, "contentHtml": httpHTML(content), "contentText": content,
		"articleId": httpStr(articleID), "writerId": httpStr(writerID), "parentCommentId": httpStr(parentID), "deleted": deleted,
		"createdAt": createdAt, "modifiedAt": createdAt, "edited": false, "likeCount": json.Number("0")}
}

func httpV2(id int64, content string, articleID, writerID int64, path string, deleted bool, createdAt string) map[string]any {
	return map[string]any{"commentId": httpStr(id), "content": content, "contentHtml": httpHTML(content), "contentText": content,
		"articleId": httpStr(articleID), "writerId": httpStr(writerID), "path": path, "deleted": deleted,
		"createdAt": createdAt, "modifiedAt": createdAt, "edited": false, "likeCount": json.Number("0")}
}

// httpHTML is the HTML of a content of plain words ("" for none).
func httpHTML(content string) string {
	if content == "" {
		return ""
	}
	return "<p>" + content + "</p>\n"
}

// httpDeleted is a written comment as it reads once soft-deleted.
func httpDeleted(c map[string]any) map[string]any {
	d := maps.Clone(c)
	d["deleted"], d["content"], d["contentHtml"], d["contentText"] = true, "", "", ""
	return d
}

// httpBody is a create request; parent goes in as parentKey unless it is "".
func httpBody(articleID, writerID int64, content, parentKey, parent string) string {
	m := map[string]any{"articleId": httpStr(articleID), "writerId": httpStr(writerID), "content": content}
	if parent != "" {
		m[parentKey] = parent
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// httpPostV1 creates a v1 comment (a reply when parentID is not "") and returns it as written.
func httpPostV1(t testing.TB, h http.Handler, articleID, writerID int64, parentID, content string) map[string]any {
	t.Helper()
	r := httpiotest.Call(httpiotest.As(h, writerID), "POST", "/v1/comments", httpBody(articleID, writerID, content, "parentCommentId", parentID))
	httpiotest.WantStatus(t, r, http.StatusCreated)
	return httpiotest.DecodeJSON(t, r.Body).(map[string]any)
}

// httpPostV2 creates a v2 comment (a reply when parentPath is not "") and returns it as written.
func httpPostV2(t testing.TB, h http.Handler, articleID, writerID int64, parentPath, content string) map[string]any {
	t.Helper()
	r := httpiotest.Call(httpiotest.As(h, writerID), "POST", "/v2/comments", httpBody(articleID, writerID, content, "parentPath", parentPath))
	httpiotest.WantStatus(t, r, http.StatusCreated)
	return httpiotest.DecodeJSON(t, r.Body).(map[string]any)
}

// httpGet reads target, expecting 200, and decodes the body.
func httpGet(t testing.TB, h http.Handler, target string) any {
	t.Helper()
	r := httpiotest.Call(h, "GET", target, "")
	httpiotest.WantStatus(t, r, http.StatusOK)
	return httpiotest.DecodeJSON(t, r.Body)
}

// httpWantJSON compares a decoded body with the exact JSON value want.
func httpWantJSON(t testing.TB, what string, want, got any) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

// httpField returns the string field key of each object in a decoded JSON array.
func httpField(t testing.TB, v any, key string) []string {
	t.Helper()
	arr, ok := v.([]any)
	if !ok {
		t.Fatalf("%v is not a JSON array", v)
	}
	out := []string{}
	for _, o := range arr {
		s, ok := o.(map[string]any)[key].(string)
		if !ok {
			t.Fatalf("%s of %v is not a string", key, o)
		}
		out = append(out, s)
	}
	return out
}

// httpList is comments as the JSON array a list holds them in.
func httpList(cs ...map[string]any) []any {
	out := []any{}
	for _, c := range cs {
		out = append(out, c)
	}
	return out
}

// httpCount reads an article's comment count (both versions).
func httpCount(t testing.TB, h http.Handler, articleID int64) string {
	t.Helper()
	r := httpiotest.Call(h, "GET", fmt.Sprintf("/v2/comments/articles/%d/count", articleID), "")
	httpiotest.WantStatus(t, r, http.StatusOK)
	return strings.TrimSpace(r.Body)
}

// httpPage reads one offset page of an article's comments of version ("v1" or "v2").
func httpPage(t testing.TB, h http.Handler, version string, articleID, page, pageSize int64) (comments any, count json.Number) {
	t.Helper()
	got := httpGet(t, h, fmt.Sprintf("/%s/comments?articleId=%d&page=%d&pageSize=%d", version, articleID, page, pageSize)).(map[string]any)
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, []string{"commentCount", "comments"}) {
		t.Fatalf("list keys = %v, want commentCount, comments", keys)
	}
	count, ok := got["commentCount"].(json.Number)
	if !ok {
		t.Fatalf("commentCount %v is not a number", got["commentCount"])
	}
	return got["comments"], count
}

// httpScroll walks an article's comments of version by infinite scroll, pageSize at a time, each request carrying
// the cursor of the previous page's last comment, and returns the ids in the order seen.
func httpScroll(t testing.TB, h http.Handler, version string, articleID, pageSize int64) []string {
	t.Helper()
	var seen []string
	cursor := ""
	for range 1000 {
		got := httpGet(t, h, fmt.Sprintf("/%s/comments/infinite-scroll?articleId=%d&pageSize=%d%s", version, articleID, pageSize, cursor))
		page := got.([]any)
		if int64(len(page)) > pageSize {
			t.Fatalf("scroll page of %d comments, pageSize %d", len(page), pageSize)
		}
		if len(page) == 0 {
			return seen
		}
		seen = append(seen, httpField(t, page, "commentId")...)
		last := page[len(page)-1].(map[string]any)
		if version == "v1" {
			cursor = fmt.Sprintf("&lastParentCommentId=%s&lastCommentId=%s", last["parentCommentId"], last["commentId"])
		} else {
			cursor = "&lastPath=" + last["path"].(string)
		}
	}
	t.Fatal("infinite scroll does not end")
	return nil
}

// httpPages walks an article's comments of version by offset pages and returns the ids in the order seen.
func httpPages(t testing.TB, h http.Handler, version string, articleID, pageSize int64) []string {
	t.Helper()
	var seen []string
	for page := int64(1); page < 1000; page++ {
		comments, _ := httpPage(t, h, version, articleID, page, pageSize)
		ids := httpField(t, comments, "commentId")
		if len(ids) == 0 {
			return seen
		}
		seen = append(seen, ids...)
	}
	t.Fatal("pages do not end")
	return nil
}

func TestHTTPCreateGetV1(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, clock := httpHandler(t, db)
		if !httpiotest.TimeFormat.MatchString(httpCreatedAt) {
			t.Fatalf("bad test time %s", httpCreatedAt)
		}
		root := int64(firstID)

		// A root comment names itself as its parent; ids as a string and a number, unknown fields ignored.
		r := httpiotest.Call(httpiotest.As(h, 9), "POST", "/v1/comments", `{"articleId":"7","content":"first","writerId":9,"extra":{"x":[1]},"path":"zz"}`)
		httpiotest.WantStatus(t, r, http.StatusCreated)
		want := httpV1(root, "first", 7, 9, root, false, httpCreatedAt)
		httpWantJSON(t, "POST root", any(want), httpiotest.DecodeJSON(t, r.Body))
		httpWantJSON(t, "GET root", any(want), httpGet(t, h, "/v1/comments/"+httpStr(root)))

		// A reply whose parent id is a JSON number above 2^53, so a float on the way would lose it.
		clock.Add(1500 * time.Millisecond)
		r = httpiotest.Call(httpiotest.As(h, 10), "POST", "/v1/comments", fmt.Sprintf(`{"articleId":7,"content":"second","writerId":"10","parentCommentId":%d}`, root))
		httpiotest.WantStatus(t, r, http.StatusCreated)
		reply := httpV1(root+1, "second", 7, 10, root, false, "2026-01-02T03:04:06.506Z")
		httpWantJSON(t, "POST reply", any(reply), httpiotest.DecodeJSON(t, r.Body))
		httpWantJSON(t, "GET reply", any(reply), httpGet(t, h, "/v1/comments/"+httpStr(root+1)))

		// The parent as a string; a null parent is a root.
		r = httpiotest.Call(httpiotest.As(h, 11), "POST", "/v1/comments", httpBody(7, 11, "third", "parentCommentId", httpStr(root)))
		httpiotest.WantStatus(t, r, http.StatusCreated)
		httpWantJSON(t, "POST reply by string id", any(httpV1(root+2, "third", 7, 11, root, false, "2026-01-02T03:04:06.506Z")), httpiotest.DecodeJSON(t, r.Body))
		r = httpiotest.Call(httpiotest.As(h, 11), "POST", "/v1/comments", `{"articleId":7,"content":"fourth","writerId":11,"parentCommentId":null}`)
		httpiotest.WantStatus(t, r, http.StatusCreated)
		httpWantJSON(t, "POST null parent", any(httpV1(root+3, "fourth", 7, 11, root+3, false, "2026-01-02T03:04:06.506Z")), httpiotest.DecodeJSON(t, r.Body))

		// Content comes back exactly as given: not trimmed, not escaped, any script, longest allowed.
		for _, content := range []string{"  padded\n", "<b>&amp;</b> \"q\"", "안녕 👋 é", "a\u0000b", strings.Repeat("가", MaxContentChars),
			strings.Repeat("😀", MaxContentChars)} {
			c := httpPostV1(t, h, 7, 1, "", content)
			if c["content"] != content {
				t.Errorf("content %.20q came back as %.20q", content, c["content"])
			}
			httpWantJSON(t, "GET of content", any(c), httpGet(t, h, "/v1/comments/"+c["commentId"].(string)))
		}

		// The largest ids there are. The article's Snowflake time lies in the future, so no lookup vouches for it: it
		// is known as its ARTICLE_CREATED would record it.
		if _, err := db.ExecContext(context.Background(),
			"INSERT INTO article_existence (article_id, deleted, article_version) VALUES (9223372036854775807, FALSE, 1)"); err != nil {
			t.Fatal(err)
		}
		r = httpiotest.Call(httpiotest.As(h, 9223372036854775807), "POST", "/v1/comments", `{"articleId":9223372036854775807,"content":"max","writerId":"9223372036854775807"}`)
		httpiotest.WantStatus(t, r, http.StatusCreated)
		got := httpiotest.DecodeJSON(t, r.Body).(map[string]any)
		if got["articleId"] != "9223372036854775807" || got["writerId"] != "9223372036854775807" {
			t.Errorf("max ids came back as %v, %v", got["articleId"], got["writerId"])
		}
		if n := httpCount(t, h, 9223372036854775807); n != "1" {
			t.Errorf("count of the max article = %s, want 1", n)
		}

		httpiotest.WantError(t, httpiotest.Call(h, "GET", "/v1/comments/"+httpStr(root+1000), ""), http.StatusNotFound, "COMMENT_NOT_FOUND")
		// The versions keep separate comments.
		httpiotest.WantError(t, httpiotest.Call(h, "GET", "/v2/comments/"+httpStr(root), ""), http.StatusNotFound, "COMMENT_NOT_FOUND")
	})
}

func TestHTTPCreateGetV2(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, clock := httpHandler(t, db)
		id := int64(firstID)

		r := httpiotest.Call(httpiotest.As(h, 9), "POST", "/v2/comments", `{"articleId":7,"content":"root","writerId":"9","extra":[1]}`)
		httpiotest.WantStatus(t, r, http.StatusCreated)
		root := httpV2(id, "root", 7, 9, "00000", false, httpCreatedAt)
		httpWantJSON(t, "POST root", any(root), httpiotest.DecodeJSON(t, r.Body))
		httpWantJSON(t, "GET root", any(root), httpGet(t, h, "/v2/comments/"+httpStr(id)))

		clock.Add(time.Second)
		const later = "2026-01-02T03:04:06.006Z"
		for _, tc := range []struct {
			name, body string
			want       map[string]any
		}{
			{"root with empty parentPath", `{"articleId":"7","content":"b","writerId":9,"parentPath":""}`, httpV2(id+1, "b", 7, 9, "00001", false, later)},
			{"root with null parentPath", `{"articleId":7,"content":"c","writerId":9,"parentPath":null}`, httpV2(id+2, "c", 7, 9, "00002", false, later)},
			{"reply", `{"articleId":7,"content":"r","writerId":10,"parentPath":"00000"}`, httpV2(id+3, "r", 7, 10, "0000000000", false, later)},
			{"reply to another root", `{"articleId":7,"content":"s","writerId":10,"parentPath":"00001"}`, httpV2(id+4, "s", 7, 10, "0000100000", false, later)},
			{"second reply", `{"articleId":7,"content":"t","writerId":10,"parentPath":"00000"}`, httpV2(id+5, "t", 7, 10, "0000000001", false, later)},
			{"reply to a reply", `{"articleId":7,"content":"u","writerId":10,"parentPath":"0000000001"}`, httpV2(id+6, "u", 7, 10, "000000000100000", false, later)},
			// Paths are per article.
			{"root of another article", `{"articleId":8,"content":"v","writerId":10}`, httpV2(id+7, "v", 8, 10, "00000", false, later)},
			// v1's parent field means nothing to v2.
			{"v1 parent ignored", fmt.Sprintf(`{"articleId":8,"content":"w","writerId":10,"parentCommentId":"%d"}`, id+7), httpV2(id+8, "w", 8, 10, "00001", false, later)},
		} {
			r := httpiotest.Call(httpiotest.As(h, httpWriter(tc.want)), "POST", "/v2/comments", tc.body)
			httpiotest.WantStatus(t, r, http.StatusCreated)
			httpWantJSON(t, tc.name+": POST", any(tc.want), httpiotest.DecodeJSON(t, r.Body))
			httpWantJSON(t, tc.name+": GET", any(tc.want), httpGet(t, h, "/v2/comments/"+tc.want["commentId"].(string)))
		}

		for _, content := range []string{"  padded\n", "안녕 👋", strings.Repeat("😀", MaxContentChars)} {
			c := httpPostV2(t, h, 9, 1, "", content)
			if c["content"] != content {
				t.Errorf("content %.20q came back as %.20q", content, c["content"])
			}
			httpWantJSON(t, "GET of content", any(c), httpGet(t, h, "/v2/comments/"+c["commentId"].(string)))
		}

		httpiotest.WantError(t, httpiotest.Call(h, "GET", "/v2/comments/"+httpStr(id+1000), ""), http.StatusNotFound, "COMMENT_NOT_FOUND")
		httpiotest.WantError(t, httpiotest.Call(h, "GET", "/v1/comments/"+httpStr(id), ""), http.StatusNotFound, "COMMENT_NOT_FOUND")
	})
}

func TestHTTPRulesV1(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, _ := httpHandler(t, db)
		root := httpPostV1(t, h, 1, 1, "", "root")
		reply := httpPostV1(t, h, 1, 2, root["commentId"].(string), "reply")
		elsewhere := httpPostV1(t, h, 2, 1, "", "another article's root")
		v2 := httpPostV2(t, h, 1, 1, "", "a v2 root")
		doomed := httpPostV1(t, h, 1, 1, "", "to be deleted")
		keep := httpPostV1(t, h, 1, 2, doomed["commentId"].(string), "keeps it in the tree")
		httpiotest.WantStatus(t, httpiotest.Call(asWriterOf(h, doomed), "DELETE", "/v1/comments/"+doomed["commentId"].(string), ""), http.StatusNoContent)

		post := func(parent string) httpiotest.Reply {
			return httpiotest.Call(httpiotest.As(h, 3), "POST", "/v1/comments", fmt.Sprintf(`{"articleId":1,"content":"c","writerId":3,"parentCommentId":%s}`, parent))
		}
		for _, tc := range []struct {
			name, parent string
			status       int
			code         string
		}{
			{"reply to a reply", strconv.Quote(reply["commentId"].(string)), 400, "DEPTH_EXCEEDED"},
			{"parent in another article", strconv.Quote(elsewhere["commentId"].(string)), 400, "PARENT_IN_OTHER_ARTICLE"},
			{"unknown parent", `"12345"`, 404, "PARENT_COMMENT_NOT_FOUND"},
			{"unknown parent as a number", `12345`, 404, "PARENT_COMMENT_NOT_FOUND"},
			{"v2 comment as parent", strconv.Quote(v2["commentId"].(string)), 404, "PARENT_COMMENT_NOT_FOUND"},
			{"soft-deleted parent", strconv.Quote(doomed["commentId"].(string)), 400, "PARENT_COMMENT_DELETED"},
			{"parent 0", `0`, 400, "INVALID_PARENT_COMMENT_ID"},
			{"parent \"0\"", `"0"`, 400, "INVALID_PARENT_COMMENT_ID"},
			{"negative parent", `-1`, 400, "INVALID_JSON"},
			{"non-numeric parent", `"abc"`, 400, "INVALID_JSON"},
		} {
			t.Run(tc.name, func(t *testing.T) { httpiotest.WantError(t, post(tc.parent), tc.status, tc.code) })
		}

		// None of the refused replies was kept.
		wantIDs := []string{root["commentId"].(string), reply["commentId"].(string), doomed["commentId"].(string), keep["commentId"].(string)}
		if diff := cmp.Diff(wantIDs, httpScroll(t, h, "v1", 1, 100)); diff != "" {
			t.Errorf("article 1 after refused replies (-want +got):\n%s", diff)
		}
		if n := httpCount(t, h, 1); n != "5" { // four v1 comments and the v2 root
			t.Errorf("article 1 count = %s, want 5", n)
		}
		if n := httpCount(t, h, 2); n != "1" {
			t.Errorf("article 2 count = %s, want 1", n)
		}
	})
}

func TestHTTPDepthAndPathsV2(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, _ := httpHandler(t, db)

		// A chain down to the deepest level.
		parent := ""
		var chain []map[string]any
		for depth := 1; depth <= MaxDepth; depth++ {
			c := httpPostV2(t, h, 1, 1, parent, fmt.Sprintf("depth %d", depth))
			if want := strings.Repeat("0", SegmentLen*depth); c["path"] != want {
				t.Fatalf("depth %d: path %v, want %s", depth, c["path"], want)
			}
			chain = append(chain, c)
			parent = c["path"].(string)
		}
		deepest := parent

		// Siblings take the next path in base-62 order (0-9, A-Z, a-z); the chain's depth-2 comment is the first.
		var siblings []string
		for range 11 {
			siblings = append(siblings, httpPostV2(t, h, 1, 2, "00000", "sibling")["path"].(string))
		}
		wantSiblings := []string{"0000000001", "0000000002", "0000000003", "0000000004", "0000000005", "0000000006",
			"0000000007", "0000000008", "0000000009", "000000000A", "000000000B"}
		if diff := cmp.Diff(wantSiblings, siblings); diff != "" {
			t.Errorf("sibling paths (-want +got):\n%s", diff)
		}
		var root map[string]any
		for _, want := range []string{"00001", "00002"} {
			if root = httpPostV2(t, h, 1, 2, "", "root"); root["path"] != want {
				t.Errorf("root path %v, want %s", root["path"], want)
			}
		}
		// A soft-deleted parent: 00002 with a reply, then deleted.
		httpPostV2(t, h, 1, 2, "00002", "reply")
		httpiotest.WantStatus(t, httpiotest.Call(asWriterOf(h, root), "DELETE", "/v2/comments/"+root["commentId"].(string), ""), http.StatusNoContent)
		httpPostV2(t, h, 2, 2, "", "article 2's only root")

		post := func(articleID int64, parentPath string) httpiotest.Reply {
			return httpiotest.Call(httpiotest.As(h, 3), "POST", "/v2/comments", httpBody(articleID, 3, "c", "parentPath", parentPath))
		}
		for _, tc := range []struct {
			name       string
			articleID  int64
			parentPath string
			status     int
			code       string
		}{
			{"reply to the deepest level", 1, deepest, 400, "DEPTH_EXCEEDED"},
			{"unknown parent", 1, "00009", 404, "PARENT_COMMENT_NOT_FOUND"},
			{"unknown deeper parent", 1, "0000000000zzzzz", 404, "PARENT_COMMENT_NOT_FOUND"},
			{"parent of another article", 2, "0000000000", 404, "PARENT_COMMENT_NOT_FOUND"},
			{"soft-deleted parent", 1, "00002", 400, "PARENT_COMMENT_DELETED"},
			{"4 characters", 1, "0000", 400, "INVALID_PARENT_PATH"},
			{"6 characters", 1, "000000", 400, "INVALID_PARENT_PATH"},
			{"1 character", 1, "0", 400, "INVALID_PARENT_PATH"},
			{"dash", 1, "0000-", 400, "INVALID_PARENT_PATH"},
			{"space", 1, "0000 ", 400, "INVALID_PARENT_PATH"},
			{"slash", 1, "00000/0000", 400, "INVALID_PARENT_PATH"},
			{"percent", 1, "%0000", 400, "INVALID_PARENT_PATH"},
			{"multi-byte", 1, "000가", 400, "INVALID_PARENT_PATH"},
			{"NUL", 1, "0000\x00", 400, "INVALID_PARENT_PATH"},
			{"26 characters", 1, strings.Repeat("0", 26), 400, "INVALID_PARENT_PATH"},
			{"30 characters", 1, strings.Repeat("0", 30), 400, "INVALID_PARENT_PATH"},
			{"long", 1, strings.Repeat("0", 5000), 400, "INVALID_PARENT_PATH"},
		} {
			t.Run(tc.name, func(t *testing.T) { httpiotest.WantError(t, post(tc.articleID, tc.parentPath), tc.status, tc.code) })
		}
		httpiotest.WantError(t, httpiotest.Call(httpiotest.As(h, 3), "POST", "/v2/comments", `{"articleId":1,"content":"c","writerId":3,"parentPath":5}`), 400, "INVALID_JSON")

		// None of the refused replies was kept: 5 in the chain, 11 siblings, 2 roots, 1 reply.
		if n := httpCount(t, h, 1); n != "19" {
			t.Errorf("article 1 count = %s, want 19", n)
		}
		if n := httpCount(t, h, 2); n != "1" {
			t.Errorf("article 2 count = %s, want 1", n)
		}
		// The chain is intact.
		for _, c := range chain {
			httpWantJSON(t, "chain comment", any(c), httpGet(t, h, "/v2/comments/"+c["commentId"].(string)))
		}
	})
}

// TestHTTPSiblingPathsV2 fills a level past its last single digit: paths must order as bytes (so "0000a" is neither
// "0000A" nor before it) and carry into the next digit.
func TestHTTPSiblingPathsV2(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, _ := httpHandler(t, db)
		var want []string
		for i := range 64 {
			want = append(want, "000"+string(digits[i/62])+string(digits[i%62]))
		}
		var got []string
		for range 64 {
			got = append(got, httpPostV2(t, h, 1, 1, "", "root")["path"].(string))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("root paths (-want +got):\n%s", diff)
		}
		// Replies to the comments on each side of the carry list right after them.
		httpPostV2(t, h, 1, 1, "0000z", "reply")
		httpPostV2(t, h, 1, 1, "00010", "reply")
		want = slices.Insert(want, 62, "0000z00000")
		want = slices.Insert(want, 64, "0001000000")
		comments, count := httpPage(t, h, "v2", 1, 1, 100)
		if diff := cmp.Diff(want, httpField(t, comments, "path")); diff != "" {
			t.Errorf("list order (-want +got):\n%s", diff)
		}
		if count != "66" {
			t.Errorf("commentCount = %s, want 66", count)
		}
	})
}

func TestHTTPDeleteV1(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, _ := httpHandler(t, db)
		del := func(c map[string]any) httpiotest.Reply {
			return httpiotest.Call(asWriterOf(h, c), "DELETE", "/v1/comments/"+c["commentId"].(string), "")
		}
		get := func(c map[string]any) httpiotest.Reply {
			return httpiotest.Call(h, "GET", "/v1/comments/"+c["commentId"].(string), "")
		}
		count := func(want string) {
			t.Helper()
			if n := httpCount(t, h, 1); n != want {
				t.Errorf("count = %s, want %s", n, want)
			}
		}

		// A root without replies is removed; deleting it again finds nothing.
		leaf := httpPostV1(t, h, 1, 1, "", "leaf")
		count("1")
		httpiotest.WantStatus(t, del(leaf), http.StatusNoContent)
		httpiotest.WantError(t, get(leaf), http.StatusNotFound, "COMMENT_NOT_FOUND")
		httpiotest.WantError(t, del(leaf), http.StatusNotFound, "COMMENT_NOT_FOUND")
		count("0")

		// A root with replies stays, without its content, and deleting it again changes nothing.
		root := httpPostV1(t, h, 1, 1, "", "root")
		a := httpPostV1(t, h, 1, 2, root["commentId"].(string), "a")
		b := httpPostV1(t, h, 1, 3, root["commentId"].(string), "b")
		httpiotest.WantStatus(t, del(root), http.StatusNoContent)
		events := len(outboxEvents(t, db))
		for range 2 {
			r := get(root)
			httpiotest.WantStatus(t, r, http.StatusOK)
			httpWantJSON(t, "soft-deleted root", any(httpDeleted(root)), httpiotest.DecodeJSON(t, r.Body))
			count("3")
			httpiotest.WantStatus(t, del(root), http.StatusNoContent)
		}
		if n := len(outboxEvents(t, db)); n != events {
			t.Errorf("deleting a deleted comment again wrote %d events", n-events)
		}
		httpWantJSON(t, "replies of a soft-deleted root", any(httpList(httpDeleted(root), a, b)),
			httpGet(t, h, "/v1/comments/infinite-scroll?articleId=1"))
		httpWantJSON(t, "reply a", any(a), httpGet(t, h, "/v1/comments/"+a["commentId"].(string)))

		// Its first reply goes alone; its last takes the root with it.
		httpiotest.WantStatus(t, del(a), http.StatusNoContent)
		httpiotest.WantError(t, get(a), http.StatusNotFound, "COMMENT_NOT_FOUND")
		httpWantJSON(t, "root after one reply went", any(httpDeleted(root)), httpGet(t, h, "/v1/comments/"+root["commentId"].(string)))
		count("2")
		httpiotest.WantStatus(t, del(b), http.StatusNoContent)
		httpiotest.WantError(t, get(b), http.StatusNotFound, "COMMENT_NOT_FOUND")
		httpiotest.WantError(t, get(root), http.StatusNotFound, "COMMENT_NOT_FOUND")
		httpiotest.WantError(t, del(root), http.StatusNotFound, "COMMENT_NOT_FOUND")
		count("0")

		// Removing the reply of a live root leaves the root as it was.
		live := httpPostV1(t, h, 1, 1, "", "live")
		r := httpPostV1(t, h, 1, 2, live["commentId"].(string), "reply")
		httpiotest.WantStatus(t, del(r), http.StatusNoContent)
		httpWantJSON(t, "live root", any(live), httpGet(t, h, "/v1/comments/"+live["commentId"].(string)))
		count("1")

		// Deleting a reply marks nothing: a reply has no replies.
		r = httpPostV1(t, h, 1, 2, live["commentId"].(string), "reply")
		httpiotest.WantStatus(t, del(r), http.StatusNoContent)
		httpiotest.WantError(t, get(r), http.StatusNotFound, "COMMENT_NOT_FOUND")

		// The v2 routes do not delete v1 comments.
		httpiotest.WantError(t, httpiotest.Call(asWriterOf(h, live), "DELETE", "/v2/comments/"+live["commentId"].(string), ""), http.StatusNotFound, "COMMENT_NOT_FOUND")
		httpWantJSON(t, "live root after a v2 delete", any(live), httpGet(t, h, "/v1/comments/"+live["commentId"].(string)))
	})
}

func TestHTTPDeleteV2(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, _ := httpHandler(t, db)
		del := func(c map[string]any) httpiotest.Reply {
			return httpiotest.Call(asWriterOf(h, c), "DELETE", "/v2/comments/"+c["commentId"].(string), "")
		}
		get := func(c map[string]any) httpiotest.Reply {
			return httpiotest.Call(h, "GET", "/v2/comments/"+c["commentId"].(string), "")
		}
		wantDeleted := func(c map[string]any) {
			t.Helper()
			r := get(c)
			httpiotest.WantStatus(t, r, http.StatusOK)
			httpWantJSON(t, "soft-deleted "+c["path"].(string), any(httpDeleted(c)), httpiotest.DecodeJSON(t, r.Body))
		}
		count := func(articleID int64, want string) {
			t.Helper()
			if n := httpCount(t, h, articleID); n != want {
				t.Errorf("article %d count = %s, want %s", articleID, n, want)
			}
		}

		// A chain a > b > c > d: deleting the three upper ones only marks them; deleting d removes all four.
		chain := []map[string]any{httpPostV2(t, h, 1, 1, "", "a")}
		for i := range 3 {
			chain = append(chain, httpPostV2(t, h, 1, 1, chain[i]["path"].(string), string(rune('b'+i))))
		}
		for _, c := range chain[:3] {
			httpiotest.WantStatus(t, del(c), http.StatusNoContent)
			wantDeleted(c)
		}
		events := len(outboxEvents(t, db))
		httpiotest.WantStatus(t, del(chain[1]), http.StatusNoContent) // again: nothing changes
		if n := len(outboxEvents(t, db)); n != events {
			t.Errorf("deleting a deleted comment again wrote %d events", n-events)
		}
		for _, c := range chain[:3] {
			wantDeleted(c)
		}
		httpWantJSON(t, "the leaf", any(chain[3]), httpGet(t, h, "/v2/comments/"+chain[3]["commentId"].(string)))
		count(1, "4")
		httpiotest.WantStatus(t, del(chain[3]), http.StatusNoContent)
		for _, c := range chain {
			httpiotest.WantError(t, get(c), http.StatusNotFound, "COMMENT_NOT_FOUND")
			httpiotest.WantError(t, del(c), http.StatusNotFound, "COMMENT_NOT_FOUND")
		}
		count(1, "0")

		// x > y > z and x > y2: the cascade from z stops at x, which still has y2.
		x := httpPostV2(t, h, 2, 1, "", "x")
		y := httpPostV2(t, h, 2, 1, x["path"].(string), "y")
		z := httpPostV2(t, h, 2, 1, y["path"].(string), "z")
		y2 := httpPostV2(t, h, 2, 1, x["path"].(string), "y2")
		httpiotest.WantStatus(t, del(x), http.StatusNoContent)
		httpiotest.WantStatus(t, del(y), http.StatusNoContent)
		httpiotest.WantStatus(t, del(z), http.StatusNoContent)
		httpiotest.WantError(t, get(z), http.StatusNotFound, "COMMENT_NOT_FOUND")
		httpiotest.WantError(t, get(y), http.StatusNotFound, "COMMENT_NOT_FOUND")
		wantDeleted(x)
		httpWantJSON(t, "y2", any(y2), httpGet(t, h, "/v2/comments/"+y2["commentId"].(string)))
		count(2, "2")
		httpiotest.WantStatus(t, del(y2), http.StatusNoContent)
		httpiotest.WantError(t, get(x), http.StatusNotFound, "COMMENT_NOT_FOUND")
		count(2, "0")

		// p > q > r, all live: removing r or then q leaves their parents as they were.
		p := httpPostV2(t, h, 3, 1, "", "p")
		q := httpPostV2(t, h, 3, 1, p["path"].(string), "q")
		r := httpPostV2(t, h, 3, 1, q["path"].(string), "r")
		httpiotest.WantStatus(t, del(r), http.StatusNoContent)
		httpWantJSON(t, "p after its grandchild went", any(p), httpGet(t, h, "/v2/comments/"+p["commentId"].(string)))
		httpWantJSON(t, "q after its child went", any(q), httpGet(t, h, "/v2/comments/"+q["commentId"].(string)))
		httpiotest.WantStatus(t, del(q), http.StatusNoContent) // now a leaf: removed, and p, live, stays
		httpiotest.WantError(t, get(q), http.StatusNotFound, "COMMENT_NOT_FOUND")
		httpWantJSON(t, "p after its child went", any(p), httpGet(t, h, "/v2/comments/"+p["commentId"].(string)))
		count(3, "1")

		// The next child path is the one after the largest child left (SPEC §3.2), so a removed last child's is reused.
		for _, want := range []string{"0000000000", "0000000001"} {
			if got := httpPostV2(t, h, 3, 1, p["path"].(string), "again"); got["path"] != want {
				t.Errorf("path of a new child of p = %v, want %s", got["path"], want)
			}
		}

		// The v1 routes do not delete v2 comments.
		httpiotest.WantError(t, httpiotest.Call(asWriterOf(h, p), "DELETE", "/v1/comments/"+p["commentId"].(string), ""), http.StatusNotFound, "COMMENT_NOT_FOUND")
		count(3, "3")
	})
}

func TestHTTPListV1(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, clock := httpHandler(t, db)
		// Created out of list order: replies come after later roots.
		r1 := httpPostV1(t, h, 5, 1, "", "r1")
		r2 := httpPostV1(t, h, 5, 1, "", "r2")
		clock.Add(time.Millisecond)
		r1a := httpPostV1(t, h, 5, 2, r1["commentId"].(string), "r1a")
		r3 := httpPostV1(t, h, 5, 1, "", "r3")
		r2a := httpPostV1(t, h, 5, 2, r2["commentId"].(string), "r2a")
		r1b := httpPostV1(t, h, 5, 3, r1["commentId"].(string), "r1b")
		httpPostV1(t, h, 6, 1, "", "another article")
		httpPostV2(t, h, 5, 1, "", "a v2 comment")
		httpiotest.WantStatus(t, httpiotest.Call(asWriterOf(h, r2), "DELETE", "/v1/comments/"+r2["commentId"].(string), ""), http.StatusNoContent)
		all := httpList(r1, r1a, r1b, httpDeleted(r2), r2a, r3)
		if r1a["createdAt"] != "2026-01-02T03:04:05.007Z" {
			t.Fatalf("r1a createdAt = %v", r1a["createdAt"])
		}

		httpWantJSON(t, "whole list", any(map[string]any{"comments": all, "commentCount": json.Number("6")}),
			httpGet(t, h, "/v1/comments?articleId=5&page=1&pageSize=100"))
		httpWantJSON(t, "defaults (page 1 of 30)", any(map[string]any{"comments": all, "commentCount": json.Number("6")}),
			httpGet(t, h, "/v1/comments?articleId=5"))
		for _, tc := range []struct {
			page, pageSize int64
			want           []any
		}{
			{1, 4, all[:4]},
			{2, 4, all[4:]},
			{3, 4, []any{}},
			{2, 3, all[3:]},
			{6, 1, all[5:]},
			{httpMaxPage, 100, []any{}},
		} {
			comments, count := httpPage(t, h, "v1", 5, tc.page, tc.pageSize)
			httpWantJSON(t, fmt.Sprintf("page %d of %d", tc.page, tc.pageSize), any(tc.want), comments)
			if count != "6" {
				t.Errorf("page %d of %d: commentCount = %s, want 6", tc.page, tc.pageSize, count)
			}
		}

		// Infinite scroll: the first page, the next by cursor, and past the end.
		httpWantJSON(t, "scroll without cursor", any(all[:4]), httpGet(t, h, "/v1/comments/infinite-scroll?articleId=5&pageSize=4"))
		httpWantJSON(t, "scroll with empty cursor", any(all), httpGet(t, h, "/v1/comments/infinite-scroll?articleId=5&lastParentCommentId=&lastCommentId="))
		cursor := func(c map[string]any) string {
			return fmt.Sprintf("&lastParentCommentId=%s&lastCommentId=%s", c["parentCommentId"], c["commentId"])
		}
		httpWantJSON(t, "scroll after r2", any(all[4:]), httpGet(t, h, "/v1/comments/infinite-scroll?articleId=5&pageSize=4"+cursor(r2)))
		httpWantJSON(t, "scroll after r1b", any(all[3:5]), httpGet(t, h, "/v1/comments/infinite-scroll?articleId=5&pageSize=2"+cursor(r1b)))
		httpWantJSON(t, "scroll after the last", any([]any{}), httpGet(t, h, "/v1/comments/infinite-scroll?articleId=5"+cursor(r3)))

		// Walks by offset and by cursor see every comment once, in list order.
		wantIDs := httpField(t, all, "commentId")
		for _, size := range []int64{1, 2, 3, 5, 6, 100} {
			if diff := cmp.Diff(wantIDs, httpScroll(t, h, "v1", 5, size)); diff != "" {
				t.Errorf("scroll by %d (-want +got):\n%s", size, diff)
			}
			if diff := cmp.Diff(wantIDs, httpPages(t, h, "v1", 5, size)); diff != "" {
				t.Errorf("pages of %d (-want +got):\n%s", size, diff)
			}
		}

		// A cursor outlives its comment: after r1a is removed, scrolling on from it goes on from r1b.
		httpiotest.WantStatus(t, httpiotest.Call(asWriterOf(h, r1a), "DELETE", "/v1/comments/"+r1a["commentId"].(string), ""), http.StatusNoContent)
		httpWantJSON(t, "scroll after a removed comment", any(all[2:4]), httpGet(t, h, "/v1/comments/infinite-scroll?articleId=5&pageSize=2"+cursor(r1a)))

		// No comments: empty arrays, never null.
		for _, tc := range []struct{ target, want string }{
			{"/v1/comments?articleId=404", `{"comments":[],"commentCount":0}`},
			{"/v1/comments?articleId=0", `{"comments":[],"commentCount":0}`},
			{"/v1/comments?articleId=5&page=99", `{"comments":[],"commentCount":5}`},
			{"/v1/comments/infinite-scroll?articleId=404", `[]`},
		} {
			r := httpiotest.Call(h, "GET", tc.target, "")
			httpiotest.WantStatus(t, r, http.StatusOK)
			if diff := cmp.Diff(tc.want, strings.TrimSpace(r.Body)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.target, diff)
			}
		}
	})
}

func TestHTTPListV2(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, _ := httpHandler(t, db)
		// Created out of tree order.
		a := httpPostV2(t, h, 5, 1, "", "a")
		b := httpPostV2(t, h, 5, 1, "", "b")
		a1 := httpPostV2(t, h, 5, 2, "00000", "a1")
		c := httpPostV2(t, h, 5, 1, "", "c")
		a1a := httpPostV2(t, h, 5, 3, "0000000000", "a1a")
		b1 := httpPostV2(t, h, 5, 2, "00001", "b1")
		a2 := httpPostV2(t, h, 5, 2, "00000", "a2")
		a1a1 := httpPostV2(t, h, 5, 4, "000000000000000", "a1a1")
		httpPostV2(t, h, 6, 1, "", "another article")
		httpPostV1(t, h, 5, 1, "", "a v1 comment")
		httpiotest.WantStatus(t, httpiotest.Call(asWriterOf(h, b), "DELETE", "/v2/comments/"+b["commentId"].(string), ""), http.StatusNoContent)
		all := httpList(a, a1, a1a, a1a1, a2, httpDeleted(b), b1, c)
		wantPaths := []string{"00000", "0000000000", "000000000000000", "00000000000000000000", "0000000001", "00001", "0000100000", "00002"}
		if diff := cmp.Diff(wantPaths, httpField(t, all, "path")); diff != "" {
			t.Fatalf("test tree paths (-want +got):\n%s", diff)
		}

		httpWantJSON(t, "whole list", any(map[string]any{"comments": all, "commentCount": json.Number("8")}),
			httpGet(t, h, "/v2/comments?articleId=5&page=1&pageSize=100"))
		httpWantJSON(t, "defaults", any(map[string]any{"comments": all, "commentCount": json.Number("8")}),
			httpGet(t, h, "/v2/comments?articleId=5"))
		for _, tc := range []struct {
			page, pageSize int64
			want           []any
		}{
			{1, 3, all[:3]},
			{2, 3, all[3:6]},
			{3, 3, all[6:]},
			{4, 3, []any{}},
			{2, 4, all[4:]},
			{8, 1, all[7:]},
			{httpMaxPage, 100, []any{}},
		} {
			comments, count := httpPage(t, h, "v2", 5, tc.page, tc.pageSize)
			httpWantJSON(t, fmt.Sprintf("page %d of %d", tc.page, tc.pageSize), any(tc.want), comments)
			if count != "8" {
				t.Errorf("page %d of %d: commentCount = %s, want 8", tc.page, tc.pageSize, count)
			}
		}

		httpWantJSON(t, "scroll without cursor", any(all[:3]), httpGet(t, h, "/v2/comments/infinite-scroll?articleId=5&pageSize=3"))
		httpWantJSON(t, "scroll with empty cursor", any(all), httpGet(t, h, "/v2/comments/infinite-scroll?articleId=5&lastPath="))
		httpWantJSON(t, "scroll after a1a", any(all[3:6]), httpGet(t, h, "/v2/comments/infinite-scroll?articleId=5&pageSize=3&lastPath=000000000000000"))
		httpWantJSON(t, "scroll after the last", any([]any{}), httpGet(t, h, "/v2/comments/infinite-scroll?articleId=5&lastPath=00002"))
		// A cursor is a position: it needs no comment at it.
		httpWantJSON(t, "scroll after a path past a's subtree", any(all[5:]), httpGet(t, h, "/v2/comments/infinite-scroll?articleId=5&lastPath=00000zzzzz"))
		httpWantJSON(t, "scroll after zzzzz", any([]any{}), httpGet(t, h, "/v2/comments/infinite-scroll?articleId=5&lastPath=zzzzz"))

		wantIDs := httpField(t, all, "commentId")
		for _, size := range []int64{1, 2, 3, 7, 8, 100} {
			if diff := cmp.Diff(wantIDs, httpScroll(t, h, "v2", 5, size)); diff != "" {
				t.Errorf("scroll by %d (-want +got):\n%s", size, diff)
			}
			if diff := cmp.Diff(wantIDs, httpPages(t, h, "v2", 5, size)); diff != "" {
				t.Errorf("pages of %d (-want +got):\n%s", size, diff)
			}
		}

		// After a1a1 is removed, scrolling on from its path goes on from a2.
		httpiotest.WantStatus(t, httpiotest.Call(asWriterOf(h, a1a1), "DELETE", "/v2/comments/"+a1a1["commentId"].(string), ""), http.StatusNoContent)
		httpWantJSON(t, "scroll after a removed comment", any(all[4:6]), httpGet(t, h, "/v2/comments/infinite-scroll?articleId=5&pageSize=2&lastPath=00000000000000000000"))

		for _, tc := range []struct{ target, want string }{
			{"/v2/comments?articleId=404", `{"comments":[],"commentCount":0}`},
			{"/v2/comments?articleId=5&page=99", `{"comments":[],"commentCount":7}`},
			{"/v2/comments/infinite-scroll?articleId=404", `[]`},
		} {
			r := httpiotest.Call(h, "GET", tc.target, "")
			httpiotest.WantStatus(t, r, http.StatusOK)
			if diff := cmp.Diff(tc.want, strings.TrimSpace(r.Body)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.target, diff)
			}
		}
	})
}

// TestHTTPListCountCapped checks commentCount against SPEC §3.1's cap, ((page-1)/10 + 1) * pageSize * 10 + 1, worked
// out by hand for an article of 25 comments.
func TestHTTPListCountCapped(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, _ := httpHandler(t, db)
		const total = 25
		var roots []string
		for i := range total {
			if i%3 == 2 { // some replies, so v1's order is not creation order
				httpPostV1(t, h, 1, 1, roots[i/3], "reply")
			} else {
				roots = append(roots, httpPostV1(t, h, 1, 1, "", "root")["commentId"].(string))
			}
			parent := ""
			if i%4 == 3 {
				parent = "00000"
			}
			httpPostV2(t, h, 1, 1, parent, "v2")
		}
		httpPostV1(t, h, 2, 1, "", "another article")
		httpPostV2(t, h, 2, 1, "", "another article")

		for _, version := range []string{"v1", "v2"} {
			all := httpPages(t, h, version, 1, 100)
			if len(all) != total {
				t.Fatalf("%s: %d comments, want %d", version, len(all), total)
			}
			for _, tc := range []struct {
				page, pageSize, wantLen int64
				wantCount               string
			}{
				{1, 1, 1, "11"},
				{2, 1, 1, "11"},
				{10, 1, 1, "11"},
				{11, 1, 1, "21"},
				{20, 1, 1, "21"},
				{21, 1, 1, "25"},
				{1, 2, 2, "21"},
				{10, 2, 2, "21"},
				{11, 2, 2, "25"},
				{13, 2, 1, "25"},
				{14, 2, 0, "25"},
				{1, 3, 3, "25"},
				{3, 10, 5, "25"},
				{1, 24, 24, "25"},
				{1, 25, 25, "25"},
				{2, 25, 0, "25"},
				{1, 100, 25, "25"},
				{99, 100, 0, "25"},
			} {
				comments, count := httpPage(t, h, version, 1, tc.page, tc.pageSize)
				ids := httpField(t, comments, "commentId")
				offset := (tc.page - 1) * tc.pageSize
				want := all[min(offset, total):min(offset+tc.wantLen, total)]
				if diff := cmp.Diff(want, ids); diff != "" {
					t.Errorf("%s page %d of %d (-want +got):\n%s", version, tc.page, tc.pageSize, diff)
				}
				if string(count) != tc.wantCount {
					t.Errorf("%s page %d of %d: commentCount = %s, want %s", version, tc.page, tc.pageSize, count, tc.wantCount)
				}
				if limit := CountLimit(tc.page, tc.pageSize); strconv.FormatInt(min(total, limit), 10) != tc.wantCount {
					t.Errorf("CountLimit(%d, %d) = %d disagrees with the hand-worked %s", tc.page, tc.pageSize, limit, tc.wantCount)
				}
			}
		}
	})
}

func TestHTTPArticleCount(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, _ := httpHandler(t, db)
		count := func(target, want string) {
			t.Helper()
			r := httpiotest.Call(h, "GET", target, "")
			httpiotest.WantStatus(t, r, http.StatusOK)
			httpWantJSON(t, target, any(json.Number(want)), httpiotest.DecodeJSON(t, r.Body))
		}
		count("/v2/comments/articles/3/count", "0")

		root := httpPostV1(t, h, 3, 1, "", "v1 root")
		httpPostV1(t, h, 3, 1, root["commentId"].(string), "v1 reply")
		v2root := httpPostV2(t, h, 3, 1, "", "v2 root")
		httpPostV2(t, h, 3, 1, "00000", "v2 reply")
		v2leaf := httpPostV2(t, h, 3, 1, "", "v2 leaf")
		httpPostV1(t, h, 4, 1, "", "another article")
		count("/v2/comments/articles/3/count", "5")
		count("/v2/comments/articles/4/count", "1")

		// Soft-deleted comments still count; removed ones do not.
		httpiotest.WantStatus(t, httpiotest.Call(asWriterOf(h, root), "DELETE", "/v1/comments/"+root["commentId"].(string), ""), http.StatusNoContent)
		httpiotest.WantStatus(t, httpiotest.Call(asWriterOf(h, v2root), "DELETE", "/v2/comments/"+v2root["commentId"].(string), ""), http.StatusNoContent)
		count("/v2/comments/articles/3/count", "5")
		httpiotest.WantStatus(t, httpiotest.Call(asWriterOf(h, v2leaf), "DELETE", "/v2/comments/"+v2leaf["commentId"].(string), ""), http.StatusNoContent)
		count("/v2/comments/articles/3/count", "4")
		count("/v2/comments/articles/4/count", "1")
		count("/v2/comments/articles/0/count", "0")
		count("/v2/comments/articles/9223372036854775807/count", "0")
	})
}

// TestHTTPArticleCountETag checks that the count's ETag is the articleCommentCountVersion of the article's latest
// comment event, through creates, soft deletes and removals of both versions.
func TestHTTPArticleCountETag(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, _ := httpHandler(t, db)
		// wantVersion checks that the latest event of an article (if any) carries version and that the count answers
		// with that version as its ETag, and with the event's count as its body.
		wantVersion := func(after string, articleID, version int64) {
			t.Helper()
			var latest event.Comment // zero: the article has had no comment
			for _, e := range outboxEvents(t, db) {
				if int64(e.Payload.ArticleID) == articleID {
					latest = e.Payload
				}
			}
			if latest.ArticleCommentCountVersion != version {
				t.Fatalf("after %s: latest event of article %d carries version %d, want %d", after, articleID,
					latest.ArticleCommentCountVersion, version)
			}
			target := fmt.Sprintf("/v2/comments/articles/%d/count", articleID)
			r := httpiotest.Call(h, "GET", target, "")
			httpiotest.WantStatus(t, r, http.StatusOK)
			if got, want := r.Header.Get("ETag"), `"`+strconv.FormatInt(version, 10)+`"`; got != want {
				t.Errorf("after %s: GET %s ETag = %q, want %q (the event's articleCommentCountVersion)", after, target, got, want)
			}
			httpWantJSON(t, "after "+after+": GET "+target, any(json.Number(strconv.FormatInt(latest.ArticleCommentCount, 10))),
				httpiotest.DecodeJSON(t, r.Body))
		}
		del := func(target string) {
			t.Helper()
			httpiotest.WantStatus(t, httpiotest.Call(httpiotest.As(h, 1), "DELETE", target, ""), http.StatusNoContent)
		}

		wantVersion("nothing", 3, 0)
		root := httpPostV1(t, h, 3, 1, "", "v1 root")
		wantVersion("a v1 create", 3, 1)
		reply := httpPostV1(t, h, 3, 1, root["commentId"].(string), "v1 reply")
		wantVersion("a v1 reply", 3, 2)
		v2root := httpPostV2(t, h, 3, 1, "", "v2 root")
		wantVersion("a v2 create", 3, 3)
		v2reply := httpPostV2(t, h, 3, 1, v2root["path"].(string), "v2 reply")
		wantVersion("a v2 reply", 3, 4)
		httpPostV1(t, h, 4, 1, "", "another article")
		wantVersion("a comment on article 4", 4, 1)
		wantVersion("a comment on article 4", 3, 4)

		// A soft delete changes neither the count nor its version; its event carries the version as it is.
		del("/v1/comments/" + root["commentId"].(string))
		wantVersion("a v1 soft delete", 3, 4)
		// Removing the last reply of a deleted root removes both, one version each.
		del("/v1/comments/" + reply["commentId"].(string))
		wantVersion("a v1 removal with its root", 3, 6)
		del("/v2/comments/" + v2root["commentId"].(string))
		wantVersion("a v2 soft delete", 3, 6)
		del("/v2/comments/" + v2reply["commentId"].(string))
		wantVersion("a v2 removal with its root", 3, 8) // the count is back to 0, its version is not
	})
}

func TestHTTPBadInput(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, _ := httpHandler(t, db)
		v1 := httpPostV1(t, h, 1, 1, "", "v1 root")
		v2 := httpPostV2(t, h, 1, 1, "", "v2 root")
		v1URL, v2URL := "/v1/comments/"+v1["commentId"].(string), "/v2/comments/"+v2["commentId"].(string)

		body := func(content string) string { return httpBody(1, 1, content, "", "") }
		type testCase struct {
			name, method, target, body string
			status                     int
			code                       string
		}
		var cases []testCase
		for _, version := range []string{"v1", "v2"} {
			create := "/" + version + "/comments"
			for _, tc := range []struct {
				name, body string
				status     int
				code       string
			}{
				{"malformed json", `{"articleId":`, 400, "INVALID_JSON"},
				{"not json", `hello`, 400, "INVALID_JSON"},
				{"empty body", ``, 400, "INVALID_JSON"},
				{"array body", `[]`, 400, "INVALID_JSON"},
				{"string body", `"x"`, 400, "INVALID_JSON"},
				{"trailing garbage", body("c") + `x`, 400, "INVALID_JSON"},
				{"two objects", body("c") + body("c"), 400, "INVALID_JSON"},
				{"null body", `null`, 400, "MISSING_FIELD"},
				{"empty object", `{}`, 400, "MISSING_FIELD"},
				{"missing articleId", `{"content":"c","writerId":1}`, 400, "MISSING_FIELD"},
				{"missing content", `{"articleId":1,"writerId":1}`, 400, "MISSING_FIELD"},
				{"null articleId", `{"articleId":null,"content":"c","writerId":1}`, 400, "MISSING_FIELD"},
				{"null content", `{"articleId":1,"content":null,"writerId":1}`, 400, "MISSING_FIELD"},
				{"content number", `{"articleId":1,"content":5,"writerId":1}`, 400, "INVALID_JSON"},
				{"content object", `{"articleId":1,"content":{},"writerId":1}`, 400, "INVALID_JSON"},
				{"empty content", body(""), 400, "INVALID_CONTENT"},
				{"blank content", body(" \t\r\n "), 400, "INVALID_CONTENT"},
				{"ideographic-space content", body("\u3000"), 400, "INVALID_CONTENT"},
				{"3001-char content", body(strings.Repeat("a", MaxContentChars+1)), 400, "INVALID_CONTENT"},
				{"3001 multi-byte content", body(strings.Repeat("가", MaxContentChars+1)), 400, "INVALID_CONTENT"},
				{"articleId 0", `{"articleId":0,"content":"c","writerId":1}`, 400, "INVALID_ID"},
				{"articleId \"0\"", `{"articleId":"0","content":"c","writerId":1}`, 400, "INVALID_ID"},
				{"writerId 0", `{"articleId":1,"content":"c","writerId":0}`, 400, "INVALID_ID"},
				{"writerId \"0\"", `{"articleId":1,"content":"c","writerId":"0"}`, 400, "INVALID_ID"},
				{"articleId negative", `{"articleId":-1,"content":"c","writerId":1}`, 400, "INVALID_JSON"},
				{"writerId negative string", `{"articleId":1,"content":"c","writerId":"-1"}`, 400, "INVALID_JSON"},
				{"articleId non-numeric", `{"articleId":"abc","content":"c","writerId":1}`, 400, "INVALID_JSON"},
				{"writerId empty string", `{"articleId":1,"content":"c","writerId":""}`, 400, "INVALID_JSON"},
				{"articleId float", `{"articleId":1.5,"content":"c","writerId":1}`, 400, "INVALID_JSON"},
				{"articleId exponent", `{"articleId":1e3,"content":"c","writerId":1}`, 400, "INVALID_JSON"},
				{"articleId bool", `{"articleId":true,"content":"c","writerId":1}`, 400, "INVALID_JSON"},
				{"articleId overflow", `{"articleId":"9223372036854775808","content":"c","writerId":1}`, 400, "INVALID_JSON"},
				{"writerId overflow number", `{"articleId":1,"content":"c","writerId":99999999999999999999}`, 400, "INVALID_JSON"},
				{"body over 64 KiB", body(strings.Repeat("a", 70_000)), 413, "BODY_TOO_LARGE"},
			} {
				cases = append(cases, testCase{version + " " + tc.name, "POST", create, tc.body, tc.status, tc.code})
			}
			item, missing := v1URL, "/"+version+"/comments/1"
			if version == "v2" {
				item = v2URL
			}
			for _, tc := range []testCase{
				{"get missing", "GET", missing, ``, 404, "COMMENT_NOT_FOUND"},
				{"get id 0", "GET", "/" + version + "/comments/0", ``, 404, "COMMENT_NOT_FOUND"},
				{"get non-numeric id", "GET", "/" + version + "/comments/abc", ``, 400, "INVALID_COMMENT_ID"},
				{"get negative id", "GET", "/" + version + "/comments/-1", ``, 400, "INVALID_COMMENT_ID"},
				{"get overflowing id", "GET", "/" + version + "/comments/9223372036854775808", ``, 400, "INVALID_COMMENT_ID"},
				{"get float id", "GET", "/" + version + "/comments/1.0", ``, 400, "INVALID_COMMENT_ID"},
				{"delete missing", "DELETE", missing, ``, 404, "COMMENT_NOT_FOUND"},
				{"delete bad id", "DELETE", "/" + version + "/comments/x", ``, 400, "INVALID_COMMENT_ID"},
				{"wrong method on item", "PATCH", item, body("c"), 405, "METHOD_NOT_ALLOWED"},
				{"wrong method on collection", "DELETE", "/" + version + "/comments", ``, 405, "METHOD_NOT_ALLOWED"},
				{"unknown sub-route", "GET", item + "/replies", ``, 404, "NOT_FOUND"},
			} {
				tc.name = version + " " + tc.name
				cases = append(cases, tc)
			}
			for _, list := range []string{"/" + version + "/comments?", "/" + version + "/comments/infinite-scroll?"} {
				for _, tc := range []struct {
					name, query string
					code        string
				}{
					{"missing articleId", "pageSize=5", "MISSING_ARTICLE_ID"},
					{"empty articleId", "articleId=", "MISSING_ARTICLE_ID"},
					{"non-numeric articleId", "articleId=x", "INVALID_ARTICLE_ID"},
					{"negative articleId", "articleId=-1", "INVALID_ARTICLE_ID"},
					{"overflowing articleId", "articleId=9223372036854775808", "INVALID_ARTICLE_ID"},
					{"pageSize 0", "articleId=1&pageSize=0", "INVALID_PAGE_SIZE"},
					{"pageSize 101", "articleId=1&pageSize=101", "INVALID_PAGE_SIZE"},
					{"pageSize -1", "articleId=1&pageSize=-1", "INVALID_PAGE_SIZE"},
					{"pageSize abc", "articleId=1&pageSize=abc", "INVALID_PAGE_SIZE"},
					{"pageSize 1.5", "articleId=1&pageSize=1.5", "INVALID_PAGE_SIZE"},
				} {
					cases = append(cases, testCase{list + " " + tc.name, "GET", list + tc.query, ``, 400, tc.code})
				}
			}
			for _, tc := range []struct{ name, query, code string }{
				{"page 0", "articleId=1&page=0", "INVALID_PAGE"},
				{"page -1", "articleId=1&page=-1", "INVALID_PAGE"},
				{"page abc", "articleId=1&page=abc", "INVALID_PAGE"},
				{"page 2^31", "articleId=1&page=2147483648", "INVALID_PAGE"},
				{"page max int64", "articleId=1&page=9223372036854775807", "INVALID_PAGE"},
			} {
				cases = append(cases, testCase{version + " list " + tc.name, "GET", "/" + version + "/comments?" + tc.query, ``, 400, tc.code})
			}
		}
		scroll1, scroll2 := "/v1/comments/infinite-scroll?articleId=1&", "/v2/comments/infinite-scroll?articleId=1&"
		cases = append(cases, []testCase{
			{"v1 parentCommentId 0", "POST", "/v1/comments", `{"articleId":1,"content":"c","writerId":1,"parentCommentId":0}`, 400, "INVALID_PARENT_COMMENT_ID"},
			{"v1 parentCommentId bool", "POST", "/v1/comments", `{"articleId":1,"content":"c","writerId":1,"parentCommentId":false}`, 400, "INVALID_JSON"},
			{"v1 unknown parent", "POST", "/v1/comments", `{"articleId":1,"content":"c","writerId":1,"parentCommentId":"1"}`, 404, "PARENT_COMMENT_NOT_FOUND"},
			{"v2 parentPath number", "POST", "/v2/comments", `{"articleId":1,"content":"c","writerId":1,"parentPath":0}`, 400, "INVALID_JSON"},
			{"v2 parentPath bad", "POST", "/v2/comments", `{"articleId":1,"content":"c","writerId":1,"parentPath":"0000"}`, 400, "INVALID_PARENT_PATH"},
			{"v2 unknown parent", "POST", "/v2/comments", `{"articleId":1,"content":"c","writerId":1,"parentPath":"zzzzz"}`, 404, "PARENT_COMMENT_NOT_FOUND"},

			{"v1 scroll lastCommentId alone", "GET", scroll1 + "lastCommentId=5", ``, 400, "INCOMPLETE_CURSOR"},
			{"v1 scroll lastParentCommentId alone", "GET", scroll1 + "lastParentCommentId=5", ``, 400, "INCOMPLETE_CURSOR"},
			{"v1 scroll lastParentCommentId 0", "GET", scroll1 + "lastParentCommentId=0&lastCommentId=5", ``, 400, "INCOMPLETE_CURSOR"},
			{"v1 scroll lastParentCommentId empty", "GET", scroll1 + "lastParentCommentId=&lastCommentId=5", ``, 400, "INCOMPLETE_CURSOR"},
			{"v1 scroll lastParentCommentId abc", "GET", scroll1 + "lastParentCommentId=abc&lastCommentId=5", ``, 400, "INVALID_LAST_PARENT_COMMENT_ID"},
			{"v1 scroll lastCommentId -1", "GET", scroll1 + "lastParentCommentId=5&lastCommentId=-1", ``, 400, "INVALID_LAST_COMMENT_ID"},
			{"v2 scroll lastPath 4 characters", "GET", scroll2 + "lastPath=0000", ``, 400, "INVALID_LAST_PATH"},
			{"v2 scroll lastPath dash", "GET", scroll2 + "lastPath=0000-", ``, 400, "INVALID_LAST_PATH"},
			{"v2 scroll lastPath space", "GET", scroll2 + "lastPath=0000%20", ``, 400, "INVALID_LAST_PATH"},
			{"v2 scroll lastPath multi-byte", "GET", scroll2 + "lastPath=" + url.QueryEscape("000가"), ``, 400, "INVALID_LAST_PATH"},
			{"v2 scroll lastPath 30 characters", "GET", scroll2 + "lastPath=" + strings.Repeat("0", 30), ``, 400, "INVALID_LAST_PATH"},

			{"count non-numeric articleId", "GET", "/v2/comments/articles/x/count", ``, 400, "INVALID_ARTICLE_ID"},
			{"count negative articleId", "GET", "/v2/comments/articles/-1/count", ``, 400, "INVALID_ARTICLE_ID"},
			{"count overflowing articleId", "GET", "/v2/comments/articles/99999999999999999999/count", ``, 400, "INVALID_ARTICLE_ID"},
			{"count wrong method", "POST", "/v2/comments/articles/1/count", ``, 405, "METHOD_NOT_ALLOWED"},
			{"count under v1", "GET", "/v1/comments/articles/1/count", ``, 404, "NOT_FOUND"},
			{"unknown version", "GET", "/v3/comments?articleId=1", ``, 404, "NOT_FOUND"},
		}...)

		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				// As the writer of every comment here: bad input is a 400 (or a 404) whoever sends it.
				r := httpiotest.Call(httpiotest.As(h, 1), tc.method, tc.target, tc.body)
				httpiotest.WantError(t, r, tc.status, tc.code)
				if r.Status == http.StatusMethodNotAllowed && r.Header.Get("Allow") == "" {
					t.Error("405 without an Allow header")
				}
			})
		}

		// Nothing above changed the article.
		if n := httpCount(t, h, 1); n != "2" {
			t.Errorf("count after bad input = %s, want 2", n)
		}
		httpWantJSON(t, "v1 root after bad input", any(v1), httpGet(t, h, v1URL))
		httpWantJSON(t, "v2 root after bad input", any(v2), httpGet(t, h, v2URL))
		httpWantJSON(t, "v1 list after bad input", any([]any{v1}), httpGet(t, h, "/v1/comments/infinite-scroll?articleId=1"))
		httpWantJSON(t, "v2 list after bad input", any([]any{v2}), httpGet(t, h, "/v2/comments/infinite-scroll?articleId=1"))

		// The boundaries that are fine: 3000 characters, whitespace around content, the largest body.
		for _, version := range []string{"v1", "v2"} {
			for _, b := range []string{
				body(strings.Repeat("가", MaxContentChars)),
				body(" x "),
				`{"articleId":1,"content":"c","writerId":1,"pad":"` + strings.Repeat(" ", httpio.MaxBodyBytes-60) + `"}`,
			} {
				r := httpiotest.Call(httpiotest.As(h, 1), "POST", "/"+version+"/comments", b)
				httpiotest.WantStatus(t, r, http.StatusCreated)
			}
		}
	})
}

// TestHTTPConcurrentCreates sends replies to one parent, and first comments to new articles, all at once: each must
// succeed, and v2's must take distinct paths with no gap.
func TestHTTPConcurrentCreates(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, _ := httpHandler(t, db)
		root := httpPostV1(t, h, 1, 1, "", "v1 root")
		httpPostV2(t, h, 1, 1, "", "v2 root")

		const each = 8
		type request struct {
			target, body string
			writer       int64
		}
		var requests []request
		for i := range each {
			writer := int64(i + 1)
			requests = append(requests,
				request{"/v1/comments", httpBody(1, writer, "v1 reply", "parentCommentId", root["commentId"].(string)), writer},
				request{"/v2/comments", httpBody(1, writer, "v2 reply", "parentPath", "00000"), writer},
				request{"/v1/comments", httpBody(2, writer, "v1 first", "", ""), writer},
				request{"/v2/comments", httpBody(3, writer, "v2 first", "", ""), writer})
		}
		replies := make([]httpiotest.Reply, len(requests))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, req := range requests {
			wg.Go(func() {
				<-start
				replies[i] = httpiotest.Call(httpiotest.As(h, req.writer), "POST", req.target, req.body)
			})
		}
		close(start)
		wg.Wait()

		paths := map[string][]string{}
		for i, r := range replies {
			if r.Status != http.StatusCreated {
				t.Errorf("%s %s: status %d, body %s", requests[i].target, requests[i].body, r.Status, r.Body)
				continue
			}
			c := httpiotest.DecodeJSON(t, r.Body).(map[string]any)
			if p, ok := c["path"].(string); ok {
				paths[c["articleId"].(string)] = append(paths[c["articleId"].(string)], p)
			}
		}
		var wantReplies, wantRoots []string
		for i := range each {
			wantReplies = append(wantReplies, "00000"+"0000"+string(digits[i]))
			wantRoots = append(wantRoots, "0000"+string(digits[i]))
		}
		if diff := cmp.Diff(wantReplies, slices.Sorted(slices.Values(paths["1"]))); diff != "" {
			t.Errorf("concurrent reply paths (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(wantRoots, slices.Sorted(slices.Values(paths["3"]))); diff != "" {
			t.Errorf("concurrent root paths (-want +got):\n%s", diff)
		}
		for article, want := range map[int64]string{1: strconv.Itoa(2 + 2*each), 2: strconv.Itoa(each), 3: strconv.Itoa(each)} {
			if n := httpCount(t, h, article); n != want {
				t.Errorf("article %d count = %s, want %s", article, n, want)
			}
		}
	})
}

// FuzzHTTPCreate posts arbitrary bodies to both versions' create: never a 5xx, every error a {code, message}, and
// whatever is created reads back the same.
func FuzzHTTPCreate(f *testing.F) {
	// The setup below makes the v1 root firstID and the v2 root path 00000, both on article 1.
	root := httpStr(firstID)
	for _, s := range []string{
		`{"articleId":1,"content":"c","writerId":1}`,
		`{"articleId":"1","content":"가","writerId":"2","x":[]}`,
		`{"articleId":1,"content":"c","writerId":1,"parentCommentId":"` + root + `"}`,
		`{"articleId":1,"content":"c","writerId":1,"parentCommentId":` + root + `}`,
		`{"articleId":2,"content":"c","writerId":1,"parentCommentId":"` + root + `"}`,
		`{"articleId":1,"content":"c","writerId":1,"parentCommentId":0}`,
		`{"articleId":1,"content":"c","writerId":1,"parentPath":"00000"}`,
		`{"articleId":1,"content":"c","writerId":1,"parentPath":"0000000000"}`,
		`{"articleId":1,"content":"c","writerId":1,"parentPath":"0000-"}`,
		`{"articleId":1,"content":"c","writerId":1,"parentPath":""}`,
		`{"articleId":1,"content":"c","writerId":0}`,
		`{"articleId":1,"content":"","writerId":1}`,
		`{"articleId":1,"content":"c\u0000\ud800","writerId":1}`,
		`{"articleId":1e3,"content":"c","writerId":-1}`,
		`{"articleId":9223372036854775807,"content":"c","writerId":9223372036854775807}`,
		`{"content":"c"}`,
		`{"articleId":1,"content":"c"}`,
		`{"articleId":1,"content":"c","writerId":"2"}`,
		`{`, ``, `null`, `[]`, `"x"`, `{}{}`,
	} {
		f.Add(false, []byte(s))
		f.Add(true, []byte(s))
	}
	h, _ := httpHandler(f, sqldbtest.OpenSQLite(f, Migrate))
	httpPostV1(f, h, 1, 1, "", "v1 root")
	httpPostV2(f, h, 1, 1, "", "v2 root")
	f.Fuzz(func(t *testing.T, v2 bool, body []byte) {
		version := "v1"
		if v2 {
			version = "v2"
		}
		rec := httptest.NewRecorder()
		httpiotest.As(h, 1).ServeHTTP(rec, httptest.NewRequest("POST", "/"+version+"/comments", bytes.NewReader(body)))
		r := httpiotest.Reply{Status: rec.Code, Header: rec.Header(), Body: rec.Body.String()}
		switch {
		case r.Status >= 500:
			t.Fatalf("%s body %q: status %d %s", version, body, r.Status, r.Body)
		case r.Status >= 400:
			httpiotest.ErrorCode(t, r)
		case r.Status == http.StatusCreated:
			created := httpiotest.DecodeJSON(t, r.Body).(map[string]any)
			if !httpiotest.TimeFormat.MatchString(created["createdAt"].(string)) {
				t.Errorf("createdAt %v", created["createdAt"])
			}
			got := httpiotest.Call(h, "GET", "/"+version+"/comments/"+created["commentId"].(string), "")
			if diff := cmp.Diff(any(created), httpiotest.DecodeJSON(t, got.Body)); diff != "" {
				t.Fatalf("%s body %q: read back (-created +read):\n%s", version, body, diff)
			}
		default:
			t.Fatalf("%s body %q: status %d", version, body, r.Status)
		}
	})
}
