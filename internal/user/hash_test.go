package user

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"board/internal/fault"
)

// cheap are hash parameters for tests that are not about hashing cost.
var cheap = HashParams{Memory: 64, Time: 1, Threads: 1}

func TestHashRoundTrip(t *testing.T) {
	t.Parallel()
	enc, err := HashPassword(cheap, "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(enc, "$argon2id$v=19$m=64,t=1,p=1$") || strings.Contains(enc, "correct horse") {
		t.Fatalf("hash %q", enc)
	}
	for pw, want := range map[string]bool{"correct horse": true, "correct hors": false, "Correct horse": false, "": false} {
		if ok, err := VerifyPassword(enc, pw); err != nil || ok != want {
			t.Errorf("verify %q: %v, %v; want %v", pw, ok, err, want)
		}
	}
	again, _ := HashPassword(cheap, "correct horse")
	if again == enc {
		t.Error("two hashes of one password are equal: no salt")
	}
}

// Verification reads the parameters from the stored hash: changing the defaults keeps old hashes working.
func TestVerifyUsesStoredParameters(t *testing.T) {
	t.Parallel()
	old, err := HashPassword(HashParams{Memory: 128, Time: 3, Threads: 2}, "pa55word!")
	if err != nil {
		t.Fatal(err)
	}
	h, err := newHasher(cheap)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := h.verify(context.Background(), old, "pa55word!"); err != nil || !ok {
		t.Errorf("old hash under new defaults: %v, %v", ok, err)
	}
}

func TestVerifyRejectsBadHashes(t *testing.T) {
	t.Parallel()
	good, _ := HashPassword(cheap, "password1")
	parts := strings.Split(good, "$")
	for _, bad := range []string{"", "plain", "$argon2i$v=19$m=64,t=1,p=1$" + parts[4] + "$" + parts[5],
		"$argon2id$v=16$m=64,t=1,p=1$" + parts[4] + "$" + parts[5],
		"$argon2id$v=19$m=4194304,t=1,p=1$" + parts[4] + "$" + parts[5], // 4 GiB: refused, not computed
		"$argon2id$v=19$m=64,t=1000,p=1$" + parts[4] + "$" + parts[5],
		"$argon2id$v=19$m=64,t=1,p=0$" + parts[4] + "$" + parts[5],
		"$argon2id$v=19$m=64,t=1,p=1$!!$" + parts[5],
		"$argon2id$v=19$m=64,t=1,p=1$" + parts[4] + "$"} {
		if ok, err := VerifyPassword(bad, "password1"); err == nil || ok {
			t.Errorf("%q: %v, %v; want an error", bad, ok, err)
		} else if strings.Contains(err.Error(), parts[5]) {
			t.Errorf("error %q holds the hash", err)
		}
	}
}

// The semaphore bounds hashes at once; a request waiting past its deadline gets a 503, not a hang.
func TestHashWaitRespectsDeadline(t *testing.T) {
	t.Parallel()
	h, err := newHasher(cheap)
	if err != nil {
		t.Fatal(err)
	}
	for range cap(h.sem) {
		h.sem <- struct{}{} // every turn taken
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = h.hash(ctx, "password1")
	if fe, ok := fault.As(err); !ok || fe.Kind != fault.Unavailable {
		t.Fatalf("hash with every turn taken: %v; want Unavailable", err)
	}
	if n := h.computed.Load(); n != 0 {
		t.Errorf("%d hashes computed while waiting", n)
	}
	<-h.sem
	if _, err := h.hash(context.Background(), "password1"); err != nil {
		t.Errorf("hash after a turn freed: %v", err)
	}
}

// BenchmarkHash measures one hash at the default parameters, the figure DefaultHashParams states.
func BenchmarkHash(b *testing.B) {
	for _, p := range []HashParams{DefaultHashParams, {Memory: 46 * 1024, Time: 1, Threads: 1}, {Memory: 64 * 1024, Time: 3, Threads: 1}} {
		b.Run(fmt.Sprintf("m=%dKiB,t=%d,p=%d", p.Memory, p.Time, p.Threads), func(b *testing.B) {
			for b.Loop() {
				if _, err := HashPassword(p, "correct horse battery staple"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
