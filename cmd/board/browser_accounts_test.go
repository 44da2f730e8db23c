package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/mail"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// mailText is the text of an .eml file, its parts decoded (quoted-printable, base64), for a test to find a link in.
func mailText(raw io.Reader) (to, text string, err error) {
	m, err := mail.ReadMessage(raw)
	if err != nil {
		return "", "", err
	}
	var out strings.Builder
	var walk func(h mimeHeader, body io.Reader) error
	walk = func(h mimeHeader, body io.Reader) error {
		media, params, _ := mime.ParseMediaType(h.Get("Content-Type"))
		if strings.HasPrefix(media, "multipart/") {
			r := multipart.NewReader(body, params["boundary"])
			for {
				part, err := r.NextRawPart()
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return err
				}
				if err := walk(part.Header, part); err != nil {
					return err
				}
			}
		}
		switch strings.ToLower(h.Get("Content-Transfer-Encoding")) {
		case "quoted-printable":
			body = quotedprintable.NewReader(body)
		case "base64":
			body = base64.NewDecoder(base64.StdEncoding, body)
		}
		b, err := io.ReadAll(body)
		out.Write(b)
		out.WriteString("\n")
		return err
	}
	err = walk(m.Header, m.Body)
	return m.Header.Get("To"), out.String(), err
}

// mimeHeader is the headers of a mail or of a part of one.
type mimeHeader interface{ Get(string) string }

