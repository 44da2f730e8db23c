// The event contract as docs/asyncapi.yaml describes it (SPEC §4): its topics, record headers and payloads are
// checked here against the code that writes them (this package and internal/kafka).

package event_test

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/go-cmp/cmp"
	"github.com/oasdiff/yaml"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/kafka"
)

// asyncDoc is what the tests read of docs/asyncapi.yaml.
type asyncDoc struct {
	AsyncAPI string `json:"asyncapi"`
	Channels map[string]struct {
		Address  string                     `json:"address"`
		Messages map[string]json.RawMessage `json:"messages"`
	} `json:"channels"`
	Components struct {
		Messages map[string]struct {
			Name    string `json:"name"`
			Headers struct {
				Ref string `json:"$ref"`
			} `json:"headers"`
			Payload struct {
				Ref string `json:"$ref"`
			} `json:"payload"`
		} `json:"messages"`
		Schemas map[string]json.RawMessage `json:"schemas"`
	} `json:"components"`
}

// loadAsync reads the AsyncAPI document, and its schemas as an OpenAPI 3.1 document's components (both use JSON
// Schema, and the same #/components/schemas/ references), which kin-openapi validates values against.
func loadAsync(t *testing.T) (asyncDoc, *openapi3.T) {
	t.Helper()
	raw, err := os.ReadFile("../../docs/asyncapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatalf("docs/asyncapi.yaml: %v", err)
	}
	var doc asyncDoc
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatalf("docs/asyncapi.yaml: %v", err)
	}
	wrapper, err := json.Marshal(map[string]any{
		"openapi":    "3.1.0",
		"info":       map[string]string{"title": "board events", "version": "1"},
		"paths":      map[string]any{},
		"components": map[string]any{"schemas": doc.Components.Schemas},
	})
	if err != nil {
		t.Fatal(err)
	}
	loader := openapi3.NewLoader()
	schemas, err := loader.LoadFromData(wrapper)
	if err != nil {
		t.Fatalf("the schemas of docs/asyncapi.yaml: %v", err)
	}
	if err := schemas.Validate(context.Background()); err != nil {
		t.Fatalf("the schemas of docs/asyncapi.yaml: %v", err)
	}
	return doc, schemas
}

func schemaName(ref string) string { return strings.TrimPrefix(ref, "#/components/schemas/") }

func TestAsyncAPITopics(t *testing.T) {
	doc, _ := loadAsync(t)
	if doc.AsyncAPI != "3.0.0" {
		t.Errorf("asyncapi = %q, want 3.0.0", doc.AsyncAPI)
	}
	var documented, want []string
	for _, ch := range doc.Channels {
		documented = append(documented, strings.ReplaceAll(ch.Address, "{prefix}", "board-"))
	}
	for _, topic := range event.Topics("board-") {
		want = append(want, topic, event.DeadLetterTopic(topic))
	}
	slices.Sort(documented)
	slices.Sort(want)
	if diff := cmp.Diff(want, documented); diff != "" {
		t.Errorf("topics (-code +documented):\n%s", diff)
	}
	// Each type's message is on its topic's channel.
	for name, ch := range doc.Channels {
		for _, raw := range ch.Messages {
			var m struct {
				Ref string `json:"$ref"`
			}
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			msg := doc.Components.Messages[strings.TrimPrefix(m.Ref, "#/components/messages/")]
			typ := event.Type(msg.Name)
			if typ.Known() && typ.Topic("{prefix}") != ch.Address {
				t.Errorf("channel %s (%s) carries %s, which goes to %s", name, ch.Address, typ, typ.Topic("{prefix}"))
			}
		}
	}
}

