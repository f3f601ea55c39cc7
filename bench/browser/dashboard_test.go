package browser

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/sluice-gw/sluice/internal/sluicetest"
)

// findChromium returns the Chromium executable: $SLUICE_CHROMIUM, or
// Debian's chromium (.ci/run installs it). Without one the test is skipped
// locally and fails under CI=true.
func findChromium(t *testing.T) string {
	t.Helper()
	return sluicetest.RequireProgram(t, "chromium chromium-driver, or set SLUICE_CHROMIUM",
		os.Getenv("SLUICE_CHROMIUM"), "chromium", "chromium-browser", "google-chrome")
}

// artifactDir is where the screenshot goes: $SLUICE_ARTIFACTS, else
// /tmp/sluice-artifacts.
func artifactDir(t *testing.T) string {
	dir := os.Getenv("SLUICE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "sluice-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pageProblems collects what must not happen on the page: console errors,
// uncaught exceptions, browser log errors (CSP violations land there),
// failed requests and HTTP error answers.
type pageProblems struct {
	mu   sync.Mutex
	list []string
}

func (p *pageProblems) add(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.list = append(p.list, fmt.Sprintf(format, args...))
}

func (p *pageProblems) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.list...)
}

func (p *pageProblems) listen(ev any) {
	switch e := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning {
			var args []string
			for _, a := range e.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			p.add("console.%s: %s", e.Type, strings.Join(args, " "))
		}
	case *runtime.EventExceptionThrown:
		d := e.ExceptionDetails
		desc := ""
		if d.Exception != nil {
			desc = d.Exception.Description
		}
		p.add("exception: %s %s (%s:%d)", d.Text, desc, d.URL, d.LineNumber)
	case *cdplog.EventEntryAdded:
		if e.Entry.Level == cdplog.EntryLevelError || e.Entry.Level == cdplog.EntryLevelWarning {
			p.add("browser log (%s): %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL)
		}
	case *network.EventLoadingFailed:
		p.add("request failed: %s (%s)", e.ErrorText, e.BlockedReason)
	case *network.EventResponseReceived:
		if e.Response.Status >= 400 {
			p.add("HTTP %d for %s", e.Response.Status, e.Response.URL)
		}
	}
}

// newBrowser starts headless Chromium for one test (stopped at its end) and
// returns its context and the problems its page listener collects.
func newBrowser(t *testing.T, chromium string) (context.Context, *pageProblems) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	t.Cleanup(cancel)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	}
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	problems := &pageProblems{}
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf), chromedp.WithListener(problems.listen))
	t.Cleanup(bcancel)
	return bctx, problems
}

// watchPage turns on the events pageProblems listens to and, when auth is
// not empty, sends it as the Authorization header of every request.
func watchPage(auth string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		if _, err := cdp.Call(ctx, tg, runtime.Enable, cdp.Empty{}); err != nil {
			return err
		}
		if _, err := cdp.Call(ctx, tg, cdplog.Enable, cdp.Empty{}); err != nil {
			return err
		}
		if auth == "" {
			return nil
		}
		_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": auth}})
		return err
	})
}

