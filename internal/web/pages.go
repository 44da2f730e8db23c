package web

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"board/internal/apijson"
	"board/internal/fault"
)

// layout is what every page shows around its content.
type layout struct {
	Title string
	// Description is the page's summary for search engines and link previews ("": the site's own).
	Description string
	// Kind is the page's Open Graph type: "article" on an article's page, "website" elsewhere.
	Kind   string
	Viewer *viewer
	Notice string
	MainID string // "error" on an error page
	// Here is the page's own address, for the sign-in link that comes back to it.
	Here string
	// Bell shows the signed-in reader's notifications, with their unread count when UnreadKnown.
	Bell        bool
	Unread      int64
	UnreadKnown bool
}

// notices are the messages an action leaves for the page it redirects to, by the key in ?notice=: fixed texts, so
// that a link cannot make the site say anything else.
var notices = map[string]string{
	"deleted":   "The article was deleted.",
	"signedout": "You are signed out.",
	"welcome":   "Welcome! Your account is ready and you are signed in.",
	"created":   "Your account is ready. Please sign in with it.",
	"signedin":  "You are signed in.",
	// Moderation.
	"reported":        "Thank you: your report was sent to the moderators.",
	"alreadyreported": "You have reported this already; the moderators have your report.",
	"locked":          "The article is locked: no new comments. The page shows it in a moment.",
	"unlocked":        "The article is unlocked. The page shows it in a moment.",
	"pinned":          "The article is pinned to the top of its board. The page shows it in a moment.",
	"unpinned":        "The article is no longer pinned. The page shows it in a moment.",
	"dismissed":       "The reports were dismissed.",
	"removed":         "It was removed; its reason is shown in its place.",
	"banned":          "The user is banned.",
	"unbanned":        "The user is no longer banned.",
	// Following.
	"blocked":      "You blocked this user. Their articles are left out of your board lists and their comments are folded.",
	"unblocked":    "You unblocked this user.",
	"unbookmarked": "The bookmark was removed.",
	// Notifications.
	"markedread":  "The notification is marked read.",
	"allread":     "All your notifications are marked read.",
	"preferences": "Your notification preferences are saved.",
	// Accounts.
	"emailsent":       "If that address can be used, a link to verify it is on its way to it. The link works for 24 hours.",
	"passwordchanged": "Your password is changed. Every other session of your account is ended; this one goes on.",
	"sessionsended":   "Every other session of your account is ended; this one goes on.",
	"emailpreference": "Your notification e-mail choice is saved.",
	"connected":       "The provider's account is connected: you may sign in with it.",
	"disconnected":    "The provider's account is disconnected: it no longer signs in to yours.",
	"passwordreset":   "Your password is set. Sign in with it.",
	"accountdeleted":  "Your account is deleted and you are signed out.",
}

func (s *Service) layout(r *http.Request, title string) layout {
	here := ""
	if r.Method == http.MethodGet {
		// Without its notice: the page signed in to again is not the moment of the action.
		u := *r.URL
		q := u.Query()
		q.Del("notice")
		u.RawQuery = q.Encode()
		here = u.RequestURI()
	}
	return layout{Title: title, Notice: notices[r.URL.Query().Get("notice")], MainID: "main", Here: here}
}

// pageLayout is layout for a page with its viewer.
func (s *Service) pageLayout(r *http.Request, v *viewer, title string) layout {
	l := s.layout(r, title)
	l.Viewer = v
	if v != nil && s.cfg.Origins.Notification != "" {
		l.Bell = true
		l.Unread, l.UnreadKnown = v.unread.get()
	}
	return l
}

// item is an article as a list shows it.
type item struct {
	ID                     int64
	Title, Writer          string
	CreatedAt              time.Time
	Likes, Comments, Views int64
	Pinned                 bool
	Hidden                 string
}

func (s *Service) items(ctx context.Context, as []articleRead) []item {
	writers := make([]int64, len(as))
	for i, a := range as {
		writers[i] = a.WriterID
	}
	names := s.names.lookup(ctx, writers)
	out := make([]item, len(as))
	for i, a := range as {
		out[i] = item{ID: a.ArticleID, Title: a.Title, Writer: names[a.WriterID], CreatedAt: a.CreatedAt,
			Likes: a.ArticleLikeCount, Comments: a.ArticleCommentCount, Views: a.ArticleViewCount, Pinned: a.Pinned, Hidden: a.Hidden}
	}
	return out
}

