package app

import (
	"net/http"
	"net/netip"
	"testing"
)

// The client-address header is the proxy's word only when the connection comes from a trusted proxy; anyone else is
// known by their own address, whatever they send.
func TestClientAddrTrustsOnlyProxies(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("10.1.0.0/16")}
	xff := clientAddr("X-Forwarded-For", trusted)
	for _, c := range []struct{ remote, header, want string }{
		{"127.0.0.1:5000", "198.51.100.7", "198.51.100.7"},
		{"[::1]:5000", "198.51.100.7", "198.51.100.7"},
		{"10.1.2.3:5000", "6.6.6.6, 198.51.100.7", "198.51.100.7"}, // the client's own claim comes first
		{"10.2.0.1:5000", "198.51.100.7", "10.2.0.1"},
		{"203.0.113.9:5000", "198.51.100.7", "203.0.113.9"},
		{"127.0.0.1:5000", "", "127.0.0.1"},
		{"127.0.0.1:5000", "junk-7", "127.0.0.1"}, // not an address: no budget of its own
		{"127.0.0.1:5000", "198.51.100.7:443", "127.0.0.1"},
		{"127.0.0.1:5000", "2001:db8::1", "2001:db8::1"},
	} {
		r := &http.Request{RemoteAddr: c.remote, Header: http.Header{}}
		if c.header != "" {
			r.Header.Set("X-Forwarded-For", c.header)
		}
		if got := xff(r); got != c.want {
			t.Errorf("from %s with %q: %q, want %q", c.remote, c.header, got, c.want)
		}
	}
	if clientAddr("", trusted) != nil {
		t.Error("no header configured: want the connection's address (nil)")
	}
}
