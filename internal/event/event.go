// Package event is the contract between services: the envelope every event travels in, the event types, their
// payloads and the topics they go to (SPEC §4).
//
// Ordering. Delivery is at least once and per-key order is not guaranteed (docs/messaging.md says why), so every
// payload carries versions: counters that the producer bumps in the same transaction as the change they describe,
// strictly increasing per aggregate. A consumer keeps the highest version it applied per aggregate and ignores an
// event whose version is not higher: duplicates and late events then never undo newer state.
//   - ArticleVersion: the article row (1 at create, +1 per update, +1 at delete).
//   - BoardArticleCountVersion: the board's article count row.
//   - ArticleCommentCountVersion: the article's comment count row.
//   - CommentVersion: the comment row (1 as written, +1 per edit); COMMENT_UPDATED carries it.
//   - ArticleLikeCountVersion: the article's like count row (article_like_count.version).
//   - ArticleViewCount needs none: it only grows.
package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"board/internal/apijson"
)

// Type names what happened.
type Type string

const (
	ArticleCreated Type = "ARTICLE_CREATED"
	ArticleUpdated Type = "ARTICLE_UPDATED"
	ArticleDeleted Type = "ARTICLE_DELETED"
	CommentCreated Type = "COMMENT_CREATED"
	CommentDeleted Type = "COMMENT_DELETED"
	// CommentUpdated is a comment edited by its writer or a moderator (SPEC §3.12), with its new content.
	CommentUpdated Type = "COMMENT_UPDATED"
	ArticleLiked   Type = "ARTICLE_LIKED"
	ArticleUnliked Type = "ARTICLE_UNLIKED"
	ArticleViewed  Type = "ARTICLE_VIEWED"
	// Comment likes (SPEC §3.13), on the like topic keyed by the comment's article.
	CommentLiked   Type = "COMMENT_LIKED"
	CommentUnliked Type = "COMMENT_UNLIKED"

	// Moderation (SPEC §3.9). A target's moderation state travels whole in every event, with a version, so that
	// consumers apply only what is newer.
	ArticleModerated Type = "ARTICLE_MODERATED" // an article hidden, restored, locked, unlocked, pinned or unpinned
	CommentModerated Type = "COMMENT_MODERATED" // a comment hidden or restored
	UserBanned       Type = "USER_BANNED"
	UserUnbanned     Type = "USER_UNBANNED"
	// UserRoleChanged comes from the user service: a role granted or taken back.
	UserRoleChanged Type = "USER_ROLE_CHANGED"

	// Blocks (SPEC §3.13): one user stops seeing another and being notified by them. Like bans, read whole by
	// every instance that needs them.
	UserBlocked   Type = "USER_BLOCKED"
	UserUnblocked Type = "USER_UNBLOCKED"

	// Media (SPEC §3.12): an image uploaded, and one deleted by its owner, a moderator or the collection.
	MediaUploaded Type = "MEDIA_UPLOADED"
	MediaDeleted  Type = "MEDIA_DELETED"

	// Accounts (SPEC §3.14), from the user service. A password changed or reset, or every session ended, voids the
	// user's tokens signed before it; a deleted user's tokens are all void, and every service forgets the user.
	UserPasswordChanged Type = "USER_PASSWORD_CHANGED"
	UserDeleted         Type = "USER_DELETED"
	// UserEmailVerified: the user proved they read this address (the notification service mails it when asked).
	UserEmailVerified Type = "USER_EMAIL_VERIFIED"
	// MailRequested is a mail to send, written to the outbox with the change that causes it; the mail service sends
	// it over SMTP.
	MailRequested Type = "MAIL_REQUESTED"
)

