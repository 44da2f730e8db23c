package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// progress reports a long job on w: a redrawn bar with rate and ETA on a terminal, a line every few seconds
// otherwise (logs, CI).
type progress struct {
	w     io.Writer
	what  string
	total int64
	done  atomic.Int64
	start time.Time
	tty   bool
	stop  chan struct{}
	ended chan struct{}
}

func startProgress(w io.Writer, what string, total int64) *progress {
	p := &progress{w: w, what: what, total: total, start: time.Now(), tty: isTerminal(w),
		stop: make(chan struct{}), ended: make(chan struct{})}
	every := 5 * time.Second
	if p.tty {
		every = 200 * time.Millisecond
	}
	go func() {
		defer close(p.ended)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.print()
			case <-p.stop:
				p.print()
				if p.tty {
					fmt.Fprintln(p.w)
				}
				return
			}
		}
	}()
	return p
}

func (p *progress) add(n int64) { p.done.Add(n) }

// finish draws the final state and returns the elapsed time.
func (p *progress) finish() time.Duration {
	close(p.stop)
	<-p.ended
	return time.Since(p.start)
}

func (p *progress) print() {
	done, elapsed := p.done.Load(), time.Since(p.start)
	rate := float64(done) / elapsed.Seconds()
	eta := "?"
	if rate > 0 {
		eta = time.Duration(float64(p.total-done) / rate * float64(time.Second)).Round(time.Second).String()
	}
	frac := float64(done) / float64(max(p.total, 1))
	const width = 30
	bar := strings.Repeat("#", int(frac*width)) + strings.Repeat(".", width-int(frac*width))
	line := fmt.Sprintf("%s [%s] %5.1f%% %d/%d  %.0f/s  elapsed %s  ETA %s", p.what, bar, frac*100, done, p.total,
		rate, elapsed.Round(time.Second), eta)
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\033[K", line)
		return
	}
	fmt.Fprintln(p.w, line)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (p *progress) set(n int64) { p.done.Store(n) }
