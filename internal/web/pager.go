package web

// pager is the page numbers under a list, in blocks of ten (SPEC §3.1): the pages of the current block, and links
// to the blocks before and after. It is made from the capped count the services answer with, which counts at
// most one row past the current block: enough to know whether a next block exists without counting the board.
type pager struct {
	ID       string
	Label    string // what the pages are of, for a screen reader
	Pages    []int64
	Current  int64
	Prev     int64 // the last page of the block before; 0 when this block starts at page 1
	Next     int64 // the first page of the block after; 0 when there is none
	prefix   string
	Fragment string // appended to every link, e.g. "#comments"
}

const pagesPerBlock = 10

func newPager(id, label, prefix string, page, size, count int64) pager {
	p := pager{ID: id, Label: label, Current: page, prefix: prefix}
	start := (page-1)/pagesPerBlock*pagesPerBlock + 1
	last := (count + size - 1) / size // the last page the count knows of
	end := min(start+pagesPerBlock-1, last)
	if count == 0 || end < start {
		// Past the end (or nothing at all): no numbers but a way back to the first block.
		if page > 1 {
			p.Prev = 1
		}
		return p
	}
	for n := start; n <= end; n++ {
		p.Pages = append(p.Pages, n)
	}
	if start > 1 {
		p.Prev = start - 1
	}
	if count > end*size {
		p.Next = end + 1
	}
	return p
}

// Link is the address of page n.
func (p pager) Link(n int64) string { return p.prefix + id(n) + p.Fragment }

// Shown says whether the pager has anything to show: one page alone needs no numbers.
func (p pager) Shown() bool { return len(p.Pages) > 1 || p.Prev > 0 || p.Next > 0 }
