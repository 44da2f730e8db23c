package main

import (
	"context"
	"io"

	"board/internal/app"
)

func migrateCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := app.Default()
	fs := app.NewFlagSet("migrate", "Usage: board migrate [flags]\n\nCreates or upgrades the schema of every service's SQL database.", stderr)
	cfg.EngineFlags(fs)
	if err := app.Parse(fs, args, getenv); err != nil {
		return err
	}
	e := app.NewEngines(&cfg, cfg.NewLogger(stderr))
	defer e.Close()
	return app.Migrate(ctx, e, stdout)
}
