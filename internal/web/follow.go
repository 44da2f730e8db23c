package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"board/internal/apijson"
	"board/internal/fault"
	"board/internal/httpio"
)

// Following (SPEC §3.13): mentions, watches and bookmarks (the notification service), comment likes (the like
// service), the orders of a board and of a thread (article-read, comment), and blocks (the user service).

// watch is a reader's watch of an article or a board, as the notification service answers it.
type watch struct {
	TargetType string    `json:"targetType"`
	TargetID   int64     `json:"targetId,string"`
	Level      string    `json:"level"`
	CreatedAt  time.Time `json:"createdAt"`
}

// bookmark is a reader's bookmark of an article or a comment; a list's carries the title and an excerpt.
type bookmark struct {
	TargetType string    `json:"targetType"`
	TargetID   int64     `json:"targetId,string"`
	ArticleID  int64     `json:"articleId,string"`
	CreatedAt  time.Time `json:"createdAt"`
	Title      string    `json:"title"`
	Excerpt    string    `json:"excerpt"`
}

type bookmarkPage struct {
	Bookmarks  []bookmark `json:"bookmarks"`
	NextCursor string     `json:"nextCursor"`
}

// blockEntry is a user the reader blocked.
type blockEntry struct {
	UserID    int64     `json:"userId,string"`
	Username  string    `json:"username"`
	CreatedAt time.Time `json:"createdAt"`
}

// Watch levels as the pages name them: the notification service knows watching and muted; normal is no watch.
const (
	levelWatching = "watching"
	levelMuted    = "muted"
	levelNormal   = "normal"
)

func watchPath(targetType string, targetID int64) string {
	return "/v1/watches/" + targetType + "/" + id(targetID)
}

// watchLevel is v's watch of the target: watching, muted, or normal when there is none.
func (b *backend) watchLevel(ctx context.Context, v *viewer, targetType string, targetID int64) (string, error) {
	var out watch
	err := b.do(ctx, call{service: "notification", method: http.MethodGet, url: b.origins.Notification + watchPath(targetType, targetID), token: v.token}, &out)
	if statusOf(err) == http.StatusNotFound {
		return levelNormal, nil
	}
	return out.Level, err
}

// setWatch watches or mutes the target as v, or drops the watch for normal.
func (b *backend) setWatch(ctx context.Context, v *viewer, targetType string, targetID int64, level string) error {
	c := call{service: "notification", method: http.MethodDelete, url: b.origins.Notification + watchPath(targetType, targetID), token: v.token}
	if level != levelNormal {
		c.method, c.body = http.MethodPut, map[string]string{"level": level}
	}
	return b.do(ctx, c, nil)
}

func bookmarkPath(targetType string, targetID int64) string {
	return "/v1/bookmarks/" + targetType + "/" + id(targetID)
}

// bookmarked says whether v bookmarked the target.
func (b *backend) bookmarked(ctx context.Context, v *viewer, targetType string, targetID int64) (bool, error) {
	err := b.do(ctx, call{service: "notification", method: http.MethodGet, url: b.origins.Notification + bookmarkPath(targetType, targetID), token: v.token}, nil)
	if statusOf(err) == http.StatusNotFound {
		return false, nil
	}
	return err == nil, err
}

// setBookmark bookmarks the target as v, or removes the bookmark; both are idempotent in the service.
func (b *backend) setBookmark(ctx context.Context, v *viewer, targetType string, targetID int64, on bool) error {
	method := http.MethodPut
	if !on {
		method = http.MethodDelete
	}
	return b.do(ctx, call{service: "notification", method: method, url: b.origins.Notification + bookmarkPath(targetType, targetID), token: v.token}, nil)
}

