package web

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/a-h/templ"
	"github.com/sergi/go-diff/diffmatchpatch"

	"board/internal/apijson"
	"board/internal/fault"
)

// Edits and their history (SPEC §3.12): a comment's writer or a moderator edits it in place on the article page;
// an edited article or comment says so, linking to its history, where each edit shows as a diff from the revision
// it replaced to the one that replaced it, a moderator's marked.

// revisionsPerPage is how many edits a history page shows; older ones are a link away.
const revisionsPerPage = 50

// revisionJSON is one revision as the article and comment services write it.
type revisionJSON struct {
	Revision  int64     `json:"revision"`
	EditorID  int64     `json:"editorId,string"`
	Title     string    `json:"title"`
	Content   string    `json:"content"`
	CreatedAt time.Time `json:"createdAt"`
	Moderator bool      `json:"moderator"`
}

// revisions reads a page of revisions from service at path (.../revisions), from revision from down (0: from the
// newest); with the reader's token, a hidden post's come whole to its writer and to moderators.
func (b *backend) revisions(ctx context.Context, v *viewer, service, origin, path string, from int64) ([]revisionJSON, error) {
	q := url.Values{"pageSize": {id(revisionsPerPage)}}
	if from > 0 {
		q.Set("beforeRevision", id(from+1))
	}
	var rs []revisionJSON
	err := b.do(ctx, call{service: service, method: http.MethodGet, url: origin + path + "?" + q.Encode(), token: v.Token()}, &rs)
	return rs, err
}

// commentSource reads a comment from the comment service; with the reader's token, a hidden one comes whole to its
// writer and to moderators.
func (b *backend) commentSource(ctx context.Context, v *viewer, commentID int64) (comment, error) {
	var c comment
	err := b.do(ctx, call{service: "comment", method: http.MethodGet, url: b.origins.Comment + "/v2/comments/" + id(commentID), token: v.Token()}, &c)
	return c, err
}

func (b *backend) updateComment(ctx context.Context, v *viewer, commentID int64, content string) (comment, error) {
	var c comment
	err := b.do(ctx, call{service: "comment", method: http.MethodPut, url: b.origins.Comment + "/v2/comments/" + id(commentID),
		body: map[string]string{"content": content}, token: v.token}, &c)
	return c, err
}

// diffPart is a run of text that an edit kept, took out or put in.
type diffPart struct {
	Op   diffmatchpatch.Operation
	Text string
}

// textDiff is the edit from before to after word by word, as a reader follows it: a word changed shows as that word
// out and the new one in, not as the letters between them. Each word, run of spaces and other character stands for
// one rune in the diff (as the library's line mode does with lines), and semantic cleanup merges the runs of noise.
func textDiff(before, after string) []diffPart {
	index := map[string]rune{}
	var tokens []string
	encode := func(text string) []rune {
		var out []rune
		for _, tok := range words(text) {
			r, ok := index[tok]
			if !ok {
				r = rune(len(tokens))
				tokens = append(tokens, tok)
				index[tok] = r
			}
			out = append(out, r)
		}
		return out
	}
	dmp := diffmatchpatch.New()
	diffs := dmp.DiffCleanupSemantic(dmp.DiffMainRunes(encode(before), encode(after), false))
	out := make([]diffPart, len(diffs))
	for i, d := range diffs {
		var text strings.Builder
		for _, r := range d.Text {
			text.WriteString(tokens[r])
		}
		out[i] = diffPart{Op: d.Type, Text: text.String()}
	}
	return out
}

