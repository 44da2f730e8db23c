package search_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"board/internal/search"
	"board/internal/search/bleveindex"
)

// blockingIndex holds each Search until release is closed.
type blockingIndex struct {
	search.Indexer
	entered chan struct{}
	release chan struct{}
}

func (b blockingIndex) Search(ctx context.Context, q search.Query) (search.Result, error) {
	b.entered <- struct{}{}
	<-b.release
	return b.Indexer.Search(ctx, q)
}

// Swap waits for the searches that use the old index, so that its caller may close it: none of them fails on a
// closed index.
func TestSwapWaitsForSearchesInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	engine := bleveindex.New(t.TempDir())
	oldIx, err := engine.Open(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	newIx, err := engine.Open(ctx, "new")
	if err != nil {
		t.Fatal(err)
	}
	defer newIx.Close()
	old := blockingIndex{Indexer: oldIx, entered: make(chan struct{}), release: make(chan struct{})}
	svc := search.NewService(old)
	searched := make(chan error)
	go func() {
		_, err := svc.Search(ctx, search.Request{Q: "words", Page: 1, PageSize: 10})
		searched <- err
	}()
	<-old.entered
	var swapped atomic.Bool
	done := make(chan struct{})
	go func() {
		svc.Swap(newIx)
		swapped.Store(true)
		close(done)
	}()
	// Swap must not return while the search uses the old index. (Had it returned, this would see it most of the time;
	// it never fails a correct Swap.)
	time.Sleep(100 * time.Millisecond)
	if swapped.Load() {
		t.Fatal("Swap returned while a search still used the old index")
	}
	close(old.release)
	if err := <-searched; err != nil {
		t.Fatalf("the search in flight: %v", err)
	}
	<-done
	if err := oldIx.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Search(ctx, search.Request{Q: "words", Page: 1, PageSize: 10}); err != nil {
		t.Errorf("a search after the swap: %v", err)
	}
}