// bookmarks is a page of v's bookmarks, newest first.
func (b *backend) bookmarks(ctx context.Context, v *viewer, cursor string, size int64) (bookmarkPage, error) {
	var p bookmarkPage
	q := url.Values{"pageSize": {id(size)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	err := b.do(ctx, call{service: "notification", method: http.MethodGet, url: b.origins.Notification + "/v1/bookmarks?" + q.Encode(), token: v.token}, &p)
	return p, err
}

func commentLikePath(commentID, userID int64) string {
	return "/v1/comment-likes/comments/" + id(commentID) + "/users/" + id(userID)
}

// commentLiked says whether the user likes the comment.
func (b *backend) commentLiked(ctx context.Context, commentID, userID int64) (bool, error) {
	err := b.do(ctx, call{service: "like", method: http.MethodGet, url: b.origins.Like + commentLikePath(commentID, userID)}, nil)
	if statusOf(err) == http.StatusNotFound {
		return false, nil
	}
	return err == nil, err
}

func (b *backend) commentLikeCount(ctx context.Context, commentID int64) (int64, error) {
	var n int64
	err := b.do(ctx, call{service: "like", method: http.MethodGet, url: b.origins.Like + "/v1/comment-likes/comments/" + id(commentID) + "/count"}, &n)
	return n, err
}

// setCommentLiked likes or unlikes the comment as v; as with articles, liking twice or unliking what is not liked
// is done, not an error.
func (b *backend) setCommentLiked(ctx context.Context, v *viewer, commentID int64, like bool, key string) error {
	method, already := http.MethodPost, http.StatusConflict
	if !like {
		method, already, key = http.MethodDelete, http.StatusNotFound, ""
	}
	err := b.do(ctx, call{service: "like", method: method, url: b.origins.Like + commentLikePath(commentID, v.ID), token: v.token, key: key}, nil)
	if statusOf(err) == already {
		return nil
	}
	return err
}

// blocks is the users v blocked.
func (b *backend) blocks(ctx context.Context, v *viewer) ([]blockEntry, error) {
	var out struct {
		Blocks []blockEntry `json:"blocks"`
	}
	err := b.do(ctx, call{service: "user", method: http.MethodGet, url: b.origins.User + "/v1/blocks", token: v.token}, &out)
	return out.Blocks, err
}

// setBlocked blocks or unblocks the user as v.
func (b *backend) setBlocked(ctx context.Context, v *viewer, userID int64, on bool) error {
	method := http.MethodPut
	if !on {
		method = http.MethodDelete
	}
	return b.do(ctx, call{service: "user", method: method, url: b.origins.User + "/v1/blocks/" + id(userID), token: v.token}, nil)
}

// usersNamed returns the users of the names that exist.
func (b *backend) usersNamed(ctx context.Context, names ...string) ([]userInfo, error) {
	var us []userInfo
	q := url.Values{"usernames": {strings.Join(names, ",")}}
	err := b.do(ctx, call{service: "user", method: http.MethodGet, url: b.origins.User + "/v1/users?" + q.Encode()}, &us)
	return us, err
}

// usersByPrefix returns up to limit users whose name starts with prefix, by name.
func (b *backend) usersByPrefix(ctx context.Context, prefix string, limit int64) ([]userInfo, error) {
	var us []userInfo
	q := url.Values{"prefix": {prefix}, "limit": {id(limit)}}
	err := b.do(ctx, call{service: "user", method: http.MethodGet, url: b.origins.User + "/v1/users?" + q.Encode()}, &us)
	return us, err
}

// Mentions.

// usernameSyntax is a username as the user service takes it (SPEC §3.7), in any case.
var usernameSyntax = regexp.MustCompile(`^[A-Za-z0-9_]{3,30}$`)

// mention is where a mention's link (/u/{name}, made by the Markdown renderer) goes: the user's page, or a 404 page
// when no one has the name.
func (s *Service) mention(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if !usernameSyntax.MatchString(name) {
		return fault.NotFoundf("NO_USER", "There is no such user.")
	}
	name = strings.ToLower(name)
	us, err := s.api.usersNamed(r.Context(), name)
	if err != nil {
		return err
	}
	for _, u := range us {
		if strings.EqualFold(u.Username, name) {
			http.Redirect(w, r, "/users/"+id(u.UserID), http.StatusFound)
			return nil
		}
	}
	return fault.NotFoundf("NO_USER", "There is no user called @%s.", name)
}

// suggestionLimit is how many names the mention autocomplete offers.
const suggestionLimit = 8

// prefixSyntax is the start of a username being typed.
var prefixSyntax = regexp.MustCompile(`^[a-z0-9_]{1,30}$`)

// usernames answers the script's autocomplete of a mention: the names that start with ?prefix=, as a JSON array.
// Usernames are public (GET /v1/users/{id} is), so no session is needed. Anything but a name's start is no names.
func (s *Service) usernames(w http.ResponseWriter, r *http.Request) {
	prefix := strings.ToLower(r.URL.Query().Get("prefix"))
	names := []string{}
	if prefixSyntax.MatchString(prefix) {
		us, err := s.api.usersByPrefix(r.Context(), prefix, suggestionLimit)
		if err != nil {
			s.cfg.Logger.WarnContext(r.Context(), "mention suggestions unavailable", "err", err)
			httpio.Write(w, http.StatusServiceUnavailable, map[string]string{"code": "UNAVAILABLE", "message": "Names cannot be suggested right now."})
			return
		}
		for _, u := range us {
			names = append(names, u.Username)
		}
	}
	// A reader typing a name asks for its starts one after another: the browser may keep each for a moment.
	w.Header().Set("Cache-Control", "private, max-age=30")
	httpio.Write(w, http.StatusOK, names)
}

// errResting is a page's extra not asked of a service that failed a moment ago.
var errResting = errors.New("not asked: the service failed a moment ago")

// notificationExtra makes a read of the notification service for what a page shows beside its content (a watch,
// bookmarks): as the bell's count, it waits at most bellTimeout, and is not made while the service rests after a
// failure. A page goes on without it.
func (s *Service) notificationExtra(ctx context.Context, read func(context.Context) error) error {
	if time.Now().UnixNano() < s.bellResting.Load() {
		return errResting
	}
	ctx, cancel := context.WithTimeout(ctx, bellTimeout)
	defer cancel()
	err := read(ctx)
	if st := statusOf(err); err != nil && (st == 0 || st >= 500) {
		s.bellResting.Store(time.Now().Add(bellRest).UnixNano())
	}
	return err
}

// Blocks: the reader's own, asked of the user service once in blocksFresh per reader (their pages in between use the
// same), and asked again at once after they block or unblock someone through this web.
const (
	blocksFresh   = 30 * time.Second
	blocksTimeout = 500 * time.Millisecond
	maxBlockSets  = 10_000
)

type blockSet struct {
	asked time.Time
	ids   map[int64]bool
}

type blockSets struct {
	mu   sync.Mutex
	sets map[int64]blockSet
}

// blocked is the set of users v blocked, nil for no reader. A user service that cannot say within blocksTimeout
// leaves the page unfiltered (logged), rather than failing or slowing it: ok is false then, and after a failure the
// blocks are not asked for nameRest.
func (s *Service) blocked(ctx context.Context, v *viewer) (set map[int64]bool, ok bool) {
	if v == nil {
		return nil, true
	}
	now := s.cfg.Now()
	s.blockSets.mu.Lock()
	bs, found := s.blockSets.sets[v.ID]
	s.blockSets.mu.Unlock()
	if found && now.Sub(bs.asked) < blocksFresh {
		return bs.ids, true
	}
	if time.Now().UnixNano() < s.blocksResting.Load() {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, blocksTimeout)
	defer cancel()
	list, err := s.api.blocks(ctx, v)
	if err != nil {
		s.cfg.Logger.WarnContext(ctx, "blocks unavailable; the page is shown unfiltered", "err", err)
		if st := statusOf(err); st == 0 || st >= 500 {
			s.blocksResting.Store(time.Now().Add(nameRest).UnixNano())
		}
		return nil, false
	}
	ids := make(map[int64]bool, len(list))
	for _, b := range list {
		ids[b.UserID] = true
	}
	s.blockSets.mu.Lock()
	defer s.blockSets.mu.Unlock()
	if len(s.blockSets.sets) >= maxBlockSets {
		for uid, old := range s.blockSets.sets {
			if now.Sub(old.asked) >= blocksFresh {
				delete(s.blockSets.sets, uid)
			}
		}
	}
	if len(s.blockSets.sets) < maxBlockSets {
		s.blockSets.sets[v.ID] = blockSet{asked: now, ids: ids}
	}
	return ids, true
}

// forgetBlocks drops the reader's kept blocks, so that their next page asks again.
func (s *Service) forgetBlocks(userID int64) {
	s.blockSets.mu.Lock()
	defer s.blockSets.mu.Unlock()
	delete(s.blockSets.sets, userID)
}

// block blocks or unblocks the path's user, and goes back to their page.
func (s *Service) block(on bool) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		userID, err := userIDOf(r)
		if err != nil {
			return err
		}
		v, ok, err := s.signedIn(w, r)
		if !ok {
			return err
		}
		if err := form(w, r); err != nil {
			return err
		}
		if v.ID == userID {
			return fault.Invalidf("SELF_BLOCK", "You cannot block yourself.")
		}
		if err := s.api.setBlocked(r.Context(), v, userID, on); err != nil {
			return err
		}
		s.forgetBlocks(v.ID)
		notice := "blocked"
		if !on {
			notice = "unblocked"
		}
		http.Redirect(w, r, "/users/"+id(userID)+"?notice="+notice, http.StatusSeeOther)
		return nil
	}
}

