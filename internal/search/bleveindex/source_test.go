package bleveindex

import (
	"testing"
	"time"

	"board/internal/search"
)

// A document reads back as it was stored, in the binary form and in the JSON of indexes made before it; a
// truncated one is an error, not a panic.
func TestSourceRoundTrip(t *testing.T) {
	created := time.Date(2026, 11, 29, 6, 30, 0, 123e6, time.UTC)
	docs := []search.Doc{
		{Type: search.TypeArticle, ArticleID: 1 << 60, BoardID: 3, WriterID: 9, Title: "제목 title", Content: "본문\nbody",
			CreatedAt: created, Version: 4, Moderation: 2, Hidden: true},
		{Type: search.TypeComment, ArticleID: 7, CommentID: 8, WriterID: -1, CreatedAt: time.UnixMilli(-5).UTC(), Version: 1, Deleted: true},
		{Type: search.TypeArticle},
	}
	for _, want := range docs {
		want.CreatedAt = want.CreatedAt.UTC()
		b := encode(want)
		got, err := decode(b)
		if err != nil || got != want {
			t.Errorf("decode(encode(%+v)) = %+v, %v", want, got, err)
		}
		for cut := range len(b) - len(want.Content) - len(want.Title) {
			if _, err := decode(b[:cut]); err == nil {
				t.Errorf("%+v cut at %d: no error", want, cut)
			}
		}
	}
	legacy := `{"t":"comment","a":7,"c":8,"b":2,"w":5,"co":"hi","cr":1700000000000,"v":2,"h":true}`
	got, err := decode([]byte(legacy))
	want := search.Doc{Type: search.TypeComment, ArticleID: 7, CommentID: 8, BoardID: 2, WriterID: 5, Content: "hi",
		CreatedAt: time.UnixMilli(1700000000000).UTC(), Version: 2, Hidden: true}
	if err != nil || got != want {
		t.Errorf("legacy JSON: %+v, %v", got, err)
	}
}
