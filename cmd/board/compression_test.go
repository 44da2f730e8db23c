package main

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"board/internal/polltest"
)

// getEncoded GETs url asking for encoding ("" for none), with a client that neither asks for gzip itself nor
// decodes it, and returns the Content-Encoding and the body decoded.
func getEncoded(t *testing.T, url, encoding string) (string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if encoding != "" {
		req.Header.Set("Accept-Encoding", encoding)
	}
	resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	var body io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.Header.Get("Content-Encoding"), string(raw)
}

// TestAnswersCompressed: a page of the web and an answer of article-read come back gzipped to a client that asks,
// the same once decoded as they are plain to one that does not.
func TestAnswersCompressed(t *testing.T) {
	t.Parallel()
	p := startProgram(t, testFlags(t, t.TempDir()))
	_, token := signUp(t, p, "gus")
	seedBoard(t, p, token, 1, 20)
	api := p.urls["article-read"] + "/v1/articles?boardId=1&page=1&pageSize=30"
	polltest.Until(t, 20*time.Second, func() (bool, string) {
		_, body := getEncoded(t, api, "")
		var page struct{ Articles []json.RawMessage }
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			return false, err.Error()
		}
		return len(page.Articles) == 20, fmt.Sprintf("%d articles listed", len(page.Articles))
	})
	for _, url := range []string{api, p.urls["web"] + "/boards/1"} {
		encoding, plain := getEncoded(t, url, "")
		if encoding != "" {
			t.Errorf("GET %s without Accept-Encoding: Content-Encoding %q", url, encoding)
		}
		encoding, decoded := getEncoded(t, url, "gzip")
		if encoding != "gzip" {
			t.Errorf("GET %s asking for gzip: Content-Encoding %q", url, encoding)
		}
		if decoded != plain {
			t.Errorf("GET %s: gzipped it decodes to %d bytes, plain it is %d", url, len(decoded), len(plain))
		}
	}
}
