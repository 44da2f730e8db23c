package user

import (
	"context"
	"database/sql"
	"encoding/base64"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"board/internal/auth"
	"board/internal/snowflake/snowflaketest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

var slogDiscard = slog.New(slog.DiscardHandler)

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// decodeSegment returns the i-th dot-separated segment of a compact JWS, decoded.
func decodeSegment(t *testing.T, token string, i int) ([]byte, error) {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is not a compact JWS", token)
	}
	return base64.RawURLEncoding.DecodeString(parts[i])
}

func ids(keys []auth.Key) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.ID
	}
	return out
}

// instance is one user service instance of a test, with its HTTP server.
type instance struct {
	name string
	svc  *Service
	url  string
}

func startInstance(t *testing.T, name string, db *sqldb.DB, clock *snowflaketest.Clock) instance {
	t.Helper()
	svc := newTestService(t, db, clock, nil)
	srv := httptest.NewServer(Routes(svc, slogDiscard))
	t.Cleanup(srv.Close)
	return instance{name: name, svc: svc, url: srv.URL}
}

// verify checks token as another service would that has just started: a verifier fed by the instance's JWK Set over
// HTTP, with nothing cached.
func (in instance) verify(clock *snowflaketest.Clock, token string) (auth.Principal, error) {
	v := auth.NewVerifier(auth.JWKS(http.DefaultClient, in.url+JWKSPath), auth.VerifierConfig{Now: clock.Now, MinRefresh: time.Nanosecond})
	return v.Verify(context.Background(), token)
}

// publishes reports whether the instance's JWK Set, fetched over HTTP, lists kid.
func (in instance) publishes(t *testing.T, kid string) bool {
	t.Helper()
	keys, err := auth.JWKS(http.DefaultClient, in.url+JWKSPath)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return keys[kid] != nil
}

func signing(t *testing.T, svc *Service) auth.Key {
	t.Helper()
	k, err := svc.keys.Signing()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Key rotation across two instances of one database, on a fake clock, each reloading every Reload (5 s) at its own
// phase: the new key is in both instances' JWK Sets before either signs with it; a token the old key signed keeps
// verifying until it expires; the old key leaves the JWK Sets TokenTTL + 1 minute after it retired.
func TestKeyRotationAcrossInstances(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		clock := snowflaketest.NewClock(t0)
		a := startInstance(t, "a", db, clock)
		b := startInstance(t, "b", db, clock)
		k1 := signing(t, a.svc)
		if k2 := signing(t, b.svc); k2.ID != k1.ID {
			t.Fatalf("instances sign with %s and %s", k1.ID, k2.ID)
		}
		u, err := a.svc.SignUp(ctx, "judy", "password1")
		if err != nil {
			t.Fatal(err)
		}
		clock.Add(time.Minute)
		before, err := a.svc.SignIn(ctx, "judy", "password1") // signed by k1 before the rotation
		if err != nil {
			t.Fatal(err)
		}

		clock.Add(1500 * time.Millisecond)
		k2, err := Rotate(ctx, db, clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		activation := a.svc.cfg.Activation
		switchAt := k2.Created.Add(activation)

		// Both reload loops, B's 3 s behind A's, stepped in 250 ms.
		instances := []instance{a, b}
		next := []time.Time{clock.Now().Add(DefaultReload - 1500*time.Millisecond), clock.Now().Add(DefaultReload + 1500*time.Millisecond)}
		var lastK1 auth.Principal
		var lastK1Token string
		for end := switchAt.Add(5 * time.Second); clock.Now().Before(end); clock.Add(250 * time.Millisecond) {
			now := clock.Now()
			for i, in := range instances {
				if !now.Before(next[i]) {
					if err := in.svc.keys.Load(ctx); err != nil {
						t.Fatal(err)
					}
					next[i] = next[i].Add(DefaultReload)
				}
			}
			for _, in := range instances {
				k := signing(t, in.svc)
				switch {
				case now.Before(switchAt) && k.ID != k1.ID, !now.Before(switchAt) && k.ID != k2.ID:
					t.Fatalf("at switch%+v instance %s signs with %s; want k1 %s until, k2 %s from the switch",
						now.Sub(switchAt), in.name, k.ID, k1.ID, k2.ID)
				case k.ID == k2.ID:
					for _, other := range instances {
						if !other.publishes(t, k2.ID) {
							t.Fatalf("at switch%+v instance %s signs with the new key that instance %s does not publish",
								now.Sub(switchAt), in.name, other.name)
						}
					}
				}
			}
			if now.Before(switchAt) {
				tok, err := b.svc.SignIn(ctx, "judy", "password1")
				if err != nil {
					t.Fatal(err)
				}
				lastK1Token, lastK1 = tok.AccessToken, auth.Principal{UserID: u.ID, Role: auth.RoleUser}
			}
		}
		// New tokens carry k2 and verify everywhere.
		tok, err := b.svc.SignIn(ctx, "judy", "password1")
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range instances {
			if _, err := in.verify(clock, tok.AccessToken); err != nil {
				t.Errorf("a token of the new key at instance %s: %v", in.name, err)
			}
		}

		// The old key's tokens verify until they expire, at both instances: the first one it signed, and the last.
		clock.Set(before.ExpiresAt.Add(-time.Second))
		for _, in := range instances {
			if _, err := in.verify(clock, before.AccessToken); err != nil {
				t.Errorf("a token of the old key a second before it expires, at instance %s: %v", in.name, err)
			}
		}
		claims, _ := decodeSegment(t, lastK1Token, 1)
		lastExp := decode[struct{ Exp int64 }](t, claims).Exp
		clock.Set(time.Unix(lastExp, 0).Add(-time.Second))
		for _, in := range instances {
			if p, err := in.verify(clock, lastK1Token); err != nil || p != lastK1 {
				t.Errorf("the old key's last token a second before it expires, at instance %s: %v, %v", in.name, p, err)
			}
		}
		// The old key is published until TokenTTL + 1 minute after it retired (the switch), and no longer.
		gone := switchAt.Add(a.svc.cfg.TokenTTL + time.Minute)
		clock.Set(gone.Add(-time.Millisecond))
		for _, in := range instances {
			if !in.publishes(t, k1.ID) {
				t.Errorf("instance %s dropped the old key before its tokens expired", in.name)
			}
		}
		clock.Set(gone)
		for _, in := range instances {
			if in.publishes(t, k1.ID) || !in.publishes(t, k2.ID) {
				t.Errorf("instance %s publishes %v at the old key's end; want only the new key %s", in.name,
					ids(in.svc.keys.Published()), k2.ID)
			}
		}
	})
}

