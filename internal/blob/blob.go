// Package blob is where board keeps large immutable bytes (images): one interface, Store, with two drivers, a
// directory on local disk (NewDir, the embedded default) and any S3-compatible object store (NewS3). The shape
// follows go-cloud's blob: keys are flat strings, a write is atomic (a reader sees the whole object or none), and a
// missing object is ErrNotFound. The package's shared suite (blobtest) runs against both drivers.
package blob

import (
	"context"
	"errors"
	"io"
	"time"
)

// ErrNotFound is returned (wrapped) for a key that holds no object.
var ErrNotFound = errors.New("blob: not found")

// Info describes a stored object.
type Info struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// Object is an open stored object: seekable, so that it can answer ranges (http.ServeContent). Close it.
type Object interface {
	io.ReadSeekCloser
	Info() Info
}

// Store keeps objects by key. Keys are made of [a-z0-9._-] and at most 200 characters (KeyOK).
type Store interface {
	// Put writes size bytes from r under key, replacing what was there; when it returns nil the object is durable,
	// and until then readers see the old object or none, never part of the new one.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// Open opens the object under key.
	Open(ctx context.Context, key string) (Object, error)
	// Stat describes the object under key.
	Stat(ctx context.Context, key string) (Info, error)
	// Delete removes the object under key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List calls fn for every object, in no given order, until fn returns an error.
	List(ctx context.Context, fn func(Info) error) error
}

// KeyOK reports whether key is a key every driver stores as is: 1 to 200 of [a-z0-9._-], not starting with a dot.
func KeyOK(key string) bool {
	if key == "" || len(key) > 200 || key[0] == '.' {
		return false
	}
	for _, c := range []byte(key) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func checkKey(key string) error {
	if !KeyOK(key) {
		return errors.New("blob: invalid key " + key)
	}
	return nil
}
