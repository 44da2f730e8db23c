package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"board/internal/app"
	"board/internal/auth"
	"board/internal/kafka"
	"board/internal/progress"
	"board/internal/search"
	"board/internal/user"
)

const searchUsage = `Usage: board search reindex [flags]

Rebuilds the search index from the services that own the articles and comments.`

func searchCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "reindex" {
		return searchReindex(ctx, args[1:], getenv, stdout, stderr)
	}
	fmt.Fprintln(stderr, searchUsage)
	if len(args) > 0 {
		return fmt.Errorf("unknown search command %q", args[0])
	}
	return errors.New("name a search command")
}

// rebuildUserID is the subject of the moderator's token a rebuild reads hidden articles and comments with: no
// Snowflake id is this small, so it is nobody's.
const rebuildUserID = 1

func searchReindex(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	cfg := app.Default()
	fs := app.NewFlagSet("search reindex", `Usage: board search reindex [flags]

Builds a new search index from the article and comment services' APIs (every board, a page of articles at a time,
each with its comments), with a progress bar and a rate, then makes it current. A running search service answers
from the old index meanwhile; it then switches to the new one once the new one's consumer has applied what changed
during the rebuild, and drops the old one. The new index's consumer group starts where the article and comment
topics ended when the rebuild began, so nothing written meanwhile is missed, and at the start of the moderation
topic, which the services read from may not have applied yet.

With the bleve engine, each search instance keeps its own index in a slot of --data-dir/search (0 for the first
instance on a data directory, 1 for a second that shares it, ...): run this once per instance, with its --data-dir
and --search-slot. With the sql engine, the instances share one index: run it once.

It signs a moderator's token with the user service's keys (the user database, as 'board user token' does) to read
hidden articles and comments too, which the index keeps, unsearchable, for a moderator's restore.`, stderr)
	cfg.EngineFlags(fs)
	cfg.SearchEngineFlag(fs)
	articleOrigin := fs.String("article-origin", "http://127.0.0.1:9000", "base URL of the article service")
	commentOrigin := fs.String("comment-origin", "http://127.0.0.1:9001", "base URL of the comment service")
	slot := fs.Int("search-slot", 0, "with the bleve engine, the slot of --data-dir/search whose index to rebuild")
	if err := app.Parse(fs, args, getenv); err != nil {
		return err
	}
	brokers, err := kafkaBrokers(&cfg)
	if err != nil {
		return err
	}
	e := app.NewEngines(&cfg, cfg.NewLogger(stderr))
	defer func() { err = errors.Join(err, e.Close()) }()
	users, err := e.OpenService(ctx, "user")
	if err != nil {
		return err
	}
	token, _, err := user.Mint(ctx, users, auth.Principal{UserID: rebuildUserID, Role: auth.RoleModerator}, user.MaxTokenTTL, time.Now())
	if err != nil {
		return err
	}
	if *slot < 0 {
		return errors.New("--search-slot must be 0 or more")
	}
	engine, err := app.SearchEngine(ctx, e, *slot)
	if err != nil {
		return err
	}
	name := app.NewSearchIndexName(time.Now())
	ix, err := engine.Open(ctx, name)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			err = errors.Join(err, engine.Drop(context.WithoutCancel(ctx), name))
		}
	}()
	replayed := app.SearchReplayedTopics(cfg.TopicPrefix)
	atEnd := slices.DeleteFunc(app.SearchTopics(cfg.TopicPrefix), func(t string) bool { return slices.Contains(replayed, t) })
	if err := kafka.StartGroup(ctx, brokers, app.SearchGroup(cfg.TopicPrefix, name), atEnd, replayed); err != nil {
		_ = ix.Close()
		return err
	}
	bar := progress.Start(stderr, "articles", 0)
	articles, comments, err := search.Rebuild(ctx, search.Sources{Article: *articleOrigin, Comment: *commentOrigin, Token: token,
		Client: &http.Client{}}, ix, bar)
	elapsed := bar.Finish()
	if err = errors.Join(err, ix.Close()); err != nil {
		return err
	}
	if err := engine.SetCurrent(ctx, name); err != nil {
		return err
	}
	done = true
	_, err = fmt.Fprintf(stdout, "index %s is current: %d articles and %d comments in %v; running search services switch to it once it has caught up\n",
		name, articles, comments, elapsed.Round(time.Millisecond))
	return err
}
