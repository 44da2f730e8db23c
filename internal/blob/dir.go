package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Dir stores objects as files under a directory: root/<first two characters of the key>/<key>. A Put writes a
// temporary file beside its target, syncs it, renames it into place and syncs the directory, so that a crash at any
// point leaves the old object or the whole new one, and a Put that returned survives the crash.
type Dir struct {
	root string
}

// tempPrefix names the files a Put is writing; List skips them, and a crashed Put's are removed by NewDir.
const tempPrefix = ".put-"

// NewDir returns the store under root, creating it, and removes the temporary files of Puts a crash interrupted.
func NewDir(root string) (*Dir, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("blob dir: %w", err)
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), tempPrefix) {
			return os.Remove(path)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("blob dir: %w", err)
	}
	return &Dir{root: root}, nil
}

func (d *Dir) path(key string) string { return filepath.Join(d.root, key[:min(2, len(key))], key) }

// Put implements Store.
func (d *Dir) Put(ctx context.Context, key string, r io.Reader, size int64) (err error) {
	if err := checkKey(key); err != nil {
		return err
	}
	target := d.path(key)
	dir := filepath.Dir(target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, tempPrefix)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	n, err := io.Copy(f, io.LimitReader(r, size+1))
	switch {
	case err != nil:
		return err
	case n != size:
		return fmt.Errorf("blob: put %s: %d bytes read, %d announced", key, n, size)
	case ctx.Err() != nil:
		return ctx.Err()
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), target); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// Open implements Store. The object's OSFile is the open file, for a caller that serves it with sendfile.
func (d *Dir) Open(_ context.Context, key string) (Object, error) {
	if err := checkKey(key); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	f, err := os.Open(d.path(key))
	if err != nil {
		return nil, notFound(key, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &file{f: f, info: Info{Key: key, Size: st.Size(), ModTime: st.ModTime()}}, nil
}

type file struct {
	f    *os.File
	info Info
}

func (f *file) Read(p []byte) (int, error)                   { return f.f.Read(p) }
func (f *file) Seek(offset int64, whence int) (int64, error) { return f.f.Seek(offset, whence) }
func (f *file) Close() error                                 { return f.f.Close() }
func (f *file) Info() Info                                   { return f.info }

// OSFile returns the open file itself: net/http sends an *os.File with sendfile, and anything wrapping it through
// user-space buffers.
func (f *file) OSFile() *os.File { return f.f }

// Stat implements Store.
func (d *Dir) Stat(_ context.Context, key string) (Info, error) {
	if err := checkKey(key); err != nil {
		return Info{}, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	st, err := os.Stat(d.path(key))
	if err != nil {
		return Info{}, notFound(key, err)
	}
	return Info{Key: key, Size: st.Size(), ModTime: st.ModTime()}, nil
}

// Delete implements Store.
func (d *Dir) Delete(_ context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := os.Remove(d.path(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// List implements Store.
func (d *Dir) List(ctx context.Context, fn func(Info) error) error {
	return filepath.WalkDir(d.root, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !KeyOK(e.Name()) {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		st, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted while listing
		} else if err != nil {
			return err
		}
		return fn(Info{Key: e.Name(), Size: st.Size(), ModTime: st.ModTime()})
	})
}

func notFound(key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return err
}
