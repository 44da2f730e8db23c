package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	"board/internal/app"
	"board/internal/comment"
	"board/internal/existence"
)

func benchComments(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := app.Default()
	fs := app.NewFlagSet("bench comments", `Usage: board bench comments [flags]

Times comment list queries of both versions on a seeded article (see board seed comments) two ways: through the
HTTP API of a comment service started in this process on a loopback port, and as the same store calls (the SQL
through database/sql) without HTTP. Prints the median of --runs runs of each and the ratio API/raw.`, stderr)
	cfg.EngineFlags(fs)
	articleID := fs.Int64("article", 1, "seeded article to read")
	lf := newListBenchFlags(fs, "comments")
	if err := app.Parse(fs, args, getenv); err != nil {
		return err
	}
	if err := lf.check(); err != nil {
		return err
	}
	page, depth, pageSize, runs := lf.page, lf.depth, lf.pageSize, lf.runs
	e := app.NewEngines(&cfg, cfg.NewLogger(stderr))
	defer e.Close()
	db, ob, ids, err := toolDatabase(ctx, e, "comment", comment.Migrate)
	if err != nil {
		return err
	}
	store := comment.NewStore(db, ob, existence.New(db, existence.Config{Service: "comment"})) // reads only
	svc := comment.NewService(store, ids, time.Now)
	count, err := svc.ArticleCount(ctx, *articleID)
	if err != nil {
		return err
	}
	// The seed loads as many comments of each version; fit each version's cases to half the count.
	if err := lf.fit(count/2, fmt.Sprintf("article %d (each version)", *articleID),
		fmt.Sprintf("board seed comments --article %d", *articleID), stdout); err != nil {
		return err
	}
	// The cursors of the deep scroll cases: the comment at position depth of each version.
	atDepthV1, err := store.Page(ctx, *articleID, *depth-1, 1)
	if err != nil {
		return err
	}
	atDepthV2, err := store.PageV2(ctx, *articleID, *depth-1, 1)
	if err != nil {
		return err
	}
	if len(atDepthV1) == 0 || len(atDepthV2) == 0 {
		return fmt.Errorf("article %d has not more than --depth %d comments of each version: seed it first (board seed comments --article %d)",
			*articleID, *depth, *articleID)
	}
	last1, last2 := atDepthV1[0], atDepthV2[0]

	base, stop, err := serveLoopback("comment", comment.Routes(svc, e.Logger), nil, e)
	if err != nil {
		return err
	}
	defer stop()

	a, n := *articleID, *pageSize
	list := func(v string, p int64) string {
		return fmt.Sprintf("/%s/comments?articleId=%d&page=%d&pageSize=%d", v, a, p, n)
	}
	cases := []benchCase{
		{"v1 page 1", list("v1", 1), func() error { _, err := svc.List(ctx, a, 1, n); return err }},
		{fmt.Sprintf("v1 page %d", *page), list("v1", *page), func() error { _, err := svc.List(ctx, a, *page, n); return err }},
		{"v1 scroll depth 0", fmt.Sprintf("/v1/comments/infinite-scroll?articleId=%d&pageSize=%d", a, n),
			func() error { _, err := svc.Scroll(ctx, a, n, 0, 0); return err }},
		{fmt.Sprintf("v1 scroll depth %d", *depth),
			fmt.Sprintf("/v1/comments/infinite-scroll?articleId=%d&pageSize=%d&lastParentCommentId=%d&lastCommentId=%d",
				a, n, last1.ParentID, last1.ID),
			func() error { _, err := svc.Scroll(ctx, a, n, last1.ParentID, last1.ID); return err }},
		{"v2 page 1", list("v2", 1), func() error { _, err := svc.ListV2(ctx, a, 1, n); return err }},
		{fmt.Sprintf("v2 page %d", *page), list("v2", *page), func() error { _, err := svc.ListV2(ctx, a, *page, n); return err }},
		{"v2 scroll depth 0", fmt.Sprintf("/v2/comments/infinite-scroll?articleId=%d&pageSize=%d", a, n),
			func() error { _, err := svc.ScrollV2(ctx, a, n, ""); return err }},
		{fmt.Sprintf("v2 scroll depth %d", *depth),
			fmt.Sprintf("/v2/comments/infinite-scroll?articleId=%d&pageSize=%d&lastPath=%s", a, n, last2.Path),
			func() error { _, err := svc.ScrollV2(ctx, a, n, last2.Path); return err }},
	}
	fmt.Fprintf(stdout, "article %d: %d comments on %s %s; page size %d; median of %d runs\n",
		a, count, db.Dialect, db.Name, n, *runs)
	return runBenchCases(ctx, stdout, base, *runs, cases)
}