type homePage struct {
	layout
	Boards         []Board
	Hot            []hotArticle
	HotUnavailable bool
}

func (s *Service) home(w http.ResponseWriter, r *http.Request) error {
	v := s.reader(w, r)
	hot, err := s.api.hot(r.Context(), s.cfg.Now().In(s.cfg.Location).Format(dayLayout))
	if err != nil {
		s.cfg.Logger.WarnContext(r.Context(), "hot articles unavailable on the home page", "err", err)
	}
	l := s.pageLayout(r, v, "Boards")
	l.Description = "The boards of board, and the day's hottest articles."
	return s.render(w, r, http.StatusOK, homeView(homePage{layout: l, Boards: s.cfg.Boards, Hot: hot, HotUnavailable: err != nil}))
}

// boardOf returns the board named by the path's {boardId}.
func (s *Service) boardOf(r *http.Request) (Board, error) {
	n, err := apijson.Parse(r.PathValue("boardId"))
	b, ok := s.boards[n]
	if err != nil || !ok {
		return Board{}, fault.NotFoundf("NO_BOARD", "There is no such board.")
	}
	return b, nil
}

// queryNumber reads an optional number of 1..max from the query.
func queryNumber(r *http.Request, name string, def, max int64) (int64, error) {
	raw := r.URL.Query().Get(name)
	if raw == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 1 || n > max {
		return 0, fault.Invalidf("BAD_"+name, "The %s in the address must be a whole number from 1 to %d.", name, max)
	}
	return n, nil
}

// maxPage bounds page numbers: far past any board's end, and inside what the services take.
const maxPage = 1_000_000

type boardPage struct {
	layout
	Board    Board
	Sort     string // "" for the default, newest first
	Articles []item
	Pager    pager
	// Watch is the reader's watch of the board, nil when it is not shown (signed out, or not known).
	Watch *watchBox
}

// board is a page of a board's articles in the sort (newest first by default), with page numbers in blocks of
// ten: one call to article-read, and one to the user service for writers not seen before. A signed-in reader's
// page leaves out the articles of the users they blocked, and has their watch of the board.
func (s *Service) board(w http.ResponseWriter, r *http.Request) error {
	b, err := s.boardOf(r)
	if err != nil {
		return err
	}
	sort, err := sortOf(r, boardSorts)
	if err != nil {
		return err
	}
	page, err := queryNumber(r, "page", 1, maxPage)
	if err != nil {
		return err
	}
	v := s.reader(w, r)
	ctx := r.Context()
	var (
		wg      sync.WaitGroup
		p       articleListPage
		pageErr error
		blocked map[int64]bool
	)
	wg.Go(func() { p, pageErr = s.api.articlePage(ctx, b.ID, sort, page, articlesPerPage) })
	if v != nil {
		wg.Go(func() { blocked, _ = s.blocked(ctx, v) })
	}
	watch := s.askWatch(ctx, &wg, v, "board", b.ID)
	wg.Wait()
	if pageErr != nil {
		return pageErr
	}
	title, description := b.Name, "The newest articles in "+b.Name+" on board."
	if sort != "" {
		title += " · " + sortLabel(boardSorts, sort)
		description = "Articles in " + b.Name + " on board: " + sortLabel(boardSorts, sort) + "."
	}
	if page > 1 {
		title += " · page " + strconv.FormatInt(page, 10)
		description = "Articles in " + b.Name + " on board, page " + strconv.FormatInt(page, 10) + "."
	}
	l := s.pageLayout(r, v, title)
	l.Description = description
	return s.render(w, r, http.StatusOK, boardView(boardPage{layout: l, Board: b, Sort: sort,
		Articles: s.items(ctx, unblocked(p.Articles, blocked)), Watch: watch.box(l.Here),
		Pager: newPager("pages", "Pages", "/boards/"+id(b.ID)+sortQuery(sort)+"page=", page, articlesPerPage, p.ArticleCount)}))
}

// unblocked is as without the articles of the writers in blocked.
func unblocked(as []articleRead, blocked map[int64]bool) []articleRead {
	if len(blocked) == 0 {
		return as
	}
	out := make([]articleRead, 0, len(as))
	for _, a := range as {
		if !blocked[a.WriterID] {
			out = append(out, a)
		}
	}
	return out
}

