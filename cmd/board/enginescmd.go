package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

const enginesUsage = `Usage: board engines [flags]

Runs only the embedded Redis-protocol server and Kafka-protocol broker, exactly as 'board serve' would start them
under --data-dir, so that several 'board serve' processes on this machine can share them. Once both listen, it
prints to stdout the flags that point a 'board serve' at them, e.g.
  --redis-addr 127.0.0.1:6380 --kafka-brokers 127.0.0.1:9092
and runs until SIGINT or SIGTERM, then stops both, keeping their data for the next start.`

// enginesFlagNames are the flags of serve's engine flags that `board engines` takes: those that say how and where
// the embedded engines run. The others (SQL, outbox, key and topic prefixes) belong to the serve processes.
var enginesFlagNames = []string{"data-dir", "embedded-redis", "embedded-redis-addr", "embedded-redis-snapshot",
	"redis-password", "embedded-kafka-addr", "embedded-kafka-retention", "log-level", "log-format"}

// refusedEnginesFlags are the flags that would point at servers of one's own, leaving nothing to embed.
var refusedEnginesFlags = []string{"redis-addr", "kafka-brokers"}

func enginesCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var cfg config
	fs := newFlagSet("engines", enginesUsage, stderr)
	cfg.enginesFlags(fs)
	if err := parse(fs, args, getenv); err != nil {
		return err
	}
	var refused []string
	fs.Visit(func(f *flag.Flag) { // only the command line's: BOARD_REDIS_ADDR may well point the serves here
		for _, name := range refusedEnginesFlags {
			if f.Name == name {
				refused = append(refused, "--"+name)
			}
		}
	})
	if len(refused) > 0 {
		return fmt.Errorf("board engines runs the embedded engines, %s leaves nothing to embed; give it to board serve instead",
			strings.Join(refused, " and "))
	}
	e, err := newEngines(&cfg, stderr)
	if err != nil {
		return err
	}
	return runEngines(ctx, e, stdout)
}

// enginesFlags registers the flags of `board engines`: serve's own definitions of enginesFlagNames, so that both
// commands read them alike, and the refused flags.
func (c *config) enginesFlags(fs *flag.FlagSet) {
	all := flag.NewFlagSet("", flag.ContinueOnError)
	c.engineFlags(all)
	for _, name := range enginesFlagNames {
		f := all.Lookup(name)
		fs.Var(f.Value, f.Name, f.Usage)
	}
	for _, name := range refusedEnginesFlags {
		fs.String(name, "", "refused: board engines embeds its own engines; give --"+name+" to board serve (BOARD_"+
			strings.ToUpper(strings.ReplaceAll(name, "-", "_"))+" is ignored here, so it can point every serve at these engines)")
	}
}

// runEngines starts the embedded Redis and Kafka, prints the serve flags that use them, and stops them at ctx's end.
func runEngines(ctx context.Context, e *engines, stdout io.Writer) (err error) {
	defer func() {
		if err = errors.Join(err, e.close()); err == nil {
			e.logger.Info("shutdown complete") // else main reports err
		}
	}()
	redisServer, err := e.startEmbeddedRedis(ctx)
	if err != nil {
		return fmt.Errorf("start embedded redis: %w", err)
	}
	e.closers = append(e.closers, redisServer.Close)
	broker, err := e.startEmbeddedKafka()
	if err != nil {
		return fmt.Errorf("start embedded kafka: %w", err)
	}
	e.closers = append(e.closers, func() error { broker.Close(); return nil })

	// The serves run on this machine: a wildcard listen address is reached at the loopback address.
	brokers := broker.Addrs()
	for i, addr := range brokers {
		brokers[i] = loopbackAddr(addr)
	}
	serveFlags := fmt.Sprintf("--redis-addr %s --kafka-brokers %s", loopbackAddr(redisServer.Addr()), strings.Join(brokers, ","))
	if _, err := fmt.Fprintln(stdout, serveFlags); err != nil {
		return err
	}
	e.logger.Info("engines ready; start board serve with these flags", "flags", serveFlags)
	if e.cfg.RedisPassword != "" {
		e.logger.Info("board serve also needs the same --redis-password (or BOARD_REDIS_PASSWORD)")
	}
	<-ctx.Done()
	e.logger.Info("shutting down")
	return nil
}
