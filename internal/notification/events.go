package notification

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/kafka"
	"board/internal/sqldb"
)

// Handlers are the service's handlers of the article, comment, like, moderation, ban and account topics. Each is idempotent:
// a notification is made at most once per comment, liker or moderator's event (see the dedupe keys in the
// migration), so a record delivered twice, or replayed, changes nothing.
func (s *Service) Handlers() map[event.Type]kafka.Handler {
	return map[event.Type]kafka.Handler{
		event.ArticleCreated: s.articleCreated, event.ArticleUpdated: s.articleUpdated, event.ArticleDeleted: s.articleDeleted,
		event.CommentCreated: s.commentCreated, event.CommentUpdated: s.commentUpdated, event.CommentDeleted: s.commentDeleted,
		event.ArticleLiked:     s.articleLiked,
		event.ArticleModerated: s.articleModerated, event.CommentModerated: s.commentModerated,
		event.UserBanned: s.banChanged, event.UserUnbanned: s.banChanged,
		event.UserEmailVerified: s.emailVerified,
	}
}

func articleOf(env event.Envelope) (event.Article, error) {
	p, err := event.Payload[event.Article](env)
	if err == nil && p.ArticleID <= 0 {
		err = fault.Invalidf("INVALID_ARTICLE_ID", "%s without a valid articleId", env.Type)
	}
	return p, err
}

// articleCreated records the article, tells the names it mentions and its board's watchers of it, and has its
// writer watch it. announced, set last, makes a delivery after that change nothing.
func (s *Service) articleCreated(ctx context.Context, env event.Envelope) error {
	p, err := articleOf(env)
	if err != nil {
		return err
	}
	a := article{id: int64(p.ArticleID), writerID: int64(p.WriterID), title: p.Title, excerpt: refExcerpt(p.Text())}
	if _, err := s.db.ExecContext(ctx, "INSERT INTO article_ref (article_id, writer_id, title, excerpt, announced) VALUES (?, ?, ?, ?, FALSE)"+
		s.db.OnConflictUpdate("article_id", "title = ?, excerpt = ?"), a.id, a.writerID, a.title, a.excerpt, a.title, a.excerpt); err != nil {
		return err
	}
	// An article hidden before its create is read (its moderation event came first) tells no one.
	var deleted, announced, hidden bool
	if err := s.db.QueryRowContext(ctx, "SELECT deleted, announced, hidden FROM article_ref WHERE article_id = ?", a.id).Scan(&deleted, &announced, &hidden); err != nil {
		return err
	}
	if deleted || announced || hidden {
		return nil
	}
	mentioned, err := s.mentioned(ctx, p.Content)
	if err != nil {
		return err
	}
	watchers, err := s.watchers(ctx, TargetBoard, int64(p.BoardID))
	if err != nil {
		return err
	}
	rs := newRecipients(a.writerID)
	rs.add(Mention, mentioned...)
	rs.add(WatchedArticle, watchers...)
	at := s.at(time.Time(p.CreatedAt))
	n := Notification{ArticleID: a.id, ArticleTitle: a.title, ActorIDs: []int64{a.writerID}, CreatedAt: at, UpdatedAt: at}
	if err := s.deliver(ctx, post{key: articleKey(a.id), n: n, board: int64(p.BoardID)}, rs.list()); err != nil {
		return err
	}
	if err := s.autoWatch(ctx, a.writerID, a.id); err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, "UPDATE article_ref SET announced = TRUE, mentioned = ? WHERE article_id = ?", formatMentioned(mentioned), a.id)
	return err
}