// pendingWatch is a reader's watch of a target, being asked beside a page's other calls.
type pendingWatch struct {
	targetType string
	targetID   int64
	level      string
	err        error
}

// askWatch starts asking v's watch of the target in wg, nil when there is no reader or no notification service.
func (s *Service) askWatch(ctx context.Context, wg *sync.WaitGroup, v *viewer, targetType string, targetID int64) *pendingWatch {
	if v == nil || s.cfg.Origins.Notification == "" {
		return nil
	}
	pw := &pendingWatch{targetType: targetType, targetID: targetID}
	wg.Go(func() {
		pw.err = s.notificationExtra(ctx, func(ctx context.Context) (err error) {
			pw.level, err = s.api.watchLevel(ctx, v, targetType, targetID)
			return err
		})
		if pw.err != nil {
			s.cfg.Logger.WarnContext(ctx, "watch unknown; its buttons are left out", "target", targetType, "id", targetID, "err", pw.err)
		}
	})
	return pw
}

// box is the watch's buttons once asked, on the page at here; nil when they are not shown.
func (pw *pendingWatch) box(here string) *watchBox {
	if pw == nil || pw.err != nil {
		return nil
	}
	return &watchBox{TargetType: pw.targetType, TargetID: pw.targetID, Level: pw.level, Back: here}
}

type scrollPage struct {
	layout
	Board    Board
	Sort     string
	Articles []item
	More     string // the address of the next chunk; "" at the end
}

// scroll is a board as one endless list in the sort: the articles after ?after= (from the first without it). A
// script asks for the next chunk alone (X-Fragment) as the reader nears its end; without script, the "More" link is
// a page. A signed-in reader's chunks leave out the articles of the users they blocked.
func (s *Service) scroll(w http.ResponseWriter, r *http.Request) error {
	b, err := s.boardOf(r)
	if err != nil {
		return err
	}
	sort, err := sortOf(r, boardSorts)
	if err != nil {
		return err
	}
	after, err := queryNumber(r, "after", 0, math.MaxInt64)
	if err != nil {
		return err
	}
	v := s.reader(w, r)
	ctx := r.Context()
	var (
		wg      sync.WaitGroup
		as      []articleRead
		asErr   error
		blocked map[int64]bool
	)
	wg.Go(func() { as, asErr = s.api.articleScroll(ctx, b.ID, sort, articlesPerPage, after) })
	if v != nil {
		wg.Go(func() { blocked, _ = s.blocked(ctx, v) })
	}
	wg.Wait()
	if asErr != nil {
		return asErr
	}
	data := scrollPage{layout: s.pageLayout(r, v, b.Name), Board: b, Sort: sort, Articles: s.items(ctx, unblocked(as, blocked))}
	data.Description = "The newest articles in " + b.Name + " on board."
	if sort != "" {
		data.Title += " · " + sortLabel(boardSorts, sort)
		data.Description = "Articles in " + b.Name + " on board: " + sortLabel(boardSorts, sort) + "."
	}
	// The next chunk starts after the last article article-read gave, shown or left out.
	if len(as) == articlesPerPage {
		data.More = "/boards/" + id(b.ID) + "/scroll" + sortQuery(sort) + "after=" + id(as[len(as)-1].ArticleID)
	}
	if r.Header.Get("X-Fragment") != "" {
		return s.renderFragment(w, r, scrollChunk(data))
	}
	return s.render(w, r, http.StatusOK, scrollView(data))
}

// articleView is an article as its page shows it.
type articleView struct {
	ID, BoardID, WriterID      int64
	Title, Content, Writer     string
	ContentHTML                string // the content as the article service rendered it, shown as it is
	CreatedAt, ModifiedAt      time.Time
	Likes, CommentCount, Views int64
	Locked, Pinned             bool
	// Hidden and RemovedReason say why the content is not shown; HiddenShown, that it is shown all the same, to
	// its writer or a moderator.
	Hidden, RemovedReason string
	HiddenShown           bool
}

// Edited says whether the article changed after it was written.
func (a articleView) Edited() bool { return a.ModifiedAt.After(a.CreatedAt) }

