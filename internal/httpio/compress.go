package httpio

import (
	"compress/gzip"
	"mime"
	"net/http"
	"strings"

	"github.com/klauspost/compress/gzhttp"
)

// compressMinSize is the smallest answer worth compressing: below about one packet, compression saves no round trip
// and costs the CPU of both ends.
const compressMinSize = 1400

// compress wraps a handler so that its answers are compressed, with zstd or gzip as the request's Accept-Encoding
// asks (zstd when both are equally welcome: it is cheaper for the same size), when they are at least
// compressMinSize and of a type compression shrinks. Every answer says Vary: Accept-Encoding, so that a shared cache
// keeps the codings apart. An ETag is kept as it is: it names the version of what is sent (SPEC §2), which is the
// same in either coding. A flush sends what was written so far, compressed; streams are not wrapped at all (see
// handler).
var compress = func() func(http.Handler) http.HandlerFunc {
	wrap, err := gzhttp.NewWrapper(
		gzhttp.MinSize(compressMinSize),
		gzhttp.CompressionLevel(gzip.BestSpeed), // pages and answers are made anew for each request: speed first
		gzhttp.ContentTypeFilter(compressible),
	)
	if err != nil {
		panic(err) // the options are constants
	}
	return wrap
}()

// compressible says whether answers of a content type shrink when compressed: text, JSON and SVG do; images (other
// than SVG), fonts, archives and anything else already compressed, or unknown, are sent as they are. Server-Sent
// Events are text, but each event must leave at once: they are not compressed either.
func compressible(contentType string) bool {
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	switch {
	case mediaType == "text/event-stream":
		return false
	case strings.HasPrefix(mediaType, "text/"):
		return true
	case mediaType == "application/json", strings.HasSuffix(mediaType, "+json"),
		mediaType == "application/javascript", mediaType == "image/svg+xml",
		mediaType == "application/xml", strings.HasSuffix(mediaType, "+xml"):
		return true
	}
	return false
}