// Watches.

// watchBox is the watch buttons of an article or a board, a fragment the script swaps.
type watchBox struct {
	TargetType string // article or board
	TargetID   int64
	Level      string
	Back       string
}

// Action is the path of the box's form.
func (b watchBox) Action() string {
	if b.TargetType == "board" {
		return "/boards/" + id(b.TargetID) + "/watch"
	}
	return "/articles/" + id(b.TargetID) + "/watch"
}

// watchLevels are the levels a reader picks from, with what each does.
var watchLevels = []struct{ Value, Label, Help string }{
	{levelWatching, "Watch", "Tell me of every new comment"},
	{levelNormal, "Normal", "Tell me of replies and mentions only"},
	{levelMuted, "Mute", "Tell me of nothing here"},
}

// watchTarget reads the target of a watch form from its path: an article or a board of the site.
func (s *Service) watchTarget(r *http.Request, targetType string) (int64, error) {
	if targetType == "board" {
		b, err := s.boardOf(r)
		return b.ID, err
	}
	return articleIDOf(r)
}

// setWatch sets the reader's watch of the path's article or board to the level of the button pressed. The script
// gets the buttons back to swap in; a plain form goes back to the page it was on.
func (s *Service) setWatch(targetType string) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		targetID, err := s.watchTarget(r, targetType)
		if err != nil {
			return err
		}
		v, ok, err := s.signedIn(w, r)
		if !ok {
			return err
		}
		if err := form(w, r); err != nil {
			return err
		}
		level := r.PostFormValue("level")
		if level != levelWatching && level != levelMuted && level != levelNormal {
			return fault.Invalidf("BAD_LEVEL", "Choose to watch, mute, or neither.")
		}
		if err := s.api.setWatch(r.Context(), v, targetType, targetID, level); err != nil {
			return err
		}
		back := backTo(r, "/"+targetType+"s/"+id(targetID))
		if r.Header.Get("X-Fragment") != "" {
			return s.renderFragment(w, r, watchView(watchBox{TargetType: targetType, TargetID: targetID, Level: level, Back: back}))
		}
		http.Redirect(w, r, back+"#watch", http.StatusSeeOther)
		return nil
	}
}

