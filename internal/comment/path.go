package comment

import (
	"strings"

	"board/internal/fault"
)

// Path enumeration (v2). A comment's path is its parent's path plus one segment of SegmentLen base-62 digits, so a
// depth-N comment has a path of N*SegmentLen characters. The digits are ordered as their bytes are (0-9 < A-Z <
// a-z), so comparing paths byte by byte, as binary collations do, puts every comment right after its parent and
// before its parent's next sibling: ordering by path is depth-first tree order.
const (
	SegmentLen = 5
	MaxDepth   = 5
	digits     = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	maxPathLen = SegmentLen * MaxDepth
)

// firstSegment is the segment of a parent's first child; lastSegment is the largest segment there is.
var (
	firstSegment = strings.Repeat(digits[:1], SegmentLen)
	lastSegment  = strings.Repeat(digits[len(digits)-1:], SegmentLen)
)

// validPath reports whether p is a whole path: 1 to MaxDepth segments of base-62 digits.
func validPath(p string) bool {
	if p == "" || len(p) > maxPathLen || len(p)%SegmentLen != 0 {
		return false
	}
	for i := 0; i < len(p); i++ {
		if strings.IndexByte(digits, p[i]) < 0 {
			return false
		}
	}
	return true
}

// depth is the number of segments of a valid path.
func depth(p string) int { return len(p) / SegmentLen }

// parentPath is the path of p's parent, "" for a root comment.
func parentPath(p string) string { return p[:len(p)-SegmentLen] }

// childPath returns the path of a new child of parent ("" for a new root comment), given the largest path among
// parent's descendants ("" when it has none).
func childPath(parent, topDescendant string) (string, error) {
	if depth(parent) >= MaxDepth {
		return "", fault.Invalidf("DEPTH_EXCEEDED", "comments nest at most %d levels deep", MaxDepth)
	}
	if topDescendant == "" {
		return parent + firstSegment, nil
	}
	// The top descendant lies under the parent's largest child, so its next segment is that child's.
	end := len(parent) + SegmentLen
	next, ok := nextSegment(topDescendant[len(parent):end])
	if !ok {
		return "", fault.Invalidf("TOO_MANY_REPLIES", "this comment has the most replies a comment can have")
	}
	return parent + next, nil
}

// Segment returns the n-th segment in base-62 order (0 gives "00000"), for 0 <= n < 62^SegmentLen.
func Segment(n int64) string {
	var seg [SegmentLen]byte
	for i := len(seg) - 1; i >= 0; i-- {
		seg[i] = digits[n%int64(len(digits))]
		n /= int64(len(digits))
	}
	return string(seg[:])
}

// nextSegment returns the segment after seg in base-62 order, and false after lastSegment.
func nextSegment(seg string) (string, bool) {
	b := []byte(seg)
	for i := len(b) - 1; i >= 0; i-- {
		d := strings.IndexByte(digits, b[i])
		if d < len(digits)-1 {
			b[i] = digits[d+1]
			return string(b), true
		}
		b[i] = digits[0] // carry
	}
	return "", false
}

// descendantBounds returns the range of paths under p: every descendant d has low < d <= high, and every path in
// that range is a descendant (for p == "", every path). The range is what an index on (article_id, path) scans.
func descendantBounds(p string) (low, high string) {
	return p, p + strings.Repeat(lastSegment[:1], maxPathLen-len(p))
}
