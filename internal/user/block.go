package user

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/outbox"
)

// MaxBlocks is how many users one user may block at once (SPEC §3.13): every instance of every service holds every
// block in memory (internal/blocks), so their number has a bound.
const MaxBlocks = 1000

// Block is one user blocked by another.
type Block struct {
	UserID    int64 // the blocked user
	Username  string
	CreatedAt time.Time
}

// Block makes user block other: 400 SELF_BLOCK, 404 for an unknown user, 409 BLOCK_LIMIT past MaxBlocks. Blocking
// someone blocked already changes nothing and returns the block in force. A new block writes USER_BLOCKED with the
// pair's next version in the same transaction.
func (s *Service) Block(ctx context.Context, user, other int64) (Block, error) {
	if user == other {
		return Block{}, fault.Invalidf("SELF_BLOCK", "you cannot block yourself")
	}
	o, err := s.Get(ctx, other) // on the other user's shard: before the transaction, which keeps to the blocker's
	if err != nil {
		return Block{}, err
	}
	b := Block{UserID: other, Username: o.Username}
	err = s.cfg.Outbox.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		if err := s.lockBlocker(ctx, tx, user); err != nil {
			return err
		}
		var blocked bool
		var version int64
		err := tx.QueryRowContext(ctx, "SELECT blocked, version, created_at FROM block WHERE user_id = ? AND blocked_user_id = ?",
			user, other).Scan(&blocked, &version, &b.CreatedAt)
		switch {
		case err == nil && blocked:
			return nil
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM block WHERE user_id = ? AND blocked = TRUE", user).Scan(&n); err != nil {
			return err
		}
		if n >= MaxBlocks {
			return fault.Conflictf("BLOCK_LIMIT", "you block %d users already, the most there may be", MaxBlocks)
		}
		b.CreatedAt = apijson.Millis(s.cfg.Now())
		if version == 0 {
			_, err = tx.ExecContext(ctx, "INSERT INTO block (user_id, blocked_user_id, blocked, version, created_at) VALUES (?, ?, TRUE, 1, ?)",
				user, other, b.CreatedAt)
		} else {
			_, err = tx.ExecContext(ctx, "UPDATE block SET blocked = TRUE, version = ?, created_at = ? WHERE user_id = ? AND blocked_user_id = ?",
				version+1, b.CreatedAt, user, other)
		}
		if err != nil {
			return err
		}
		return emit(event.UserBlocked, user, event.Block{UserID: apijson.ID(user), BlockedUserID: apijson.ID(other),
			Blocked: true, At: apijson.Time(b.CreatedAt), BlockVersion: version + 1})
	})
	if err != nil {
		return Block{}, fmt.Errorf("block: %w", err)
	}
	b.CreatedAt = b.CreatedAt.UTC()
	return b, nil
}

// Unblock ends user's block of other, writing USER_UNBLOCKED in the same transaction; without a block, it changes
// nothing.
func (s *Service) Unblock(ctx context.Context, user, other int64) error {
	err := s.cfg.Outbox.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		if err := s.lockBlocker(ctx, tx, user); err != nil {
			return err
		}
		var version int64
		err := tx.QueryRowContext(ctx, "SELECT version FROM block WHERE user_id = ? AND blocked_user_id = ? AND blocked = TRUE",
			user, other).Scan(&version)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		} else if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE block SET blocked = FALSE, version = ? WHERE user_id = ? AND blocked_user_id = ?",
			version+1, user, other); err != nil {
			return err
		}
		return emit(event.UserUnblocked, user, event.Block{UserID: apijson.ID(user), BlockedUserID: apijson.ID(other),
			At: apijson.Time(apijson.Millis(s.cfg.Now())), BlockVersion: version + 1})
	})
	if err != nil {
		return fmt.Errorf("unblock: %w", err)
	}
	return nil
}

// lockBlocker takes the blocker's users row in tx: the lock that makes a user's blocks change one at a time, so that
// a count of them stays true until the transaction ends and each change reads the pair's latest version.
func (s *Service) lockBlocker(ctx context.Context, tx *sql.Tx, user int64) error {
	var one int
	err := tx.QueryRowContext(ctx, "SELECT 1 FROM users WHERE user_id = ?"+s.db.ForUpdate(), user).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return notFound(user)
	}
	return err
}

// Blocks returns the users user blocks, newest block first. A blocked user whose account is gone is left out.
func (s *Service) Blocks(ctx context.Context, user int64) ([]Block, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT blocked_user_id, created_at FROM block WHERE user_id = ? AND blocked = TRUE", user)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var blocks []Block
	var ids []int64
	for rows.Next() {
		var b Block
		if err := rows.Scan(&b.UserID, &b.CreatedAt); err != nil {
			return nil, err
		}
		b.CreatedAt = b.CreatedAt.UTC()
		blocks, ids = append(blocks, b), append(ids, b.UserID)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	users, err := s.GetMany(ctx, ids)
	if err != nil {
		return nil, err
	}
	names := make(map[int64]string, len(users))
	for _, u := range users {
		names[u.ID] = toJSON(u).Username // a deleted account's name is not shown
	}
	out := make([]Block, 0, len(blocks))
	for _, b := range blocks {
		if name, ok := names[b.UserID]; ok {
			b.Username = name
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b Block) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.UserID, a.UserID)
	})
	return out, nil
}
