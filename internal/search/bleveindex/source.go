package bleveindex

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"board/internal/search"
)

// A document is stored whole in one field, read back by Get and for the hits a search shows. It is encoded in a
// binary form, which the hits of a page decode in a few microseconds where JSON took most of a newest-first
// search's time: a version byte, the numbers as varints, a byte of flags, then the title and the content, each
// after its length.

const sourceVersion = 1

const (
	flagComment = 1 << iota
	flagHidden
	flagDeleted
)

func encode(d search.Doc) []byte {
	b := make([]byte, 0, 1+8*binary.MaxVarintLen64+1+len(d.Title)+len(d.Content))
	b = append(b, sourceVersion)
	for _, n := range []int64{d.ArticleID, d.CommentID, d.BoardID, d.WriterID, d.CreatedAt.UnixMilli(), d.Version, d.Moderation} {
		b = binary.AppendVarint(b, n)
	}
	var flags byte
	if d.Type == search.TypeComment {
		flags |= flagComment
	}
	if d.Hidden {
		flags |= flagHidden
	}
	if d.Deleted {
		flags |= flagDeleted
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(len(d.Title)))
	b = append(b, d.Title...)
	return append(b, d.Content...)
}

var errCorrupt = errors.New("bleve index: stored document: corrupt")

func decode(b []byte) (search.Doc, error) {
	if len(b) > 0 && b[0] == '{' {
		return decodeJSON(b)
	}
	if len(b) == 0 || b[0] != sourceVersion {
		return search.Doc{}, errCorrupt
	}
	b = b[1:]
	var n [7]int64
	for i := range n {
		v, size := binary.Varint(b)
		if size <= 0 {
			return search.Doc{}, errCorrupt
		}
		n[i], b = v, b[size:]
	}
	if len(b) == 0 {
		return search.Doc{}, errCorrupt
	}
	flags := b[0]
	titleLen, size := binary.Uvarint(b[1:])
	if size <= 0 || uint64(len(b)-1-size) < titleLen {
		return search.Doc{}, errCorrupt
	}
	b = b[1+size:]
	d := search.Doc{Type: search.TypeArticle, ArticleID: n[0], CommentID: n[1], BoardID: n[2], WriterID: n[3],
		CreatedAt: time.UnixMilli(n[4]).UTC(), Version: n[5], Moderation: n[6], Hidden: flags&flagHidden != 0,
		Deleted: flags&flagDeleted != 0, Title: string(b[:titleLen]), Content: string(b[titleLen:])}
	if flags&flagComment != 0 {
		d.Type = search.TypeComment
	}
	return d, nil
}

// decodeJSON reads a document stored by an index made before the binary form.
func decodeJSON(b []byte) (search.Doc, error) {
	var s struct {
		Type       search.Type `json:"t"`
		ArticleID  int64       `json:"a"`
		CommentID  int64       `json:"c"`
		BoardID    int64       `json:"b"`
		WriterID   int64       `json:"w"`
		Title      string      `json:"ti"`
		Content    string      `json:"co"`
		CreatedAt  int64       `json:"cr"` // Unix ms
		Version    int64       `json:"v"`
		Moderation int64       `json:"m"`
		Hidden     bool        `json:"h"`
		Deleted    bool        `json:"d"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return search.Doc{}, fmt.Errorf("bleve index: stored document: %w", err)
	}
	return search.Doc{Type: s.Type, ArticleID: s.ArticleID, CommentID: s.CommentID, BoardID: s.BoardID,
		WriterID: s.WriterID, Title: s.Title, Content: s.Content, CreatedAt: time.UnixMilli(s.CreatedAt).UTC(),
		Version: s.Version, Moderation: s.Moderation, Hidden: s.Hidden, Deleted: s.Deleted}, nil
}
