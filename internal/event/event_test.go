package event

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	payload := Like{ArticleLikeID: 9007199254740993, ArticleID: 2, UserID: 3, ArticleLikeCount: 4, ArticleLikeCountVersion: 5}
	body, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	value, err := Encode(9007199254740995, ArticleLiked, body)
	if err != nil {
		t.Fatal(err)
	}
	env, err := Decode(value)
	if err != nil {
		t.Fatal(err)
	}
	if env.EventID != 9007199254740995 || env.Type != ArticleLiked {
		t.Errorf("envelope = %d %s", env.EventID, env.Type)
	}
	got, err := Payload[Like](env)
	if err != nil {
		t.Fatal(err)
	}
	if got != payload {
		t.Errorf("payload = %+v, want %+v", got, payload)
	}
	// Ids above 2^53 travel as strings, so JavaScript consumers keep them exact.
	var raw map[string]any
	if err := json.Unmarshal(value, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["eventId"] != "9007199254740995" {
		t.Errorf("eventId on the wire = %#v, want a string", raw["eventId"])
	}
}

func TestDecodeToleratesUnknownFields(t *testing.T) {
	env, err := Decode([]byte(`{"eventId":"1","type":"ARTICLE_VIEWED","payload":{"articleId":"7","articleViewCount":100,"extra":true},"traceId":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Payload[View](env)
	if err != nil || p.ArticleID != 7 || p.ArticleViewCount != 100 {
		t.Errorf("payload = %+v, %v", p, err)
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	for name, value := range map[string]string{
		"not json":        `garbage`,
		"empty":           ``,
		"array":           `[]`,
		"no event id":     `{"type":"ARTICLE_VIEWED","payload":{}}`,
		"zero event id":   `{"eventId":"0","type":"ARTICLE_VIEWED","payload":{}}`,
		"bad event id":    `{"eventId":"x","type":"ARTICLE_VIEWED","payload":{}}`,
		"unknown type":    `{"eventId":"1","type":"ARTICLE_EXPLODED","payload":{}}`,
		"no payload":      `{"eventId":"1","type":"ARTICLE_VIEWED"}`,
		"null payload":    `{"eventId":"1","type":"ARTICLE_VIEWED","payload":null}`,
		"string payload":  `{"eventId":"1","type":"ARTICLE_VIEWED","payload":"{}"}`,
		"trailing":        `{"eventId":"1","type":"ARTICLE_VIEWED","payload":{}} {}`,
		"truncated":       `{"eventId":"1","type":"ARTICLE_VIEWED","payload":{`,
		"wrong id type":   `{"eventId":true,"type":"ARTICLE_VIEWED","payload":{}}`,
		"wrong type type": `{"eventId":"1","type":5,"payload":{}}`,
	} {
		if _, err := Decode([]byte(value)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Decode(%q) = %v, want ErrMalformed", name, value, err)
		}
	}
	env, err := Decode([]byte(`{"eventId":"1","type":"ARTICLE_VIEWED","payload":{"articleViewCount":"many"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Payload[View](env); !errors.Is(err, ErrMalformed) {
		t.Errorf("a payload of the wrong shape: %v, want ErrMalformed", err)
	}
}

func TestTopics(t *testing.T) {
	for typ, want := range map[Type]string{
		ArticleCreated: "board-article", ArticleUpdated: "board-article", ArticleDeleted: "board-article",
		CommentCreated: "board-comment", CommentDeleted: "board-comment", CommentUpdated: "board-comment",
		ArticleLiked: "board-like", ArticleUnliked: "board-like", ArticleViewed: "board-view",
		ArticleModerated: "board-moderation", CommentModerated: "board-moderation",
		UserBanned: "board-ban", UserUnbanned: "board-ban", UserRoleChanged: "board-user",
		CommentLiked: "board-like", CommentUnliked: "board-like", UserBlocked: "board-block", UserUnblocked: "board-block",
		MediaUploaded: "board-media", MediaDeleted: "board-media",
		UserPasswordChanged: "board-session", UserDeleted: "board-session", UserEmailVerified: "board-account",
		MailRequested: "board-mail",
	} {
		if got := typ.Topic("board-"); got != want {
			t.Errorf("%s.Topic = %s, want %s", typ, got, want)
		}
	}
	if diff := cmp.Diff([]string{"board-article", "board-comment", "board-like", "board-view", "board-moderation",
		"board-ban", "board-user", "board-block", "board-media", "board-session", "board-account", "board-mail"},
		Topics("board-")); diff != "" {
		t.Errorf("Topics (-want +got):\n%s", diff)
	}
	if _, err := Encode(1, "NOPE", []byte(`{}`)); err == nil {
		t.Error("Encode accepted an unknown type")
	}
}

// FuzzDecode: Decode never panics, and what it accepts re-encodes to an envelope it accepts again, unchanged.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"eventId":"1","type":"ARTICLE_CREATED","payload":{"articleId":"1"}}`,
		`{"eventId":2,"type":"COMMENT_DELETED","payload":{}}`,
		`{"eventId":"1","type":"ARTICLE_VIEWED","payload":{"articleViewCount":1e3}}`,
		`{}`, `null`, `{"eventId":"-1"}`, "\x00\xff",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		env, err := Decode(value)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Decode error %v is not ErrMalformed", err)
			}
			return
		}
		again, err := Encode(int64(env.EventID), env.Type, env.Payload)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		env2, err := Decode(again)
		if err != nil {
			t.Fatalf("re-decode %s: %v", again, err)
		}
		if env2.EventID != env.EventID || env2.Type != env.Type {
			t.Fatalf("round trip changed the envelope: %+v -> %+v", env, env2)
		}
	})
}
