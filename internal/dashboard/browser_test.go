package dashboard_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/provisiond/provisiond/provisiondtest"
)

// The browser test drives Debian's chromium over the DevTools protocol
// (chromedp): no WebDriver server, no browser download, the same binary
// an operator runs.

// chromium finds the browser, or skips the test saying why; under CI=true
// a missing browser fails it (.ci/run installs one).
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROVISIOND_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const why = "no chromium on PATH (Debian: apt-get install -y chromium; or set PROVISIOND_CHROMIUM)"
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and %s: .ci/run installs it", why)
	}
	t.Skip("skipping the browser test: " + why)
	return ""
}

// buildProvisionctl builds the operator CLI the test adds machines with.
func buildProvisionctl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "provisionctl")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/provisiond/provisiond/cmd/provisionctl").CombinedOutput()
	if err != nil {
		t.Fatalf("go build provisionctl: %v\n%s", err, out)
	}
	return bin
}

// serverSPKI is the base64 SHA-256 of the public key of the certificate
// the daemon at addr presents: chromium accepts that certificate (made by
// the daemon's own CA, or taken from the store in etcd mode) and no other.
func serverSPKI(t *testing.T, addr string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) // only to read the certificate
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cert := conn.ConnectionState().PeerCertificates[0]
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// newBrowser starts a headless chromium for the daemon's certificate, with
// the flags that keep it off the network (no component updates, no
// background fetches), and collects what the page logs as errors.
func newBrowser(t *testing.T, chrome, spki string) (context.Context, func() []string) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.UserDataDir(t.TempDir()),
		// Its singleton socket and other temporary files go under the
		// test's own directory: a killed chromium leaves them behind.
		chromedp.Env("TMPDIR="+t.TempDir()),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("ignore-certificate-errors-spki-list", spki),
		chromedp.WindowSize(1400, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))

	var mu sync.Mutex
	var problems []string
	note := func(s string) {
		mu.Lock()
		problems = append(problems, s)
		mu.Unlock()
	}
	// Content-Security-Policy violations and failed loads are logged to
	// the console; exceptions come on their own. The readers end with ctx.
	entries := chromedp.Events(ctx, log.EntryAdded)
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	var wg sync.WaitGroup
	wg.Go(func() {
		for ev, err := range entries {
			if err != nil {
				return
			}
			// The stream's 401 after logout is what the test wants.
			if ev.Entry.Level == log.EntryLevelError && !strings.Contains(ev.Entry.URL, "/dashboard/events") {
				note(fmt.Sprintf("%s: %s (%s)", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		}
	})
	wg.Go(func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			note(fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber+1, msg))
		}
	})
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
		wg.Wait()
	})
	if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), problems...)
	}
}

