package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/app"

	"board/internal/apijson"
	"board/internal/auth"
	faults "board/internal/fault"
	"board/internal/kafka"
	"board/internal/outbox"
	"board/internal/snowflake"
	"board/internal/sqldb"
	"board/internal/user"
)

const userUsage = `Usage: board user create|grant|token|rotate-key [flags]

Manages the user service's accounts and signing keys from the shell, on its SQL database (user):
  board user create --username NAME [--role moderator]   create a user; the password is the first line of stdin
  board user grant --username NAME --role moderator|user  set a user's role; running services apply it at once,
                                                          to tokens already issued too
  board user token --username NAME | --user-id N          print an access token signed with the signing keys,
                                                          without a password: for operators and benchmarks
  board user rotate-key                                   store a new signing key; every instance publishes it
                                                          and then signs with it; old tokens stay valid
Run 'board user <command> --help' for its flags.`

// userCommand is 'board user': it reads a new user's password from os.Stdin.
func userCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return userCommandIO(ctx, args, getenv, os.Stdin, stdout, stderr)
}

// userCommandIO is userCommand reading stdin from the given reader.
func userCommandIO(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "help", "-h", "-help", "--help":
			fmt.Fprintln(stdout, userUsage)
			return nil
		case "create":
			return userCreate(ctx, args[1:], getenv, stdin, stdout, stderr)
		case "grant":
			return userGrant(ctx, args[1:], getenv, stdout, stderr)
		case "token":
			return userToken(ctx, args[1:], getenv, stdout, stderr)
		case "rotate-key":
			return userRotateKey(ctx, args[1:], getenv, stdout, stderr)
		}
	}
	fmt.Fprintln(stderr, userUsage)
	if len(args) > 0 {
		return fmt.Errorf("unknown user command %q", args[0])
	}
	return errors.New("name a user command")
}

// userFlags are a user subcommand's engine flags and its own.
type userFlags struct {
	cfg app.Config
	fs  *flag.FlagSet
}

func newUserFlags(name, usage string, stderr io.Writer) *userFlags {
	f := &userFlags{cfg: app.Default(), fs: app.NewFlagSet("user "+name, usage, stderr)}
	f.cfg.EngineFlags(f.fs)
	return f
}

// open opens the user database (migrated when --migrate); the caller closes the engines.
func (f *userFlags) open(ctx context.Context, stderr io.Writer) (*sqldb.DB, func() error, error) {
	e := app.NewEngines(&f.cfg, f.cfg.NewLogger(stderr))
	db, err := e.OpenService(ctx, "user")
	if err != nil {
		return nil, nil, errors.Join(err, e.Close())
	}
	return db, e.Close, nil
}

// service opens the user database as open does and returns the user service over it.
func (f *userFlags) service(ctx context.Context, stderr io.Writer) (*user.Service, func() error, error) {
	db, closeEngines, err := f.open(ctx, stderr)
	if err != nil {
		return nil, nil, err
	}
	svc, err := app.UserService(ctx, db)
	if err != nil {
		return nil, nil, errors.Join(err, closeEngines())
	}
	return svc, closeEngines, nil
}

// printUser writes u as the service's API does.
func printUser(w io.Writer, u user.User) error {
	return json.NewEncoder(w).Encode(struct {
		UserID    apijson.ID   `json:"userId"`
		Username  string       `json:"username"`
		Role      string       `json:"role"`
		CreatedAt apijson.Time `json:"createdAt"`
	}{apijson.ID(u.ID), u.Username, string(u.Role), apijson.Time(u.CreatedAt)})
}

func roleFlag(fs *flag.FlagSet, role *auth.Role, def auth.Role, usage string) {
	*role = def
	fs.Func("role", usage, func(v string) (err error) { *role, err = auth.ParseRole(v); return err })
}

