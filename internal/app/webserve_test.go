package app

import (
	"bytes"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
)

// A web whose user service would not believe the browser addresses it passes on is told at start.
func TestWarnUnbelievedWeb(t *testing.T) {
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	for _, c := range []struct {
		origin, header string
		warn           bool
	}{
		{"http://127.0.0.1:9006", "X-Forwarded-For", false},
		{"http://[::1]:9006", "x-forwarded-for", false},
		{"http://user.internal:9006", "X-Forwarded-For", false}, // a name is not checked
		{"http://192.0.2.2:9006", "X-Forwarded-For", true},
		{"http://127.0.0.1:9006", "", true},
		{"http://127.0.0.1:9006", "X-Real-IP", true},
	} {
		var logs bytes.Buffer
		e := &Engines{Config: &Config{ClientIPHeader: c.header, TrustedProxies: loopback}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		warnUnbelievedWeb(e, c.origin)
		if got := strings.Contains(logs.String(), "will not believe"); got != c.warn {
			t.Errorf("user at %s, header %q: warned %v, want %v", c.origin, c.header, got, c.warn)
		}
	}
}