// samples are events as the producers write them, every field set.
func samples() map[event.Type]any {
	created := apijson.Time(time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC))
	article := event.Article{ArticleID: 383009385012031488, Title: "title", Content: "content", BoardID: 1, WriterID: 7,
		CreatedAt: created, ModifiedAt: created, BoardArticleCount: 3, ArticleVersion: 2, BoardArticleCountVersion: 5}
	v1 := event.Comment{CommentID: 383009385012031490, Content: "reply", ParentCommentID: 383009385012031489,
		ArticleID: 383009385012031488, WriterID: 7, CreatedAt: created, ArticleCommentCount: 2, ArticleCommentCountVersion: 2,
		CommentVersion: 1, ModifiedAt: created}
	v2 := event.Comment{CommentID: 383009385012031491, Content: "", Path: "00000000a1", ArticleID: 383009385012031488,
		WriterID: 7, Deleted: true, CreatedAt: created, ArticleCommentCount: 2, ArticleCommentCountVersion: 2, CommentVersion: 1,
		ModifiedAt: created}
	edited := v1
	edited.Content, edited.CommentVersion, edited.ModifiedAt = "reply, edited", 2, apijson.Time(time.Date(2026, 1, 2, 4, 0, 0, 0, time.UTC))
	like := event.Like{ArticleLikeID: 383009385012031492, ArticleID: 383009385012031488, UserID: 7, CreatedAt: created,
		ArticleLikeCount: 1, ArticleLikeCountVersion: 1}
	view := event.View{ArticleID: 383009385012031488, ArticleViewCount: 100}
	moderated := event.ArticleModeration{ArticleID: 383009385012031488, BoardID: 1, WriterID: 7, Hidden: event.Removed,
		RemovedReason: "spam", Locked: true, Pinned: true, Action: event.ActionRemove, Reason: "spam", ModeratorID: 9,
		ModeratedAt: created, ModerationVersion: 3}
	comment := event.CommentModeration{CommentID: 383009385012031490, ArticleID: 383009385012031488, BoardID: 1, WriterID: 7,
		Hidden: event.Pending, RemovedReason: "5 reports", Action: event.ActionHide, ModeratedAt: created, ModerationVersion: 1}
	until := apijson.Time(time.Date(2026, 2, 2, 3, 4, 5, 6e6, time.UTC))
	ban := event.Ban{UserID: 7, Banned: true, Reason: "spam", Until: &until, ModeratorID: 9, At: created, BanVersion: 1}
	unban := event.Ban{UserID: 7, ModeratorID: 9, At: created, BanVersion: 2}
	role := event.Role{UserID: 7, Role: "moderator", RoleVersion: 2}
	commentLike := event.CommentLike{CommentLikeID: 383009385012031494, CommentID: 383009385012031490,
		ArticleID: 383009385012031488, UserID: 7, CreatedAt: created, CommentLikeCount: 1, CommentLikeCountVersion: 1}
	block := event.Block{UserID: 7, BlockedUserID: 9, Blocked: true, At: created, BlockVersion: 1}
	img := event.Media{MediaID: 383009385012031493, OwnerID: 7, Key: strings.Repeat("ab", 32) + ".jpg",
		ThumbnailKey: strings.Repeat("cd", 32) + ".jpg", ContentType: "image/jpeg", Width: 4000, Height: 3000, Bytes: 4 << 20,
		CreatedAt: created}
	session := event.Session{UserID: 7, TokenEpoch: 3, Reason: event.SessionPasswordReset, At: created}
	deletion := event.UserDeletion{UserID: 7, Content: event.DeleteRemove, TokenEpoch: 4, At: created}
	email := event.EmailVerified{UserID: 7, Email: "ann@example.com", EmailVersion: 2, At: created}
	mail := event.Mail{MailID: 383009385012031495, Kind: event.MailDigest, UserID: 7, To: "ann@example.com",
		Subject: "Your day on board", Text: "3 replies", HTML: "<p>3 replies</p>",
		Unsubscribe: "https://board.example.com/unsubscribe/abc", At: created}
	return map[event.Type]any{
		event.UserPasswordChanged: session, event.UserDeleted: deletion, event.UserEmailVerified: email,
		event.MailRequested:  mail,
		event.ArticleCreated: article, event.ArticleUpdated: article, event.ArticleDeleted: article,
		event.CommentCreated: v1, event.CommentDeleted: v2, event.CommentUpdated: edited,
		event.ArticleLiked: like, event.ArticleUnliked: like, event.CommentLiked: commentLike, event.CommentUnliked: commentLike,
		event.UserBlocked: block, event.UserUnblocked: block,
		event.ArticleViewed:    view,
		event.ArticleModerated: moderated, event.CommentModerated: comment,
		event.UserBanned: ban, event.UserUnbanned: unban, event.UserRoleChanged: role,
		event.MediaUploaded: img, event.MediaDeleted: img,
	}
}