// articleUpdated keeps the article's title, and tells the names an edit mentions that the article did not before.
func (s *Service) articleUpdated(ctx context.Context, env event.Envelope) error {
	p, err := articleOf(env)
	if err != nil {
		return err
	}
	a := article{id: int64(p.ArticleID), writerID: int64(p.WriterID), title: p.Title, excerpt: refExcerpt(p.Text())}
	if err := s.saveArticle(ctx, a); err != nil {
		return err
	}
	var deleted, announced, hidden bool
	var before string
	if err := s.db.QueryRowContext(ctx, "SELECT deleted, announced, hidden, mentioned FROM article_ref WHERE article_id = ?", a.id).Scan(&deleted, &announced, &hidden, &before); err != nil {
		return err
	}
	if deleted || !announced || hidden {
		return nil
	}
	at := s.at(time.Time(p.ModifiedAt))
	return s.mentionedByEdit(ctx, p.Content, before, post{key: articleKey(a.id),
		n: Notification{ArticleID: a.id, ArticleTitle: a.title, ActorIDs: []int64{a.writerID}, CreatedAt: at, UpdatedAt: at}},
		"UPDATE article_ref SET mentioned = ? WHERE article_id = ?", a.id)
}

// mentionedByEdit tells the users an edit's source mentions that before (the post's mentioned column) does not, and
// then records them all with update (its arguments after the list).
func (s *Service) mentionedByEdit(ctx context.Context, source, before string, p post, update string, args ...any) error {
	mentioned, err := s.mentioned(ctx, source)
	if err != nil {
		return err
	}
	told := parseActors(before)
	var fresh []int64
	for _, u := range mentioned {
		if !slices.Contains(told, u) {
			fresh = append(fresh, u)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	rs := newRecipients(p.n.ActorIDs[0])
	rs.add(Mention, fresh...)
	if err := s.deliver(ctx, p, rs.list()); err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, update, append([]any{formatMentioned(append(told, fresh...))}, args...)...)
	return err
}

// maxMentioned bounds the users a post's mentioned column keeps, the oldest dropped first: edits add to it.
const maxMentioned = 100

func formatMentioned(ids []int64) string { return formatActors(ids[max(0, len(ids)-maxMentioned):]) }

// articleKey and commentKey are the dedupe keys of what an article and a comment tell: one notification per person.
func articleKey(id int64) string { return "a:" + strconv.FormatInt(id, 10) }
func commentKey(id int64) string { return "c:" + strconv.FormatInt(id, 10) }

// articleDeleted takes back the unread notifications about the article, of its writer and of its commenters, and
// remembers that it is gone.
func (s *Service) articleDeleted(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.Article](env)
	if err != nil {
		return err
	}
	id := int64(p.ArticleID)
	if id <= 0 {
		return fault.Invalidf("INVALID_ARTICLE_ID", "%s without a valid articleId", env.Type)
	}
	// Marked gone first: a comment or like handled at the same time either sees it gone, or adds its notification
	// before it looks again, which finds it gone and takes the notification back (notifyComment, articleLiked).
	if _, err := s.db.ExecContext(ctx, "INSERT INTO article_ref (article_id, writer_id, title, deleted) VALUES (?, ?, '', TRUE)"+
		s.db.OnConflictUpdate("article_id", "deleted = TRUE"), id, int64(p.WriterID)); err != nil {
		return err
	}
	told, err := s.toldOfArticle(ctx, id, int64(p.BoardID))
	if err != nil {
		return err
	}
	if err := s.retractAll(ctx, append(told, int64(p.WriterID)), "article_id = ? AND kind <> ?", id, string(Moderation)); err != nil {
		return err
	}
	// The comments go last: a delivery that fails midway finds their writers again.
	_, err = s.db.ExecContext(ctx, "DELETE FROM comment_ref WHERE article_id = ?", id)
	return err
}

// commentCreated tells the writer of the comment's parent of a reply, and the article's writer of a comment, each
// unless they wrote it. A writer who is both is told once, of the reply.
func (s *Service) commentCreated(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.Comment](env)
	if err != nil {
		return err
	}
	c, err := commentOf(env, p)
	if err != nil {
		return err
	}
	r, err := s.refsOf(ctx, c.articleID, c.id)
	if err != nil || r.comment.created || r.comment.deleted {
		return err // told of already, or gone before its create was read
	}
	if !r.comment.hidden {
		if c.mentioned, err = s.mentioned(ctx, p.Content); err != nil {
			return err
		}
		if err := s.notifyComment(ctx, c, r, time.Time(p.CreatedAt)); err != nil {
			return err
		}
	}
	// The ref goes last: a delivery that fails midway (the article service down) does not find it, and notifies
	// again; the dedupe keys keep that to one notification each.
	return s.saveComment(ctx, c)
}

