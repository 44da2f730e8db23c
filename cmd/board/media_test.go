package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"board/internal/polltest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

type mediaOut struct {
	MediaID, URL, ThumbnailURL, ContentType string
	Width, Height                           int
	Bytes                                   int64
}

// testPNG is a PNG of its own for each seed: PNGs carry no metadata here, so what is stored is these bytes.
func testPNG(t testing.TB, seed int) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, 64, 48))
	for i := range img.Pix {
		img.Pix[i] = byte(i*7 + seed)
	}
	img.Set(0, 0, color.NRGBA{byte(seed), byte(seed >> 8), byte(seed >> 16), 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func pngKey(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]) + ".png"
}

// uploadImage posts data to the media service as the tests' moderator (the transport signs the request).
func uploadImage(base string, data []byte) (mediaOut, error) {
	resp, err := http.Post(base+"/v1/media", "application/octet-stream", bytes.NewReader(data))
	if err != nil {
		return mediaOut{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return mediaOut{}, err
	}
	if resp.StatusCode != http.StatusCreated {
		return mediaOut{}, fmt.Errorf("upload: %s %s", resp.Status, raw)
	}
	var m mediaOut
	return m, json.Unmarshal(raw, &m)
}

// fetchImage returns the status and bytes of GET base+url.
func fetchImage(t *testing.T, base, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(base + url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// mediaEngine is an SQL engine the media tests run on: its flags, and how to open the media database a board of
// those flags in data directory dir uses.
type mediaEngine struct {
	name   string
	flags  []string
	openDB func(t *testing.T, dir string) *sqldb.DB
}

// mediaEngines are SQLite, and the server BOARD_TEST_MYSQL_DSN names: MariaDB, or Vitess's vtgate, whose media
// keyspace is unsharded (docs/media.md#vitess).
func mediaEngines(t *testing.T) []mediaEngine {
	engines := []mediaEngine{{name: "sqlite", openDB: func(t *testing.T, dir string) *sqldb.DB {
		db, err := sqldb.OpenSQLite(filepath.Join(dir, "sqlite", "media.db"))
		if err != nil {
			t.Fatal(err)
		}
		return db
	}}}
	if os.Getenv(sqldbtest.MySQLDSNEnv) != "" {
		name := "mariadb"
		if os.Getenv(sqldbtest.VitessPrefixesEnv) != "" {
			name = "vitess"
		}
		prefix := sqldbtest.Databases(t, "board_e2e_", testDatabases()...)
		engines = append(engines, mediaEngine{name: name,
			flags: []string{"--mysql-dsn", os.Getenv(sqldbtest.MySQLDSNEnv), "--mysql-db-prefix", prefix, "--mysql-max-conns", "10"},
			openDB: func(t *testing.T, _ string) *sqldb.DB {
				db, err := sqldb.OpenMySQL(t.Context(), sqldbtest.DSN(t, prefix+"media"), 2)
				if err != nil {
					t.Fatal(err)
				}
				return db
			}})
	}
	return engines
}

// An image a post shows stays; one no post shows is collected once unreferenced for the configured time; a deleted
// article's image follows. The article is written first, naming the image's content key, so that its reference is
// recorded (read from the media database) before any collection could see the image.
func TestMediaReferencesAndCollection(t *testing.T) {
	t.Parallel()
	for _, engine := range mediaEngines(t) {
		t.Run(engine.name, func(t *testing.T) { testMediaReferencesAndCollection(t, engine) })
	}
}

func testMediaReferencesAndCollection(t *testing.T, engine mediaEngine) {
	dir := t.TempDir()
	p := startProgram(t, append([]string{"--data-dir", dir, "--embedded-redis-addr", "127.0.0.1:0", "--embedded-kafka-addr",
		"127.0.0.1:0", "--log-format", "json", "--media-unreferenced-for", "2s", "--media-gc-interval", "100ms"}, engine.flags...))
	defer p.shutdown()
	base := p.urls["media"]
	shown, orphan := testPNG(t, 1), testPNG(t, 2)
	var a articleOut
	call(t, "POST", p.urls["article"]+"/v1/articles", map[string]any{"title": "a picture",
		"content": "here: ![cat](/media/" + pngKey(shown) + ")", "writerId": 5, "boardId": 1}, http.StatusCreated, &a)
	db := engine.openDB(t, dir)
	defer db.Close()
	refs := func() int {
		var n int
		if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM media_ref WHERE blob_key = ?", pngKey(shown)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	polltest.Until(t, time.Minute, func() (bool, string) { return refs() == 1, "the article's reference is not recorded" })

	s, err := uploadImage(base, shown)
	if err != nil {
		t.Fatal(err)
	}
	o, err := uploadImage(base, orphan)
	if err != nil {
		t.Fatal(err)
	}
	if s.URL != "/media/"+pngKey(shown) || s.Width != 64 || s.Height != 48 || s.ContentType != "image/png" {
		t.Fatalf("upload answered %+v", s)
	}
	polltest.Until(t, time.Minute, func() (bool, string) {
		status, _ := fetchImage(t, base, o.URL)
		return status == http.StatusNotFound, "the unreferenced image is still served"
	})
	if status, body := fetchImage(t, base, s.URL); status != http.StatusOK || !bytes.Equal(body, shown) {
		t.Fatalf("the image the article shows: %d", status)
	}
	if status, _ := fetchImage(t, base, s.ThumbnailURL); status != http.StatusOK {
		t.Fatalf("its thumbnail: %d", status)
	}
	// An avatar is an upload the collection keeps too; the redirect leads to its thumbnail.
	avatar, err := uploadImage(base, testPNG(t, 3))
	if err != nil {
		t.Fatal(err)
	}
	call(t, "PUT", base+"/v1/users/me/avatar", map[string]any{"mediaId": avatar.MediaID}, http.StatusOK, nil)
	if status, body := fetchImage(t, base, fmt.Sprintf("/v1/avatars/%d", testModerator.UserID)); status != http.StatusOK || len(body) == 0 {
		t.Fatalf("the avatar, through its redirect: %d", status)
	}
	call(t, "DELETE", base+"/v1/users/me/avatar", nil, http.StatusNoContent, nil)
	call(t, "DELETE", base+"/v1/media/"+avatar.MediaID, nil, http.StatusNoContent, nil)
	call(t, "DELETE", p.urls["article"]+"/v1/articles/"+a.ArticleID, nil, http.StatusNoContent, nil)
	polltest.Until(t, time.Minute, func() (bool, string) {
		status, _ := fetchImage(t, base, s.URL)
		return status == http.StatusNotFound, "the deleted article's image is still served"
	})
}

// Every upload acknowledged before a SIGKILL is served whole after the restart, image and thumbnail.
func TestMediaSurvivesKill9(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	for _, engine := range mediaEngines(t) {
		t.Run(engine.name, func(t *testing.T) { testMediaSurvivesKill9(t, engine) })
	}
}

func testMediaSurvivesKill9(t *testing.T, engine mediaEngine) {
	dir := t.TempDir()
	args := append([]string{"user", "media", "--user-addr", "127.0.0.1:0", "--media-addr", "127.0.0.1:0", "--data-dir", dir,
		"--embedded-redis-addr", "127.0.0.1:0", "--embedded-kafka-addr", "127.0.0.1:0", "--log-format", "json"}, engine.flags...)
	p := startProcess(t, args...)
	type acked struct {
		data []byte
		m    mediaOut
	}
	var (
		mu      sync.Mutex
		done    []acked
		next    atomic.Int64
		running atomic.Int64
		wg      sync.WaitGroup
	)
	for range 6 {
		running.Add(1)
		wg.Go(func() {
			defer running.Add(-1)
			for {
				data := testPNG(t, int(next.Add(1)))
				m, err := uploadImage(p.urls["media"], data)
				if err != nil {
					return // killed
				}
				mu.Lock()
				done = append(done, acked{data, m})
				mu.Unlock()
			}
		})
	}
	polltest.Until(t, 2*time.Minute, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(done) >= 40 || running.Load() == 0, fmt.Sprintf("%d uploads acknowledged", len(done))
	})
	if running.Load() == 0 {
		t.Fatalf("every uploader failed\n%s", p.logs)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.wait()
	wg.Wait()
	p = startProcess(t, args...)
	for _, a := range done {
		if status, body := fetchImage(t, p.urls["media"], a.m.URL); status != http.StatusOK || !bytes.Equal(body, a.data) {
			t.Fatalf("acknowledged upload %s: %d, %d bytes", a.m.MediaID, status, len(body))
		}
		if status, _ := fetchImage(t, p.urls["media"], a.m.ThumbnailURL); status != http.StatusOK {
			t.Fatalf("acknowledged upload %s's thumbnail: %d", a.m.MediaID, status)
		}
	}
	t.Logf("%d uploads acknowledged before the kill, all served after it", len(done))
}
