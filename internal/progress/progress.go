// Package progress draws the progress of a long job: a bar with its rate and ETA.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// Bar reports a long job on w: a redrawn bar with rate and ETA on a terminal, a line every few seconds
// otherwise (logs, CI).
type Bar struct {
	w     io.Writer
	what  string
	total atomic.Int64
	done  atomic.Int64
	start time.Time
	tty   bool
	stop  chan struct{}
	ended chan struct{}
}

// Start starts drawing the progress of what, total units of work.
func Start(w io.Writer, what string, total int64) *Bar {
	p := &Bar{w: w, what: what, start: time.Now(), tty: isTerminal(w), stop: make(chan struct{}), ended: make(chan struct{})}
	p.total.Store(total)
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

// Add counts n more units done.
func (p *Bar) Add(n int64) { p.done.Add(n) }

// Finish draws the final state and returns the elapsed time.
func (p *Bar) Finish() time.Duration {
	close(p.stop)
	<-p.ended
	return time.Since(p.start)
}

func (p *Bar) print() {
	done, total, elapsed := p.done.Load(), p.total.Load(), time.Since(p.start)
	rate := float64(done) / elapsed.Seconds()
	eta := "?"
	if rate > 0 {
		eta = time.Duration(float64(max(total-done, 0)) / rate * float64(time.Second)).Round(time.Second).String()
	}
	// Work found after the start (articles written during a rebuild) may take done past total.
	frac := min(float64(done)/float64(max(total, 1)), 1)
	const width = 30
	bar := strings.Repeat("#", int(frac*width)) + strings.Repeat(".", width-int(frac*width))
	line := fmt.Sprintf("%s [%s] %5.1f%% %d/%d  %.0f/s  elapsed %s  ETA %s", p.what, bar, frac*100, done, total,
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

// Set says n units are done.
func (p *Bar) Set(n int64) { p.done.Store(n) }

// SetTotal says how many units the job has, once it knows.
func (p *Bar) SetTotal(n int64) { p.total.Store(n) }
