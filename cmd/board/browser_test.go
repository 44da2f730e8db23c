package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// The browser tests drive Debian's Chromium, headless, through the web pages as a person would. One browser serves
// the whole test binary; each user of a test gets a tab in a browser context of their own (their own cookies).

// stepTimeout bounds every step: a page that never answers fails the step instead of hanging the suite.
const stepTimeout = 15 * time.Second

// settleTimeout bounds a wait for the read side to show a write (reloads until it does). It is generous: the
// race detector on a loaded two-core machine slows the relay, the consumers and the view cache by several times.
const settleTimeout = 45 * time.Second

// theBrowser is the shared browser, started by the first browser test and stopped by TestMain.
var theBrowser struct {
	ctx           context.Context // the browser's first tab; its children are new tabs
	cancel, alloc context.CancelFunc
}

var startBrowser = sync.OnceValues(func() (context.Context, error) {
	path, err := exec.LookPath("chromium")
	if err != nil {
		return nil, err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		// The machine has no network but loopback: nothing in the background may try to reach out.
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-background-networking", true), chromedp.WindowSize(1280, 800))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	// The first Do starts the browser and binds it to ctx, so it gets no deadline of its own; a watchdog ends it.
	watchdog := time.AfterFunc(60*time.Second, cancel)
	err = chromedp.Do(ctx)
	watchdog.Stop()
	if err != nil {
		cancel()
		cancelAlloc()
		return nil, fmt.Errorf("start chromium: %w", err)
	}
	theBrowser.ctx, theBrowser.cancel, theBrowser.alloc = ctx, cancel, cancelAlloc
	return ctx, nil
})

// stopBrowser closes the shared browser, if a test started it.
func stopBrowser() {
	if theBrowser.ctx == nil {
		return
	}
	ctx, cancel := context.WithTimeout(theBrowser.ctx, 5*time.Second)
	defer cancel()
	_ = chromedp.Cancel(ctx) // closes the browser cleanly
	theBrowser.cancel()
	theBrowser.alloc() // waits for the process and removes its profile directory
}

// tab is one user of the site: a tab in a browser context of its own.
type tab struct {
	t    *testing.T
	ctx  context.Context
	name string // who uses the tab, which prefixes the names of its artifacts
	base string // the web's base URL
	step string // the step running now, which names the artifacts of a failure

	mu       sync.Mutex
	problems []string // console errors, uncaught exceptions and CSP violations not yet reported
	saved    int      // how many failure snapshots were saved
	console  sync.WaitGroup
}

// newTab opens a tab for a new user of the web at base, skipping the test when Chromium is not installed.
func newTab(t *testing.T, name, base string) *tab {
	t.Helper()
	if _, err := exec.LookPath("chromium"); err != nil {
		t.Skip("the browser tests need Chromium: apt-get install chromium")
	}
	root, err := startBrowser()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := chromedp.NewContext(root, chromedp.WithNewBrowserContext())
	b := &tab{t: t, ctx: ctx, name: name, base: strings.TrimSuffix(base, "/"), step: "open a tab"}
	watchdog := time.AfterFunc(stepTimeout, cancel)
	err = chromedp.Do(ctx) // creates the tab
	watchdog.Stop()
	if err != nil {
		cancel()
		t.Fatalf("open a tab: %v", err)
	}
	b.watchConsole()
	b.acceptDialogs()
	// Cleanups run last first: the snapshot of a failed test is taken before the tab closes.
	t.Cleanup(func() {
		cancel()
		b.console.Wait()
	})
	t.Cleanup(func() {
		b.reportProblems()
		if t.Failed() && b.saved == 0 {
			b.snapshot("at-the-end")
		}
	})
	return b
}

// watchConsole collects what the page reports as an error: console.error, uncaught exceptions and the browser's
// own errors, among them Content-Security-Policy violations. A failed load (a 4xx or 5xx answer, which the failure
// tests expect) is the browser's "network" source and is not a problem.
func (b *tab) watchConsole() {
	messages := chromedp.Console(b.ctx)
	b.console.Go(func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type != chromedp.ConsoleError && m.Type != chromedp.ConsoleException || m.Source == "network" {
				continue
			}
			where := m.URL
			if where != "" {
				where = fmt.Sprintf(" (%s:%d)", where, m.Line+1)
			}
			b.mu.Lock()
			b.problems = append(b.problems, fmt.Sprintf("%s%s", m, where))
			b.mu.Unlock()
		}
	})
}

