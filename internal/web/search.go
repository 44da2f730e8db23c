package web

import (
	"context"
	"errors"
	"html"
	"net/http"
	"net/url"
	"strings"
	"time"

	"board/internal/apijson"
	"board/internal/fault"
)

// The search page (SPEC §3.10): the search service's results for a query, with filters for the board, the kind of
// result and the order, and page numbers like a board's.

// searchResult is one match as the search service answers it; CommentID is 0 for an article.
type searchResult struct {
	Type      string    `json:"type"`
	ArticleID int64     `json:"articleId,string"`
	CommentID int64     `json:"commentId,string"`
	BoardID   int64     `json:"boardId,string"`
	Title     string    `json:"title"`
	Fragment  string    `json:"fragment"`
	WriterID  int64     `json:"writerId,string"`
	CreatedAt time.Time `json:"createdAt"`
}

type searchReply struct {
	Results []searchResult `json:"results"`
	Count   int64          `json:"count"`
}

// searchQuery is what a reader asks: the words, and the filters ("" or 0: any).
type searchQuery struct {
	Q       string
	BoardID int64
	Type    string // "article", "comment"
	Sort    string // "relevance", "newest"
}

// values is the query as the search page's address writes it, without its page.
func (q searchQuery) values() url.Values {
	v := url.Values{"q": {q.Q}}
	if q.BoardID != 0 {
		v.Set("boardId", id(q.BoardID))
	}
	if q.Type != "" {
		v.Set("type", q.Type)
	}
	if q.Sort != "" {
		v.Set("sort", q.Sort)
	}
	return v
}

func (b *backend) search(ctx context.Context, q searchQuery, page, size int64) (searchReply, error) {
	var r searchReply
	v := q.values()
	v.Set("page", id(page))
	v.Set("pageSize", id(size))
	err := b.do(ctx, call{service: "search", method: http.MethodGet, url: b.origins.Search + "/v1/search?" + v.Encode()}, &r)
	return r, err
}

// resultsPerPage is how many results a search page shows.
const resultsPerPage = 20

// The choices of the search page's filters, as the search service names them; "" is the default.
var (
	searchTypes = []choice{{"", "Articles and comments"}, {"article", "Articles"}, {"comment", "Comments"}}
	searchSorts = []choice{{"", "Best match"}, {"newest", "Newest first"}}
)

type choice struct{ Value, Label string }

// resultView is a match as the search page shows it.
type resultView struct {
	Type      string
	Link      string
	Title     string
	Board     Board
	WriterID  int64
	Writer    string
	CreatedAt time.Time
	// Fragment is HTML: escaped text and balanced <mark> tags, made by highlighted.
	Fragment string
}

type searchPage struct {
	layout
	Query  searchQuery
	Boards []Board
	Types  []choice
	Sorts  []choice
	// Searched: a query was sent; Problem is the search service's answer to a query it refused.
	Searched bool
	Problem  string
	Results  []resultView
	Count    int64
	// More: the count is the service's cap, so there are more results than it says.
	More  bool
	Pager pager
}

// searchQueryOf reads the query and its filters from the address; a filter the page does not offer is a 400.
func (s *Service) searchQueryOf(r *http.Request) (searchQuery, error) {
	in := r.URL.Query()
	q := searchQuery{Q: strings.TrimSpace(in.Get("q")), Type: in.Get("type"), Sort: in.Get("sort")}
	if raw := in.Get("boardId"); raw != "" {
		n, err := apijson.Parse(raw)
		if _, ok := s.boards[n]; err != nil || !ok {
			return q, fault.Invalidf("BAD_boardId", "There is no such board to search.")
		}
		q.BoardID = n
	}
	if q.Type != "" && q.Type != "article" && q.Type != "comment" {
		return q, fault.Invalidf("BAD_type", "Search articles or comments.")
	}
	if q.Sort == "relevance" {
		q.Sort = ""
	}
	if q.Sort != "" && q.Sort != "newest" {
		return q, fault.Invalidf("BAD_sort", "Sort by best match or newest first.")
	}
	return q, nil
}

