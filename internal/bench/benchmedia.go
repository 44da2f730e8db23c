package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"board/internal/app"
	"board/internal/blob"
	"board/internal/httpio"
	"board/internal/media"
	"board/internal/outbox"
	"board/internal/snowflake"
	"board/internal/sqldb"
)

func benchMedia(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := app.Default()
	flags := app.NewFlagSet("bench media", `Usage: board bench media [flags]

Measures the media service (internal/media) on the embedded engines (a SQLite file and a blob directory in a new
temporary directory), served on a loopback port with its guard, as board serve would:
  serving  one stored image (a --serve-kb KiB JPEG) fetched by --clients closed-loop clients for --duration through
           GET /media/{key}; the floor is Go's http.FileServer on the very file the blob store keeps, in the same run,
           the two taking turns of a tenth of --duration;
  uploads  --uploads concurrent uploads of one generated 4000x3000 (12-megapixel) JPEG of about --upload-mb MiB,
           each a whole upload (read, header check, strip, decode, thumbnail, hash, store, row); prints the rate and
           the peak resident memory of this process over the uploads (VmHWM, reset just before), against 512 MiB.`, stderr)
	clients := flags.Int("clients", 16, "concurrent clients of the serving cases")
	duration := flags.Duration("duration", 5*time.Second, "timed length of each serving case")
	serveKB := flags.Int("serve-kb", 200, "size of the served image, in KiB (about)")
	uploads := flags.Int("uploads", 50, "concurrent uploads")
	uploadMB := flags.Float64("upload-mb", 4, "size of the uploaded JPEG, in MiB (about)")
	if err := app.Parse(flags, args, getenv); err != nil {
		return err
	}
	if *clients < 1 || *duration <= 0 || *serveKB < 1 || *uploads < 1 || *uploadMB <= 0 {
		return errors.New("need --clients, --serve-kb, --uploads >= 1, --duration > 0, --upload-mb > 0")
	}
	logger := cfg.NewLogger(stderr)
	dir, err := os.MkdirTemp("", "board-bench-media-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := sqldb.OpenSQLite(filepath.Join(dir, "media.db"))
	if err != nil {
		return err
	}
	defer db.Close()
	if err := media.Migrate(ctx, db); err != nil {
		return err
	}
	blobDir := filepath.Join(dir, "blobs")
	blobs, err := blob.NewDir(blobDir)
	if err != nil {
		return err
	}
	ids, err := snowflake.New(snowflake.MaxNode, nil)
	if err != nil {
		return err
	}
	svc := media.New(db, outbox.New(db, cfg.OutboxShards, ids, time.Now, nil, nil), blobs, ids,
		media.Config{DailyQuota: 1 << 40, TotalQuota: 1 << 40})
	key, err := newBenchKey()
	if err != nil {
		return err
	}
	token, err := key.token(1)
	if err != nil {
		return err
	}
	base, stop, err := serveMedia(svc, key.guard(), logger)
	if err != nil {
		return err
	}
	defer stop()

	// Serving.
	small, err := benchJPEG(800, 600, float64(*serveKB)/1024)
	if err != nil {
		return err
	}
	stored, err := postImage(ctx, base, token, small)
	if err != nil {
		return err
	}
	file := filepath.Join(blobDir, strings.TrimPrefix(stored, "/media/")[:2], strings.TrimPrefix(stored, "/media/"))
	fileBase, stopFiles, err := serveFiles(filepath.Dir(file))
	if err != nil {
		return err
	}
	defer stopFiles()
	fmt.Fprintf(stdout, "serving a stored %d-byte JPEG, %d clients, %s each, in turns of a tenth\n", len(small), *clients, *duration)
	fmt.Fprintf(stdout, "%-34s %12s %12s\n", "case", "req/s", "MiB/s")
	// The two cases take turns, a tenth of the duration at a time, so that a neighbour's load on the machine falls on
	// both alike.
	var floor, served float64
	for range 10 {
		f, err := loadGets(ctx, fileBase+"/"+filepath.Base(file), *clients, *duration/10)
		if err != nil {
			return fmt.Errorf("http.FileServer: %w", err)
		}
		m, err := loadGets(ctx, base+stored, *clients, *duration/10)
		if err != nil {
			return fmt.Errorf("GET /media/{key}: %w", err)
		}
		floor, served = floor+f/10, served+m/10
	}
	mib := func(rate float64) float64 { return rate * float64(len(small)) / (1 << 20) }
	fmt.Fprintf(stdout, "%-34s %12.0f %12.1f\n", "floor: http.FileServer, same file", floor, mib(floor))
	fmt.Fprintf(stdout, "%-34s %12.0f %12.1f\n", "media GET /media/{key}", served, mib(served))
	fmt.Fprintf(stdout, "%-34s %12.2f   (target >= 0.80)\n", "media / floor", served/floor)

	// Uploads.
	big, err := benchJPEG(4000, 3000, *uploadMB)
	if err != nil {
		return err
	}
	runtime.GC()
	debug.FreeOSMemory()
	before := residentKiB("VmRSS")
	resetPeak := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	var failed atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range *uploads {
		wg.Go(func() {
			if _, err := postImage(ctx, base, token, big); err != nil {
				failed.Add(1)
				once.Do(func() { firstErr = err })
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	peak := residentKiB("VmHWM")
	fmt.Fprintf(stdout, "\n%d concurrent uploads of one %.1f MiB 4000x3000 (12-megapixel) JPEG, GOMAXPROCS %d\n",
		*uploads, float64(len(big))/(1<<20), runtime.GOMAXPROCS(0))
	fmt.Fprintf(stdout, "%-34s %12s\n", "all done in", elapsed.Round(time.Millisecond))
	fmt.Fprintf(stdout, "%-34s %12.2f uploads/s (%.1f MiB/s of uploads)\n", "rate", float64(*uploads)/elapsed.Seconds(),
		float64(*uploads)*float64(len(big))/(1<<20)/elapsed.Seconds())
	fmt.Fprintf(stdout, "%-34s %12d\n", "failed", failed.Load())
	peakNote := "peak resident (VmHWM) over the uploads"
	if !resetPeak {
		peakNote = "peak resident (VmHWM) of the run"
	}
	fmt.Fprintf(stdout, "%-34s %9d MiB   (target < 512 MiB; %d MiB resident before)\n", peakNote, peak>>10, before>>10)
	if firstErr != nil {
		return fmt.Errorf("%d uploads failed; the first: %w", failed.Load(), firstErr)
	}
	return nil
}

// serveMedia serves the media service on a loopback port as board serve does: its guard, its stored files kept out
// of the compressor (httpio.Server.Files), and uploads under their own deadline.
func serveMedia(svc *media.Service, guard *httpio.Guard, logger *slog.Logger) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := httpio.Server{Service: "media", API: media.Routes(svc, logger), Guard: guard, Gatherer: prometheus.NewRegistry(),
		Metrics: httpio.NewMetrics(prometheus.NewRegistry()), Logger: logger, Streams: map[string]bool{media.UploadPath: true},
		Files: []string{media.BlobPrefix}}.HTTPServer()
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("bench: the media server stopped", "err", err)
		}
	}()
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// serveFiles serves dir with http.FileServer on a loopback port.
func serveFiles(dir string) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// loadGets sends GETs of url from clients closed-loop clients for a fifth of d untimed, then for d, and returns the
// rate of successful answers.
func loadGets(ctx context.Context, url string, clients int, d time.Duration) (float64, error) {
	transport := &http.Transport{MaxIdleConnsPerHost: clients, DisableCompression: true}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}
	run := func(d time.Duration) (int64, error) {
		var n atomic.Int64
		var firstErr atomic.Value
		end := time.Now().Add(d)
		var wg sync.WaitGroup
		for range clients {
			wg.Go(func() {
				for time.Now().Before(end) && ctx.Err() == nil {
					if err := get(ctx, client, url); err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					n.Add(1)
				}
			})
		}
		wg.Wait()
		if err, _ := firstErr.Load().(error); err != nil {
			return 0, err
		}
		return n.Load(), ctx.Err()
	}
	if _, err := run(d / 5); err != nil {
		return 0, err
	}
	n, err := run(d)
	return float64(n) / d.Seconds(), err
}

// postImage uploads data as the token's user and returns the image's URL.
func postImage(ctx context.Context, base, token string, data []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+media.UploadPath, bytes.NewReader(data))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("upload: %s %s", resp.Status, body)
	}
	var out struct{ URL string }
	return out.URL, json.Unmarshal(body, &out)
}