// acceptDialogs answers yes to any confirm() a page asks before a delete, so that a dialog cannot block a step.
func (b *tab) acceptDialogs() {
	dialogs := chromedp.Events(b.ctx, page.JavascriptDialogOpening)
	b.console.Go(func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(b.ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	})
}

// takeProblems returns the console problems seen since the last call.
func (b *tab) takeProblems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.problems
	b.problems = nil
	return p
}

// reportProblems fails the test for every console problem seen so far.
func (b *tab) reportProblems() {
	b.t.Helper()
	for _, p := range b.takeProblems() {
		b.t.Errorf("%s: the page reported an error: %s", b.step, p)
	}
}

// disableJavaScript turns the page's scripts off, as a reader who blocks them has it.
func (b *tab) disableJavaScript() {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled,
		emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		b.t.Fatalf("disable JavaScript: %v", err)
	}
}

// fatalf saves the page and stops the test.
func (b *tab) fatalf(format string, args ...any) {
	b.t.Helper()
	b.failf(format, args...)
	b.t.FailNow()
}

// failf saves the page (the first few times) and marks the test failed.
func (b *tab) failf(format string, args ...any) {
	b.t.Helper()
	b.t.Errorf("%s: %s", b.step, fmt.Sprintf(format, args...))
	if b.saved < 4 {
		b.snapshot(b.step)
	}
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// snapshot saves a full-page screenshot and the HTML of the page in the test's artifact directory, named by step.
// The directory is kept when go test runs with -artifacts.
func (b *tab) snapshot(step string) {
	b.t.Helper()
	b.saved++
	name := fmt.Sprintf("%s-%02d-%s", b.name, b.saved, strings.Trim(unsafeName.ReplaceAllString(step, "-"), "-"))
	dir := b.t.ArtifactDir()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	var saved []string
	if png, err := chromedp.Run(ctx, fullPageScreenshot()); err == nil {
		path := filepath.Join(dir, name+".png")
		if os.WriteFile(path, png, 0o644) == nil {
			saved = append(saved, path)
		}
	} else {
		b.t.Logf("screenshot of %q: %v", step, err)
	}
	html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if err == nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		path := filepath.Join(dir, name+".html")
		if os.WriteFile(path, []byte("<!-- "+loc+" -->\n"+html), 0o644) == nil {
			saved = append(saved, path)
		}
	} else {
		b.t.Logf("HTML of %q: %v", step, err)
	}
	if len(saved) > 0 {
		b.t.Logf("saved %s (kept with go test -artifacts)", strings.Join(saved, ", "))
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		b.recover()
	}
}

// fullPageScreenshot captures the whole page, beyond the viewport.
func fullPageScreenshot() chromedp.Action[[]byte] {
	return func(ctx context.Context, t *chromedp.Target) ([]byte, error) {
		m, err := cdp.Call(ctx, t, page.GetLayoutMetrics, cdp.Empty{})
		if err != nil {
			return nil, err
		}
		params := page.CaptureScreenshotParams{CaptureBeyondViewport: new(true), FromSurface: new(true)}
		if r := m.CSSContentSize; r != nil && r.Width > 0 && r.Height > 0 {
			params.Clip = &page.Viewport{X: r.X, Y: r.Y, Width: r.Width, Height: r.Height, Scale: 1}
		}
		res, err := cdp.Call(ctx, t, page.CaptureScreenshot, params)
		return res.Data, err
	}
}

// recover stops whatever the tab was loading after a step ran out of time, so that the next step starts clean.
func (b *tab) recover() {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	_ = chromedp.Do(ctx, chromedp.Stop(), chromedp.Navigate("about:blank"))
}

// do runs the actions of one step within the step deadline; a failure stops the test.
func (b *tab) do(step string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	b.step = step
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fatalf("%v", err)
	}
	b.reportProblems()
}

// result runs one action of the step named step and returns its value; a failure stops the test.
func result[T any](b *tab, step string, a chromedp.Action[T]) T {
	b.t.Helper()
	b.step = step
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.fatalf("%v", err)
	}
	return v
}

// url is the web's URL of path.
func (b *tab) url(path string) string { return b.base + path }

// open loads path and returns the status of its answer.
func (b *tab) open(path string) int {
	b.t.Helper()
	resp := result(b, "open "+path, chromedp.NavigateResponse(b.url(path)))
	b.reportProblems()
	if resp == nil {
		b.fatalf("no response")
	}
	return int(resp.Status)
}