// jsonFields lists the JSON names of a struct type's fields.
func jsonFields(typ reflect.Type) []string {
	var names []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		if name != "-" && f.IsExported() {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

func TestAsyncAPIPayloads(t *testing.T) {
	doc, schemas := loadAsync(t)
	byType := map[event.Type]string{} // event type -> envelope schema
	for _, m := range doc.Components.Messages {
		if typ := event.Type(m.Name); typ.Known() {
			byType[typ] = schemaName(m.Payload.Ref)
		}
	}
	for typ, payload := range samples() {
		t.Run(string(typ), func(t *testing.T) {
			envName, ok := byType[typ]
			if !ok {
				t.Fatalf("no message named %s", typ)
			}
			env := schemas.Components.Schemas[envName]
			if env == nil {
				t.Fatalf("no schema %s", envName)
			}
			// The envelope as the relay writes it validates.
			p, err := json.Marshal(payload)
			if err != nil {
				t.Fatal(err)
			}
			value, err := event.Encode(383009385012031500, typ, p)
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(value, &v); err != nil {
				t.Fatal(err)
			}
			if err := env.Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
				t.Errorf("the %s record value does not match %s: %v", typ, envName, err)
			}
			// And the payload schema names exactly the payload struct's fields.
			var payloadRef string
			for _, s := range env.Value.AllOf {
				if pr := s.Value.Properties["payload"]; pr != nil && pr.Ref != "" {
					payloadRef = pr.Ref
				}
			}
			ps := schemas.Components.Schemas[schemaName(payloadRef)]
			if ps == nil {
				t.Fatalf("%s: no payload schema (%q)", envName, payloadRef)
			}
			documented := slices.Sorted(func(yield func(string) bool) {
				for k := range ps.Value.Properties {
					if !yield(k) {
						return
					}
				}
			})
			if diff := cmp.Diff(jsonFields(reflect.TypeOf(payload)), documented); diff != "" {
				t.Errorf("%s payload fields (-%T +documented):\n%s", typ, payload, diff)
			}
		})
	}
	if len(byType) != len(samples()) {
		t.Errorf("%d event types have a message, want %d", len(byType), len(samples()))
	}
}

func TestAsyncAPIHeaders(t *testing.T) {
	_, schemas := loadAsync(t)
	props := func(name string) []string {
		s := schemas.Components.Schemas[name]
		if s == nil {
			t.Fatalf("no schema %s", name)
		}
		return slices.Sorted(func(yield func(string) bool) {
			for k := range s.Value.Properties {
				if !yield(k) {
					return
				}
			}
		})
	}
	// The headers of a record as the relay builds it.
	rec := kafka.EventRecord("board-article", 1, 2, event.ArticleCreated, []byte("{}"))
	kafka.SetCreatedAt(rec, time.Now())
	var sent []string
	for _, h := range rec.Headers {
		sent = append(sent, h.Key)
	}
	slices.Sort(sent)
	if diff := cmp.Diff(sent, props("EventHeaders")); diff != "" {
		t.Errorf("event headers (-sent +documented):\n%s", diff)
	}
	dlt := slices.Concat(sent, []string{kafka.HeaderDLTError, kafka.HeaderDLTOriginTopic, kafka.HeaderDLTOriginPartition,
		kafka.HeaderDLTOriginOffset, kafka.HeaderDLTAttempts, kafka.HeaderDLTFailedAt})
	slices.Sort(dlt)
	if diff := cmp.Diff(dlt, props("DeadLetterHeaders")); diff != "" {
		t.Errorf("dead-letter headers (-sent +documented):\n%s", diff)
	}
	var types []string
	for typ := range samples() {
		types = append(types, string(typ))
	}
	slices.Sort(types)
	var enum []string
	for _, e := range schemas.Components.Schemas["EventHeaders"].Value.Properties[event.HeaderType].Value.Enum {
		enum = append(enum, e.(string))
	}
	slices.Sort(enum)
	if diff := cmp.Diff(types, enum); diff != "" {
		t.Errorf("the %s header's values (-types +documented):\n%s", event.HeaderType, diff)
	}
}
