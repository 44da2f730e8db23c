package app

import (
	"context"
	"net/http"

	"board/internal/httpio"
	"board/internal/outbox"
	"board/internal/sqldb"
)

// The moderation service's wiring: a placeholder until internal/moderation lands (issue 27).

func migrateModeration(ctx context.Context, db *sqldb.DB) error { return outbox.Migrate(ctx, db) }

func moderationOpenAPI() []byte { return nil }

func buildModeration(context.Context, *Engines, deps) (*http.ServeMux, []httpio.Check, error) {
	return http.NewServeMux(), nil, nil
}
