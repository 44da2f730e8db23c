package bleveindex

import (
	"testing"

	"board/internal/search"
	"board/internal/search/searchtest"
)

func TestSuite(t *testing.T) {
	t.Parallel()
	searchtest.Run(t, func(t *testing.T) search.Engine { return New(t.TempDir()) })
}