// topics maps each type to its topic's base name; the deployment's prefix goes in front (SPEC §4: "board-").
var topics = map[Type]string{
	ArticleCreated: "article", ArticleUpdated: "article", ArticleDeleted: "article",
	CommentCreated: "comment", CommentDeleted: "comment", CommentUpdated: "comment",
	ArticleLiked: "like", ArticleUnliked: "like", CommentLiked: "like", CommentUnliked: "like",
	ArticleViewed:    "view",
	ArticleModerated: "moderation", CommentModerated: "moderation",
	// Bans and roles are a user's standing, which every instance of every service reads whole when it starts: each
	// in a topic of its own, keyed by user id, compacted to the latest record per user.
	UserBanned: "ban", UserUnbanned: "ban",
	UserRoleChanged: "user",
	// A block is keyed by the pair "blocker:blocked", so compaction keeps each pair's latest state.
	UserBlocked: "block", UserUnblocked: "block",
	MediaUploaded: "media", MediaDeleted: "media",
	// A user's sessions: the token epoch in force, and deletion (final), keyed by user id and compacted like the
	// bans, so that every instance reads every user's latest one at start.
	UserPasswordChanged: "session", UserDeleted: "session",
	// The latest verified address per user, keyed by user id, compacted.
	UserEmailVerified: "account",
	// Mails to send, keyed by the recipient's user id.
	MailRequested: "mail",
}

// Known reports whether t is one of the event types.
func (t Type) Known() bool { _, ok := topics[t]; return ok }

// Topic returns the topic events of type t go to, under prefix (e.g. "board-" gives "board-article").
func (t Type) Topic(prefix string) string { return prefix + topics[t] }

// Topics returns every topic under prefix, each once.
func Topics(prefix string) []string {
	return []string{prefix + "article", prefix + "comment", prefix + "like", prefix + "view", prefix + "moderation",
		prefix + "ban", prefix + "user", prefix + "block", prefix + "media", prefix + "session", prefix + "account",
		prefix + "mail"}
}

// CompactedTopics are the topics under prefix whose records are a user's latest standing, kept per key for good
// (cleanup.policy=compact) rather than for a retention time.
func CompactedTopics(prefix string) []string {
	return []string{prefix + "ban", prefix + "user", prefix + "block", prefix + "session", prefix + "account"}
}

// DeadLetterTopic is where a consumer puts the records of topic it could not handle.
func DeadLetterTopic(topic string) string { return topic + ".dlt" }