// backTo is the page a form came from, as its "back" field names it (a path of this site, without a fragment), or
// def.
func backTo(r *http.Request, def string) string {
	back := r.PostFormValue("back")
	if back == "" {
		return def
	}
	back, _, _ = strings.Cut(localPath(back), "#")
	return back
}

// Bookmarks.

// bookmarkBox is the bookmark button of an article or a comment, a fragment the script swaps.
type bookmarkBox struct {
	ArticleID  int64
	TargetType string
	TargetID   int64
	On         bool
	Back       string
}

// DOMID is the box's element id.
func (b bookmarkBox) DOMID() string {
	if b.TargetType == "comment" {
		return "cb-" + id(b.TargetID)
	}
	return "bookmark"
}

// Action is the path of the box's form.
func (b bookmarkBox) Action() string {
	p := "/articles/" + id(b.ArticleID)
	if b.TargetType == "comment" {
		p += "/comments/" + id(b.TargetID)
	}
	if b.On {
		return p + "/unbookmark"
	}
	return p + "/bookmark"
}

// setBookmark bookmarks the path's article, or its comment, or removes the bookmark.
func (s *Service) setBookmark(targetType string, on bool) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		var commentID int64
		if targetType == "comment" {
			n, err := apijson.Parse(r.PathValue("commentId"))
			if err != nil {
				return fault.NotFoundf("NO_COMMENT", "There is no such comment.")
			}
			commentID = n
		}
		articleID, v, ok, err := s.articleAction(w, r)
		if !ok {
			return err
		}
		box := bookmarkBox{ArticleID: articleID, TargetType: targetType, TargetID: articleID, On: on, Back: backTo(r, "/articles/"+id(articleID))}
		if targetType == "comment" {
			box.TargetID = commentID
		}
		if err := s.api.setBookmark(r.Context(), v, targetType, box.TargetID, on); err != nil {
			return err
		}
		if r.Header.Get("X-Fragment") != "" {
			return s.renderFragment(w, r, bookmarkView(box))
		}
		anchor := "#bookmark"
		if targetType == "comment" {
			anchor = "#c-" + id(commentID)
		}
		http.Redirect(w, r, box.Back+anchor, http.StatusSeeOther)
		return nil
	}
}

