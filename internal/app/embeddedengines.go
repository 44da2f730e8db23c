package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// enginesFlagNames are the flags of serve's engine flags that `board engines` takes: those that say how and where
// the embedded engines run. The others (SQL, outbox, key and topic prefixes) belong to the serve processes.
var enginesFlagNames = []string{"data-dir", "embedded-redis", "embedded-redis-addr", "embedded-redis-snapshot",
	"redis-password", "embedded-kafka-addr", "embedded-kafka-retention", "log-level", "log-format"}

// refusedEnginesFlags are the flags that would point at servers of one's own, leaving nothing to embed.
var refusedEnginesFlags = []string{"redis-addr", "kafka-brokers"}

// ParseEngines reads the arguments of `board engines` over the defaults and the environment; --help prints usage
// and the flags to w.
func ParseEngines(args []string, getenv func(string) string, usage string, w io.Writer) (Config, error) {
	cfg := Default()
	fs := NewFlagSet("engines", usage, w)
	cfg.enginesFlags(fs)
	if err := Parse(fs, args, getenv); err != nil {
		return Config{}, err
	}
	var refused []string
	fs.Visit(func(f *flag.Flag) { // only the command line's: BOARD_REDIS_ADDR may well point the serves here
		if slices.Contains(refusedEnginesFlags, f.Name) {
			refused = append(refused, "--"+f.Name)
		}
	})
	if len(refused) > 0 {
		return Config{}, fmt.Errorf("board engines runs the embedded engines, %s leaves nothing to embed; give it to board serve instead",
			strings.Join(refused, " and "))
	}
	return cfg, nil
}

// enginesFlags registers the flags of `board engines`: serve's own definitions of enginesFlagNames, so that both
// commands read them alike, and the refused flags.
func (c *Config) enginesFlags(fs *flag.FlagSet) {
	all := flag.NewFlagSet("", flag.ContinueOnError)
	c.EngineFlags(all)
	for _, name := range enginesFlagNames {
		f := all.Lookup(name)
		fs.Var(f.Value, f.Name, f.Usage)
	}
	for _, name := range refusedEnginesFlags {
		fs.String(name, "", "refused: board engines embeds its own engines; give --"+name+" to board serve (BOARD_"+
			strings.ToUpper(strings.ReplaceAll(name, "-", "_"))+" is ignored here, so it can point every serve at these engines)")
	}
}

// RunEngines starts the embedded Redis and Kafka, prints the serve flags that use them, and stops them at ctx's end.
func RunEngines(ctx context.Context, e *Engines, stdout io.Writer) (err error) {
	defer func() {
		if err = errors.Join(err, e.Close()); err == nil {
			e.Logger.Info("shutdown complete") // else main reports err
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
	e.Logger.Info("engines ready; start board serve with these flags", "flags", serveFlags)
	if e.Config.RedisPassword != "" {
		e.Logger.Info("board serve also needs the same --redis-password (or BOARD_REDIS_PASSWORD)")
	}
	<-ctx.Done()
	e.Logger.Info("shutting down")
	return nil
}
