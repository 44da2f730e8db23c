package media

import (
	"bytes"
	_ "embed"
)

// openAPI is the HTTP contract of the media service, an OpenAPI 3.1 document that board serves at GET /openapi.json.
// The file is the document: edit it by hand, with Routes; the package's tests check that it is valid and that its
// paths are exactly the routes.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the service's OpenAPI document, a fresh copy.
func OpenAPI() []byte { return bytes.Clone(openAPI) }