// bookmarksPerPage is the bookmarks page's size.
const bookmarksPerPage = 20

type bookmarksPage struct {
	layout
	Items         []bookmark
	Cursor, Older string
}

// Link is where a bookmark goes: its article, or its comment in the thread.
func bookmarkLink(b bookmark) string {
	if b.TargetType == "comment" {
		return "/articles/" + id(b.ArticleID) + "#c-" + id(b.TargetID)
	}
	return "/articles/" + id(b.ArticleID)
}

// bookmarksList is the reader's bookmarks, newest first, 20 a page, each with a button that removes it.
func (s *Service) bookmarksList(w http.ResponseWriter, r *http.Request) error {
	cursor := r.URL.Query().Get("cursor")
	if len(cursor) > maxCursor {
		return fault.Invalidf("BAD_CURSOR", "This address does not name a page of your bookmarks.")
	}
	v, ok, err := s.signedIn(w, r)
	if !ok {
		return err
	}
	p, err := s.api.bookmarks(r.Context(), v, cursor, bookmarksPerPage)
	if err != nil {
		return err
	}
	data := bookmarksPage{layout: s.pageLayout(r, v, "Bookmarks"), Items: p.Bookmarks, Cursor: cursor}
	if p.NextCursor != "" {
		data.Older = "/bookmarks?cursor=" + url.QueryEscape(p.NextCursor)
	}
	return s.render(w, r, http.StatusOK, bookmarksView(data))
}

