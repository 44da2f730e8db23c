package web

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/fault"
)

// The pages of moderation (SPEC §3.9): reports from any signed-in reader; the queue, locks, pins and bans for
// moderators; the public log. The moderation service decides who may do what; the pages only leave out the
// buttons a reader may not use.

// The error codes of the services the pages say more about than their message.
const (
	codeBanned       = "BANNED"
	codeLocked       = "LOCKED"
	codeReportExists = "REPORT_EXISTS"
)

// bannedMessage is what a banned reader is told when a write is refused.
func bannedMessage(b *banInfo) string {
	end := "for good"
	if b.Until != nil {
		end = "until " + utc(*b.Until)
	}
	msg := "You are banned " + end
	if b.Reason != "" {
		msg += ": " + b.Reason
	}
	return msg + "."
}

// reportReason is a reason a reader may give for a report, as the moderation service names it.
type reportReason struct{ Value, Label string }

var reportReasons = []reportReason{{"spam", "Spam"}, {"abuse", "Abuse or harassment"}, {"off-topic", "Off-topic"}, {"other", "Something else"}}

// reasonLabel is how a page names a report's reason.
func reasonLabel(value string) string {
	for _, r := range reportReasons {
		if r.Value == value {
			return r.Label
		}
	}
	return value
}

type reportPage struct {
	layout
	formState
	ArticleID    int64
	TargetType   string
	TargetID     int64
	CPage        string
	Reason, Text string
}

// reportContent reports the article of the path, or one of its comments, and goes back to it with a notice: sent,
// or already sent before. A report the service refused comes back in a form of its own, its text kept.
func (s *Service) reportContent(w http.ResponseWriter, r *http.Request) error {
	articleID, err := articleIDOf(r)
	if err != nil {
		return err
	}
	v, err := s.textForm(w, r)
	if err != nil {
		return err
	}
	data := reportPage{layout: s.pageLayout(r, v, "Report"), ArticleID: articleID, TargetType: r.PostFormValue("targetType"),
		Reason: r.PostFormValue("reason"), Text: formText(r, "text")}
	switch data.TargetType {
	case "article":
		data.TargetID = articleID
	case "comment":
		if data.TargetID, err = apijson.Parse(r.PostFormValue("targetId")); err != nil {
			return fault.NotFoundf("NO_COMMENT", "There is no such comment.")
		}
	default:
		return fault.Invalidf("BAD_TARGET", "Only an article or a comment can be reported.")
	}
	if cpage, err := strconv.ParseInt(r.PostFormValue("cpage"), 10, 64); err == nil && cpage > 1 && cpage <= maxPage {
		data.CPage = id(cpage)
	}
	if v == nil {
		return s.keepText(w, r, func() templ.Component { return reportFormView(data) }, &data.formState, nil)
	}
	err = s.api.report(r.Context(), v, data.TargetType, data.TargetID, data.Reason, data.Text, r.PostFormValue(formKeyField))
	notice := "reported"
	if se, ok := errors.AsType[*serviceError](err); ok && se.code == codeReportExists {
		notice, err = "alreadyreported", nil
	}
	if err != nil {
		return s.keepText(w, r, func() templ.Component { return reportFormView(data) }, &data.formState, err)
	}
	to := "/articles/" + id(articleID) + "?notice=" + notice
	if data.CPage != "" {
		to += "&cpage=" + data.CPage
	}
	if data.TargetType == "comment" {
		to += "#c-" + id(data.TargetID)
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
	return nil
}

// moderator is signedIn for a moderator's page or form: anyone else is refused before a service is asked.
func (s *Service) moderator(w http.ResponseWriter, r *http.Request) (*viewer, bool, error) {
	v, ok, err := s.signedIn(w, r)
	if !ok {
		return nil, false, err
	}
	if !v.Moderator() {
		return nil, false, fault.Forbiddenf("Only moderators may do this.")
	}
	return v, true, nil
}

// articleFlag locks or pins the path's article (flag "lock" or "pin") when on, and undoes it when not, then goes
// back to it. The page shows the change once the read model has it, a moment later.
func (s *Service) articleFlag(flag string, on bool) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		articleID, err := articleIDOf(r)
		if err != nil {
			return err
		}
		v, ok, err := s.moderator(w, r)
		if !ok {
			return err
		}
		if err := form(w, r); err != nil {
			return err
		}
		if err := s.api.setArticleFlag(r.Context(), v, articleID, flag, on); err != nil {
			return err
		}
		notice := flag + "ed"
		if flag == "pin" {
			notice = "pinned"
		}
		if !on {
			notice = "un" + notice
		}
		http.Redirect(w, r, "/articles/"+id(articleID)+"?notice="+notice, http.StatusSeeOther)
		return nil
	}
}