// TestDashboardInBrowser opens the dashboard in headless Chromium with HTTP
// Basic auth, drives traffic until the route's chart shows denials, saves a
// screenshot and fails on any console error or failed request.
func TestDashboardInBrowser(t *testing.T) {
	chromium := findChromium(t)
	p := start(t, `
server:
  listen: "127.0.0.1:0"
  shutdown_timeout: 10s
  access_log: {raw_keys: true}   # the dashboard shows keys as they are
admin:
  listen: "127.0.0.1:0"
  token: "e2e-token"
policies:
  per-user: {algorithm: token_bucket, capacity: 5, rate: 2}
  global:   {algorithm: fixed_window, limit: 12, window: 10s}
routes:
  - id: api
    match: {path: /api/**}
    respond: {status: 200, body: "ok\n"}
    limits:
      - {policy: per-user, key: header:X-User-Id}
      - {policy: global, key: "const:all", shadow: true}
  - id: hello
    match: {path: /hello}
    respond: {status: 200, body: "hello\n"}
    limits: [{policy: per-user, key: ip}]
`)

	bctx, problems := newBrowser(t, chromium)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:e2e-token"))
	if err := chromedp.Do(bctx,
		watchPage(basic),
		chromedp.Navigate(p.admin+"/admin/"),
		chromedp.WaitVisible(`#charts .chart[data-route="api"] canvas`),
	); err != nil {
		t.Fatalf("opening the dashboard: %v\nproblems: %v", err, problems.all())
	}

	// Traffic: users over their budget of 5 plus 2/s (mallory most), and a
	// global shadow limit that admitted requests soon exceed.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w, user := range []string{"mallory", "mallory", "eve", "alice"} {
		wg.Go(func() {
			tick := time.NewTicker(time.Duration(40*(w+1)) * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					get(t, p.base+"/api/items", "X-User-Id", user)
					if w == 3 {
						get(t, p.base+"/hello")
					}
				}
			}
		})
	}
	_, err := chromedp.Run(bctx,
		chromedp.Poll[chromedp.Void](`(() => {
			const c = document.querySelector('.chart[data-route="api"]');
			return c && Number(c.dataset.denied) > 0 && Number(c.dataset.points) >= 4 &&
				document.querySelector('#topkeys tbody td.key')?.textContent === 'mallory';
		})()`, chromedp.WithPollingTimeout(25*time.Second)))
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("the chart never showed denials: %v\nproblems: %v", err, problems.all())
	}
	denied, _ := chromedp.Run(bctx, chromedp.AttributeValue(`.chart[data-route="api"]`, "data-denied"))
	topKey, _ := chromedp.Run(bctx, chromedp.Text(`#topkeys tbody td.key`))
	t.Logf("chart shows %s denials/s summed over its window; top key %q", denied.Value, topKey)

	// Let one more sample in so the chart shows the traffic stopping.
	if err := chromedp.Do(bctx, chromedp.Sleep(1200*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(artifactDir(t), "dashboard.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
	if len(png) < 10000 {
		t.Errorf("screenshot is only %d bytes", len(png))
	}
	for _, pr := range problems.all() {
		t.Errorf("page problem: %s", pr)
	}
}

// TestDashboardCredentialsURLHashedKeys: the dashboard works when opened
// through a URL that carries the credentials
// (http://admin:TOKEN@host/admin/), and without access_log.raw_keys it shows
// the top limited key hashed as the access log writes it, never the key
// itself.
func TestDashboardCredentialsURLHashedKeys(t *testing.T) {
	chromium := findChromium(t)
	p := start(t, `
server:
  listen: "127.0.0.1:0"
  shutdown_timeout: 10s
  access_log: {sample: 1}
admin:
  listen: "127.0.0.1:0"
  token: "e2e-token"
policies:
  per-user: {algorithm: token_bucket, capacity: 2, rate: 0.01}
routes:
  - id: api
    match: {path: /api/**}
    respond: {status: 200, body: "ok\n"}
    limits: [{policy: per-user, key: header:X-User-Id}]
`)
	for range 4 {
		get(t, p.base+"/api/items", "X-User-Id", "mallory-secret-key")
	}
	// The access log's form of the key: every logged request names it.
	m := regexp.MustCompile(`keys=\[([0-9a-f]{16})\]`).FindStringSubmatch(p.logs.String())
	if m == nil {
		t.Fatalf("no hashed key in the access log:\n%s", p.logs)
	}
	hashed := m[1]

	bctx, problems := newBrowser(t, chromium)
	withCreds := strings.Replace(p.admin, "http://", "http://admin:e2e-token@", 1) + "/admin/"
	if err := chromedp.Do(bctx,
		watchPage(""),
		chromedp.Navigate(withCreds),
		chromedp.Poll[chromedp.Void](`document.querySelector('#topkeys tbody td.key')?.textContent === '`+hashed+`'`,
			chromedp.WithPollingTimeout(20*time.Second)),
	); err != nil {
		page, _ := chromedp.Run(bctx, chromedp.Text(`body`))
		t.Fatalf("the dashboard opened with credentials in its URL never showed the hashed key %s: %v\nproblems: %v\npage: %s", hashed, err, problems.all(), page)
	}
	page, err := chromedp.Run(bctx, chromedp.Text(`body`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page, "mallory-secret-key") {
		t.Errorf("the dashboard shows the raw key:\n%s", page)
	}
	if !strings.Contains(page, "key (hashed)") {
		t.Errorf("the dashboard does not say its keys are hashed:\n%s", page)
	}
	for _, pr := range problems.all() {
		t.Errorf("page problem: %s", pr)
	}
}