// commentUpdated tells the names an edit mentions that the comment did not before.
func (s *Service) commentUpdated(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.Comment](env)
	if err != nil {
		return err
	}
	c, err := commentOf(env, p)
	if err != nil {
		return err
	}
	// The excerpt follows every edit, for the bookmarks that show it.
	if _, err := s.db.ExecContext(ctx, "UPDATE comment_ref SET excerpt = ? WHERE article_id = ? AND comment_id = ?", c.excerpt, c.articleID, c.id); err != nil {
		return err
	}
	r, err := s.refsOf(ctx, c.articleID, c.id)
	// An edit of a comment this service never saw created tells no one: it cannot know who was told before.
	if err != nil || !r.articleFound || r.articleDeleted || !r.comment.created || r.comment.deleted || r.comment.hidden {
		return err
	}
	at := s.at(time.Time(p.ModifiedAt))
	return s.mentionedByEdit(ctx, p.Content, formatActors(r.comment.mentioned), post{key: commentKey(c.id),
		n: Notification{ArticleID: c.articleID, ArticleTitle: r.article.title, CommentID: c.id, ActorIDs: []int64{c.writerID},
			CreatedAt: at, UpdatedAt: at}},
		"UPDATE comment_ref SET mentioned = ? WHERE article_id = ? AND comment_id = ?", c.articleID, c.id)
}

func (s *Service) notifyComment(ctx context.Context, c comment, r refs, at time.Time) error {
	a, ok := r.article, r.articleFound && !r.articleDeleted
	if !r.articleFound {
		var err error
		if a, ok, err = s.article(ctx, c.articleID); err != nil {
			return err
		}
	}
	if !ok {
		return nil
	}
	n := Notification{ArticleID: c.articleID, ArticleTitle: a.title, CommentID: c.id, ActorIDs: []int64{c.writerID},
		CreatedAt: s.at(at), UpdatedAt: s.at(at)}
	key := commentKey(c.id)
	parent, found, deleted, err := s.parentWriter(ctx, c)
	if err != nil {
		return err
	}
	watchers, err := s.watchers(ctx, TargetArticle, c.articleID)
	if err != nil {
		return err
	}
	rs := newRecipients(c.writerID)
	if found && !deleted {
		rs.add(CommentReply, parent)
	}
	rs.add(ArticleComment, a.writerID)
	rs.add(Mention, c.mentioned...)
	rs.add(WatchedComment, watchers...)
	if err := s.deliver(ctx, post{key: key, n: n}, rs.list()); err != nil {
		return err
	}
	if err := s.autoWatch(ctx, c.writerID, c.articleID); err != nil {
		return err
	}
	// The article's delete, or the comment's hide, may have been handled meanwhile (their topics are read apart):
	// looked at again after the adds, one of the two handlers sees the other's work.
	again, err := s.refsOf(ctx, c.articleID, c.id)
	if err != nil {
		return err
	}
	if again.articleFound && !again.articleDeleted && !again.comment.hidden && !again.comment.deleted {
		return nil
	}
	return s.retractAll(ctx, rs.users(), "dedupe_key = ?", key)
}

// commentDeleted takes back the unread notifications of the comment and remembers that it is gone.
func (s *Service) commentDeleted(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.Comment](env)
	if err != nil {
		return err
	}
	c, err := commentOf(env, p)
	if err != nil {
		return err
	}
	if err := s.retractComment(ctx, c); err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, "INSERT INTO comment_ref (article_id, comment_id, path, parent_id, writer_id, deleted) VALUES (?, ?, ?, ?, ?, TRUE)"+
		s.db.OnConflictUpdate("article_id, comment_id", "deleted = TRUE"), c.articleID, c.id, c.path, c.parentID, c.writerID)
	return err
}

