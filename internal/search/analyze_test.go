package search

import (
	"slices"
	"strings"
	"testing"
)

func TestTerms(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"I liked the boards", "like board"},
		{"자유게시판에 글을", "자유 유게 게시 시판 판에 글을"},
		{"board게시판 ok", "board 게시 시판 ok"},
		{"ＢＯＡＲＤ", "board"},
		{"가", "가"},
		{"İstanbul게시판", "istanbul 게시 시판"},
		{"\u212Aelvin", "kelvin"},
		{"the게시판", "게시 시판"},
	} {
		if want := strings.Fields(c.want); !slices.Equal(Terms(c.text), want) {
			t.Errorf("Terms(%q) = %q, want %q", c.text, Terms(c.text), want)
		}
	}
}