// removeBookmark removes a bookmark from the bookmarks page, and goes back to the page it was on.
func (s *Service) removeBookmark(w http.ResponseWriter, r *http.Request) error {
	v, ok, err := s.signedIn(w, r)
	if !ok {
		return err
	}
	if err := form(w, r); err != nil {
		return err
	}
	targetType := r.PostFormValue("targetType")
	targetID, err := apijson.Parse(r.PostFormValue("targetId"))
	if err != nil || targetType != "article" && targetType != "comment" {
		return fault.Invalidf("BAD_TARGET", "The form names no article or comment.")
	}
	if err := s.api.setBookmark(r.Context(), v, targetType, targetID, false); err != nil {
		return err
	}
	back := backTo(r, "/bookmarks")
	sep := "?"
	if strings.Contains(back, "?") {
		sep = "&"
	}
	http.Redirect(w, r, back+sep+"notice=unbookmarked", http.StatusSeeOther)
	return nil
}

// Comment likes.

// commentLikeBox is a comment's like button and count, a fragment the script swaps.
type commentLikeBox struct {
	ArticleID, CommentID int64
	SignedIn, Liked      bool
	Count                int64
	Back                 string
}

// commentLike likes or unlikes the path's comment. The script gets the button and the like service's count back;
// a plain form goes back to the comment.
func (s *Service) commentLike(like bool) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		commentID, err := apijson.Parse(r.PathValue("commentId"))
		if err != nil {
			return fault.NotFoundf("NO_COMMENT", "There is no such comment.")
		}
		articleID, v, ok, err := s.articleAction(w, r)
		if !ok {
			return err
		}
		if err := s.api.setCommentLiked(r.Context(), v, commentID, like, r.PostFormValue(formKeyField)); err != nil {
			return err
		}
		s.likedLately.counted(v.ID, commentID)
		back := backTo(r, "/articles/"+id(articleID))
		if r.Header.Get("X-Fragment") == "" {
			http.Redirect(w, r, back+"#c-"+id(commentID), http.StatusSeeOther)
			return nil
		}
		n, err := s.api.commentLikeCount(r.Context(), commentID)
		if err != nil {
			return err
		}
		return s.renderFragment(w, r, commentLikeView(commentLikeBox{ArticleID: articleID, CommentID: commentID, SignedIn: true,
			Liked: like, Count: n, Back: back}))
	}
}

// Sorts.

// sortOption is an order a list can be read in: its value in the address and the services, and its name.
type sortOption struct{ Value, Label string }

// boardSorts are a board's orders (article-read's, SPEC §3.13); the first is the default.
var boardSorts = []sortOption{{"newest", "Newest"}, {"top-day", "Top today"}, {"top-week", "Top this week"},
	{"top-month", "Top this month"}, {"top-all", "Top of all time"}, {"comments", "Most commented"}, {"active", "Active"}}

// threadSorts are a thread's orders (the comment service's); the first, the tree, is the default.
var threadSorts = []sortOption{{"oldest", "Oldest first"}, {"newest", "Newest first"}, {"top", "Most liked"}}

// sortOf reads ?sort= as one of options ("" for the default, so that its addresses stay as they were).
func sortOf(r *http.Request, options []sortOption) (string, error) {
	raw := r.URL.Query().Get("sort")
	if raw == "" || raw == options[0].Value {
		return "", nil
	}
	for _, o := range options {
		if o.Value == raw {
			return raw, nil
		}
	}
	return "", fault.Invalidf("BAD_SORT", "This list cannot be sorted that way.")
}

// sortQuery is the query that starts an address in the sort ("" for the default): "?sort=top&" or "?".
func sortQuery(sort string) string {
	if sort == "" {
		return "?"
	}
	return "?sort=" + sort + "&"
}

// sortLink is the address of a list in the sort (the default: none).
func sortLink(base, sort string) string {
	if sort == "" {
		return base
	}
	return base + "?sort=" + sort
}

// sortLabel is how a board page names its sort in its title.
func sortLabel(options []sortOption, sort string) string {
	for _, o := range options {
		if o.Value == sort {
			return o.Label
		}
	}
	return options[0].Label
}