func userCreate(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) (err error) {
	f := newUserFlags("create", `Usage: board user create --username NAME [--role moderator] [flags] < password

Creates a user and prints it as JSON. The password is the first line of stdin (8 to 128 characters), so that it
stays out of the shell's history and the process list: e.g. printf '%s\n' "$PASSWORD" | board user create ...`, stderr)
	username := f.fs.String("username", "", "the new user's name: 3 to 30 of a-z, 0-9 and _ (stored lower-cased)")
	var role auth.Role
	roleFlag(f.fs, &role, auth.RoleUser, "the new user's role: user or moderator (default user)")
	if err := app.Parse(f.fs, args, getenv); err != nil {
		return err
	}
	if *username == "" {
		return errors.New("--username is required")
	}
	password, err := readPassword(stdin)
	if err != nil {
		return err
	}
	svc, closeEngines, err := f.service(ctx, stderr)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeEngines()) }() // a store that did not close cleanly fails the command
	u, err := svc.Create(ctx, *username, password, role)
	if err != nil {
		return err
	}
	return printUser(stdout, u)
}

// readPassword reads the first line of r, without its line ending; an empty one is refused.
func readPassword(r io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read the password from stdin: %w", err)
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("no password on stdin: give it as the first line")
	}
	return line, nil
}

func userGrant(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	f := newUserFlags("grant", `Usage: board user grant --username NAME --role moderator|user [flags]

Sets a user's role and prints the user as JSON. The change is an event (USER_ROLE_CHANGED) written with the role;
the command publishes it to Kafka itself, so that every running service applies it within a second, to the tokens
already issued as well: a demoted moderator loses their powers at once. Without --kafka-brokers it tries the
embedded broker of a 'board serve' on --embedded-kafka-addr. When it cannot reach Kafka, the user service's relay
publishes the event within --relay-min-age plus --relay-poll-interval (20 s by default).`, stderr)
	username := f.fs.String("username", "", "the user's name")
	var role auth.Role
	roleFlag(f.fs, &role, "", "the role to set: moderator or user (required)")
	if err := app.Parse(f.fs, args, getenv); err != nil {
		return err
	}
	if *username == "" || role == "" {
		return errors.New("--username and --role are required")
	}
	logger := f.cfg.NewLogger(stderr)
	e := app.NewEngines(&f.cfg, logger)
	defer func() { err = errors.Join(err, e.Close()) }() // a store that did not close cleanly fails the command
	db, err := e.OpenService(ctx, "user")
	if err != nil {
		return err
	}
	ids, err := snowflake.New(snowflake.MaxNode, nil)
	if err != nil {
		return err
	}
	client, kafkaErr := reachKafka(ctx, &f.cfg)
	var relay *outbox.Relay
	if client != nil {
		defer client.Close()
		relay = outbox.NewRelay(db, client, nil, outbox.RelayConfig{TopicPrefix: f.cfg.TopicPrefix}, logger, nil)
	}
	svc, err := user.NewService(ctx, db, ids, user.Config{Outbox: outbox.New(db, f.cfg.OutboxShards, ids, time.Now, nil, relay)})
	if err != nil {
		return err
	}
	u, err := svc.Grant(ctx, *username, role)
	if err != nil {
		return err
	}
	if relay != nil {
		pctx, cancel := context.WithTimeout(ctx, grantPublishTimeout)
		kafkaErr = relay.PublishQueued(pctx)
		cancel()
	}
	if kafkaErr != nil {
		fmt.Fprintf(stderr, "the role is set, but the change was not published (%v): running services apply it within %v, once the user service's relay publishes it\n",
			kafkaErr, f.cfg.RelayMinAge+f.cfg.RelayPollInterval)
	}
	return printUser(stdout, u)
}

// grantPublishTimeout bounds how long board user grant waits for Kafka: reaching it, and its acknowledgement.
const grantPublishTimeout = 5 * time.Second

// reachKafka returns a producer on the configured brokers, or on the embedded broker of a running 'board serve'
// when none are configured, once it answers; an error when it does not.
func reachKafka(ctx context.Context, cfg *app.Config) (*kgo.Client, error) {
	brokers, err := kafkaBrokers(cfg)
	if err != nil {
		return nil, err
	}
	client, err := kafka.NewProducer(brokers, grantPublishTimeout)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, grantPublishTimeout)
	defer cancel()
	if err := client.Ping(pctx); err != nil {
		client.Close()
		return nil, fmt.Errorf("kafka %v: %w", brokers, err)
	}
	return client, nil
}

