package app

import (
	"context"
	"net/http"
	"time"

	"board/internal/httpio"
	"board/internal/moderation"
	"board/internal/sqldb"
)

// The moderation service's wiring (SPEC §3.9).

func migrateModeration(ctx context.Context, db *sqldb.DB) error { return moderation.Migrate(ctx, db) }

func moderationOpenAPI() []byte { return moderation.OpenAPI() }

// buildModeration builds the service, which looks reported targets up at the article and comment services and users
// at the user service, and starts its consumer of the article and comment topics, which forgets deleted targets.
func buildModeration(ctx context.Context, e *Engines, r deps) (*http.ServeMux, []httpio.Check, error) {
	origin := func(name, listen string) string { return r.origin(e, name, listen) }
	svc := moderation.New(r.db, r.ob, r.ids, moderation.Config{
		Origins: moderation.Origins{Article: origin("article", e.Config.ArticleAddr), Comment: origin("comment", e.Config.CommentAddr),
			User: origin("user", e.Config.UserAddr)},
		ReportThreshold: e.Config.ReportThreshold, Now: time.Now})
	if err := startConsumer(ctx, e, r, svc.Handlers(), ""); err != nil {
		return nil, nil, err
	}
	r.purgeKeys(ctx, e)
	return moderation.Routes(svc, e.Logger), r.checks(e), nil
}
