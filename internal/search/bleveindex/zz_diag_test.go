package bleveindex

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"board/internal/search"
)

func TestZZDiag(t *testing.T) {
	dir := os.Getenv("BOARD_PROF_INDEX")
	if dir == "" {
		t.Skip()
	}
	ctx := context.Background()
	ixx, err := New(dir).Open(ctx, "bench")
	if err != nil {
		t.Fatal(err)
	}
	ix := ixx.(*Index)
	defer ix.Close()
	qs := strings.Split(strings.TrimSpace(os.Getenv("BOARD_DIAG_Q")), ",")
	for _, qt := range qs {
		q := search.Query{Terms: search.Terms(qt), Limit: 20, CountLimit: 201}
		p, _ := ix.plan(ctx, q)
		st := time.Now()
		_, ok, err := p.relevantByImpact(ctx, 20)
		dImp := time.Since(st)
		st = time.Now()
		full, _ := p.search(ctx, nil, 20, false)
		dFull := time.Since(st)
		st = time.Now()
		ix.Search(ctx, q)
		dS := time.Since(st)
		fmt.Printf("%q held=%v levels=%v ok=%v err=%v imp=%v full=%v (total %d) search=%v\n", qt, p.held, p.levelHeld, ok, err, dImp, dFull, full.Total, dS)
	}
}
