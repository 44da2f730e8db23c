package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"board/internal/app"
)

func TestHelpForEveryCommand(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help"}, {"serve", "--help"}, {"serve", "article", "-h"}, {"bench", "--help"}, {"migrate", "--help"}, {"seed", "--help"},
		{"seed", "comments", "--help"}, {"bench", "paging", "--help"}, {"bench", "comments", "--help"}, {"bench", "relay", "--help"},
		{"bench", "likes", "--help"}, {"bench", "standing", "--help"}} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, noEnv, &out, &errOut); err != nil {
			t.Errorf("board %s: %v", strings.Join(args, " "), err)
		}
		if !strings.Contains(out.String()+errOut.String(), "Usage") {
			t.Errorf("board %s printed no usage:\n%s%s", strings.Join(args, " "), out.String(), errOut.String())
		}
	}
}

func TestBadInvocations(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{}, {"frobnicate"}, {"serve", "--no-such-flag"}, {"serve", "nosuchservice"},
		{"bench"}, {"seed", "--articles", "0"}, {"seed", "comments", "--versions", "v3"}, {"seed", "comments", "--batch", "0"},
		{"serve", "--like-strategy", "no-lock"}, {"bench", "comments", "--depth", "0"}, {"bench", "paging", "--page-size", "101"},
		{"seed", "comments", "--comments", "3000000000"}, {"migrate", "extra"}, {"bench", "relay", "now"},
		{"serve", "article", "--article-addr"}} {
		if err := run(context.Background(), args, noEnv, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
			t.Errorf("board %s: no error", strings.Join(args, " "))
		}
	}
}

func TestMigrateIsIdempotentAndSeedResumes(t *testing.T) {
	t.Parallel()
	flags := testFlags(t, t.TempDir())
	for range 2 {
		var out bytes.Buffer
		if err := run(context.Background(), append([]string{"migrate"}, flags...), noEnv, &out, &bytes.Buffer{}); err != nil {
			t.Fatalf("migrate: %v", err)
		}
		if !strings.Contains(out.String(), "migrated article") || !strings.Contains(out.String(), "migrated comment") {
			t.Errorf("migrate printed %q", out.String())
		}
	}
	seed := append([]string{"seed", "--board", "3", "--articles", "5000", "--batch", "700", "--workers", "3"}, flags...)
	var out bytes.Buffer
	if err := run(context.Background(), seed, noEnv, &out, &bytes.Buffer{}); err != nil {
		t.Fatalf("seed: %v", err)
	}
	if !strings.Contains(out.String(), "seeded 5000 articles (0 already there)") {
		t.Errorf("first seed printed %q", out.String())
	}
	out.Reset()
	if err := run(context.Background(), seed, noEnv, &out, &bytes.Buffer{}); err != nil {
		t.Fatalf("seed again: %v", err)
	}
	if !strings.Contains(out.String(), "seeded 0 articles (5000 already there)") {
		t.Errorf("second seed printed %q", out.String())
	}

	seed = append([]string{"seed", "comments", "--article", "5", "--comments", "1003", "--batch", "100"}, flags...)
	for _, want := range []string{"seeded 1003 v1 comments (0 already there)", "seeded 0 v1 comments (1003 already there)"} {
		out.Reset()
		if err := run(context.Background(), seed, noEnv, &out, &bytes.Buffer{}); err != nil {
			t.Fatalf("seed comments: %v", err)
		}
		if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), strings.ReplaceAll(want, "v1", "v2")) {
			t.Errorf("seed comments printed %q, want %q for v1 and v2", out.String(), want)
		}
	}

	p := startProgram(t, flags)
	var count int
	call(t, "GET", p.urls["article"]+"/v1/articles/boards/3/count", nil, 200, &count)
	var page struct{ ArticleCount int }
	call(t, "GET", p.urls["article"]+"/v1/articles?boardId=3&page=1&pageSize=100", nil, 200, &page)
	if count != 5000 || page.ArticleCount != 1001 {
		t.Errorf("board count %d and capped page count %d; want 5000 and 1001", count, page.ArticleCount)
	}

	// Seeded comments follow the tree rules: v1 pairs of a root and its reply, v2 threads five deep.
	api := p.urls["comment"]
	call(t, "GET", api+"/v2/comments/articles/5/count", nil, 200, &count)
	if count != 2*1003 {
		t.Errorf("comment count %d, want %d", count, 2*1003)
	}
	var v1 []struct{ CommentID, ParentCommentID string }
	call(t, "GET", api+"/v1/comments/infinite-scroll?articleId=5&pageSize=4", nil, 200, &v1)
	if len(v1) != 4 || v1[0].ParentCommentID != v1[0].CommentID || v1[1].ParentCommentID != v1[0].CommentID ||
		v1[2].ParentCommentID != v1[2].CommentID || v1[3].ParentCommentID != v1[2].CommentID {
		t.Errorf("first v1 comments %+v, want root, reply, root, reply", v1)
	}
	var v2 []struct{ Path string }
	call(t, "GET", api+"/v2/comments/infinite-scroll?articleId=5&pageSize=6&lastPath=00000", nil, 200, &v2)
	var paths []string
	for _, c := range v2 {
		paths = append(paths, c.Path)
	}
	if want := "0000000000 000000000000000 00000000000000000000 0000000000000000000000000 00001 0000100000"; strings.Join(paths, " ") != want {
		t.Errorf("v2 paths after 00000: %v, want %s", paths, want)
	}
}

