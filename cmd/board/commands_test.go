package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os/exec"
	"strings"
	"testing"
)

func TestHelpForEveryCommand(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"serve", "--help"}, {"migrate", "--help"}, {"seed", "--help"},
		{"bench", "paging", "--help"}} {
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
		{"bench"}, {"seed", "--articles", "0"}} {
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
		if !strings.Contains(out.String(), "migrated article") {
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

	p := startProgram(t, flags)
	var count int
	call(t, "GET", p.urls["article"]+"/v1/articles/boards/3/count", nil, 200, &count)
	var page struct{ ArticleCount int }
	call(t, "GET", p.urls["article"]+"/v1/articles?boardId=3&page=1&pageSize=100", nil, 200, &page)
	if count != 5000 || page.ArticleCount != 1001 {
		t.Errorf("board count %d and capped page count %d; want 5000 and 1001", count, page.ArticleCount)
	}
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