func TestBrowserLogInAndFollowTheModel(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("-short: the browser test builds provisionctl and runs chromium")
	}
	chrome := chromium(t)
	ctl := buildProvisionctl(t)
	srv := provisiondtest.Start(t)
	creds := srv.Credentials()
	provisionctl := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(ctl, append(args, "--credentials", srv.CredentialsFile())...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("provisionctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := provisionctl("add-machine", "--base", "ubuntu@22.04"); got != "0" {
		t.Fatalf("add-machine printed %q, want 0", got)
	}

	ctx, problems := newBrowser(t, chrome, serverSPKI(t, srv.Addr()))
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	base := "https://" + srv.Addr() + "/dashboard/"

	// No session: the page is the login form. Log in with the keyboard
	// alone: type, then Enter submits.
	do(t, ctx, "open the dashboard", chromedp.Navigate(base), chromedp.WaitVisible(chromedp.ID("user")))
	if url := get(t, ctx, "read the location", chromedp.Location()); !strings.HasSuffix(url, "/dashboard/login") {
		t.Fatalf("without a session the dashboard went to %s, want the login form", url)
	}
	do(t, ctx, "log in",
		chromedp.SendKeys(chromedp.ID("user"), creds.AdminUser),
		chromedp.SendKeys(chromedp.ID("password"), creds.AdminPassword+"\r"),
		chromedp.WaitVisible(chromedp.CSS(`#machines tr[data-key="machine/0"]`)))

	// No provisioner agent is connected and machine 0 waits to be
	// started: the banner says so. The controller agent logging in at the
	// model's endpoint takes it away without a reload; its going brings
	// it back.
	do(t, ctx, "see the provisioner banner", chromedp.WaitVisible(chromedp.ID("provisioner-banner")))
	if b := get(t, ctx, "read the banner", chromedp.Text(chromedp.ID("provisioner-banner"))); !strings.Contains(b, "No provisioner agent is connected") || !strings.Contains(b, "1 machine to start") {
		t.Errorf("banner %q", b)
	}
	agent := srv.ControllerAgent(t, srv.DefaultModel())
	do(t, ctx, "see the banner go", chromedp.WaitNotPresent(chromedp.ID("provisioner-banner")))
	agent.Close()
	do(t, ctx, "see the banner again", chromedp.WaitVisible(chromedp.ID("provisioner-banner")))
	if b := get(t, ctx, "read the banner", chromedp.Text(chromedp.ID("provisioner-banner"))); !strings.Contains(b, "for ") {
		t.Errorf("banner %q does not say how long the agent has been down", b)
	}

	// A machine added with provisionctl appears without a reload.
	get(t, ctx, "mark the page", chromedp.Evaluate[int](`window.__sameDocument = 42`))
	start := time.Now()
	if got := provisionctl("add-machine"); got != "1" {
		t.Fatalf("add-machine printed %q, want 1", got)
	}
	do(t, ctx, "see machine 1", chromedp.WaitVisible(chromedp.CSS(`#machines tr[data-key="machine/1"]`)))
	t.Logf("machine 1 appeared %v after provisionctl add-machine was started (its own start-up included)", time.Since(start).Round(time.Millisecond))
	if get(t, ctx, "check the page was not reloaded", chromedp.Evaluate[int](`window.__sameDocument || 0`)) != 42 {
		t.Fatal("the page was reloaded to show the new machine")
	}
	do(t, ctx, "wait for the feed", chromedp.WaitVisible(chromedp.CSS(`#activity li .what`)))
	if activity := get(t, ctx, "read the feed", chromedp.Text(chromedp.ID("activity"))); !strings.Contains(activity, "machine 1 added") {
		t.Errorf("activity feed %q does not show machine 1 added", activity)
	}
	if pending := get(t, ctx, "read what needs attention", chromedp.Text(chromedp.ID("attention"))); !strings.Contains(pending, "machine 1 is pending") {
		t.Errorf("needs attention %q does not call out machine 1 as pending", pending)
	}
	// The chart has points once the stream has sent two samples.
	do(t, ctx, "see the chart", chromedp.WaitVisible(chromedp.CSS(`#metrics .metric.m1 polyline[points*=","]`)))

	png := get(t, ctx, "screenshot", chromedp.FullScreenshot(100))
	shot := filepath.Join(t.ArtifactDir(), "dashboard.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d KiB)", shot, len(png)>>10)

	// At a phone's width nothing is wider than the screen: tables scroll
	// inside their box.
	do(t, ctx, "phone width", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)))
	if get(t, ctx, "measure", chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`)) {
		t.Error("at 390 px wide the page is wider than the screen")
	}
	png = get(t, ctx, "phone screenshot", chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "dashboard-phone.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "laptop width", chromedp.EmulateViewport(1400, 1000))

	// Keyboard: focus the controller model's link, Enter switches to it
	// in the same document.
	do(t, ctx, "switch model with the keyboard",
		chromedp.Focus(chromedp.CSS(`#models a[data-model="`+srv.ControllerModel()+`"]`)),
		chromedp.KeyEvent("\r"))
	get(t, ctx, "see the controller model", chromedp.Poll[bool](
		`document.querySelector('#model-head h2')?.textContent === 'controller'`, chromedp.WithPollingTimeout(10*time.Second)))
	if get(t, ctx, "check the document", chromedp.Evaluate[int](`window.__sameDocument || 0`)) != 42 {
		t.Error("switching models reloaded the page")
	}

	// Log out: back to the form, and the page is gone.
	do(t, ctx, "log out", chromedp.Click(chromedp.CSS(`form.logout button`)), chromedp.WaitVisible(chromedp.CSS(`p.notice`)))
	notice := get(t, ctx, "read the notice", chromedp.Text(chromedp.CSS(`p.notice`)))
	if url := get(t, ctx, "read the location", chromedp.Location()); !strings.Contains(notice, "logged out") || !strings.Contains(url, "/dashboard/login") {
		t.Errorf("after logout: %s says %q", url, notice)
	}
	do(t, ctx, "reopen the dashboard", chromedp.Navigate(base), chromedp.WaitVisible(chromedp.ID("user")))

	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged errors (CSP violations, failed loads, exceptions):\n%s", strings.Join(p, "\n"))
	}
}

// do runs steps, failing the test with the page's HTML when one fails.
func do(t *testing.T, ctx context.Context, step string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v\n%s", step, err, page(ctx))
	}
}

// get runs one action and returns its value.
func get[T any](t *testing.T, ctx context.Context, step string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v\n%s", step, err, page(ctx))
	}
	return v
}

func page(ctx context.Context) string {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	html, err := chromedp.Run(dctx, chromedp.OuterHTML(chromedp.CSS("body")))
	if err != nil {
		return "(no page: " + err.Error() + ")"
	}
	if len(html) > 4000 {
		html = html[:4000] + "..."
	}
	return "page: " + html
}
