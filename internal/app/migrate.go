package app

import (
	"context"
	"fmt"
	"io"
)

// Migrate creates or upgrades the schema of every service's SQL database on e, saying which on out.
func Migrate(ctx context.Context, e *Engines, out io.Writer) error {
	for _, s := range services {
		if s.Database == "" {
			continue
		}
		db, err := e.OpenSQL(ctx, s.Database)
		if err != nil {
			return err
		}
		if err := s.migrate(ctx, db); err != nil {
			return err
		}
		fmt.Fprintf(out, "migrated %s (%s %s)\n", s.Name, db.Dialect, db.Name)
	}
	return nil
}
