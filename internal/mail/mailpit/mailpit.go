// Package mailpit runs a real SMTP server, Mailpit (github.com/axllent/mailpit, built by scripts/mailpit), as a
// child process on loopback, for the mail service's tests and `board bench mail`: it can be killed and started
// again on the same database, and its HTTP API says what it received.
package mailpit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Version is the Mailpit that Install builds, and scripts/mailpit.
const Version = "v1.33.1"

// startTimeout bounds a start, until the server answers on both ports.
const startTimeout = 30 * time.Second

// installTimeout bounds a build of Mailpit (a few minutes on a small machine).
const installTimeout = 20 * time.Minute

// DefaultDir is where Install keeps Mailpit unless told otherwise: board's directory in the user's cache.
func DefaultDir() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "board", "mailpit-"+Version), nil
}

// TestEnv names the mailpit binary the tests run; scripts/mailpit install prints it, and CI sets it.
const TestEnv = "BOARD_TEST_MAILPIT"

// ForTests returns the mailpit binary of the tests: $BOARD_TEST_MAILPIT when set (an error if it names no file),
// else one built into DefaultDir, once (a few minutes).
func ForTests(ctx context.Context) (string, error) {
	if bin := os.Getenv(TestEnv); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("%s: %w", TestEnv, err)
		}
		return bin, nil
	}
	dir, err := DefaultDir()
	if err != nil {
		return "", err
	}
	return Install(ctx, dir)
}

// Install builds Mailpit Version from the Go module proxy into dir, unless it is there already, and returns the
// path of its binary.
func Install(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "mailpit")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	ctx, cancel := context.WithTimeout(ctx, installTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "install", "github.com/axllent/mailpit@"+Version)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install mailpit@%s: %w\n%s", Version, err, lastLines(out, 20))
	}
	return bin, nil
}

// Server is one Mailpit process, or none between Kill and Start.
type Server struct {
	bin, dir string
	args     []string
	SMTPAddr string // host:port of its SMTP server
	API      string // base URL of its HTTP API

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd has exited
	log  *os.File
}

// Start runs bin (the mailpit binary) on two free loopback ports, with its database and log in dir, and returns
// once it answers. args are more of its flags (e.g. --smtp-allowed-recipients REGEXP, --enable-chaos). It accepts
// any login, also without TLS, and keeps every message (--max 0).
func Start(bin, dir string, args ...string) (*Server, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir, args: args, SMTPAddr: net.JoinHostPort("127.0.0.1", ports[0]),
		API: "http://" + net.JoinHostPort("127.0.0.1", ports[1])}
	if err := s.Restart(); err != nil {
		return nil, err
	}
	return s, nil
}

// Restart starts the server again after Kill, on the same ports and database: it keeps the mail it had.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("mailpit: already running")
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, apiPort, _ := strings.Cut(strings.TrimPrefix(s.API, "http://"), ":")
	args := append([]string{"--smtp", s.SMTPAddr, "--listen", "127.0.0.1:" + apiPort,
		"--database", filepath.Join(s.dir, "mailpit.db"), "--max", "0",
		"--smtp-auth-accept-any", "--smtp-auth-allow-insecure", "--disable-version-check", "-q"}, s.args...)
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("mailpit: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.cmd, s.done, s.log = cmd, done, log
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		_, err := s.Total(ctx)
		if err == nil {
			if err = dial(s.SMTPAddr); err == nil {
				return nil
			}
		}
		select {
		case <-done:
			s.reap()
			out, _ := os.ReadFile(log.Name())
			return fmt.Errorf("mailpit exited at start: %s", lastLines(out, 10))
		case <-ctx.Done():
			return fmt.Errorf("mailpit did not answer within %v: %w", startTimeout, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Kill stops the server at once (SIGKILL), as a crash would, and waits until it is gone.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.reap()
}

// reap forgets the process that has exited; s.mu is held.
func (s *Server) reap() {
	s.log.Close()
	s.cmd, s.done, s.log = nil, nil, nil
}

// Message is what the API says of a message it received.
type Message struct {
	ID        string // Mailpit's own id of it
	MessageID string // its Message-ID, without the angle brackets
	Username  string // the login it was sent with, if any
}

// messages is the answer of GET /api/v1/messages.
type messages struct {
	Total    int       `json:"total"`
	Messages []Message `json:"messages"`
}

// Total returns how many messages the server holds.
func (s *Server) Total(ctx context.Context) (int, error) {
	var page messages
	err := s.get(ctx, "/api/v1/messages?limit=1", &page)
	return page.Total, err
}

// Messages returns every message the server holds, newest first.
func (s *Server) Messages(ctx context.Context) ([]Message, error) {
	const limit = 500
	var all []Message
	for {
		var page messages
		if err := s.get(ctx, "/api/v1/messages?limit="+strconv.Itoa(limit)+"&start="+strconv.Itoa(len(all)), &page); err != nil {
			return nil, err
		}
		all = append(all, page.Messages...)
		if len(page.Messages) < limit || len(all) >= page.Total {
			return all, nil
		}
	}
}

// Raw returns the source of the message Mailpit knows as id (Message.ID), as it was received.
func (s *Server) Raw(ctx context.Context, id string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.API+"/api/v1/message/"+url.PathEscape(id)+"/raw", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("mailpit: GET raw %s: %s", id, resp.Status)
	}
	return body, err
}

// SetChaos sets the errors its SMTP server answers (PUT /api/v1/chaos), e.g.
// {"Sender":{"ErrorCode":451,"Probability":100}} fails every MAIL FROM with a 451, and {} sets none; the server must
// run with --enable-chaos.
func (s *Server) SetChaos(ctx context.Context, triggers string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.API+"/api/v1/chaos", strings.NewReader(triggers))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("mailpit: PUT chaos: %s %s", resp.Status, msg)
	}
	return nil
}

func (s *Server) get(ctx context.Context, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.API+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("mailpit: GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func dial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	return err
}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(n int) ([]string, error) {
	var ports []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close() // held until all are picked, so that they differ
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		ports = append(ports, port)
	}
	return ports, nil
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