func TestBenchLikesCountsExactly(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	args := append([]string{"bench", "likes", "--likes", "60", "--workers", "6"}, testFlags(t, t.TempDir())...)
	if err := run(context.Background(), args, noEnv, &out, &bytes.Buffer{}); err != nil {
		t.Fatalf("bench likes: %v\n%s", err, out.String())
	}
	for _, st := range []string{"pessimistic-lock-1", "pessimistic-lock-2", "optimistic-lock"} {
		if !strings.Contains(out.String(), st) {
			t.Errorf("bench likes printed no line for %s:\n%s", st, out.String())
		}
	}
}

// The relay bench fills an outbox as producers do (behind Vitess: one shard per transaction) and drains all of it.
func TestBenchRelayDrains(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	args := append([]string{"bench", "relay", "--events", "1200"}, testFlags(t, t.TempDir())...)
	if err := run(context.Background(), args, noEnv, &out, &bytes.Buffer{}); err != nil {
		t.Fatalf("bench relay: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "relayed 1200 events") {
		t.Errorf("bench relay did not relay all 1200 events:\n%s", out.String())
	}
}

// The standing bench reads every ban it published, through the table every process keeps.
func TestBenchStandingReadsEveryBan(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	args := append([]string{"bench", "standing", "--users", "1200"}, testFlags(t, t.TempDir())...)
	if err := run(context.Background(), args, noEnv, &out, &bytes.Buffer{}); err != nil {
		t.Fatalf("bench standing: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "1200 banned users") || !strings.Contains(out.String(), "catches up") {
		t.Errorf("bench standing printed:\n%s", out.String())
	}
}

// flagValue returns the value after flag in args, "" if absent.
func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// TestServicesDoNotImportEachOther keeps the services apart: they meet only through HTTP and events, as separate
// processes would.
func TestServicesDoNotImportEachOther(t *testing.T) {
	t.Parallel()
	var pkgs []string
	for _, s := range app.Services() {
		pkgs = append(pkgs, "board/internal/"+strings.ReplaceAll(s.Name, "-", "")) // hot-article lives in hotarticle
	}
	for _, pkg := range pkgs {
		out, err := exec.Command("go", "list", "-deps", "-json=ImportPath", pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		for dec.More() {
			var dep struct{ ImportPath string }
			if err := dec.Decode(&dep); err != nil {
				t.Fatal(err)
			}
			for _, other := range pkgs {
				if dep.ImportPath == other && other != pkg {
					t.Errorf("%s imports %s", pkg, other)
				}
			}
		}
	}
}

func noEnv(string) string { return "" }
