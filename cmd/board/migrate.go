package main

import (
	"context"
	"fmt"
	"io"
)

func migrateCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var cfg config
	fs := newFlagSet("migrate", "Usage: board migrate [flags]\n\nCreates or upgrades the schema of every service's SQL database.", stderr)
	cfg.engineFlags(fs)
	if err := parse(fs, args, getenv); err != nil {
		return err
	}
	e, err := newEngines(&cfg, stderr)
	if err != nil {
		return err
	}
	defer e.close()
	for _, s := range services {
		if s.database == "" {
			continue
		}
		db, err := e.openSQL(ctx, s.database)
		if err != nil {
			return err
		}
		if err := s.migrate(ctx, db); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "migrated %s (%s %s)\n", s.name, db.Dialect, db.Name)
	}
	return nil
}
