package search

import (
	"strings"
	"testing"
)

func TestFragment(t *testing.T) {
	for _, c := range []struct{ text, query, want string }{
		{"I liked it", "like", "I <mark>liked</mark> it"},
		{"자유게시판에 글을", "게시판", "자유<mark>게시판</mark>에 글을"},
		{"<b>bold</b> & like", "like", "&lt;b&gt;bold&lt;/b&gt; &amp; <mark>like</mark>"},
		{"<script>alert(1)</script>", "script", "&lt;<mark>script</mark>&gt;alert(1)&lt;/<mark>script</mark>&gt;"},
		{"nothing matches here", "zebra", "nothing matches here"},
		{"a b like c like", "like", "a b <mark>like</mark> c <mark>like</mark>"},
		{"ＢＯＡＲＤ게시판 글", "게시판", "ＢＯＡＲＤ<mark>게시판</mark> 글"},
		{"ＢＯＡＲＤ게시판 글", "board", "<mark>ＢＯＡＲＤ</mark>게시판 글"},
	} {
		if got := Fragment(c.text, Terms(c.query)); got != c.want {
			t.Errorf("Fragment(%q, %q) = %q, want %q", c.text, c.query, got, c.want)
		}
	}
}

func TestFragmentWindow(t *testing.T) {
	long := strings.Repeat("filler words go here ", 40) + "the needle is here " + strings.Repeat("more words after ", 40)
	got := Fragment(long, Terms("needle"))
	if !strings.HasPrefix(got, "…") || !strings.HasSuffix(got, "…") || !strings.Contains(got, "<mark>needle</mark>") {
		t.Errorf("fragment of a long text: %q", got)
	}
	if n := len([]rune(got)); n > fragmentRunes+20 {
		t.Errorf("fragment has %d runes, want about %d", n, fragmentRunes)
	}
	// Multi-byte text is cut at rune boundaries.
	korean := strings.Repeat("가나다라마바사 ", 60) + "게시판"
	if got := Fragment(korean, Terms("게시판")); !strings.Contains(got, "<mark>게시판</mark>") || !utf8Valid(got) {
		t.Errorf("Korean fragment: %q", got)
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