// Instances that start together on an empty table agree on the signing key, whether one first key was stored or
// several.
func TestFirstKeyRace(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		clock := snowflaketest.NewClock(t0)
		rings := make([]*KeyRing, 6)
		var wg sync.WaitGroup
		for i := range rings {
			ring, err := NewKeyRing(db, Config{Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			rings[i] = ring
			wg.Go(func() {
				if err := ring.Load(ctx); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for _, r := range rings { // the next reload
			if err := r.Load(ctx); err != nil {
				t.Fatal(err)
			}
		}
		agree(t, rings, "after a racing start")
		// Two first keys stored anyway (the lock did not serialize the inserts): the oldest signs everywhere, then
		// the newer once it is activated, still everywhere.
		if _, err := db.ExecContext(ctx, "DELETE FROM signing_key"); err != nil {
			t.Fatal(err)
		}
		k1, _ := auth.NewKey(clock.Now().Add(-time.Millisecond))
		k2, _ := auth.NewKey(clock.Now())
		for _, k := range []auth.Key{k2, k1} {
			if err := db.Transact(ctx, func(tx *sql.Tx) error { return insertKey(ctx, tx, k) }); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range rings {
			if err := r.Load(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got := agree(t, rings, "with two first keys"); got != k1.ID {
			t.Errorf("signing with %s, want the oldest %s", got, k1.ID)
		}
		clock.Add(2 * DefaultReload)
		if got := agree(t, rings, "with two first keys, both activated"); got != k2.ID {
			t.Errorf("signing with %s, want the newest activated %s", got, k2.ID)
		}
	})
}

// agree checks that every ring signs with one key and returns its id.
func agree(t *testing.T, rings []*KeyRing, when string) string {
	t.Helper()
	var first string
	for i, r := range rings {
		k, err := r.Signing()
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = k.ID
		} else if k.ID != first {
			t.Errorf("%s: ring %d signs with %s, ring 0 with %s", when, i, k.ID, first)
		}
	}
	return first
}

func TestRotateDeletesKeysRetiredADayAgo(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		k1, err := Rotate(ctx, db, t0)
		if err != nil {
			t.Fatal(err)
		}
		k2, err := Rotate(ctx, db, t0.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		k1Retired := k2.Created.Add(2 * DefaultReload)
		k3, err := Rotate(ctx, db, k1Retired.Add(retiredKept))
		if err != nil {
			t.Fatal(err)
		}
		keys, _ := readKeys(ctx, db)
		if got, want := ids(keys), []string{k1.ID, k2.ID, k3.ID}; !slices.Equal(got, want) {
			t.Errorf("a day after k1 retired: keys %v, want %v", got, want)
		}
		k4, err := Rotate(ctx, db, k1Retired.Add(retiredKept+time.Second))
		if err != nil {
			t.Fatal(err)
		}
		keys, _ = readKeys(ctx, db)
		if got, want := ids(keys), []string{k2.ID, k3.ID, k4.ID}; !slices.Equal(got, want) {
			t.Errorf("over a day after k1 retired: keys %v, want %v", got, want)
		}
	})
}

// The signing and publishing rule, on its own.
func TestSigningRule(t *testing.T) {
	t.Parallel()
	const act, ttl = 10 * time.Second, time.Hour
	keys := []auth.Key{{ID: "k1", Created: t0}, {ID: "k2", Created: t0.Add(time.Minute)}, {ID: "k3", Created: t0.Add(time.Minute + time.Second)}}
	for _, tc := range []struct {
		at        time.Duration // after t0
		sign      string
		published []string
	}{
		{0, "k1", []string{"k1", "k2", "k3"}},
		{time.Minute + 9*time.Second, "k1", []string{"k1", "k2", "k3"}},
		{time.Minute + 10*time.Second, "k2", []string{"k1", "k2", "k3"}}, // k1 retires
		{time.Minute + 11*time.Second, "k3", []string{"k1", "k2", "k3"}}, // k2 retires, having signed for a second
		{time.Minute + 10*time.Second + ttl + time.Minute - 1, "k3", []string{"k1", "k2", "k3"}},
		{time.Minute + 10*time.Second + ttl + time.Minute, "k3", []string{"k2", "k3"}},
		{time.Minute + 11*time.Second + ttl + time.Minute, "k3", []string{"k3"}},
	} {
		now := t0.Add(tc.at)
		if got := keys[signingIndex(keys, now, act)].ID; got != tc.sign {
			t.Errorf("at +%v: signs with %s, want %s", tc.at, got, tc.sign)
		}
		if got := ids(published(keys, now, act, ttl)); !slices.Equal(got, tc.published) {
			t.Errorf("at +%v: publishes %v, want %v", tc.at, got, tc.published)
		}
	}
	// Only fresh keys: the oldest signs.
	if got := keys[signingIndex(keys[1:], t0.Add(time.Minute+2*time.Second), act)+1].ID; got != "k2" {
		t.Errorf("no activated key: signs with %s, want the oldest, k2", got)
	}
}

// Run reloads: a key rotated in picks up within a few reloads (a generous wait, never a timing assertion).
func TestRunReloads(t *testing.T) {
	t.Parallel()
	db := sqldbtest.OpenSQLite(t, Migrate)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ring, err := NewKeyRing(db, Config{Reload: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := ring.Load(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); ring.Run(ctx) }()
	k, err := Rotate(ctx, db, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !slices.Contains(ids(ring.Published()), k.ID); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the rotated key never showed up")
		}
	}
	cancel()
	<-done
}

func TestMint(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		clock := snowflaketest.NewClock(t0)
		p := auth.Principal{UserID: 42, Role: auth.RoleModerator}
		token, expires, err := Mint(ctx, db, p, 10*time.Minute, clock.Now()) // on an empty table: makes the first key
		if err != nil {
			t.Fatal(err)
		}
		if want := t0.Truncate(time.Second).Add(10 * time.Minute); !expires.Equal(want) {
			t.Errorf("expires %v, want %v", expires, want)
		}
		in := startInstance(t, "a", db, clock)
		if got, err := in.verify(clock, token); err != nil || got != p {
			t.Errorf("minted token verifies as %v, %v; want %v", got, err, p)
		}
	})
}