// commentView is a comment as the thread shows it.
type commentView struct {
	ID, WriterID                   int64
	Path                           string
	Depth                          int
	Content, Writer                string
	ContentHTML                    string // the content as the comment service rendered it, shown as it is
	CreatedAt                      time.Time
	Deleted                        bool
	Hidden, RemovedReason          string
	CanReply, CanDelete, CanReport bool
	// Edited links to the comment's history (revisions.go); CanEdit: its writer or a moderator, and on a locked
	// article a moderator only.
	Edited     bool
	ModifiedAt time.Time
	CanEdit    bool
	// Like is its like button and count (nil: a deleted or hidden comment, which takes none); Bookmark, the reader's
	// bookmark button (nil: none shown).
	Like     *commentLikeBox
	Bookmark *bookmarkBox
	// Blocked: by a user the reader blocked, folded under a placeholder.
	Blocked bool
	// ReplyTo names the comment this one answers, in a flat order (newest, top): its writer, and its id when it is
	// on the page ("" and 0 for a comment that answers the article).
	ReplyTo   string
	ReplyToID int64
	IsReply   bool
}

// likeBox is the like button and count, a fragment of the article page.
type likeBox struct {
	ArticleID int64
	SignedIn  bool
	Liked     bool
	Count     int64
}

type articlePage struct {
	layout
	Board     Board
	Article   articleView
	CanChange bool
	// CanReport: a signed-in reader who did not write it; CanComment: not locked, or a moderator.
	CanReport, CanComment bool
	Like                  likeBox
	// Watch and Bookmark are the reader's buttons for the article (nil: not shown).
	Watch               *watchBox
	Bookmark            *bookmarkBox
	Sort                string // the thread's order, "" for the tree
	Comments            []commentView
	CommentsUnavailable bool
	CommentPager        pager
}

// Flat says whether the thread is a flat list (newest, top) rather than the tree.
func (p articlePage) Flat() bool { return p.Sort != "" }

// maxDepth is the deepest a comment may be (SPEC §3.2: five levels of five characters).
const (
	maxDepth   = 5
	pathPerLvl = 5
)

// bookmarksSeen is how many of the reader's newest bookmarks an article page reads to mark what is bookmarked: one
// call for the article and all its comments (the service answers one target at a time otherwise).
const bookmarksSeen = 100

