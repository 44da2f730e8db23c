package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"board/internal/app"
)

const enginesUsage = `Usage: board engines [flags]

Runs only the embedded Redis-protocol server and Kafka-protocol broker, exactly as 'board serve' would start them
under --data-dir, so that several 'board serve' processes on this machine can share them. Once both listen, it
prints to stdout the flags that point a 'board serve' at them, e.g.
  --redis-addr 127.0.0.1:6380 --kafka-brokers 127.0.0.1:9092
and runs until SIGINT or SIGTERM, then stops both, keeping their data for the next start.`

func enginesCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := app.Default()
	fs := app.NewFlagSet("engines", enginesUsage, stderr)
	cfg.EnginesFlags(fs)
	if err := app.Parse(fs, args, getenv); err != nil {
		return err
	}
	var refused []string
	fs.Visit(func(f *flag.Flag) { // only the command line's: BOARD_REDIS_ADDR may well point the serves here
		for _, name := range app.RefusedEnginesFlags {
			if f.Name == name {
				refused = append(refused, "--"+name)
			}
		}
	})
	if len(refused) > 0 {
		return fmt.Errorf("board engines runs the embedded engines, %s leaves nothing to embed; give it to board serve instead",
			strings.Join(refused, " and "))
	}
	return app.RunEngines(ctx, app.NewEngines(&cfg, cfg.NewLogger(stderr)), stdout)
}
