package app

import (
	"context"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// Every API service the binary runs serves its OpenAPI document; the web serves pages, not an API. Each service's
// own tests check its document against its routes (httpiotest.CheckOpenAPI).
func TestEveryServiceHasItsOpenAPIDocument(t *testing.T) {
	for _, s := range services {
		if s.pages {
			if s.openAPI != nil {
				t.Errorf("%s serves pages, yet has an OpenAPI document", s.Name)
			}
			continue
		}
		if s.openAPI == nil {
			t.Errorf("%s: no OpenAPI document", s.Name)
			continue
		}
		doc, err := openapi3.NewLoader().LoadFromData(s.openAPI())
		if err == nil {
			err = doc.Validate(context.Background())
		}
		if err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
	}
}
