package mail

import (
	"bytes"
	_ "embed"
)

// openAPI is the HTTP contract of the mail service, an OpenAPI 3.1 document that board serves at GET
// /openapi.json: the operational paths only, as the service has no API of its own. The file is the document; the
// package's tests check it.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the service's OpenAPI document, a fresh copy.
func OpenAPI() []byte { return bytes.Clone(openAPI) }