// openOK loads path and expects a 200.
func (b *tab) openOK(path string) {
	b.t.Helper()
	if status := b.open(path); status != 200 {
		b.fatalf("status %d, want 200", status)
	}
}

// follow clicks sel, which must load a new page (a link, or a form's submit button), and returns the new page's
// status, after any redirect.
func (b *tab) follow(step, sel string) int {
	b.t.Helper()
	b.step = step
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel)))
	if err != nil {
		b.fatalf("click %s: %v", sel, err)
	}
	b.reportProblems()
	if resp == nil {
		b.fatalf("click %s: no response", sel)
	}
	return int(resp.Status)
}

// followOK clicks sel and expects the page it loads to answer 200.
func (b *tab) followOK(step, sel string) {
	b.t.Helper()
	if status := b.follow(step, sel); status != 200 {
		b.fatalf("click %s: status %d, want 200", sel, status)
	}
}

// click clicks sel without waiting for a page load (a control the page handles with its script).
func (b *tab) click(step, sel string) {
	b.t.Helper()
	b.do(step, chromedp.Click(chromedp.CSS(sel)))
}

// fill replaces the value of the field sel by typing value into it.
func (b *tab) fill(step, sel, value string) {
	b.t.Helper()
	enter := chromedp.SendKeys(chromedp.CSS(sel), value)
	if len(value) > typedAtMost {
		// A key event a character takes a round trip to the browser each: a long text typed so outlasts a step on
		// a busy machine. It goes in at once instead, as a paste or an input method does, with its input event.
		enter = func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
			_, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: value})
			return chromedp.Void{}, err
		}
	}
	b.do(step, chromedp.Focus(chromedp.CSS(sel)), selectAll(), chromedp.KeyEvent("\b"), enter)
}

// typedAtMost is the longest text fill types key by key.
const typedAtMost = 64

// selectAll selects everything in the focused field (ctrl+A), so that the next key replaces it.
func selectAll() chromedp.Action[chromedp.Void] {
	return chromedp.KeyEvent("a", chromedp.KeyModifiers(chromedp.ModifierCtrl))
}

// js quotes s as a JavaScript string.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// eval evaluates a JavaScript expression in the page and decodes its value.
func eval[T any](b *tab, expr string) T {
	b.t.Helper()
	return result(b, b.step, chromedp.Evaluate[T](expr))
}

