package main

import (
	"context"
	"io"

	"board/internal/app"
)

const enginesUsage = `Usage: board engines [flags]

Runs only the embedded Redis-protocol server and Kafka-protocol broker, exactly as 'board serve' would start them
under --data-dir, so that several 'board serve' processes on this machine can share them. Once both listen, it
prints to stdout the flags that point a 'board serve' at them, e.g.
  --redis-addr 127.0.0.1:6380 --kafka-brokers 127.0.0.1:9092
and runs until SIGINT or SIGTERM, then stops both, keeping their data for the next start.`

func enginesCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := app.ParseEngines(args, getenv, enginesUsage, stderr)
	if err != nil {
		return err
	}
	return app.RunEngines(ctx, app.NewEngines(&cfg, cfg.NewLogger(stderr)), stdout)
}
