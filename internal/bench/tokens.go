package bench

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"board/internal/app"
)

// benchWriter is the user a bench's articles are written by.
const benchWriter = 1

// boardUserDBFlags registers the flags that find a running board's user database, for a command that writes to the
// board as users whose tokens it mints with the board's own signing keys. open mints with them.
func boardUserDBFlags(fs *flag.FlagSet) (open func(ctx context.Context, logger *slog.Logger) (*app.TokenMinter, func(), error)) {
	cfg := app.Default()
	cfg.MySQLMaxConns = 4
	cfg.Migrate = false // the board's database is the board's to migrate: a wrong --data-dir must fail, not make one
	fs.StringVar(&cfg.DataDir, "data-dir", "./board-data", "the board's --data-dir: its user database signs the tokens of the users the bench writes as")
	fs.StringVar(&cfg.MySQLDSN, "mysql-dsn", "", "the board's --mysql-dsn (empty: its SQLite files in --data-dir)")
	fs.StringVar(&cfg.MySQLDBPrefix, "mysql-db-prefix", "", "the board's --mysql-db-prefix")
	return func(ctx context.Context, logger *slog.Logger) (*app.TokenMinter, func(), error) {
		e := app.NewEngines(&cfg, logger)
		m, err := app.NewTokenMinter(ctx, e, time.Hour)
		if err != nil {
			e.Close()
			return nil, nil, fmt.Errorf("the board's user database (--data-dir or --mysql-dsn): %w", err)
		}
		return m, func() { _ = e.Close() }, nil // it only read the signing keys: nothing is lost if a close fails
	}
}