// text is the trimmed text content of the first element matching sel, or "" when there is none.
func (b *tab) text(sel string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(document.querySelector(%s)?.textContent ?? "").trim()`, js(sel)))
}

// attr is the attribute name of the first element matching sel, or "" when there is none.
func (b *tab) attr(sel, name string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`document.querySelector(%s)?.getAttribute(%s) ?? ""`, js(sel), js(name)))
}

// count is how many elements match sel.
func (b *tab) count(sel string) int {
	b.t.Helper()
	return eval[int](b, fmt.Sprintf(`document.querySelectorAll(%s).length`, js(sel)))
}

// location is the page's URL without the web's base.
func (b *tab) location() string {
	b.t.Helper()
	return strings.TrimPrefix(result(b, b.step, chromedp.Location()), b.base)
}

// path is the page's path, without its query (such as a notice) and fragment.
func (b *tab) path() string {
	b.t.Helper()
	return eval[string](b, `location.pathname`)
}

// waitFor polls the JavaScript condition cond until it holds, through any page load in between, and fails the
// step at its deadline.
func (b *tab) waitFor(step, cond string) {
	b.t.Helper()
	b.step = step
	deadline := time.Now().Add(stepTimeout)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+cond+")"))
		cancel()
		if err == nil && ok {
			b.reportProblems()
			return
		}
		if time.Now().After(deadline) {
			b.fatalf("still not true after %v: %s (last error: %v)", stepTimeout, cond, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// reloadUntil loads path again and again until the JavaScript condition cond holds on it: for what the read
// model shows a moment after a write.
func (b *tab) reloadUntil(step, path, cond string) {
	b.t.Helper()
	b.step = step
	deadline := time.Now().Add(settleTimeout)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
		_, err := chromedp.Run(ctx, chromedp.NavigateResponse(b.url(path)))
		var ok bool
		if err == nil {
			ok, err = chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+cond+")"))
		}
		cancel()
		if err == nil && ok {
			b.reportProblems()
			return
		}
		if time.Now().After(deadline) {
			b.fatalf("%s: still not true after %v: %s (last error: %v)", path, settleTimeout, cond, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// reloadUntilText loads path until the text of sel is want, and reports the last text seen when it never is.
func (b *tab) reloadUntilText(step, path, sel, want string) {
	b.t.Helper()
	b.step = step
	deadline := time.Now().Add(settleTimeout)
	for {
		b.openOK(path)
		got := b.text(sel)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			b.fatalf("%s: %s is still %q after %v, want %q", path, sel, got, settleTimeout, want)
		}
		b.step = step
		time.Sleep(200 * time.Millisecond)
	}
}

// expect fails the test (without stopping it) when got is not want.
func expect[T comparable](b *tab, what string, got, want T) {
	b.t.Helper()
	if got != want {
		b.failf("%s = %v, want %v", what, got, want)
	}
}

// openResponse loads path and returns its answer.
func (b *tab) openResponse(path string) *network.Response {
	b.t.Helper()
	resp := result(b, "open "+path, chromedp.NavigateResponse(b.url(path)))
	b.reportProblems()
	if resp == nil {
		b.fatalf("no response")
	}
	return resp
}

// openUntil loads path until it answers status: for a page that reflects a write a moment later.
func (b *tab) openUntil(path string, status int) {
	b.t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for {
		got := b.open(path)
		if got == status {
			return
		}
		if time.Now().After(deadline) {
			b.fatalf("%s: still status %d after %v, want %d", path, got, stepTimeout, status)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pressTab presses the Tab key up to limit times from the top of the page, and reports which of the elements
// with the given ids got the focus on the way.
func (b *tab) pressTab(limit int, ids ...string) map[string]bool {
	b.t.Helper()
	reached := map[string]bool{}
	for range limit {
		b.do("press Tab", chromedp.KeyEvent(kb.Tab))
		id := eval[string](b, `document.activeElement?.id ?? ""`)
		if slices.Contains(ids, id) {
			reached[id] = true
		}
		if len(reached) == len(ids) {
			break
		}
	}
	return reached
}

// checkPage checks what every page owes a reader: lang="en", a title, a label for every field, a name for every
// link and button, alt text on every image.
func (b *tab) checkPage(what string) {
	b.t.Helper()
	b.step = "check " + what
	expect(b, "document.documentElement.lang", eval[string](b, `document.documentElement.lang`), "en")
	if eval[string](b, `document.title.trim()`) == "" {
		b.failf("the page has no title")
	}
	unlabelled := eval[[]string](b, `[...document.querySelectorAll("input, textarea, select")]
		.filter(e => !["hidden", "submit", "button", "reset", "image"].includes(e.type))
		.filter(e => !(e.labels && e.labels.length) && !e.getAttribute("aria-label") && !e.getAttribute("aria-labelledby"))
		.map(e => e.outerHTML.slice(0, 160))`)
	for _, f := range unlabelled {
		b.failf("a field without a label: %s", f)
	}
	nameless := eval[[]string](b, `[...document.querySelectorAll("a[href], button, summary")]
		.filter(e => !e.textContent.trim() && !e.getAttribute("aria-label") && !e.querySelector("img[alt]:not([alt=''])"))
		.map(e => e.outerHTML.slice(0, 160))`)
	for _, e := range nameless {
		b.failf("a control with no name a screen reader could say: %s", e)
	}
	for _, img := range eval[[]string](b, `[...document.querySelectorAll("img:not([alt])")].map(e => e.outerHTML.slice(0, 160))`) {
		b.failf("an image without alt text: %s", img)
	}
}

// TestBrowserCatchesPageErrors checks the harness itself: a page whose inline script the Content-Security-Policy
// blocks is reported, so that the other browser tests' silence about errors means something.
func TestBrowserCatchesPageErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'")
		fmt.Fprint(w, `<!doctype html><html lang="en"><title>t</title><p id="p">hello</p><script>console.log(1)</script>`)
	}))
	defer srv.Close()
	b := newTab(t, "harness", srv.URL)
	b.step = "open a page that breaks its CSP"
	if _, err := chromedp.Run(b.ctx, chromedp.NavigateResponse(srv.URL)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(stepTimeout)
	var problems []string
	for len(problems) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		problems = b.takeProblems()
	}
	if len(problems) == 0 || !strings.Contains(problems[0], "Content Security Policy") {
		t.Errorf("the blocked inline script was not reported: %q", problems)
	}
	expect(b, "text", b.text("#p"), "hello")
}
