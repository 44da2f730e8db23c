// Package event is the contract between services: the envelope every event travels in, the eight event types, their
// payloads and the topics they go to (SPEC §4).
//
// Ordering. Delivery is at least once and per-key order is not guaranteed (docs/messaging.md says why), so every
// payload carries versions: counters that the producer bumps in the same transaction as the change they describe,
// strictly increasing per aggregate. A consumer keeps the highest version it applied per aggregate and ignores an
// event whose version is not higher: duplicates and late events then never undo newer state.
//   - ArticleVersion: the article row (1 at create, +1 per update, +1 at delete).
//   - BoardArticleCountVersion: the board's article count row.
//   - ArticleCommentCountVersion: the article's comment count row.
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
	ArticleLiked   Type = "ARTICLE_LIKED"
	ArticleUnliked Type = "ARTICLE_UNLIKED"
	ArticleViewed  Type = "ARTICLE_VIEWED"
)

// topics maps each type to its topic's base name; the deployment's prefix goes in front (SPEC §4: "board-").
var topics = map[Type]string{
	ArticleCreated: "article", ArticleUpdated: "article", ArticleDeleted: "article",
	CommentCreated: "comment", CommentDeleted: "comment",
	ArticleLiked: "like", ArticleUnliked: "like",
	ArticleViewed: "view",
}

// Known reports whether t is one of the event types.
func (t Type) Known() bool { _, ok := topics[t]; return ok }

// Topic returns the topic events of type t go to, under prefix (e.g. "board-" gives "board-article").
func (t Type) Topic(prefix string) string { return prefix + topics[t] }

// Topics returns every topic under prefix, each once.
func Topics(prefix string) []string {
	return []string{prefix + "article", prefix + "comment", prefix + "like", prefix + "view"}
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
	ArticleID                apijson.ID   `json:"articleId"`
	Title                    string       `json:"title"`
	Content                  string       `json:"content"`
	BoardID                  apijson.ID   `json:"boardId"`
	WriterID                 apijson.ID   `json:"writerId"`
	CreatedAt                apijson.Time `json:"createdAt"`
	ModifiedAt               apijson.Time `json:"modifiedAt"`
	BoardArticleCount        int64        `json:"boardArticleCount"`
	ArticleVersion           int64        `json:"articleVersion"`
	BoardArticleCountVersion int64        `json:"boardArticleCountVersion"`
}

// Comment is the payload of COMMENT_CREATED and COMMENT_DELETED; the key is ArticleID. A v2 comment has a Path, a
// v1 comment a ParentCommentID (its own id for a root) instead.
type Comment struct {
	CommentID                  apijson.ID   `json:"commentId"`
	Content                    string       `json:"content"`
	Path                       string       `json:"path"`
	ParentCommentID            apijson.ID   `json:"parentCommentId,omitempty"`
	ArticleID                  apijson.ID   `json:"articleId"`
	WriterID                   apijson.ID   `json:"writerId"`
	Deleted                    bool         `json:"deleted"`
	CreatedAt                  apijson.Time `json:"createdAt"`
	ArticleCommentCount        int64        `json:"articleCommentCount"`
	ArticleCommentCountVersion int64        `json:"articleCommentCountVersion"`
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

// View is the payload of ARTICLE_VIEWED; the key is ArticleID.
type View struct {
	ArticleID        apijson.ID `json:"articleId"`
	ArticleViewCount int64      `json:"articleViewCount"`
}

// Record headers every event carries besides its JSON value, so tools can route without decoding.
const (
	HeaderType    = "eventType"
	HeaderEventID = "eventId"
)
