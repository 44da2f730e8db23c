package user

import (
	"context"
	"testing"

	"board/internal/snowflake/snowflaketest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// After --password-hash changes, a user's next sign-in stores a hash with the new parameters, so that their sign-ins
// cost what an unknown username's does; the sign-in after that computes one hash again.
func TestSignInRehashesWithTheCurrentParameters(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		clock := snowflaketest.NewClock(t0)
		before := newTestService(t, db, clock, nil)
		if _, err := before.SignUp(ctx, "alice", "correct horse"); err != nil {
			t.Fatal(err)
		}
		raised := HashParams{Memory: 128, Time: 2, Threads: 1}
		after, err := NewService(ctx, db, snowflaketest.NewIDs(firstID+100), Config{Hash: raised, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		stored := func() HashParams {
			_, hash, err := after.byName(ctx, "alice")
			if err != nil {
				t.Fatal(err)
			}
			p, _, _, err := decodeHash(hash)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		if got := stored(); got != cheap {
			t.Fatalf("stored parameters %+v before, want %+v", got, cheap)
		}
		if _, err := after.SignIn(ctx, "alice", "wrong password"); err == nil {
			t.Fatal("wrong password signed in")
		}
		if got := stored(); got != cheap {
			t.Errorf("a failed sign-in rehashed: %+v", got)
		}
		if _, err := after.SignIn(ctx, "alice", "correct horse"); err != nil {
			t.Fatal(err)
		}
		if got := stored(); got != raised {
			t.Errorf("stored parameters %+v after a sign-in, want %+v", got, raised)
		}
		n := after.hasher.computed.Load()
		if _, err := after.SignIn(ctx, "alice", "correct horse"); err != nil {
			t.Fatal(err)
		}
		if d := after.hasher.computed.Load() - n; d != 1 {
			t.Errorf("the next sign-in computed %d hashes, want 1", d)
		}
	})
}