// waitMailLink waits for a mail to the address, written by the embedded mail default as an .eml file under
// dataDir/mail, that holds a link whose path starts with prefix, and returns the link's path, a link it has not
// returned before.
func waitMailLink(t *testing.T, dataDir, to, prefix string, seen map[string]bool) string {
	t.Helper()
	link := regexp.MustCompile(`https?://[^\s"'<>]+` + regexp.QuoteMeta(prefix) + `[A-Za-z0-9._~-]+`)
	deadline := time.Now().Add(settleTimeout)
	for {
		files, _ := filepath.Glob(filepath.Join(dataDir, "mail", "*.eml"))
		for _, name := range files {
			f, err := os.Open(name)
			if err != nil {
				continue
			}
			addr, text, err := mailText(f)
			f.Close()
			if err != nil || !strings.Contains(strings.ToLower(addr), strings.ToLower(to)) {
				continue
			}
			for _, found := range link.FindAllString(text, -1) {
				u, err := url.Parse(found)
				if err == nil && !seen[u.Path] {
					seen[u.Path] = true
					return u.Path
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no mail to %s with a link to %s… in %s/mail after %v (files: %v)", to, prefix, dataDir, settleTimeout, files)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestBrowserAccounts is issue 41's walk through the account pages, as a member does it, against every real
// service and the embedded mail default: fay signs up, adds her address and verifies it through the link mailed to
// her (the link's page uses it only when she presses its button), changes her password (her other browser's session
// ends, this one goes on), signs out everywhere else (the same), has a comment on her article mailed to her at once
// and stops those mails with the mail's one-click unsubscribe, chooses a daily digest, forgets her password and sets
// a new one through the mailed link, downloads her data, and deletes her account. With BOARD_WEB_SCREENSHOTS
// set it photographs the account page and the reset page for docs/web.md.
func TestBrowserAccounts(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	dataDir := t.TempDir()
	p := startWeb(t, "--data-dir", dataDir)
	shots := os.Getenv(screenshotsEnv)
	seen := map[string]bool{}

	b := newTab(t, "fay", p.urls["web"])
	if shots != "" {
		b.do("the screen", chromedp.EmulateViewport(1280, 900))
	}
	b.signUpWith("fay")
	// Her other browser, signed in before the password change.
	other := newTab(t, "fay-elsewhere", p.urls["web"])
	other.openOK("/signin")
	other.signInWith("fay", "fay-password")
	expect(other, "signed in elsewhere", other.text("#nav-user"), "fay")

	// Her account, with no address yet; she adds one.
	b.followOK("open the account page", "#nav-account")
	expect(b, "the account page", b.path(), "/account")
	b.checkPage("the account page")
	expect(b, "the account's name", b.text("#account-name"), "fay")
	if !strings.Contains(b.text("#email-current"), "no verified address") {
		b.failf("a new account says %q of its address", b.text("#email-current"))
	}
	b.fill("her address", "#new-email", "fay@example.com")
	b.fill("her password", "#email-password", "fay-password")
	b.followOK("send the verification link", "#email-form button[type=submit]")
	expect(b, "the page after", b.location(), "/account?notice=emailsent#email")
	if !strings.Contains(b.text("#email-pending"), "fay@example.com") {
		b.failf("the pending address: %q", b.text("#email-pending"))
	}

	// The mailed link shows a button; only pressing it verifies.
	verify := waitMailLink(t, dataDir, "fay@example.com", "/verify-email/", seen)
	b.openOK(verify)
	b.checkPage("the verification page")
	b.openOK(verify) // a second visit, as a mail scanner's before hers: the link still works
	b.followOK("verify the address", "#verify-form button[type=submit]")
	if !strings.Contains(b.text("#verified"), "fay@example.com") {
		b.failf("after verifying: %q", b.text("main"))
	}
	b.openOK(verify)
	b.follow("the link again", "#verify-form button[type=submit]")
	if b.count("#link-invalid") != 1 {
		b.failf("a used verification link: %q", b.text("main"))
	}
	b.openOK("/account")
	if !strings.Contains(b.text("#email-current"), "fay@example.com") {
		b.failf("the verified address: %q", b.text("#email-current"))
	}

	// She changes her password: this session goes on, the other ends.
	b.fill("the current password", "#current-password", "fay-password")
	b.fill("the new password", "#new-password", "fay-second-password")
	b.followOK("change the password", "#password-form button[type=submit]")
	expect(b, "the page after", b.location(), "/account?notice=passwordchanged#password")
	expect(b, "still signed in", b.text("#nav-user"), "fay")
	other.reloadUntil("the other session ends", "/", `!document.querySelector("#nav-user")`)

	// Signed in there again, she signs out everywhere else from here: there it ends again, here it goes on.
	other.openOK("/signin")
	other.signInWith("fay", "fay-second-password")
	expect(other, "signed in again elsewhere", other.text("#nav-user"), "fay")
	b.followOK("sign out everywhere else", "#sessions-form button[type=submit]")
	expect(b, "the page after", b.location(), "/account?notice=sessionsended#sessions")
	expect(b, "still signed in here", b.text("#nav-user"), "fay")
	other.reloadUntil("the other session ends again", "/", `!document.querySelector("#nav-user")`)

	// Her notifications by e-mail at once: a comment on her article is mailed to her, with a link to stop them, which
	// her mail client uses in one click (RFC 8058: a POST with no session, from no page of the site).
	b.openOK("/account")
	b.click("mails at once", "#email-pref-immediate")
	b.followOK("save the choice", "#notify-form button[type=submit]")
	b.openOK("/boards/1/write")
	b.fill("a title", "#title", "Where to eat near the station?")
	b.fill("a text", "#content", "Somewhere open late, ideally.")
	_, article := b.publish()
	_, gil := signUp(t, p, "gil")
	apiComment(t, p, gil, article, "The noodle bar by the north exit.")
	unsubscribe := waitMailLink(t, dataDir, "fay@example.com", "/unsubscribe/", seen)
	b.openOK(unsubscribe)
	b.checkPage("the unsubscribe page")
	expect(b, "the page's button", b.text("#unsubscribe-form button"), "Stop the e-mails")
	resp, err := http.Post(p.urls["web"]+unsubscribe, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the one-click unsubscribe answered %d", resp.StatusCode)
	}
	b.openOK("/account")
	expect(b, "mails off after the one click", eval[bool](b, `document.querySelector("#email-pref-off").checked`), true)

	// A daily digest of her notifications.
	b.openOK("/account")
	b.click("a daily digest", "#email-pref-daily")
	b.followOK("save the choice", "#notify-form button[type=submit]")
	expect(b, "the notice", b.text("#notice"), "Your notification e-mail choice is saved.")
	expect(b, "the choice kept", eval[bool](b, `document.querySelector("#email-pref-daily").checked`), true)
	if shots != "" {
		shoot(t, b, filepath.Join(shots, "account-desktop.png"))
	}

	// Signed out, she forgets her password and sets a new one through the mailed link.
	b.followOK("sign out", "#signout button")
	b.openOK("/signin")
	b.followOK("forgot the password", "#forgot-link")
	b.checkPage("the forgotten password page")
	b.fill("her address", "#forgot-email", "fay@example.com")
	b.followOK("ask for a link", "#forgot-form button[type=submit]")
	if b.count("#reset-sent") != 1 {
		b.failf("after asking: %q", b.text("main"))
	}
	reset := waitMailLink(t, dataDir, "fay@example.com", "/reset-password/", seen)
	b.openOK(reset)
	b.checkPage("the reset page")
	if shots != "" {
		shoot(t, b, filepath.Join(shots, "reset-desktop.png"))
	}
	b.fill("a new password", "#reset-password", "fay-third-password")
	b.followOK("set it", "#reset-form button[type=submit]")
	expect(b, "the page after the reset", b.location(), "/signin?notice=passwordreset")
	b.openOK(reset)
	b.fill("the link again", "#reset-password", "fay-fourth-password")
	b.follow("set it again", "#reset-form button[type=submit]")
	expect(b, "a used reset link", b.attr("#ask-again", "href"), "/forgot-password")
	b.openOK("/signin")
	if status := b.signInWith("fay", "fay-second-password"); status != 401 {
		b.failf("the password before the reset signed in (%d)", status)
	}
	b.openOK("/signin?next=/account")
	if status := b.signInWith("fay", "fay-third-password"); status != 200 {
		b.fatalf("the new password: %d", status)
	}
	expect(b, "back to the account", b.path(), "/account")

	// Her data, as the download link fetches it.
	expect(b, "the link downloads", b.attr("#export-link", "download"), "")
	type download struct {
		Status      int            `json:"status"`
		Disposition string         `json:"disposition"`
		Archive     map[string]any `json:"archive"`
	}
	got := result(b, "download her data", chromedp.Evaluate[download](`fetch(document.querySelector("#export-link").href)
		.then(async r => ({status: r.status, disposition: r.headers.get("content-disposition"), archive: await r.json()}))`,
		chromedp.EvalAwaitPromise))
	expect(b, "the download's status", got.Status, 200)
	if !strings.HasPrefix(got.Disposition, `attachment; filename="board-fay-`) {
		b.failf("the download's Content-Disposition: %q", got.Disposition)
	}
	profile, _ := got.Archive["profile"].(map[string]any)
	if profile["username"] != "fay" {
		b.failf("the archive's profile: %v", got.Archive["profile"])
	}
	for _, part := range []string{"articles", "comments", "likes", "bookmarks", "notifications"} {
		if _, ok := got.Archive[part].([]any); !ok {
			b.failf("the archive has no %s: %v", part, got.Archive)
		}
	}

	// She deletes her account, removing what she wrote; she is signed out and cannot sign in again.
	b.click("remove her content", "#delete-remove")
	b.fill("her password", "#delete-password", "fay-third-password")
	b.click("confirm", "#delete-confirm")
	b.followOK("delete the account", "#delete-account button[type=submit]")
	expect(b, "the page after", b.location(), "/?notice=accountdeleted")
	expect(b, "signed out", b.count("#nav-user"), 0)
	b.openOK("/signin")
	if status := b.signInWith("fay", "fay-third-password"); status != 401 {
		b.failf("the deleted account signed in (%d)", status)
	}
}

// oidcProviderEnv names the test OIDC provider's binary, zitadel/oidc's example server (scripts/oidc-provider build
// prints it); without it the test builds the provider when the Go toolchain can, and skips when it cannot.
const oidcProviderEnv = "BOARD_TEST_OIDC_PROVIDER"

var oidcProviderBuild = sync.OnceValues(func() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	out, err := exec.Command("../../scripts/oidc-provider", "build", "--build-dir", filepath.Join(cache, "board-oidc-provider")).Output()
	if err != nil {
		return "", fmt.Errorf("scripts/oidc-provider build: %w", err)
	}
	_, bin, _ := strings.Cut(strings.TrimSpace(string(out)), "=")
	return bin, nil
})

// startOIDCProvider runs the provider on a free port, with its users dev (dev-password, dev@example.com, verified)
// and ivy (ivy-at-dev) and its client web (secret "secret") sending browsers back to redirect; it returns the issuer.
func startOIDCProvider(t *testing.T, redirect string) string {
	t.Helper()
	bin := os.Getenv(oidcProviderEnv)
	if bin == "" {
		var err error
		if bin, err = oidcProviderBuild(); err != nil {
			t.Skipf("%s is not set, and the provider could not be built here: %v", oidcProviderEnv, err)
		}
	}
	dir := t.TempDir()
	users := `{"dev": {"ID": "dev", "Username": "dev", "Password": "dev-password", "Email": "dev@example.com", "EmailVerified": true, "PreferredLanguage": "en"},
		"ivy": {"ID": "ivy", "Username": "ivy", "Password": "ivy-at-dev", "Email": "ivy@example.com", "EmailVerified": true, "PreferredLanguage": "en"}}`
	if err := os.WriteFile(filepath.Join(dir, "users.json"), []byte(users), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freeLoopbackPort(t)
	var log bytes.Buffer
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port), "USERS_FILE="+filepath.Join(dir, "users.json"), "REDIRECT_URI="+redirect)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	issuer := fmt.Sprintf("http://localhost:%d/", port)
	for deadline := time.Now().Add(time.Minute); ; {
		resp, err := http.Get(issuer + ".well-known/openid-configuration")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return issuer
			}
		}
		select {
		case <-exited:
			t.Fatalf("the OIDC provider exited: %s", log.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the OIDC provider did not come up: %v %s", err, log.String())
		}
	}
}

// freeLoopbackPort is a loopback port nothing listens on now.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestBrowserSignInWithProvider signs in with a real OpenID Connect provider through the pages: dev presses "Sign in
// with Dev" on the sign-in page, signs in at the provider, and comes back signed in to an account made for him,
// which his account page shows connected; ivy, signed up with a password, connects the provider with it and signs
// in through it as herself; a callback that reaches another browser is refused. With BOARD_WEB_SCREENSHOTS set it
// photographs the sign-in page with its button for docs/web.md.
func TestBrowserSignInWithProvider(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	webAddr := "127.0.0.1:" + strconv.Itoa(freeLoopbackPort(t))
	callback := "http://" + webAddr + "/oidc/dev/callback"
	issuer := startOIDCProvider(t, callback)
	p := startWeb(t, "--web-addr", webAddr, "--public-url", "http://"+webAddr,
		"--oidc-provider", "name=dev,issuer="+issuer+",client-id=web,client-secret=secret,redirect-url="+callback)
	shots := os.Getenv(screenshotsEnv)

	b := newTab(t, "dev", p.urls["web"])
	if shots != "" {
		b.do("the screen", chromedp.EmulateViewport(1280, 900))
	}
	b.openOK("/signin")
	b.checkPage("the sign-in page with a provider")
	expect(b, "the provider's button", b.text(`#providers a[data-provider="dev"]`), "Sign in with Dev")
	if shots != "" {
		shoot(t, b, filepath.Join(shots, "signin-provider-desktop.png"))
	}
	b.followOK("sign in with the provider", `#providers a[data-provider="dev"]`)
	if !strings.HasPrefix(b.location(), "http://localhost:") {
		b.fatalf("the button led to %s, not the provider", b.location())
	}
	b.fill("the provider's username", `input[name="username"]`, "dev")
	b.fill("the provider's password", `input[name="password"]`, "dev-password")
	b.followOK("sign in at the provider", `form button[type="submit"], form input[type="submit"]`)
	expect(b, "back on the site", b.path(), "/")
	if b.text("#nav-user") == "" {
		b.fatalf("not signed in after the provider: %q", b.text("main"))
	}
	b.openOK("/account")
	if !strings.Contains(b.text(`#provider-list li[data-provider="dev"]`), "connected as dev@example.com") {
		b.failf("the account's provider: %q", b.text("#provider-list"))
	}
	expect(b, "an account without a password", b.count("#no-password"), 1)

	// ivy, who signed up with a password, connects her account at the provider with it, and then signs in with the
	// provider as herself.
	ivy := newTab(t, "ivy", p.urls["web"])
	ivy.signUpWith("ivy")
	ivy.openOK("/account")
	ivy.fill("her password", "#connect-password-dev", "ivy-password")
	ivy.followOK("connect the provider", `#provider-list li[data-provider="dev"] form.provider-connect button`)
	ivy.waitFor("on at the provider", `location.host.startsWith("localhost:") && !!document.querySelector('input[name="username"]')`)
	ivy.fill("the provider's username", `input[name="username"]`, "ivy")
	ivy.fill("the provider's password", `input[name="password"]`, "ivy-at-dev")
	ivy.followOK("sign in at the provider", `form button[type="submit"], form input[type="submit"]`)
	expect(ivy, "back on her account", ivy.location(), "/account?notice=connected#providers")
	if !strings.Contains(ivy.text(`#provider-list li[data-provider="dev"]`), "connected as ivy@example.com") {
		ivy.failf("the connected provider: %q", ivy.text("#provider-list"))
	}
	ivy.followOK("sign out", "#signout button")
	ivy.openOK("/signin")
	ivy.followOK("sign in with the provider", `#providers a[data-provider="dev"]`)
	ivy.waitFor("at the provider", `!!document.querySelector('input[name="username"]') || !!document.querySelector("#nav-user")`)
	if ivy.count("#nav-user") == 0 {
		ivy.fill("the provider's username", `input[name="username"]`, "ivy")
		ivy.fill("the provider's password", `input[name="password"]`, "ivy-at-dev")
		ivy.followOK("sign in at the provider", `form button[type="submit"], form input[type="submit"]`)
	}
	expect(ivy, "signed in as herself", ivy.text("#nav-user"), "ivy")

	// The provider's answer, opened in another browser that did not start the sign-in: refused there.
	other := newTab(t, "someone-else", p.urls["web"])
	if status := other.open("/oidc/dev/callback?code=stolen&state=stolen"); status != http.StatusBadRequest {
		other.failf("a callback of another browser answered %d, want 400", status)
	}
	if !strings.Contains(other.text("#oidc-error"), "not started in this browser") {
		other.failf("the refusal says %q", other.text("main"))
	}
	expect(other, "signed out", other.count("#nav-user"), 0)
}
