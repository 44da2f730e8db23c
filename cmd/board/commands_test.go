package main

import (
	"board/internal/sqldb/sqldbtest"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestHelpForEveryCommand(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"serve", "--help"}, {"serve", "article", "-h"}, {"bench", "--help"}, {"migrate", "--help"}, {"seed", "--help"},
		{"seed", "comments", "--help"}, {"bench", "paging", "--help"}, {"bench", "comments", "--help"}, {"bench", "relay", "--help"},
		{"bench", "likes", "--help"}} {
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

func TestEnvironmentConfiguresFlags(t *testing.T) {
	var cfg config
	fs := newFlagSet("test", "Usage", &bytes.Buffer{})
	cfg.serveFlags(fs)
	env := map[string]string{"BOARD_DATA_DIR": "/from/env", "BOARD_ARTICLE_ADDR": ":1234", "BOARD_MIGRATE": "false"}
	if err := parse(fs, []string{"--article-addr", ":5678"}, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != "/from/env" || cfg.ArticleAddr != ":5678" || cfg.Migrate {
		t.Errorf("got data dir %q, article addr %q, migrate %v; want the env's dir, the flag's addr, no migrate",
			cfg.DataDir, cfg.ArticleAddr, cfg.Migrate)
	}
	env["BOARD_MIGRATE"] = "maybe"
	if err := parse(newFlagSetWith(&cfg), nil, func(k string) string { return env[k] }); err == nil {
		t.Error("a bad BOARD_MIGRATE value was accepted")
	}
}

// The README's distributed example puts flags after the service names.
func TestServeTakesFlagsAndServicesInAnyOrder(t *testing.T) {
	var cfg config
	fs := newFlagSetWith(&cfg)
	args := []string{"article", "--article-addr", ":9100", "view", "--like-addr=:1", "comment", "--", "--not-a-flag"}
	operands, err := parseWithOperands(fs, args, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"article", "view", "comment", "--not-a-flag"}; !slices.Equal(operands, want) {
		t.Errorf("operands %q, want %q", operands, want)
	}
	if cfg.ArticleAddr != ":9100" || cfg.LikeAddr != ":1" {
		t.Errorf("article addr %q, like addr %q; want :9100 and :1", cfg.ArticleAddr, cfg.LikeAddr)
	}
}

// The list benchmarks' deep cases fit the seeded data unless told otherwise, and refuse to time past its end.
func TestListBenchFlagsFitTheData(t *testing.T) {
	for _, tc := range []struct {
		args                []string
		rows                int64
		wantPage, wantDepth int64
		wantErr             bool
	}{
		{nil, 12_000_000, defaultBenchPage, defaultBenchDepth, false},
		{nil, 1000, 34, 500, false},
		{[]string{"--page-size", "10"}, 1000, 100, 500, false},
		{[]string{"--page", "3"}, 1000, 3, 500, false},
		{[]string{"--page", "35"}, 1000, 0, 0, true},
		{[]string{"--depth", "1000"}, 1000, 0, 0, true},
		{nil, 1, 0, 0, true},
	} {
		fs := newFlagSet("bench", "Usage", &bytes.Buffer{})
		lf := newListBenchFlags(fs, "rows")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := lf.fit(tc.rows, "board 1", "board seed", &bytes.Buffer{})
		if (err != nil) != tc.wantErr {
			t.Errorf("%q on %d rows: error %v, want error %v", tc.args, tc.rows, err, tc.wantErr)
			continue
		}
		if !tc.wantErr && (*lf.page != tc.wantPage || *lf.depth != tc.wantDepth) {
			t.Errorf("%q on %d rows: page %d, depth %d; want %d, %d", tc.args, tc.rows, *lf.page, *lf.depth,
				tc.wantPage, tc.wantDepth)
		}
	}
}

func newFlagSetWith(cfg *config) *flag.FlagSet {
	fs := newFlagSet("test", "Usage", &bytes.Buffer{})
	cfg.serveFlags(fs)
	return fs
}

func TestMigrateIsIdempotentAndSeedResumes(t *testing.T) {
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
	var out bytes.Buffer
	args := append([]string{"bench", "likes", "--likes", "60", "--workers", "6"}, testFlags(t, t.TempDir())...)
	if os.Getenv(sqldbtest.MySQLDSNEnv) != "" {
		sqldbtest.DatabaseDSN(t, flagValue(args, "--mysql-db-prefix")+"like_bench")
	}
	if err := run(context.Background(), args, noEnv, &out, &bytes.Buffer{}); err != nil {
		t.Fatalf("bench likes: %v\n%s", err, out.String())
	}
	for _, st := range []string{"pessimistic-lock-1", "pessimistic-lock-2", "optimistic-lock"} {
		if !strings.Contains(out.String(), st) {
			t.Errorf("bench likes printed no line for %s:\n%s", st, out.String())
		}
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
	var pkgs []string
	for _, s := range services {
		pkgs = append(pkgs, "board/internal/"+strings.ReplaceAll(s.name, "-", "")) // hot-article lives in hotarticle
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