// queueItem is a reported article or comment as the queue shows it.
type queueItem struct {
	reportTarget
	Writer  string
	Reasons string // "Spam 3 · Off-topic 1"
}

// Link is the address of the reported article or comment.
func (q queueItem) Link() string {
	if q.TargetType == "comment" {
		return "/articles/" + id(q.ArticleID) + "#c-" + id(q.TargetID)
	}
	return "/articles/" + id(q.ArticleID)
}

type queuePage struct {
	layout
	Items []queueItem
	Page  int64
	Pager pager
}

// queueSize is how many reported targets a queue page shows.
const queueSize = 20

// queue is the moderators' queue: reported articles and comments, oldest report first, each with what the
// reports say and the buttons that resolve them.
func (s *Service) queue(w http.ResponseWriter, r *http.Request) error {
	page, err := queryNumber(r, "page", 1, maxPage)
	if err != nil {
		return err
	}
	v, ok, err := s.moderator(w, r)
	if !ok {
		return err
	}
	q, err := s.api.reports(r.Context(), v, page, queueSize)
	if err != nil {
		return err
	}
	writers := make([]int64, len(q.Targets))
	for i, t := range q.Targets {
		writers[i] = t.WriterID
	}
	names := s.names.lookup(r.Context(), writers)
	data := queuePage{layout: s.pageLayout(r, v, "Reports"), Page: page,
		Pager: newPager("pages", "Pages of reports", "/moderation/reports?page=", page, queueSize, q.Count)}
	for _, t := range q.Targets {
		data.Items = append(data.Items, queueItem{reportTarget: t, Writer: names[t.WriterID], Reasons: reasonCounts(t.Reasons)})
	}
	return s.render(w, r, http.StatusOK, queueView(data))
}

// reasonCounts names the reasons of a target's reports with their counts, in the order of the report form.
func reasonCounts(reasons map[string]int64) string {
	var parts []string
	for _, rr := range reportReasons {
		if n := reasons[rr.Value]; n > 0 {
			parts = append(parts, rr.Label+" "+strconv.FormatInt(n, 10))
		}
	}
	for value, n := range reasons {
		if reasonLabel(value) == value && n > 0 { // a reason this web does not know yet
			parts = append(parts, value+" "+strconv.FormatInt(n, 10))
		}
	}
	return strings.Join(parts, " · ")
}