// retractComment takes back the unread notifications of a comment: its article's writer's, its parent's writer's,
// the mentioned users' and the article's watchers'.
func (s *Service) retractComment(ctx context.Context, c comment) error {
	recipients := []int64{}
	if a, ok, err := s.knownArticle(ctx, c.articleID); err != nil {
		return err
	} else if ok {
		recipients = append(recipients, a.writerID)
	}
	// A deleted parent's writer was told of the reply all the same, when the parent was still there.
	if parent, found, _, err := s.parentWriter(ctx, c); err != nil {
		return err
	} else if found {
		recipients = append(recipients, parent)
	}
	watchers, err := s.watchers(ctx, TargetArticle, c.articleID)
	if err != nil {
		return err
	}
	ref, err := s.commentRef(ctx, c.articleID, c.id) // who its mentions told
	if err != nil {
		return err
	}
	recipients = append(append(recipients, watchers...), ref.mentioned...)
	return s.retractAll(ctx, distinct(recipients, c.writerID), "dedupe_key = ?", commentKey(c.id))
}

func (s *Service) articleLiked(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.Like](env)
	if err != nil {
		return err
	}
	id, liker := int64(p.ArticleID), int64(p.UserID)
	if id <= 0 || liker <= 0 {
		return fault.Invalidf("INVALID_LIKE", "%s without a valid articleId and userId", env.Type)
	}
	a, ok, err := s.article(ctx, id)
	if err != nil || !ok || a.writerID == liker {
		return err
	}
	at := s.at(time.Time(p.CreatedAt))
	if err := s.addLike(ctx, a.writerID, Notification{Kind: ArticleLike, ArticleID: id, ArticleTitle: a.title,
		ActorIDs: []int64{liker}, CreatedAt: at, UpdatedAt: at}); err != nil {
		return err
	}
	// As for a comment (notifyComment): the article's delete may have been handled meanwhile.
	if _, there, err := s.knownArticle(ctx, id); err != nil || there {
		return err
	}
	return s.retract(ctx, a.writerID, "article_id = ? AND kind = ?", id, string(ArticleLike))
}

// articleModerated tells the article's writer what a moderator (or enough reports) did to it. A hidden article is
// out of sight of its commenters: their unread replies on it are taken back.
func (s *Service) articleModerated(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.ArticleModeration](env)
	if err != nil {
		return err
	}
	id, writer := int64(p.ArticleID), int64(p.WriterID)
	if id <= 0 {
		return fault.Invalidf("INVALID_ARTICLE_ID", "%s without a valid articleId", env.Type)
	}
	if err := s.articleHidden(ctx, p); err != nil {
		return err
	}
	if p.Hidden != event.Visible {
		writers, err := s.commentWriters(ctx, id)
		if err != nil {
			return err
		}
		for _, user := range distinct(writers, writer) {
			if err := s.retract(ctx, user, "article_id = ? AND kind = ?", id, string(CommentReply)); err != nil {
				return err
			}
		}
	}
	a, _, err := s.knownArticle(ctx, id)
	if err != nil {
		return err
	}
	return s.moderated(ctx, env, writer, p.ModeratorID, Notification{ArticleID: id, ArticleTitle: a.title,
		Action: p.Action, Reason: p.Reason, CreatedAt: s.at(time.Time(p.ModeratedAt))})
}

// commentModerated tells the comment's writer what was done to it; a hidden comment's unread notifications are taken
// back.
func (s *Service) commentModerated(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.CommentModeration](env)
	if err != nil {
		return err
	}
	if p.CommentID <= 0 || p.ArticleID <= 0 {
		return fault.Invalidf("INVALID_COMMENT_ID", "%s without a valid commentId and articleId", env.Type)
	}
	hidden := p.Hidden != event.Visible
	// A comment hidden before its create was read here (the topics are read apart) gets its row now, not created
	// yet: its create then tells no one, unless a restore comes first.
	if _, err := s.db.ExecContext(ctx, "INSERT INTO comment_ref (article_id, comment_id, path, parent_id, writer_id, hidden, created) VALUES (?, ?, '', 0, ?, ?, FALSE)"+
		s.db.OnConflictUpdate("article_id, comment_id", "hidden = ?"), int64(p.ArticleID), int64(p.CommentID), int64(p.WriterID), hidden, hidden); err != nil {
		return err
	}
	if ref, err := s.commentRef(ctx, int64(p.ArticleID), int64(p.CommentID)); err != nil {
		return err
	} else if hidden && ref.created {
		if err := s.retractComment(ctx, ref.comment); err != nil {
			return err
		}
	}
	a, _, err := s.knownArticle(ctx, int64(p.ArticleID))
	if err != nil {
		return err
	}
	return s.moderated(ctx, env, int64(p.WriterID), p.ModeratorID, Notification{ArticleID: int64(p.ArticleID),
		ArticleTitle: a.title, CommentID: int64(p.CommentID), Action: p.Action, Reason: p.Reason,
		CreatedAt: s.at(time.Time(p.ModeratedAt))})
}

