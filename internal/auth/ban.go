package auth

import (
	"time"

	"board/internal/apijson"
	"board/internal/fault"
)

// Ban is why a user may not write, and until when: Until is nil for a ban for good.
type Ban struct {
	Reason string
	Until  *time.Time
}

// BannedCode is the code of the answer to a banned user's write or sign-in.
const BannedCode = "BANNED"

// Banned is the 403 answer to a write or a sign-in of a user under ban b. Its JSON body carries, besides code and
// message, the ban's reason and until (RFC 3339, or null for good) so that a client can show them (SPEC §3.9).
func Banned(b Ban) *fault.Error {
	e := fault.Forbiddenf("you are banned for good: %s", b.Reason)
	e.Code = BannedCode
	var until *apijson.Time
	if b.Until != nil {
		t := apijson.Time(*b.Until)
		until = &t
		e.Message = "you are banned until " + b.Until.UTC().Format(apijson.TimeLayout) + ": " + b.Reason
	}
	e.Details = map[string]any{"reason": b.Reason, "until": until}
	return e
}
