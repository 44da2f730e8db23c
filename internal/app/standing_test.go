package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"testing"
	"time"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/kafka"
)

// A ban published to the ban topic reaches a running board's Guard: the user's next writes are refused with 403
// BANNED, and so is their sign-in; an unban lets them write again.
func TestBanReachesTheGuard(t *testing.T) {
	t.Parallel()
	a, cfg := runBoard(t, "--article-addr", "127.0.0.1:0", "user", "article")

	type answer struct {
		status int
		body   map[string]any
	}
	send := func(token, method, url string, body any) answer {
		t.Helper()
		raw, _ := json.Marshal(body)
		req, err := http.NewRequest(method, url, bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out := answer{status: resp.StatusCode}
		raw, _ = io.ReadAll(resp.Body)
		_ = json.Unmarshal(raw, &out.body)
		return out
	}
	creds := map[string]any{"username": "mallory", "password": "password1"}
	signUp := send("", "POST", a.URL("user")+"/v1/users", creds)
	if signUp.status != http.StatusCreated {
		t.Fatalf("sign up: %v", signUp)
	}
	userID, err := apijson.Parse(signUp.body["userId"].(string))
	if err != nil {
		t.Fatal(err)
	}
	signIn := send("", "POST", a.URL("user")+"/v1/tokens", creds)
	token, _ := signIn.body["accessToken"].(string)
	if token == "" {
		t.Fatalf("sign in: %v", signIn)
	}
	article := map[string]any{"title": "t", "content": "c", "boardId": 1}
	write := func() answer { return send(token, "POST", a.URL("article")+"/v1/articles", article) }
	if w := write(); w.status != http.StatusCreated {
		t.Fatalf("write before the ban: %v", w)
	}

	publish := func(id int64, typ event.Type, b event.Ban) {
		t.Helper()
		payload, _ := json.Marshal(b)
		value, err := event.Encode(id, typ, payload)
		if err != nil {
			t.Fatal(err)
		}
		rec := kafka.EventRecord(typ.Topic(cfg.TopicPrefix), userID, id, typ, value)
		if err := a.engines.Producer.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	until := apijson.Time(time.Now().Add(time.Hour))
	publish(1, event.UserBanned, event.Ban{UserID: apijson.ID(userID), Banned: true, Reason: "spam", Until: &until, BanVersion: 1})
	poll(t, "a write refused for the ban", func() bool {
		w := write()
		return w.status == http.StatusForbidden && w.body["code"] == "BANNED" && w.body["reason"] == "spam" && w.body["until"] != nil
	})
	if s := send("", "POST", a.URL("user")+"/v1/tokens", creds); s.status != http.StatusForbidden || s.body["code"] != "BANNED" {
		t.Errorf("sign-in of a banned user: %v", s)
	}
	publish(2, event.UserUnbanned, event.Ban{UserID: apijson.ID(userID), BanVersion: 2})
	poll(t, "a write after the unban", func() bool { return write().status == http.StatusCreated })
}

// runBoard runs a board on embedded engines, with the user service and args, until the test ends.
func runBoard(t *testing.T, args ...string) (*App, Config) {
	t.Helper()
	args = append([]string{"--data-dir", t.TempDir(), "--embedded-redis-addr", "127.0.0.1:0", "--embedded-kafka-addr", "127.0.0.1:0",
		"--password-hash", "64,1,1", "--rate-limits=false", "--user-addr", "127.0.0.1:0"}, args...)
	cfg, err := ParseServe(args, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Run(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return a, cfg
}

// poll calls cond until it holds, for at most 10 s: never an assertion on how fast.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
	}
}

// A block made at the user service reaches the process's table of blocks, through the outbox, the relay and the
// compacted block topic; so does its unblock.
func TestBlockReachesTheTable(t *testing.T) {
	t.Parallel()
	a, _ := runBoard(t, "user")
	send := func(token, method, path string, body any) (int, map[string]any) {
		t.Helper()
		raw, _ := json.Marshal(body)
		req, err := http.NewRequest(method, a.URL("user")+path, bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		raw, _ = io.ReadAll(resp.Body)
		_ = json.Unmarshal(raw, &out)
		return resp.StatusCode, out
	}
	ids := map[string]int64{}
	var token string
	for _, name := range []string{"alice", "bob"} {
		creds := map[string]any{"username": name, "password": "password1"}
		status, body := send("", "POST", "/v1/users", creds)
		if status != http.StatusCreated {
			t.Fatalf("sign up %s: %d %v", name, status, body)
		}
		ids[name], _ = apijson.Parse(body["userId"].(string))
		if name == "alice" {
			_, body = send("", "POST", "/v1/tokens", creds)
			token, _ = body["accessToken"].(string)
		}
	}
	path := "/v1/blocks/" + strconv.FormatInt(ids["bob"], 10)
	if status, body := send(token, "PUT", path, nil); status != http.StatusOK {
		t.Fatalf("block: %d %v", status, body)
	}
	poll(t, "the block in the table", func() bool { return a.engines.Blocks.Blocks(ids["alice"], ids["bob"]) })
	if status, body := send(token, "DELETE", path, nil); status != http.StatusNoContent {
		t.Fatalf("unblock: %d %v", status, body)
	}
	poll(t, "the unblock in the table", func() bool { return !a.engines.Blocks.Blocks(ids["alice"], ids["bob"]) })
}