func (s *Service) banChanged(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.Ban](env)
	if err != nil {
		return err
	}
	if p.UserID <= 0 {
		return fault.Invalidf("INVALID_USER_ID", "%s without a valid userId", env.Type)
	}
	action := event.ActionBan
	if !p.Banned {
		action = event.ActionUnban
	}
	return s.moderated(ctx, env, int64(p.UserID), p.ModeratorID, Notification{Action: action, Reason: p.Reason,
		CreatedAt: s.at(time.Time(p.At))})
}

// moderated adds a moderation notification of the event to the user's inbox, unless the user did it.
func (s *Service) moderated(ctx context.Context, env event.Envelope, user int64, moderator apijson.ID, n Notification) error {
	if user <= 0 || int64(moderator) == user {
		return nil
	}
	n.Kind, n.UpdatedAt = Moderation, n.CreatedAt
	if moderator > 0 {
		n.ActorIDs = []int64{int64(moderator)}
	}
	return s.add(ctx, user, "m:"+env.EventID.String(), n)
}

// article is what the service knows of an article.
type article struct {
	id, writerID   int64
	title, excerpt string
}

func (s *Service) saveArticle(ctx context.Context, a article) error {
	_, err := s.db.ExecContext(ctx, "INSERT INTO article_ref (article_id, writer_id, title, excerpt) VALUES (?, ?, ?, ?)"+
		s.db.OnConflictUpdate("article_id", "title = ?, excerpt = ?"), a.id, a.writerID, a.title, a.excerpt, a.title, a.excerpt)
	return err
}

// knownArticle returns the article as the events told of it; ok is false for one they did not, or that is deleted.
func (s *Service) knownArticle(ctx context.Context, id int64) (article, bool, error) {
	a, found, deleted, err := s.articleRef(ctx, id)
	return a, found && !deleted, err
}

// article returns the article, from the events or else from the article service: the article topic is read apart
// from the others, so a comment or like can come before its article's event. ok is false for a deleted article.
func (s *Service) article(ctx context.Context, id int64) (article, bool, error) {
	a, found, deleted, err := s.articleRef(ctx, id)
	if err != nil || found {
		return a, found && !deleted, err
	}
	looked, err := s.lookUpArticle(ctx, id)
	if err != nil || !looked.ok {
		return a, false, err
	}
	// Only inserted: an ARTICLE_UPDATED handled while the lookup ran has the newer title.
	// Not announced: its create, when it is read, tells its watchers and mentions.
	_, err = s.db.ExecContext(ctx, s.insertIgnore()+" article_ref (article_id, writer_id, title, announced, hidden) VALUES (?, ?, ?, FALSE, ?)",
		looked.id, looked.writerID, looked.title, looked.hidden)
	return looked.article, true, err
}

func (s *Service) articleRef(ctx context.Context, id int64) (a article, found, deleted bool, err error) {
	a.id = id
	err = s.db.QueryRowContext(ctx, "SELECT writer_id, title, deleted FROM article_ref WHERE article_id = ?", id).Scan(&a.writerID, &a.title, &deleted)
	if errors.Is(err, sql.ErrNoRows) {
		return a, false, false, nil
	}
	return a, err == nil, deleted, err
}

type lookedUp struct {
	article
	hidden bool // by moderation, as the article service answered
	ok     bool
}

