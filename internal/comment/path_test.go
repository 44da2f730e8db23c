package comment

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"board/internal/fault"
)

func TestNextSegment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		seg, want string
		ok        bool
	}{
		{"00000", "00001", true},
		{"00009", "0000A", true},
		{"0000Z", "0000a", true},
		{"0000z", "00010", true},
		{"0zzzz", "10000", true},
		{"Azzzz", "B0000", true},
		{"yzzzz", "z0000", true},
		{"zzzzy", "zzzzz", true},
		{"zzzzz", "", false},
	} {
		got, ok := nextSegment(tc.seg)
		if got != tc.want || ok != tc.ok {
			t.Errorf("nextSegment(%q) = %q, %v; want %q, %v", tc.seg, got, ok, tc.want, tc.ok)
		}
		if ok && got <= tc.seg {
			t.Errorf("nextSegment(%q) = %q does not sort after it", tc.seg, got)
		}
	}
}

func TestNextSegmentCountsInBase62(t *testing.T) {
	t.Parallel()
	seg := firstSegment
	for i := 1; i <= 62*62+5; i++ {
		next, ok := nextSegment(seg)
		if !ok || next <= seg {
			t.Fatalf("step %d: nextSegment(%q) = %q, %v", i, seg, next, ok)
		}
		seg = next
	}
	// 62*62+5 = 1*62^2 + 0*62 + 5
	if seg != "00105" || Segment(62*62+5) != seg {
		t.Errorf("after 3849 steps: %q, want 00105 = Segment(3849) = %q", seg, Segment(62*62+5))
	}
	if Segment(0) != firstSegment || Segment(62*62*62*62*62-1) != lastSegment {
		t.Errorf("Segment(0), Segment(62^5-1) = %q, %q", Segment(0), Segment(62*62*62*62*62-1))
	}
}

func TestChildPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		parent, top, want string
		code              string
	}{
		{"", "", "00000", ""},
		{"", "00000", "00001", ""},
		{"", "00003abcde", "00004", ""},                // the top descendant is a grandchild of the root level
		{"00003", "", "0000300000", ""},                // first reply
		{"00003", "00003000010000z", "0000300002", ""}, // deepest top descendant under child 00001
		{"0000000000000000000000000", "", "", "DEPTH_EXCEEDED"},
		{"00000000000000000000", "", "0000000000000000000000000", ""}, // depth 5 is allowed
		{"", "zzzzz", "", "TOO_MANY_REPLIES"},
		{"abcde", "abcdezzzzz00000", "", "TOO_MANY_REPLIES"},
	} {
		got, err := childPath(tc.parent, tc.top)
		if tc.code != "" {
			if fe, ok := fault.As(err); !ok || fe.Kind != fault.Invalid || fe.Code != tc.code {
				t.Errorf("childPath(%q, %q) = %q, %v; want %s", tc.parent, tc.top, got, err, tc.code)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("childPath(%q, %q) = %q, %v; want %q", tc.parent, tc.top, got, err, tc.want)
		}
	}
}

func TestValidPath(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]bool{
		"00000": true, "zzzzz": true, "aZ09b": true, strings.Repeat("Ab3dE", 5): true,
		"": false, "0000": false, "000000": false, strings.Repeat("00000", 6): false,
		"0000-": false, "0000 ": false, "0000é": false, "00000/0000": false,
	} {
		if got := validPath(p); got != want {
			t.Errorf("validPath(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestDescendantBounds(t *testing.T) {
	t.Parallel()
	low, high := descendantBounds("00001")
	in := []string{"0000100000", "00001zzzzz", "00001zzzzzzzzzzzzzzzzzzzz", "000010000000000"}
	out := []string{"00001", "00000", "00000zzzzz", "00002", "0000200000", "0000"}
	for _, p := range in {
		if !(low < p && p <= high) {
			t.Errorf("%q is under 00001 but outside (%q, %q]", p, low, high)
		}
	}
	for _, p := range out {
		if low < p && p <= high {
			t.Errorf("%q is not under 00001 but inside (%q, %q]", p, low, high)
		}
	}
}

// node is a comment of a random tree in the fuzz test.
type node struct {
	path     string
	children []*node
}

// randomTree adds n comments to a tree, each under a random existing comment (or at the root) below MaxDepth,
// giving each the path childPath gives it, as the store does. It returns the roots.
func randomTree(t testing.TB, rng *rand.Rand, n int) []*node {
	root := &node{}
	parents := []*node{root}
	for range n {
		parent := parents[rng.IntN(len(parents))]
		// The largest path under the parent, as the store reads it: the last reply of the last reply of ...
		top := ""
		for last := parent; len(last.children) > 0; top = last.path {
			last = last.children[len(last.children)-1]
		}
		p, err := childPath(parent.path, top)
		if err != nil {
			t.Fatalf("childPath(%q, %q): %v", parent.path, top, err)
		}
		child := &node{path: p}
		parent.children = append(parent.children, child)
		if depth(p) < MaxDepth {
			parents = append(parents, child)
		}
	}
	return root.children
}

// depthFirst lists a forest's paths in depth-first order: each comment, then its replies, oldest first.
func depthFirst(nodes []*node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.path)
		out = append(out, depthFirst(n.children)...)
	}
	return out
}

// FuzzPathOrderIsTreeOrder: for random trees, sorting paths byte-wise (as binary collation does) gives depth-first
// order, and every path is valid and unique.
func FuzzPathOrderIsTreeOrder(f *testing.F) {
	f.Add(uint64(1), uint8(10))
	f.Add(uint64(42), uint8(200))
	f.Fuzz(func(t *testing.T, seed uint64, n uint8) {
		tree := randomTree(t, rand.New(rand.NewPCG(seed, seed>>1)), int(n))
		want := depthFirst(tree)
		got := slices.Clone(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("sorted paths differ from depth-first order:\nsorted %v\ntree   %v", got, want)
		}
		for i, p := range got {
			if !validPath(p) {
				t.Fatalf("invalid path %q", p)
			}
			if i > 0 && got[i-1] == p {
				t.Fatalf("duplicate path %q", p)
			}
		}
	})
}