// benchJPEG makes a w x h JPEG of about mib MiB: smooth gradients with noise, the noise's strength found by
// bisection so that the encoded size comes near the target (a photo's entropy, not a flat picture's).
func benchJPEG(w, h int, mib float64) ([]byte, error) {
	target := int(mib * (1 << 20))
	rng := rand.New(rand.NewPCG(1, 2))
	noise := make([]byte, w*h)
	for i := range noise {
		noise[i] = byte(rng.IntN(256))
	}
	encode := func(strength int) ([]byte, error) {
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				n := int(noise[y*w+x])*strength/255 - strength/2
				i := img.PixOffset(x, y)
				img.Pix[i] = clamp(x*255/w + n)
				img.Pix[i+1] = clamp(y*255/h + n)
				img.Pix[i+2] = clamp((x+y)*255/(w+h) - n)
				img.Pix[i+3] = 255
			}
		}
		var b bytes.Buffer
		err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 85})
		return b.Bytes(), err
	}
	lo, hi := 0, 255
	var best []byte
	for range 8 {
		mid := (lo + hi) / 2
		b, err := encode(mid)
		if err != nil {
			return nil, err
		}
		if best == nil || abs(len(b)-target) < abs(len(best)-target) {
			best = b
		}
		if len(b) < target {
			lo = mid + 1
		} else {
			hi = mid - 1
		}
		if lo > hi {
			break
		}
	}
	return best, nil
}

func clamp(v int) uint8 { return uint8(min(max(v, 0), 255)) }

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// residentKiB reads a field (VmRSS, VmHWM) of /proc/self/status, in KiB; 0 where there is none.
func residentKiB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