// lookUpArticle GETs the article at the article service within the lookup deadline.
func (s *Service) lookUpArticle(ctx context.Context, id int64) (lookedUp, error) {
	var a struct {
		Title    string       `json:"title"`
		WriterID apijson.ID   `json:"writerId"`
		Hidden   event.Hidden `json:"hidden"`
	}
	found, err := s.lookUp(ctx, "article", s.cfg.ArticleOrigin, "/v1/articles/"+strconv.FormatInt(id, 10), &a)
	if err != nil || !found {
		return lookedUp{}, err
	}
	return lookedUp{article: article{id: id, writerID: int64(a.WriterID), title: a.Title}, hidden: a.Hidden != event.Visible, ok: true}, nil
}

// lookUp GETs path at the named service's origin within the lookup deadline, and decodes its answer into v: found
// is false for a 404, or without an origin; any other failure is the service's, unavailable.
func (s *Service) lookUp(ctx context.Context, service, origin, path string, v any) (found bool, err error) {
	if origin == "" {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	url := strings.TrimSuffix(origin, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	unavailable := func(err error) error {
		return fault.Unavailablef(err, strings.ToUpper(service)+"_SERVICE_UNAVAILABLE", "the %s service did not answer; try again", service)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return false, unavailable(err)
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, 1<<20)
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		_, _ = io.Copy(io.Discard, body)
		return false, nil
	default:
		_, _ = io.Copy(io.Discard, body)
		return false, unavailable(fmt.Errorf("GET %s: %s", url, resp.Status))
	}
	if err := json.NewDecoder(body).Decode(v); err != nil {
		return false, unavailable(fmt.Errorf("GET %s: %w", url, err))
	}
	return true, nil
}

// comment is what the service knows of a comment. A v2 comment's parent is found by path, a v1 comment's by id.
type comment struct {
	id, articleID, writerID int64
	path                    string
	parentID                int64 // v1: the parent's id, 0 for a root
	excerpt                 string
	mentioned               []int64 // the users its mentions told
}

// commentOf checks a comment event's payload.
func commentOf(env event.Envelope, p event.Comment) (comment, error) {
	c := comment{id: int64(p.CommentID), articleID: int64(p.ArticleID), writerID: int64(p.WriterID), path: p.Path,
		excerpt: refExcerpt(p.Text())}
	if c.id <= 0 || c.articleID <= 0 {
		return c, fault.Invalidf("INVALID_COMMENT", "%s without a valid commentId and articleId", env.Type)
	}
	if p.Path == "" && p.ParentCommentID != p.CommentID {
		c.parentID = int64(p.ParentCommentID)
	}
	return c, nil
}

// saveComment records a comment's create, keeping what a delete or a hide recorded before.
func (s *Service) saveComment(ctx context.Context, c comment) error {
	m := formatMentioned(c.mentioned)
	_, err := s.db.ExecContext(ctx, "INSERT INTO comment_ref (article_id, comment_id, path, parent_id, writer_id, excerpt, mentioned) VALUES (?, ?, ?, ?, ?, ?, ?)"+
		s.db.OnConflictUpdate("article_id, comment_id", "path = ?, parent_id = ?, excerpt = ?, mentioned = ?, created = TRUE"),
		c.articleID, c.id, c.path, c.parentID, c.writerID, c.excerpt, m, c.path, c.parentID, c.excerpt, m)
	return err
}

// refs is what the service knows of an article and one of its comments.
type refs struct {
	article                      article
	articleFound, articleDeleted bool
	comment                      commentRefState
}

// refsOf reads what the service knows of an article and one of its comments in one statement: both are keyed by
// the article, so behind Vitess the join runs on its one shard.
func (s *Service) refsOf(ctx context.Context, articleID, commentID int64) (refs, error) {
	r := refs{article: article{id: articleID}, comment: commentRefState{comment: comment{id: commentID, articleID: articleID}}}
	var path, mentioned sql.NullString
	var parent, writer sql.NullInt64
	var created, deleted, hidden sql.NullBool
	err := s.db.QueryRowContext(ctx, `SELECT a.writer_id, a.title, a.deleted, c.path, c.parent_id, c.writer_id, c.created, c.deleted, c.hidden, c.mentioned
		FROM article_ref a LEFT JOIN comment_ref c ON c.article_id = a.article_id AND c.comment_id = ? WHERE a.article_id = ?`,
		commentID, articleID).Scan(&r.article.writerID, &r.article.title, &r.articleDeleted, &path, &parent, &writer, &created, &deleted, &hidden, &mentioned)
	if errors.Is(err, sql.ErrNoRows) {
		// No record of the article; one of the comment may be there all the same (a hide read first).
		r.comment, err = s.commentRef(ctx, articleID, commentID)
		return r, err
	}
	if err != nil {
		return r, err
	}
	r.articleFound = true
	r.comment.path, r.comment.parentID, r.comment.writerID = path.String, parent.Int64, writer.Int64
	r.comment.created, r.comment.deleted, r.comment.hidden = created.Bool, deleted.Bool, hidden.Bool
	r.comment.mentioned = parseActors(mentioned.String)
	return r, nil
}

// commentRefState is what the service knows of a comment: nothing (all false), or its row.
type commentRefState struct {
	comment
	created, deleted, hidden bool
}

func (s *Service) commentRef(ctx context.Context, articleID, id int64) (commentRefState, error) {
	r := commentRefState{comment: comment{id: id, articleID: articleID}}
	var mentioned string
	err := s.db.QueryRowContext(ctx, "SELECT path, parent_id, writer_id, created, deleted, hidden, mentioned FROM comment_ref WHERE article_id = ? AND comment_id = ?",
		articleID, id).Scan(&r.path, &r.parentID, &r.writerID, &r.created, &r.deleted, &r.hidden, &mentioned)
	r.mentioned = parseActors(mentioned)
	if errors.Is(err, sql.ErrNoRows) {
		return r, nil
	}
	return r, err
}

// parentWriter returns the writer of a reply's parent, and whether it is deleted; found is false for a root comment,
// or a parent the events did not tell of (older than the topic's retention when the service started).
func (s *Service) parentWriter(ctx context.Context, c comment) (writer int64, found, deleted bool, err error) {
	var query string
	var key any
	switch {
	case len(c.path) > pathLevel:
		query, key = "SELECT writer_id, deleted FROM comment_ref WHERE article_id = ? AND path = ?", c.path[:len(c.path)-pathLevel]
	case c.path == "" && c.parentID > 0:
		query, key = "SELECT writer_id, deleted FROM comment_ref WHERE article_id = ? AND comment_id = ?", c.parentID
	default:
		return 0, false, false, nil
	}
	err = s.db.QueryRowContext(ctx, query, c.articleID, key).Scan(&writer, &deleted)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, false, nil
	}
	return writer, err == nil, deleted, err
}