// search is the search page: without a query, the form alone; with one, a page of the search service's results
// and the writers' names. A query the service refuses (too long) is shown on the page with its message.
func (s *Service) search(w http.ResponseWriter, r *http.Request) error {
	q, err := s.searchQueryOf(r)
	if err != nil {
		return err
	}
	page, err := queryNumber(r, "page", 1, maxPage)
	if err != nil {
		return err
	}
	v := s.reader(w, r)
	title := "Search"
	if q.Q != "" {
		title = q.Q + " · Search"
	}
	data := searchPage{layout: s.pageLayout(r, v, title), Query: q, Boards: s.cfg.Boards, Types: searchTypes, Sorts: searchSorts}
	data.Description = "Search the articles and comments of board."
	if q.Q != "" {
		data.Description = "Articles and comments on board that match “" + q.Q + "”."
	}
	if q.Q == "" {
		return s.render(w, r, http.StatusOK, searchView(data))
	}
	data.Searched = true
	reply, err := s.api.search(r.Context(), q, page, resultsPerPage)
	if se, ok := errors.AsType[*serviceError](err); ok && (se.status == http.StatusBadRequest || se.code == "SEARCH_TIMEOUT") {
		// A refused query, or one too broad to answer in time: the form again, with the service's advice.
		data.Problem = se.message
		return s.render(w, r, se.status, searchView(data))
	}
	if err != nil {
		return err
	}
	writers := make([]int64, len(reply.Results))
	for i, res := range reply.Results {
		writers[i] = res.WriterID
	}
	names := s.names.lookup(r.Context(), writers)
	for _, res := range reply.Results {
		link := "/articles/" + id(res.ArticleID)
		if res.Type == "comment" {
			link += "#c-" + id(res.CommentID)
		}
		data.Results = append(data.Results, resultView{Type: res.Type, Link: link, Title: res.Title, Board: s.boardNamed(res.BoardID),
			WriterID: res.WriterID, Writer: names[res.WriterID], CreatedAt: res.CreatedAt, Fragment: highlighted(res.Fragment)})
	}
	data.Count = reply.Count
	data.More = reply.Count >= countCap(page, resultsPerPage)
	data.Pager = newPager("pages", "Result pages", "/search?"+q.values().Encode()+"&page=", page, resultsPerPage, reply.Count)
	return s.render(w, r, http.StatusOK, searchView(data))
}

// countCap is the most a capped count says for page (SPEC §3.1): one past the results of page's block of ten.
func countCap(page, size int64) int64 {
	return ((page-1)/pagesPerBlock+1)*size*pagesPerBlock + 1
}

// CountText words how many results there are: a count at the cap means at least that many.
func (p searchPage) CountText() string {
	if p.More {
		return "More than " + id(p.Count-1) + " results"
	}
	return id(p.Count) + " " + plural(p.Count, "result", "results")
}

// The only markup a fragment may carry.
const (
	markOpen  = "<mark>"
	markClose = "</mark>"
)

// highlighted makes a search fragment safe to put in a page as HTML. The search service promises escaped text with
// the matches in <mark>, but the page does not rely on it: everything between the two literal tags is unescaped
// and escaped again (so an escaped "&lt;" still reads "<", and a raw "<script>" is text), and the tags are kept only
// where they pair up, one level deep.
func highlighted(fragment string) string {
	var b strings.Builder
	open := false
	for fragment != "" {
		next, tag := len(fragment), ""
		if i := strings.Index(fragment, markOpen); i >= 0 {
			next, tag = i, markOpen
		}
		if i := strings.Index(fragment, markClose); i >= 0 && i < next {
			next, tag = i, markClose
		}
		b.WriteString(html.EscapeString(html.UnescapeString(fragment[:next])))
		fragment = fragment[next+len(tag):]
		switch {
		case tag == markOpen && !open:
			b.WriteString(markOpen)
			open = true
		case tag == markClose && open:
			b.WriteString(markClose)
			open = false
		}
	}
	if open {
		b.WriteString(markClose)
	}
	return b.String()
}