// article is an article with its comment thread: article-read and the comment service asked at once, and for a
// signed-in reader whether they like it, their watch of it, their newest bookmarks and their blocks; then usernames
// not seen before, and whether they like the comments that have likes. A signed-in reader's visit is counted as a
// view behind the page (the view service counts one per reader per 10 minutes).
func (s *Service) article(w http.ResponseWriter, r *http.Request) error {
	articleID, err := articleIDOf(r)
	if err != nil {
		return err
	}
	sort, err := sortOf(r, threadSorts)
	if err != nil {
		return err
	}
	cpage, err := queryNumber(r, "cpage", 1, maxPage)
	if err != nil {
		return err
	}
	since, err := queryNumber(r, "since", 0, math.MaxInt64)
	if err != nil {
		return err
	}
	v := s.reader(w, r)
	ctx := r.Context()
	var (
		wg          sync.WaitGroup
		a           articleRead
		articleErr  error
		comments    commentPage
		commentsErr error
		liked       bool
		likedErr    error
		blocked     map[int64]bool
		marks       bookmarkPage
		marksErr    error
		bookmarksOn = v != nil && s.cfg.Origins.Notification != ""
	)
	wg.Go(func() { a, articleErr = s.api.article(ctx, articleID) })
	wg.Go(func() { comments, commentsErr = s.api.comments(ctx, v, articleID, sort, cpage, commentsPerPage) })
	if v != nil {
		wg.Go(func() { liked, likedErr = s.api.liked(ctx, articleID, v.ID) })
		wg.Go(func() { blocked, _ = s.blocked(ctx, v) })
	}
	if bookmarksOn {
		wg.Go(func() {
			marksErr = s.notificationExtra(ctx, func(ctx context.Context) (err error) {
				if marks, err = s.api.bookmarks(ctx, v, "", bookmarksSeen); err != nil || marks.NextCursor == "" {
					return err
				}
				// More bookmarks than the page read: the article's own button asks for it by name (its comments' may
				// show an older bookmark as none; a second one is harmless, a bookmark keeps its first date).
				var on bool
				if on, err = s.api.bookmarked(ctx, v, "article", articleID); on {
					marks.Bookmarks = append(marks.Bookmarks, bookmark{TargetType: "article", TargetID: articleID, ArticleID: articleID})
				}
				return err
			})
		})
	}
	watch := s.askWatch(ctx, &wg, v, "article", articleID)
	wg.Wait()
	if articleErr != nil {
		return articleErr
	}
	if commentsErr != nil {
		s.cfg.Logger.WarnContext(ctx, "comments unavailable on an article page", "article", articleID, "err", commentsErr)
	}
	if likedErr != nil {
		s.cfg.Logger.WarnContext(ctx, "like state unavailable on an article page", "article", articleID, "err", likedErr)
	}
	if marksErr != nil {
		s.cfg.Logger.WarnContext(ctx, "bookmarks unavailable on an article page; their buttons are left out", "err", marksErr)
		bookmarksOn = false
	}
	// Read your writes: the page a writer lands on after an edit names the edit's time, and a read model that has
	// not applied the edit yet is passed over for the article service.
	if since > 0 && a.ModifiedAt.UnixMilli() < since {
		if src, err := s.api.articleSource(ctx, v, articleID); err == nil {
			a.Title, a.Content, a.ContentHTML, a.ContentText, a.ModifiedAt = src.Title, src.Content, src.ContentHTML, src.ContentText, src.ModifiedAt
		}
	}
	// A hidden article is a placeholder in the read model, which is public; its writer and moderators are shown
	// the article service's own, which their token opens.
	hiddenShown := false
	if a.Hidden != "" && v.Owns(a.WriterID) {
		if src, err := s.api.articleSource(ctx, v, articleID); err == nil {
			a.Title, a.Content, a.ContentHTML, hiddenShown = src.Title, src.Content, src.ContentHTML, true
		} else {
			s.cfg.Logger.WarnContext(ctx, "a hidden article not shown to its writer or a moderator", "article", articleID, "err", err)
		}
	}

	writers := []int64{a.WriterID}
	for _, c := range comments.Comments {
		writers = append(writers, c.WriterID)
	}
	var (
		names      map[int64]string
		likedByYou map[int64]bool
	)
	wg.Go(func() { names = s.names.lookup(ctx, writers) })
	if v != nil {
		wg.Go(func() { likedByYou = s.commentsLiked(ctx, v, comments.Comments) })
	}
	wg.Wait()
	board := s.boardNamed(a.BoardID)
	l := s.pageLayout(r, v, a.Title)
	l.Kind = "article"
	// A hidden article's text is not for everyone: its page is described as the reason stands in for it.
	if l.Description = summary(a.ContentText); a.Hidden != "" || l.Description == "" {
		l.Description = "An article in " + board.Name + " on board."
	}
	data := articlePage{
		layout: l,
		Board:  board,
		Article: articleView{ID: articleID, BoardID: a.BoardID, WriterID: a.WriterID, Title: a.Title, Content: a.Content,
			ContentHTML: a.ContentHTML, Writer: names[a.WriterID], CreatedAt: a.CreatedAt,
			ModifiedAt: a.ModifiedAt, Likes: a.ArticleLikeCount, CommentCount: a.ArticleCommentCount, Views: a.ArticleViewCount,
			Locked: a.Locked, Pinned: a.Pinned, Hidden: a.Hidden, RemovedReason: a.RemovedReason, HiddenShown: hiddenShown},
		CanChange:           v.Owns(a.WriterID),
		CanReport:           v != nil && v.ID != a.WriterID && a.Hidden != "removed",
		CanComment:          v != nil && (!a.Locked || v.Moderator()),
		Like:                likeBox{ArticleID: articleID, SignedIn: v != nil, Liked: liked, Count: a.ArticleLikeCount},
		Watch:               watch.box(l.Here),
		Sort:                sort,
		CommentsUnavailable: commentsErr != nil,
		CommentPager: newPager("comment-pages", "Comment pages", "/articles/"+id(articleID)+sortQuery(sort)+"cpage=", cpage,
			commentsPerPage, comments.CommentCount),
	}
	data.CommentPager.Fragment = "#comments"
	bookmarked := map[[2]int64]bool{}
	for _, b := range marks.Bookmarks {
		bookmarked[[2]int64{b.TargetID, typeCode(b.TargetType)}] = true
	}
	if bookmarksOn {
		data.Bookmark = &bookmarkBox{ArticleID: articleID, TargetType: "article", TargetID: articleID,
			On: bookmarked[[2]int64{articleID, typeCode("article")}], Back: l.Here}
	}
	byPath := map[string]comment{}
	for _, c := range comments.Comments {
		byPath[c.Path] = c
	}
	for _, c := range comments.Comments {
		if c.Hidden != "" && !v.Owns(c.WriterID) {
			c.Content, c.ContentHTML = "", "" // what the reason stands in place of: only its writer and moderators see it
		}
		depth := len(c.Path) / pathPerLvl
		cv := commentView{ID: c.CommentID, WriterID: c.WriterID, Path: c.Path, Depth: depth, Content: c.Content,
			ContentHTML: c.ContentHTML, Writer: names[c.WriterID], CreatedAt: c.CreatedAt, Deleted: c.Deleted, Hidden: c.Hidden, RemovedReason: c.RemovedReason,
			CanReply: data.CanComment && !c.Deleted && depth < maxDepth, CanDelete: !c.Deleted && v.Owns(c.WriterID),
			CanReport: v != nil && v.ID != c.WriterID && !c.Deleted && c.Hidden != "removed",
			Edited:    c.Edited && !c.Deleted, ModifiedAt: c.ModifiedAt, CanEdit: !c.Deleted && v.Owns(c.WriterID) && (!a.Locked || v.Moderator()),
			Blocked: blocked[c.WriterID] && !c.Deleted}
		if !c.Deleted && c.Hidden == "" {
			cv.Like = &commentLikeBox{ArticleID: articleID, CommentID: c.CommentID, SignedIn: v != nil, Liked: likedByYou[c.CommentID],
				Count: c.LikeCount, Back: l.Here}
			if bookmarksOn {
				cv.Bookmark = &bookmarkBox{ArticleID: articleID, TargetType: "comment", TargetID: c.CommentID,
					On: bookmarked[[2]int64{c.CommentID, typeCode("comment")}], Back: l.Here}
			}
		}
		if data.Flat() && depth > 1 {
			cv.IsReply = true
			if parent, ok := byPath[c.Path[:len(c.Path)-pathPerLvl]]; ok {
				cv.ReplyTo, cv.ReplyToID = names[parent.WriterID], parent.CommentID
				if blocked[parent.WriterID] {
					cv.ReplyTo = "a user you blocked"
				}
			}
		}
		data.Comments = append(data.Comments, cv)
	}
	if v != nil && r.Method == http.MethodGet { // a HEAD is no visit
		s.countView(v, articleID)
	}
	return s.render(w, r, http.StatusOK, articlePageView(data))
}

