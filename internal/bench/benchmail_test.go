package bench

import (
	"bytes"
	"context"
	"net"
	"os"
	"strings"
	"testing"

	"board/internal/mail/mailpit"
)

// The resets mode runs end to end at a tiny size on the embedded engines: users loaded, their resets asked of the
// user service, each mail through its outbox, relay, Kafka and the mail service to a real Mailpit, killed and
// started again mid-way; every mail delivered once.
func TestBenchMailViaResetsRuns(t *testing.T) {
	bin, err := mailpit.ForTests(context.Background())
	if err != nil {
		if os.Getenv("CI") != "" || os.Getenv(mailpit.TestEnv) != "" {
			t.Fatalf("no mailpit (see scripts/mailpit): %v", err)
		}
		t.Skipf("no mailpit: %s is unset and it could not be built: %v", mailpit.TestEnv, err)
	}
	var stdout, stderr bytes.Buffer
	err = Command(context.Background(), append([]string{"mail", "--via", "resets", "--mails", "20", "--outage", "1s", "--mailpit", bin,
		"--data-dir", t.TempDir()}, embeddedAddrs(t)...), func(string) string { return "" }, &stdout, &stderr)
	if err != nil {
		t.Fatalf("bench mail: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := strings.Join(strings.Fields(stdout.String()), " ")
	for _, want := range []string{"20 password resets asked", "503 answers", "delivered 20 of 20", "duplicates 0 "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s\nstderr:\n%s", want, out, stderr.String())
		}
	}
}

// embeddedAddrs are flags that put a bench's embedded Redis and Kafka on ports of their own: the defaults are a
// board's, which another test or a board running here may hold.
func embeddedAddrs(t *testing.T) []string {
	t.Helper()
	free := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	return []string{"--embedded-redis-addr", free(), "--embedded-kafka-addr", free()}
}
