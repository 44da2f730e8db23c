// Package apidoc holds the HTTP contract of every service as an OpenAPI 3.1 document (SPEC §2.1), one JSON file per
// service, which the service serves at GET /openapi.json. The files are the documents: edit them by hand, with the
// routes. The tests check that each one is valid, that writes ask for a token, and that its paths are exactly the
// service's routes; the end-to-end tests of cmd/board validate every request and answer they make against the
// document the server serves. The topics and event payloads are in docs/asyncapi.yaml, which the tests here check
// against internal/event and internal/kafka; scripts/apidoc-check lints both kinds with third-party tools.
package apidoc

import (
	"embed"
	"io/fs"
	"slices"
	"strings"
)

//go:embed *.json
var files embed.FS

// For returns the OpenAPI document of the named service ("article", "hot-article", ...), a fresh copy, or nil for an
// unknown name.
func For(service string) []byte {
	if service == "" || strings.ContainsAny(service, "/.\\") {
		return nil
	}
	b, err := files.ReadFile(service + ".json")
	if err != nil {
		return nil
	}
	return b
}

// Services lists the services that have a document, sorted.
func Services() []string {
	entries, err := fs.Glob(files, "*.json")
	if err != nil {
		panic(err) // the pattern is well-formed
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = strings.TrimSuffix(e, ".json")
	}
	slices.Sort(names)
	return names
}