// typeCode tells an article's id from a comment's in one map key.
func typeCode(targetType string) int64 {
	if targetType == "comment" {
		return 1
	}
	return 0
}

// commentLikeAsks bounds the like service calls a page makes at once to learn which comments the reader likes.
const commentLikeAsks = 8

// commentsLiked says which of comments v likes. The like service answers one comment at a time, so only the
// comments it can be true of are asked: those with likes, and those v liked or unliked through this web lately (a
// comment's count follows its likes a moment later). A failure is logged and shown as not liked.
func (s *Service) commentsLiked(ctx context.Context, v *viewer, comments []comment) map[int64]bool {
	var ask []int64
	for _, c := range comments {
		if !c.Deleted && c.Hidden == "" && (c.LikeCount > 0 || s.likedLately.recent(v.ID, c.CommentID)) {
			ask = append(ask, c.CommentID)
		}
	}
	out := make(map[int64]bool, len(ask))
	// The asks share one deadline, as the page's other extras, and the first failure ends them: a slow or failing
	// like service costs a page at most bellTimeout, not a timeout per comment.
	ctx, cancel := context.WithTimeout(ctx, bellTimeout)
	defer cancel()
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		tokens = make(chan struct{}, commentLikeAsks)
	)
	for _, cid := range ask {
		tokens <- struct{}{}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-tokens }()
			liked, err := s.api.commentLiked(ctx, cid, v.ID)
			if err != nil {
				cancel()
				s.cfg.Logger.WarnContext(ctx, "comment like state unavailable", "comment", cid, "err", err)
				return
			}
			mu.Lock()
			out[cid] = liked
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// countView counts the visit behind the page: a slow view service must not slow the page, and a failed count is
// only logged. At most maxViewsInFlight are sent at once; past that, while the view service is slow or hung, a
// visit goes uncounted rather than piling up goroutines and connections. A view this web counted less than
// viewDedupe ago is not sent again: the view service would count it as nothing.
func (s *Service) countView(v *viewer, articleID int64) {
	if s.views.recent(v.ID, articleID) {
		return
	}
	select {
	case s.viewsInFlight <- struct{}{}:
	default:
		s.cfg.Logger.Warn("a view was not counted: too many views in flight", "article", articleID, "user", v.ID)
		return
	}
	go func() {
		defer func() { <-s.viewsInFlight }()
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if err := s.api.view(ctx, v, articleID); err != nil {
			s.cfg.Logger.Warn("a view was not counted", "article", articleID, "user", v.ID, "err", err)
			return
		}
		s.views.counted(v.ID, articleID)
	}()
}