// resolve dismisses a target's reports or removes the target, and goes back to the queue.
func (s *Service) resolve(w http.ResponseWriter, r *http.Request) error {
	v, ok, err := s.moderator(w, r)
	if !ok {
		return err
	}
	if err := form(w, r); err != nil {
		return err
	}
	targetType, action, reason := r.PostFormValue("targetType"), r.PostFormValue("action"), strings.TrimSpace(formText(r, "reason"))
	targetID, err := apijson.Parse(r.PostFormValue("targetId"))
	if err != nil || targetType != "article" && targetType != "comment" {
		return fault.Invalidf("BAD_TARGET", "The form names no article or comment.")
	}
	switch {
	case action != "dismiss" && action != "remove":
		return fault.Invalidf("BAD_ACTION", "Reports are dismissed or their target removed.")
	case action == "remove" && reason == "":
		return fault.Invalidf("NO_REASON", "Say why it is removed: the reason is shown in its place.")
	}
	if err := s.api.resolve(r.Context(), v, targetType, targetID, action, reason); err != nil {
		return err
	}
	to := "/moderation/reports?notice=" + map[string]string{"dismiss": "dismissed", "remove": "removed"}[action]
	if page, err := strconv.ParseInt(r.PostFormValue("page"), 10, 64); err == nil && page > 1 && page <= maxPage {
		to += "&page=" + id(page)
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
	return nil
}

type userPage struct {
	layout
	User           userInfo
	Ban            *ban
	BanUnavailable bool
	CanBan         bool
	// CanBlock: a signed-in reader on another's page, whose blocks are known; Blocked, that they blocked this user.
	CanBlock, Blocked bool
}

// userIDOf reads the path's {userId}; an id that cannot exist is a missing user.
func userIDOf(r *http.Request) (int64, error) {
	n, err := apijson.Parse(r.PathValue("userId"))
	if err != nil {
		return 0, fault.NotFoundf("NO_USER", "There is no such user.")
	}
	return n, nil
}

// userProfile is a user's page: their name and role, and their ban if any, with the ban and unban forms for
// moderators, and the block or unblock button for any other signed-in reader. The user service (the user, and the
// reader's blocks) and moderation are asked at once; without moderation the page says the ban is unknown.
func (s *Service) userProfile(w http.ResponseWriter, r *http.Request) error {
	userID, err := userIDOf(r)
	if err != nil {
		return err
	}
	v := s.reader(w, r)
	ctx := r.Context()
	var (
		wg      sync.WaitGroup
		u       userInfo
		userErr error
		b       *ban
		banErr  error
		blocked map[int64]bool
		known   bool
	)
	wg.Go(func() { u, userErr = s.api.user(ctx, userID) })
	wg.Go(func() { b, banErr = s.api.banOf(ctx, userID) })
	if v != nil && v.ID != userID {
		wg.Go(func() { blocked, known = s.blocked(ctx, v) })
	}
	wg.Wait()
	if userErr != nil {
		return userErr
	}
	if banErr != nil {
		s.cfg.Logger.WarnContext(ctx, "ban unknown on a user's page", "user", userID, "err", banErr)
	}
	l := s.pageLayout(r, v, u.Username)
	l.Description = u.Username + ", a member of board."
	return s.render(w, r, http.StatusOK, userView(userPage{layout: l, User: u, Ban: b,
		BanUnavailable: banErr != nil, CanBan: v.Moderator() && v.ID != userID && u.Role != string(auth.RoleModerator),
		CanBlock: known && v != nil && v.ID != userID, Blocked: blocked[userID]}))
}

// banDurations are the lengths of a ban a moderator picks from; 0 is for good.
var banDurations = []struct {
	Value, Label string
	For          time.Duration
}{{"1d", "1 day", 24 * time.Hour}, {"7d", "7 days", 7 * 24 * time.Hour}, {"30d", "30 days", 30 * 24 * time.Hour}, {"forever", "For good", 0}}

// banUser bans the path's user for the chosen time, with a reason, and goes back to their page.
func (s *Service) banUser(w http.ResponseWriter, r *http.Request) error {
	userID, err := userIDOf(r)
	if err != nil {
		return err
	}
	v, ok, err := s.moderator(w, r)
	if !ok {
		return err
	}
	if err := form(w, r); err != nil {
		return err
	}
	reason := strings.TrimSpace(formText(r, "reason"))
	if reason == "" {
		return fault.Invalidf("NO_REASON", "Say why the user is banned: they are told the reason.")
	}
	var until *time.Time
	found := false
	for _, d := range banDurations {
		if d.Value == r.PostFormValue("duration") {
			found = true
			if d.For > 0 {
				end := s.cfg.Now().Add(d.For)
				until = &end
			}
		}
	}
	if !found {
		return fault.Invalidf("BAD_DURATION", "Choose how long the ban lasts.")
	}
	if err := s.api.setBan(r.Context(), v, userID, reason, until); err != nil {
		return err
	}
	http.Redirect(w, r, "/users/"+id(userID)+"?notice=banned", http.StatusSeeOther)
	return nil
}

func (s *Service) unbanUser(w http.ResponseWriter, r *http.Request) error {
	userID, err := userIDOf(r)
	if err != nil {
		return err
	}
	v, ok, err := s.moderator(w, r)
	if !ok {
		return err
	}
	if err := form(w, r); err != nil {
		return err
	}
	if err := s.api.unban(r.Context(), v, userID); err != nil {
		return err
	}
	http.Redirect(w, r, "/users/"+id(userID)+"?notice=unbanned", http.StatusSeeOther)
	return nil
}

// logItem is a moderator's action as the log shows it.
type logItem struct {
	logEntry
	Moderator string
	User      string // the name of a user acted on
}

// What is how the log names the action.
func (l logItem) What() string {
	if w, ok := actionWords[l.Action]; ok {
		return w
	}
	return l.Action
}

var actionWords = map[string]string{"hide": "hid, on reports,", "remove": "removed", "restore": "restored", "dismiss": "dismissed the reports on",
	"lock": "locked", "unlock": "unlocked", "pin": "pinned", "unpin": "unpinned", "ban": "banned", "unban": "unbanned"}

// Target names what the action was done to: a user by name, an article or comment by id.
func (l logItem) Target() string {
	if l.TargetType == "user" && l.User != "" {
		return l.User
	}
	return l.TargetType + " " + id(l.TargetID)
}

// Link is the address of what the action was done to, "" when the log does not say.
func (l logItem) Link() string {
	switch {
	case l.TargetType == "article":
		return "/articles/" + id(l.TargetID)
	case l.TargetType == "comment" && l.ArticleID != 0:
		return "/articles/" + id(l.ArticleID) + "#c-" + id(l.TargetID)
	case l.TargetType == "user":
		return "/users/" + id(l.TargetID)
	}
	return ""
}

type logPage struct {
	layout
	Entries    []logItem
	Prev, Next int64 // the pages before and after; 0 for none
}

// logSize is how many actions a log page shows.
const logSize = 50

// modlog is the public log of what moderators did, newest first; a page that comes back full has a next page.
func (s *Service) modlog(w http.ResponseWriter, r *http.Request) error {
	page, err := queryNumber(r, "page", 1, maxPage)
	if err != nil {
		return err
	}
	v := s.reader(w, r)
	entries, err := s.api.modlog(r.Context(), v, page, logSize)
	if err != nil {
		return err
	}
	data := logPage{layout: s.pageLayout(r, v, "Moderation log"), Prev: page - 1}
	if len(entries) == logSize {
		data.Next = page + 1
	}
	data.Entries = s.logItems(r.Context(), entries)
	return s.render(w, r, http.StatusOK, logView(data))
}

func (s *Service) logItems(ctx context.Context, entries []logEntry) []logItem {
	var users []int64
	for _, e := range entries {
		if e.ModeratorID != 0 {
			users = append(users, e.ModeratorID)
		}
		if e.TargetType == "user" {
			users = append(users, e.TargetID)
		}
	}
	names := s.names.lookup(ctx, users)
	out := make([]logItem, len(entries))
	for i, e := range entries {
		out[i] = logItem{logEntry: e, Moderator: names[e.ModeratorID]}
		if e.TargetType == "user" {
			out[i].User = names[e.TargetID]
		}
		if e.ModeratorID == 0 {
			out[i].Moderator = "Reports"
		}
	}
	return out
}

// hiddenHeading says why an article or comment is hidden, before its reason.
func hiddenHeading(hidden string) string {
	if hidden == "pending" {
		return "Hidden until a moderator looks at it:"
	}
	return "Removed by a moderator:"
}
