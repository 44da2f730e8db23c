// Package blobtest is the one test suite every blob.Store driver passes (internal/blob's tests run it against the
// directory driver, and against a real S3-compatible server when BOARD_TEST_S3_ENDPOINT names one).
package blobtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"

	"board/internal/blob"
)

// Run runs the suite on the stores open returns; each call gets an empty store of its own.
func Run(t *testing.T, open func(t *testing.T) blob.Store) {
	t.Run("PutOpenRoundTrip", func(t *testing.T) {
		s, ctx := open(t), t.Context()
		data := random(t, 300<<10)
		put(t, s, "roundtrip.png", data)
		if got := read(t, s, "roundtrip.png"); !bytes.Equal(got, data) {
			t.Fatalf("read %d bytes back, want the %d put", len(got), len(data))
		}
		info, err := s.Stat(ctx, "roundtrip.png")
		if err != nil || info.Size != int64(len(data)) || info.Key != "roundtrip.png" || info.ModTime.IsZero() {
			t.Fatalf("Stat = %+v, %v", info, err)
		}
	})
	t.Run("EmptyObject", func(t *testing.T) {
		s := open(t)
		put(t, s, "empty", nil)
		if got := read(t, s, "empty"); len(got) != 0 {
			t.Fatalf("read %d bytes of an empty object", len(got))
		}
	})
	t.Run("SeekReadsRanges", func(t *testing.T) {
		s, ctx := open(t), t.Context()
		data := random(t, 64<<10)
		put(t, s, "ranges", data)
		obj, err := s.Open(ctx, "ranges")
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Close()
		if obj.Info().Size != int64(len(data)) {
			t.Fatalf("Info().Size = %d, want %d", obj.Info().Size, len(data))
		}
		for _, off := range []int64{40000, 3, int64(len(data)) - 10} {
			if _, err := obj.Seek(off, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 10)
			if _, err := io.ReadFull(obj, buf); err != nil {
				t.Fatalf("read 10 bytes at %d: %v", off, err)
			}
			if !bytes.Equal(buf, data[off:off+10]) {
				t.Fatalf("bytes at %d differ", off)
			}
		}
		if end, err := obj.Seek(0, io.SeekEnd); err != nil || end != int64(len(data)) {
			t.Fatalf("Seek(0, SeekEnd) = %d, %v", end, err)
		}
	})
	t.Run("MissingIsNotFound", func(t *testing.T) {
		s, ctx := open(t), t.Context()
		if _, err := s.Open(ctx, "missing"); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("Open of a missing key: %v, want ErrNotFound", err)
		}
		if _, err := s.Stat(ctx, "missing"); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("Stat of a missing key: %v, want ErrNotFound", err)
		}
		if err := s.Delete(ctx, "missing"); err != nil {
			t.Fatalf("Delete of a missing key: %v", err)
		}
	})
	t.Run("DeleteRemoves", func(t *testing.T) {
		s, ctx := open(t), t.Context()
		put(t, s, "gone", []byte("x"))
		if err := s.Delete(ctx, "gone"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Stat(ctx, "gone"); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("Stat after Delete: %v", err)
		}
	})
	t.Run("PutReplaces", func(t *testing.T) {
		s := open(t)
		put(t, s, "twice", []byte("first"))
		put(t, s, "twice", []byte("second, longer"))
		if got := read(t, s, "twice"); string(got) != "second, longer" {
			t.Fatalf("read %q", got)
		}
	})
	t.Run("ShortReaderFailsAndStoresNothing", func(t *testing.T) {
		s, ctx := open(t), t.Context()
		if err := s.Put(ctx, "short", bytes.NewReader([]byte("abc")), 10); err == nil {
			t.Fatal("Put of 3 bytes announced as 10 succeeded")
		}
		if _, err := s.Stat(ctx, "short"); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("a failed Put left an object: %v", err)
		}
	})
	t.Run("InvalidKeyRefused", func(t *testing.T) {
		s, ctx := open(t), t.Context()
		for _, key := range []string{"", "../escape", "a/b", ".hidden", "UPPER"} {
			if err := s.Put(ctx, key, bytes.NewReader(nil), 0); err == nil {
				t.Errorf("Put(%q) succeeded", key)
			}
		}
	})
	t.Run("ListSeesEveryObject", func(t *testing.T) {
		s, ctx := open(t), t.Context()
		want := []string{"aa1", "ab2", "zz3.jpg"}
		for _, k := range want {
			put(t, s, k, []byte(k))
		}
		var got []string
		err := s.List(ctx, func(i blob.Info) error {
			if i.Size != int64(len(i.Key)) {
				return fmt.Errorf("%s: size %d", i.Key, i.Size)
			}
			got = append(got, i.Key)
			return nil
		})
		slices.Sort(got)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("List = %v, %v; want %v", got, err, want)
		}
		stop := errors.New("stop")
		if err := s.List(ctx, func(blob.Info) error { return stop }); !errors.Is(err, stop) {
			t.Fatalf("List did not return fn's error: %v", err)
		}
	})
	t.Run("ConcurrentPutsOfOneKey", func(t *testing.T) {
		// Content-addressed keys are written by every upload of the same bytes at once: each reader sees them whole.
		s := open(t)
		data := random(t, 128<<10)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() { errs <- s.Put(t.Context(), "shared", bytes.NewReader(data), int64(len(data))) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := read(t, s, "shared"); !bytes.Equal(got, data) {
			t.Fatal("concurrent puts of the same bytes left other bytes")
		}
	})
}

func random(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func put(t *testing.T, s blob.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(t.Context(), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put(%s): %v", key, err)
	}
}

func read(t *testing.T, s blob.Store, key string) []byte {
	t.Helper()
	obj, err := s.Open(context.WithoutCancel(t.Context()), key)
	if err != nil {
		t.Fatalf("Open(%s): %v", key, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return b
}