// words splits text into words (letters and digits), runs of white space, and single other characters.
func words(text string) []string {
	var out []string
	kind := func(r rune) int {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			return 1
		case unicode.IsSpace(r):
			return 2
		}
		return 3
	}
	start := 0
	for i, r := range text {
		if i > start {
			prev, _ := utf8.DecodeLastRuneInString(text[:i])
			if k := kind(r); k != kind(prev) || k == 3 {
				out = append(out, text[start:i])
				start = i
			}
		}
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

// diffClass is the class a run of a diff is shown with.
func diffClass(op diffmatchpatch.Operation) string {
	switch op {
	case diffmatchpatch.DiffDelete:
		return "diff-del"
	case diffmatchpatch.DiffInsert:
		return "diff-ins"
	}
	return "diff-same"
}

// editView is one edit on a history page: what it replaced (revision Number) and the change it made.
type editView struct {
	Number          int64
	Editor          string
	EditorID        int64
	At              time.Time
	Moderator       bool
	TitleDiff, Diff []diffPart // TitleDiff: an article's edit that changed the title
	Replaced        string     // the revision's source, whole
}

type revisionsPage struct {
	layout
	ArticleID int64
	CommentID int64 // 0 for the article's own history
	What      string
	// Current is the post's source now, the newest end of the history.
	Current, CurrentTitle string
	Edits                 []editView
	Older                 string // the next page's address, "" at the first revision
	// Hidden: moderation hides the post from this reader, and its history with it (its writer and moderators see
	// both).
	Hidden bool
}

// articleRevisions is an article's edit history.
func (s *Service) articleRevisions(w http.ResponseWriter, r *http.Request) error {
	articleID, err := articleIDOf(r)
	if err != nil {
		return err
	}
	before, err := queryNumber(r, "before", 0, maxPage)
	if err != nil {
		return err
	}
	v := s.reader(w, r)
	a, err := s.api.articleSource(r.Context(), v, articleID)
	if err != nil {
		return err
	}
	if a.Hidden != "" && !v.Owns(a.WriterID) {
		return s.render(w, r, http.StatusOK, revisionsView(revisionsPage{layout: s.pageLayout(r, v, "Edits of an article"),
			ArticleID: articleID, What: "article", Hidden: true}))
	}
	rs, err := s.api.revisions(r.Context(), v, "article", s.api.origins.Article, "/v1/articles/"+id(articleID)+"/revisions", before)
	if err != nil {
		return err
	}
	data := revisionsPage{layout: s.pageLayout(r, v, "Edits of "+a.Title), ArticleID: articleID, What: "article",
		Current: a.Content, CurrentTitle: a.Title}
	s.history(r.Context(), &data, rs, before, "/articles/"+id(articleID)+"/revisions")
	return s.render(w, r, http.StatusOK, revisionsView(data))
}

// commentRevisions is a comment's edit history.
func (s *Service) commentRevisions(w http.ResponseWriter, r *http.Request) error {
	articleID, err := articleIDOf(r)
	if err != nil {
		return err
	}
	commentID, err := commentIDOf(r)
	if err != nil {
		return err
	}
	before, err := queryNumber(r, "before", 0, maxPage)
	if err != nil {
		return err
	}
	v := s.reader(w, r)
	c, err := s.api.commentSource(r.Context(), v, commentID)
	if err != nil {
		return err
	}
	if c.ArticleID != articleID {
		return errNoComment
	}
	if c.Hidden != "" && !v.Owns(c.WriterID) {
		return s.render(w, r, http.StatusOK, revisionsView(revisionsPage{layout: s.pageLayout(r, v, "Edits of a comment"),
			ArticleID: articleID, CommentID: commentID, What: "comment", Hidden: true}))
	}
	rs, err := s.api.revisions(r.Context(), v, "comment", s.api.origins.Comment, "/v2/comments/"+id(commentID)+"/revisions", before)
	if err != nil {
		return err
	}
	data := revisionsPage{layout: s.pageLayout(r, v, "Edits of a comment"), ArticleID: articleID, CommentID: commentID,
		What: "comment", Current: c.Content}
	s.history(r.Context(), &data, rs, before, "/articles/"+id(articleID)+"/comments/"+id(commentID)+"/revisions")
	return s.render(w, r, http.StatusOK, revisionsView(data))
}

// history fills in a page's edits from rs, newest first: each edit's diff runs from the revision it replaced to the
// next newer one (the current source for the newest). A page past the first (before > 0) was read from revision
// before down: that one is the newer end of the page's newest edit, and is shown on the page before.
func (s *Service) history(ctx context.Context, p *revisionsPage, rs []revisionJSON, before int64, here string) {
	full := len(rs) == revisionsPerPage
	newerTitle, newer := p.CurrentTitle, p.Current
	if before > 0 && len(rs) > 0 && rs[0].Revision == before {
		newerTitle, newer = rs[0].Title, rs[0].Content
		rs = rs[1:]
	}
	ids := make([]int64, len(rs))
	for i, r := range rs {
		ids[i] = r.EditorID
	}
	names := s.names.lookup(ctx, ids)
	for _, r := range rs {
		e := editView{Number: r.Revision, Editor: names[r.EditorID], EditorID: r.EditorID, At: r.CreatedAt, Moderator: r.Moderator,
			Diff: textDiff(r.Content, newer), Replaced: r.Content}
		if r.Title != newerTitle {
			e.TitleDiff = textDiff(r.Title, newerTitle)
		}
		p.Edits = append(p.Edits, e)
		newerTitle, newer = r.Title, r.Content
	}
	if n := len(rs); full && n > 0 && rs[n-1].Revision > 1 {
		p.Older = here + "?before=" + id(rs[n-1].Revision)
	}
}

// errNoComment is the answer to an address of a comment that is not there.
var errNoComment = fault.NotFoundf("NO_COMMENT", "There is no such comment.")

// commentIDOf reads the path's {commentId}; an id that cannot exist is a missing comment.
func commentIDOf(r *http.Request) (int64, error) {
	n, err := apijson.Parse(r.PathValue("commentId"))
	if err != nil {
		return 0, errNoComment
	}
	return n, nil
}

type commentEditPage struct {
	layout
	formState
	ArticleID, CommentID int64
	Content              string
}

// editComment saves a comment's new content and goes back to it. One that could not be saved comes back in a form
// of its own, with the text kept.
func (s *Service) editComment(w http.ResponseWriter, r *http.Request) error {
	articleID, err := articleIDOf(r)
	if err != nil {
		return err
	}
	commentID, err := commentIDOf(r)
	if err != nil {
		return err
	}
	v, err := s.textForm(w, r)
	if err != nil {
		return err
	}
	data := commentEditPage{layout: s.pageLayout(r, v, "Edit your comment"), ArticleID: articleID, CommentID: commentID,
		Content: formText(r, "content")}
	page := func() templ.Component { return commentEditView(data) }
	if v == nil {
		return s.keepText(w, r, page, &data.formState, nil)
	}
	if _, err := s.api.updateComment(r.Context(), v, commentID, data.Content); err != nil {
		if hasCode(err, "COMMENT_DELETED") || hasCode(err, "COMMENT_NOT_FOUND") {
			return fault.NotFoundf("NO_COMMENT", "This comment was deleted, so it cannot be edited.")
		}
		return s.keepText(w, r, page, &data.formState, err)
	}
	to := "/articles/" + id(articleID)
	if cpage, err := strconv.ParseInt(r.PostFormValue("cpage"), 10, 64); err == nil && cpage > 1 && cpage <= maxPage {
		to += "?cpage=" + id(cpage)
	}
	http.Redirect(w, r, to+"#c-"+id(commentID), http.StatusSeeOther)
	return nil
}