// Envelope is the JSON value of every event record.
type Envelope struct {
	EventID apijson.ID      `json:"eventId"`
	Type    Type            `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// ErrMalformed wraps every reason Decode rejects a record.
var ErrMalformed = errors.New("malformed event")

// Encode builds the record value of an event whose payload is already JSON.
func Encode(id int64, t Type, payload []byte) ([]byte, error) {
	if !t.Known() {
		return nil, fmt.Errorf("encode event: unknown type %q", t)
	}
	return json.Marshal(Envelope{EventID: apijson.ID(id), Type: t, Payload: payload})
}

// Decode reads a record value. It tolerates unknown fields; it rejects anything that is not an envelope with an
// event id, a known type and an object payload.
func Decode(value []byte) (Envelope, error) {
	var env Envelope
	if err := json.Unmarshal(value, &env); err != nil {
		return Envelope{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	switch payload := bytes.TrimSpace(env.Payload); {
	case env.EventID == 0:
		return Envelope{}, fmt.Errorf("%w: no eventId", ErrMalformed)
	case !env.Type.Known():
		return Envelope{}, fmt.Errorf("%w: unknown type %q", ErrMalformed, env.Type)
	case len(payload) == 0 || payload[0] != '{':
		return Envelope{}, fmt.Errorf("%w: payload is not a JSON object", ErrMalformed)
	}
	return env, nil
}

// Payload decodes an envelope's payload into T (one of the payload structs below).
func Payload[T any](env Envelope) (T, error) {
	var p T
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		return p, fmt.Errorf("%w: %s payload: %w", ErrMalformed, env.Type, err)
	}
	return p, nil
}

// Article is the payload of ARTICLE_CREATED, ARTICLE_UPDATED and ARTICLE_DELETED; the key is BoardID.
type Article struct {
	ArticleID apijson.ID `json:"articleId"`
	Title     string     `json:"title"`
	Content   string     `json:"content"` // the Markdown source
	// ContentHTML is Content rendered and sanitized, to show as it is; ContentText its plain text, for search and
	// excerpts. Consumers never render (internal/markdown).
	ContentHTML              string       `json:"contentHtml"`
	ContentText              string       `json:"contentText"`
	BoardID                  apijson.ID   `json:"boardId"`
	WriterID                 apijson.ID   `json:"writerId"`
	CreatedAt                apijson.Time `json:"createdAt"`
	ModifiedAt               apijson.Time `json:"modifiedAt"`
	BoardArticleCount        int64        `json:"boardArticleCount"`
	ArticleVersion           int64        `json:"articleVersion"`
	BoardArticleCountVersion int64        `json:"boardArticleCountVersion"`
}

// Text is the article's plain text: ContentText, or for an event written before articles had one, Content (plain
// text then).
func (a Article) Text() string { return textOf(a.ContentText, a.Content) }

// Text is the comment's plain text, as Article.Text.
func (c Comment) Text() string { return textOf(c.ContentText, c.Content) }

func textOf(text, content string) string {
	if text == "" {
		return content
	}
	return text
}

// Comment is the payload of COMMENT_CREATED, COMMENT_UPDATED and COMMENT_DELETED; the key is ArticleID. A v2
// comment has a Path, a v1 comment a ParentCommentID (its own id for a root) instead. CommentVersion orders a
// comment's edits (1 as written, +1 per edit; 0 in events written before comments were editable, which are
// version 1); ModifiedAt is the last edit's time (CreatedAt until one).
type Comment struct {
	CommentID                  apijson.ID   `json:"commentId"`
	Content                    string       `json:"content"` // the Markdown source; "" once deleted
	ContentHTML                string       `json:"contentHtml"`
	ContentText                string       `json:"contentText"`
	Path                       string       `json:"path"`
	ParentCommentID            apijson.ID   `json:"parentCommentId,omitempty"`
	ArticleID                  apijson.ID   `json:"articleId"`
	WriterID                   apijson.ID   `json:"writerId"`
	Deleted                    bool         `json:"deleted"`
	CreatedAt                  apijson.Time `json:"createdAt"`
	ArticleCommentCount        int64        `json:"articleCommentCount"`
	ArticleCommentCountVersion int64        `json:"articleCommentCountVersion"`
	CommentVersion             int64        `json:"commentVersion"`
	ModifiedAt                 apijson.Time `json:"modifiedAt"`
}

// Like is the payload of ARTICLE_LIKED and ARTICLE_UNLIKED; the key is ArticleID.
type Like struct {
	ArticleLikeID           apijson.ID   `json:"articleLikeId"`
	ArticleID               apijson.ID   `json:"articleId"`
	UserID                  apijson.ID   `json:"userId"`
	CreatedAt               apijson.Time `json:"createdAt"`
	ArticleLikeCount        int64        `json:"articleLikeCount"`
	ArticleLikeCountVersion int64        `json:"articleLikeCountVersion"`
}

// CommentLike is the payload of COMMENT_LIKED and COMMENT_UNLIKED; the key is ArticleID.
// CommentLikeCountVersion is the comment's like count row's version, as ArticleLikeCountVersion.
type CommentLike struct {
	CommentLikeID           apijson.ID   `json:"commentLikeId"`
	CommentID               apijson.ID   `json:"commentId"`
	ArticleID               apijson.ID   `json:"articleId"`
	UserID                  apijson.ID   `json:"userId"`
	CreatedAt               apijson.Time `json:"createdAt"`
	CommentLikeCount        int64        `json:"commentLikeCount"`
	CommentLikeCountVersion int64        `json:"commentLikeCountVersion"`
}

// View is the payload of ARTICLE_VIEWED; the key is ArticleID.
type View struct {
	ArticleID        apijson.ID `json:"articleId"`
	ArticleViewCount int64      `json:"articleViewCount"`
}

// Hidden says whether, and why, moderation hides an article or a comment from everyone but moderators and its writer.
type Hidden string

const (
	Visible Hidden = ""        // not hidden
	Pending Hidden = "pending" // hidden at once by enough reports, pending a moderator's review
	Removed Hidden = "removed" // removed by a moderator
)

// ArticleModeration is the payload of ARTICLE_MODERATED; the key is BoardID, the moderation database's shard key for
// content (a board's pins are limited together). It is the article's whole moderation state after the action.
type ArticleModeration struct {
	ArticleID apijson.ID `json:"articleId"`
	BoardID   apijson.ID `json:"boardId"`
	WriterID  apijson.ID `json:"writerId"`
	Hidden    Hidden     `json:"hidden"`
	// RemovedReason is shown in place of the content while it is hidden.
	RemovedReason string `json:"removedReason"`
	Locked        bool   `json:"locked"` // no new comments
	Pinned        bool   `json:"pinned"` // shown first on the board's first page
	// Action is what the moderator did (one of the Action constants); ModeratorID is 0 for a hide by reports.
	Action      string       `json:"action"`
	Reason      string       `json:"reason"`
	ModeratorID apijson.ID   `json:"moderatorId"`
	ModeratedAt apijson.Time `json:"moderatedAt"`
	// ModerationVersion is bumped with every change of the article's moderation state.
	ModerationVersion int64 `json:"moderationVersion"`
}

// CommentModeration is the payload of COMMENT_MODERATED; the key is BoardID, as for articles. It is the comment's
// whole moderation state after the action it reports.
type CommentModeration struct {
	CommentID         apijson.ID   `json:"commentId"`
	ArticleID         apijson.ID   `json:"articleId"`
	BoardID           apijson.ID   `json:"boardId"`
	WriterID          apijson.ID   `json:"writerId"`
	Hidden            Hidden       `json:"hidden"`
	RemovedReason     string       `json:"removedReason"`
	Action            string       `json:"action"`
	Reason            string       `json:"reason"`
	ModeratorID       apijson.ID   `json:"moderatorId"`
	ModeratedAt       apijson.Time `json:"moderatedAt"`
	ModerationVersion int64        `json:"moderationVersion"`
}

// Moderation actions, as ArticleModeration.Action, CommentModeration.Action and the moderation log name them.
const (
	ActionHide    = "hide"    // hidden by reports, pending review
	ActionRemove  = "remove"  // a moderator removed it
	ActionRestore = "restore" // a moderator dismissed its reports, showing it again
	ActionLock    = "lock"
	ActionUnlock  = "unlock"
	ActionPin     = "pin"
	ActionUnpin   = "unpin"
	ActionBan     = "ban"
	ActionUnban   = "unban"
)

// Ban is the payload of USER_BANNED and USER_UNBANNED; the key is UserID. Until is nil for a ban for good.
type Ban struct {
	UserID      apijson.ID    `json:"userId"`
	Banned      bool          `json:"banned"`
	Reason      string        `json:"reason"`
	Until       *apijson.Time `json:"until"`
	ModeratorID apijson.ID    `json:"moderatorId"`
	At          apijson.Time  `json:"at"`
	// BanVersion is bumped with every ban and unban of the user.
	BanVersion int64 `json:"banVersion"`
}

// Role is the payload of USER_ROLE_CHANGED; the key is UserID.
type Role struct {
	UserID apijson.ID `json:"userId"`
	Role   string     `json:"role"`
	// RoleVersion is bumped with every change of the user's role.
	RoleVersion int64 `json:"roleVersion"`
}

// Block is the payload of USER_BLOCKED and USER_UNBLOCKED; the key is BlockKey(UserID, BlockedUserID).
// BlockVersion is bumped with every block and unblock of the pair.
type Block struct {
	UserID        apijson.ID   `json:"userId"` // who blocks
	BlockedUserID apijson.ID   `json:"blockedUserId"`
	Blocked       bool         `json:"blocked"`
	At            apijson.Time `json:"at"`
	BlockVersion  int64        `json:"blockVersion"`
}

// BlockKey is the record key of a pair's block events.
func BlockKey(userID, blockedUserID int64) string { return fmt.Sprintf("%d:%d", userID, blockedUserID) }

// Media is the payload of MEDIA_UPLOADED and MEDIA_DELETED; the key is OwnerID. Key and ThumbnailKey are the blob
// keys the image and its thumbnail are served under (GET /media/{key}).
type Media struct {
	MediaID      apijson.ID   `json:"mediaId"`
	OwnerID      apijson.ID   `json:"ownerId"`
	Key          string       `json:"key"`
	ThumbnailKey string       `json:"thumbnailKey"`
	ContentType  string       `json:"contentType"`
	Width        int          `json:"width"`
	Height       int          `json:"height"`
	Bytes        int64        `json:"bytes"`
	CreatedAt    apijson.Time `json:"createdAt"`
}

// Record headers every event carries besides its JSON value, so tools can route without decoding.
const (
	HeaderType    = "eventType"
	HeaderEventID = "eventId"
)

// Session is the payload of USER_PASSWORD_CHANGED; the key is UserID. Tokens of the user that carry a token epoch
// below TokenEpoch are void (auth.Principal.TokenEpoch): it is bumped, in the transaction that changes the password,
// by a password change, a reset and "end every session". It orders the user's session events like a version.
type Session struct {
	UserID     apijson.ID   `json:"userId"`
	TokenEpoch int64        `json:"tokenEpoch"`
	Reason     string       `json:"reason"` // one of the Session* reasons
	At         apijson.Time `json:"at"`
}

// Why a user's token epoch moved (Session.Reason).
const (
	SessionPasswordChanged = "password-changed"
	SessionPasswordReset   = "password-reset"
	SessionsEnded          = "sessions-ended"
)

// UserDeletion is the payload of USER_DELETED; the key is UserID. Every token of the user is void from then on.
// Content says what becomes of what they wrote: DeleteRemove removes their articles, comments and likes, DeleteKeep
// keeps them, shown as a deleted user's. Every service forgets the rest of what it holds about the user (their inbox,
// watches, bookmarks, e-mail). TokenEpoch is the user's epoch after the deletion, higher than any before it.
type UserDeletion struct {
	UserID     apijson.ID   `json:"userId"`
	Content    string       `json:"content"`
	TokenEpoch int64        `json:"tokenEpoch"`
	At         apijson.Time `json:"at"`
}

// What a deleted user's content becomes (UserDeletion.Content).
const (
	DeleteKeep   = "keep"
	DeleteRemove = "remove"
)

// EmailVerified is the payload of USER_EMAIL_VERIFIED; the key is UserID. EmailVersion is bumped with every change of
// the user's verified address, so that an older address never replaces a newer one. Email is empty when the user has
// none any more (they deleted their account): on the compacted topic, that record replaces their last address.
type EmailVerified struct {
	UserID       apijson.ID   `json:"userId"`
	Email        string       `json:"email"`
	EmailVersion int64        `json:"emailVersion"`
	At           apijson.Time `json:"at"`
}

// Mail is the payload of MAIL_REQUESTED; the key is UserID (the shard key of the outbox row that carries it). The mail service sends it as it is: its writer
// renders it. MailID names it for good (the Message-ID, and the dedupe of a redelivered record).
type Mail struct {
	MailID  apijson.ID `json:"mailId"`
	Kind    string     `json:"kind"` // one of the Mail* kinds
	UserID  apijson.ID `json:"userId"`
	To      string     `json:"to"`
	Subject string     `json:"subject"`
	Text    string     `json:"text"`           // the plain-text body
	HTML    string     `json:"html,omitempty"` // an HTML alternative, if any
	// Unsubscribe, when set, is the one-click unsubscribe URL (RFC 8058): the mail carries List-Unsubscribe and
	// List-Unsubscribe-Post headers with it.
	Unsubscribe string       `json:"unsubscribe,omitempty"`
	At          apijson.Time `json:"at"`
}

// Mail kinds.
const (
	MailVerifyEmail   = "verify-email"
	MailPasswordReset = "password-reset"
	MailNotification  = "notification"
	MailDigest        = "digest"
)
