package notification

import (
	"bytes"
	_ "embed"
)

// openAPI is the HTTP contract of the notification service (SPEC §2.1), an OpenAPI 3.1 document that board serves at
// GET /openapi.json. The file is the document: edit it by hand, with Routes; the package's tests check that it is
// valid, that its writes ask for a token and that its paths are exactly the routes, and the end-to-end tests of
// cmd/board check every request and answer they make against it.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the service's OpenAPI document, a fresh copy.
func OpenAPI() []byte { return bytes.Clone(openAPI) }