// viewDedupe is how long the view service counts a reader's views of an article as one (SPEC §5.2).
const viewDedupe = 10 * time.Minute

// maxRecentViews bounds the memory of views counted; when full, it starts over.
const maxRecentViews = 100_000

// recentViews remembers when this web last had a reader's view of an article counted (and, as likedLately, when a
// reader liked or unliked a comment: the pair is then user and comment).
type recentViews struct {
	now func() time.Time
	mu  sync.Mutex
	at  map[[2]int64]time.Time // by user id and article id
}

func newRecentViews(now func() time.Time) *recentViews {
	return &recentViews{now: now, at: map[[2]int64]time.Time{}}
}

func (rv *recentViews) recent(userID, articleID int64) bool {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	at, ok := rv.at[[2]int64{userID, articleID}]
	return ok && rv.now().Sub(at) < viewDedupe
}

func (rv *recentViews) counted(userID, articleID int64) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if len(rv.at) >= maxRecentViews {
		clear(rv.at)
	}
	rv.at[[2]int64{userID, articleID}] = rv.now()
}

// boardNamed is the board of an article, named even when the configuration does not list it.
func (s *Service) boardNamed(boardID int64) Board {
	if b, ok := s.boards[boardID]; ok {
		return b
	}
	return Board{ID: boardID, Name: "Board " + id(boardID)}
}

// dayLayout is how hot-article names a day in its path.
const dayLayout = "20060102"

type hotPage struct {
	layout
	Day, Today time.Time
	Prev, Next string // the days before and after, as ?date= values; Next is "" for today
	Hot        []hotArticle
}

// hot is a day's hot articles, today's by default, in hot-article's time zone: one call.
func (s *Service) hot(w http.ResponseWriter, r *http.Request) error {
	today := s.cfg.Now().In(s.cfg.Location)
	today = time.Date(today.Year(), today.Month(), today.Day(), 0, 0, 0, 0, s.cfg.Location)
	day := today
	if raw := r.URL.Query().Get("date"); raw != "" {
		var err error
		// The date picker sends 2006-01-02; links send hot-article's own 20060102.
		if day, err = time.ParseInLocation(dayLayout, raw, s.cfg.Location); err != nil {
			if day, err = time.ParseInLocation(time.DateOnly, raw, s.cfg.Location); err != nil {
				return fault.Invalidf("BAD_DATE", "The date must look like 2026-11-22.")
			}
		}
	}
	v := s.reader(w, r)
	hot, err := s.api.hot(r.Context(), day.Format(dayLayout))
	if err != nil {
		return err
	}
	data := hotPage{layout: s.pageLayout(r, v, "Hot articles"), Day: day, Today: today, Hot: hot,
		Prev: day.AddDate(0, 0, -1).Format(dayLayout)}
	data.Description = "The hottest articles on board on " + day.Format("Monday, 2 January 2006") + ", by likes, comments and views."
	if day.Before(today) {
		data.Next = day.AddDate(0, 0, 1).Format(dayLayout)
	}
	return s.render(w, r, http.StatusOK, hotView(data))
}