// kafkaBrokers returns the configured brokers, or the embedded broker of a running 'board serve' when none are.
func kafkaBrokers(cfg *app.Config) ([]string, error) {
	if brokers := app.SplitList(cfg.KafkaBrokers); len(brokers) > 0 {
		return brokers, nil
	}
	if _, port, err := net.SplitHostPort(cfg.EmbeddedKafkaAddr); err != nil || port == "0" {
		return nil, fmt.Errorf("no Kafka brokers given, and the embedded broker's address %q is not a fixed one", cfg.EmbeddedKafkaAddr)
	}
	return []string{cfg.EmbeddedKafkaAddr}, nil
}

func userToken(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	f := newUserFlags("token", `Usage: board user token --username NAME [flags]
       board user token --user-id N [--role moderator] [flags]

Prints an access token signed directly with the user service's signing keys, without a password: for operators,
the README's examples and benchmarks. With --username the token carries the user's id and role; with --user-id it
carries that id (which need not exist) and --role. The token carries the user's token epoch: it works until the
user's sessions are next ended (a password change or reset, or "end every session"). Any service that trusts these keys accepts it, so guard access to
this command as you would the database.`, stderr)
	username := f.fs.String("username", "", "the user to mint a token for")
	userID := f.fs.Int64("user-id", 0, "the user id to mint a token for, instead of --username")
	var role auth.Role
	roleFlag(f.fs, &role, "", "the token's role with --user-id: user or moderator (default user); with --username, overrides the user's role")
	ttl := f.fs.Duration("ttl", user.DefaultTokenTTL, "how long the token is valid (at most 12h; after a key rotation it verifies only as long as the servers' --token-ttl)")
	if err := app.Parse(f.fs, args, getenv); err != nil {
		return err
	}
	if (*username == "") == (*userID == 0) || *userID < 0 {
		return errors.New("give exactly one of --username and --user-id (a positive id)")
	}
	if *ttl <= 0 || *ttl > user.MaxTokenTTL {
		return fmt.Errorf("--ttl must be positive and at most %v", user.MaxTokenTTL)
	}
	db, closeEngines, err := f.open(ctx, stderr)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeEngines()) }() // a store that did not close cleanly fails the command
	svc, err := app.UserService(ctx, db)
	if err != nil {
		return err
	}
	// The token carries the user's token epoch, so that it works until their sessions are next ended.
	p := auth.Principal{UserID: *userID, Role: auth.RoleUser}
	if *username != "" {
		u, err := svc.ByUsername(ctx, *username)
		if err != nil {
			return err
		}
		p = auth.Principal{UserID: u.ID, Role: u.Role, TokenEpoch: u.TokenEpoch}
	} else if u, err := svc.Get(ctx, *userID); err == nil {
		p.TokenEpoch = u.TokenEpoch
	} else if faults.KindOf(err) != faults.NotFound {
		return err
	}
	if role != "" {
		p.Role = role
	}
	token, _, err := user.Mint(ctx, db, p, *ttl, time.Now())
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, token)
	return err
}

func userRotateKey(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	f := newUserFlags("rotate-key", `Usage: board user rotate-key [flags]

Stores a new token signing key. Every user service instance publishes it at /.well-known/jwks.json within
--signing-key-reload (5 s by default) and signs with it from twice that after now; the old key stays published until
the tokens it signed have expired, so nobody is signed out. Keys retired over a day ago are deleted.`, stderr)
	if err := app.Parse(f.fs, args, getenv); err != nil {
		return err
	}
	db, closeEngines, err := f.open(ctx, stderr)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeEngines()) }() // a store that did not close cleanly fails the command
	now := time.Now()
	k, err := user.Rotate(ctx, db, now)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "new signing key %s, created %s; instances sign with it from %s (with the default reload)\n",
		k.ID, k.Created.Format(apijson.TimeLayout), k.Created.Add(2*user.DefaultReload).Format(apijson.TimeLayout))
	return err
}
