package mail

import (
	"net/http"
	"testing"

	"board/internal/httpio/httpiotest"
)

// The service has no API: its document has the operational paths alone.
func TestOpenAPI(t *testing.T) {
	t.Parallel()
	httpiotest.CheckOpenAPI(t, OpenAPI(), http.NewServeMux(), nil)
}
