package notification

import (
	"testing"

	"board/internal/httpio/httpiotest"
)

func TestOpenAPI(t *testing.T) {
	t.Parallel()
	httpiotest.CheckOpenAPI(t, OpenAPI(), Routes(nil, httpiotest.Logger), OpenRoutes)
}
