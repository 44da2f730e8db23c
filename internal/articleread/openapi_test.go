package articleread

import (
	"testing"

	"board/internal/httpio/httpiotest"
)

func TestOpenAPI(t *testing.T) {
	httpiotest.CheckOpenAPI(t, OpenAPI(), Routes(nil, httpiotest.Logger), nil)
}
