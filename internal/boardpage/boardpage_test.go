package boardpage

import (
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"board/internal/fault"
)

func TestCountLimit(t *testing.T) {
	for _, tc := range []struct{ page, size, want int64 }{
		{1, 30, 301},
		{10, 30, 301},
		{11, 30, 601},
		{20, 30, 601},
		{21, 30, 901},
		{1, 1, 11},
		{1, 2, 21},
		{11, 2, 41},
		{12, 2, 41},
		{21, 2, 61},
		{1, 100, 1001},
		{100, 100, 10001},
		{101, 100, 11001},
	} {
		if got := CountLimit(tc.page, tc.size); got != tc.want {
			t.Errorf("CountLimit(%d, %d) = %d, want %d", tc.page, tc.size, got, tc.want)
		}
	}
}

// code is the error code of err, "" for nil, or the error itself when it is no fault.Error with Kind Invalid.
func code(err error) string {
	if err == nil {
		return ""
	}
	if f, ok := fault.As(err); ok && f.Kind == fault.Invalid {
		return f.Code
	}
	return err.Error()
}

func TestReadPage(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  PageRequest
		code  string
	}{
		{query: "boardId=1", want: PageRequest{BoardID: 1, Page: 1, PageSize: 30}},
		{query: "boardId=7&page=3&pageSize=100", want: PageRequest{BoardID: 7, Page: 3, PageSize: 100}},
		{query: "boardId=7&page=2147483647&pageSize=1", want: PageRequest{BoardID: 7, Page: 2147483647, PageSize: 1}},
		{query: "", code: "MISSING_BOARD_ID"},
		{query: "page=1", code: "MISSING_BOARD_ID"},
		{query: "boardId=x", code: "INVALID_BOARD_ID"},
		{query: "boardId=0", want: PageRequest{BoardID: 0, Page: 1, PageSize: 30}}, // no such board: an empty page
		{query: "boardId=007", code: "INVALID_BOARD_ID"},
		{query: "boardId=x&page=0", code: "INVALID_BOARD_ID"}, // the board first
		{query: "boardId=1&page=0", code: "INVALID_PAGE"},
		{query: "boardId=1&page=2147483648", code: "INVALID_PAGE"},
		{query: "boardId=1&page=x&pageSize=0", code: "INVALID_PAGE"}, // then the page
		{query: "boardId=1&pageSize=0", code: "INVALID_PAGE_SIZE"},
		{query: "boardId=1&pageSize=101", code: "INVALID_PAGE_SIZE"},
	} {
		got, err := ReadPage(httptest.NewRequest("GET", "/v1/articles?"+tc.query, nil))
		if code(err) != tc.code || got != tc.want {
			t.Errorf("ReadPage(%q) = %+v, %q; want %+v, %q", tc.query, got, code(err), tc.want, tc.code)
		}
	}
}

func TestReadScroll(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  ScrollRequest
		code  string
	}{
		{query: "boardId=1", want: ScrollRequest{BoardID: 1, PageSize: 30}},
		{query: "boardId=1&pageSize=5&lastArticleId=", want: ScrollRequest{BoardID: 1, PageSize: 5}},
		{query: "boardId=1&pageSize=5&lastArticleId=9007199254740993",
			want: ScrollRequest{BoardID: 1, PageSize: 5, LastArticleID: 9007199254740993}},
		{query: "pageSize=5", code: "MISSING_BOARD_ID"},
		{query: "boardId=-1", code: "INVALID_BOARD_ID"},
		{query: "boardId=1&pageSize=x&lastArticleId=x", code: "INVALID_PAGE_SIZE"}, // the size before the cursor
		{query: "boardId=1&lastArticleId=x", code: "INVALID_LAST_ARTICLE_ID"},
		{query: "boardId=1&lastArticleId=0", want: ScrollRequest{BoardID: 1, PageSize: 30}}, // as if left out
		{query: "boardId=1&page=0", want: ScrollRequest{BoardID: 1, PageSize: 30}},          // no page to check
	} {
		got, err := ReadScroll(httptest.NewRequest("GET", "/v1/articles/infinite-scroll?"+tc.query, nil))
		if code(err) != tc.code || got != tc.want {
			t.Errorf("ReadScroll(%q) = %+v, %q; want %+v, %q", tc.query, got, code(err), tc.want, tc.code)
		}
	}
}

// A request written with Query reads back as itself.
func TestQueryRoundTrip(t *testing.T) {
	for _, p := range []PageRequest{{BoardID: 1, Page: 1, PageSize: 30}, {BoardID: 9007199254740993, Page: 12, PageSize: 1}} {
		got, err := ReadPage(httptest.NewRequest("GET", "/v1/articles?"+p.Query().Encode(), nil))
		if err != nil || got != p {
			t.Errorf("ReadPage(%v.Query()) = %+v, %v", p, got, err)
		}
	}
	for _, s := range []ScrollRequest{{BoardID: 1, PageSize: 30}, {BoardID: 2, PageSize: 100, LastArticleID: 383009385012031488}} {
		got, err := ReadScroll(httptest.NewRequest("GET", "/v1/articles/infinite-scroll?"+s.Query().Encode(), nil))
		if err != nil || got != s {
			t.Errorf("ReadScroll(%v.Query()) = %+v, %v", s, got, err)
		}
	}
	if diff := cmp.Diff("boardId=2&pageSize=10", ScrollRequest{BoardID: 2, PageSize: 10}.Query().Encode()); diff != "" {
		t.Errorf("a scroll from the newest names no lastArticleId (-want +got):\n%s", diff)
	}
}
