package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"board/internal/app"
	"board/internal/bench"
)

const usage = `board — a bulletin-board site: event-driven services and their web pages.

Usage:
  board serve [service...]   run services (default: all of them)
  board engines              run only the embedded Redis and Kafka, for several serve processes to share
  board migrate              create or upgrade every service's schema
  board seed [articles]      bulk-load articles for experiments
  board seed comments        bulk-load comments of both versions for experiments
  board user create          create a user (password on stdin); also grant, token, rotate-key
  board search reindex       rebuild the search index from the article and comment services
  board bench paging         time article list queries through the HTTP API and directly
  board bench comments       time comment list queries through the HTTP API and directly
  board bench relay          time a relay draining an outbox backlog into Kafka
  board bench likes          time concurrent likes of one article with each like strategy
  board bench freshness      time writes until a running board's hot-article ranking shows them
  board bench read           load a running board's article-read, warm and cold, against a bare Redis GET
  board bench pages          load a running board's web pages next to the article-read calls they are made from
  board bench standing       time a process reading every user's ban at start, against a bare Kafka read
  board bench search         index generated articles and query them at 50 clients, against their floors
  board bench search-freshness  time creates until a running board's search finds them
  board bench notifications  time comments until two instances' streams deliver them, and hold 10,000 streams
  board bench media          serve a stored image against http.FileServer; 50 concurrent 12-megapixel uploads
  board bench delete-user    time a user's export and departure (10,000 likes) in the like and notification services
  board bench mail           a burst of mails through the mail service with the SMTP server down for 30 s mid-way
  board --version            print the module version and the VCS revision of this build

Run 'board <command> --help' for a command's flags.`

// run is the whole program; main only supplies the process's arguments, environment and output.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return errors.New("no command given")
	}
	cmd, rest := args[0], args[1:]
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd {
	case "serve":
		err = serveCommand(ctx, rest, getenv, stderr)
	case "engines":
		err = enginesCommand(ctx, rest, getenv, stdout, stderr)
	case "migrate":
		err = migrateCommand(ctx, rest, getenv, stdout, stderr)
	case "seed":
		err = bench.Seed(ctx, rest, getenv, stdout, stderr)
	case "bench":
		err = bench.Command(ctx, rest, getenv, stdout, stderr)
	case "user":
		err = userCommand(ctx, rest, getenv, stdout, stderr)
	case "search":
		err = searchCommand(ctx, rest, getenv, stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "board", app.Version())
		return nil
	case "help", "-h", "-help", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	default:
		fmt.Fprintln(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

func serveCommand(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	cfg, err := app.ParseServe(args, getenv, stderr)
	if err != nil {
		return err
	}
	return app.Serve(ctx, cfg, cfg.NewLogger(stderr))
}