// pathLevel is the length of one level of a v2 comment's path (SPEC §5.2).
const pathLevel = 5

// toldOfArticle returns who may have been told of the article or its comments, besides its writer: its commenters,
// the users its posts mention, its watchers, and its board's.
func (s *Service) toldOfArticle(ctx context.Context, id, board int64) ([]int64, error) {
	var told []int64
	var mentioned string
	err := s.db.QueryRowContext(ctx, "SELECT mentioned FROM article_ref WHERE article_id = ?", id).Scan(&mentioned)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	told = append(told, parseActors(mentioned)...)
	rows, err := s.db.QueryContext(ctx, "SELECT writer_id, mentioned FROM comment_ref WHERE article_id = ?", id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var writer int64
		if err := rows.Scan(&writer, &mentioned); err != nil {
			return nil, err
		}
		told = append(append(told, writer), parseActors(mentioned)...)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, target := range []struct {
		typ string
		id  int64
	}{{TargetArticle, id}, {TargetBoard, board}} {
		ws, err := s.watchers(ctx, target.typ, target.id)
		if err != nil {
			return nil, err
		}
		told = append(told, ws...)
	}
	return told, nil
}

// commentWriters returns the writers of the article's comments the events told of.
func (s *Service) commentWriters(ctx context.Context, articleID int64) ([]int64, error) {
	return sqldb.IDs(s.db.QueryContext(ctx, "SELECT DISTINCT writer_id FROM comment_ref WHERE article_id = ?", articleID))
}
