package dashboard_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/provisiondtest"
)

// TestBrowserClusterView: a controller of two daemons on one etcd
// (provisiondtest's embedded one, internal/etcdtest). The page on the
// first shows the store (etcd, its revision, this daemon's health, the
// members), both daemons, this one first, with the agents connected to
// each; a daemon that stops leaves the view.
func TestBrowserClusterView(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("-short: the browser test builds provisionctl and runs chromium")
	}
	chromium(t) // skip before starting etcd when there is no browser
	a := provisiondtest.Start(t, provisiondtest.WithStore(provisiondtest.StoreEtcd))
	bsrv := provisiondtest.Start(t, provisiondtest.Join(a))
	// The provisioner agent of the default model is connected to the
	// second daemon.
	bsrv.ControllerAgent(t, a.DefaultModel())
	rev := a.Revision()

	b := startBrowserTest(t, a)
	aID, bID := testkit.Daemon(a).ServerID(), testkit.Daemon(bsrv).ServerID()
	get(t, b.ctx, "see the second daemon's agent", chromedp.Poll[bool](
		`document.querySelector('#cluster-servers li[data-server="`+bID+`"] li[data-model="default"]')?.textContent === 'default: provisioner'`,
		chromedp.WithPollingTimeout(20*time.Second)))
	var view struct {
		Servers                 []string
		Self                    []bool
		Store, Revision, Health string
		Members                 []string
	}
	js := get(t, b.ctx, "read the cluster view", chromedp.Evaluate[string](`JSON.stringify({
		Servers: [...document.querySelectorAll('#cluster-servers > li')].map((li) => li.dataset.server),
		Self: [...document.querySelectorAll('#cluster-servers > li')].map((li) => li.classList.contains('self')),
		Store: document.getElementById('cluster-store').textContent,
		Revision: document.getElementById('cluster-revision').textContent,
		Health: document.getElementById('cluster-health').textContent,
		Members: [...document.querySelectorAll('#cluster-members li')].map((li) => li.textContent)})`))
	if err := json.Unmarshal([]byte(js), &view); err != nil {
		t.Fatal(err)
	}
	shown, _ := strconv.ParseUint(view.Revision, 10, 64)
	if len(view.Servers) != 2 || view.Servers[0] != aID || view.Servers[1] != bID || !view.Self[0] || view.Self[1] ||
		view.Store != "etcd" || shown < rev || view.Health != "ok" || len(view.Members) != 1 {
		t.Errorf("cluster view %+v: want daemons %s (this one) and %s, store etcd at revision %d or later, health ok, one member", view, aID, bID, rev)
	}
	if len(view.Members) == 1 && !regexpMatch(`^\S+ up \d+\.\d MiB`, view.Members[0]) {
		t.Errorf("etcd member %q: want its endpoint, up, its database size", view.Members[0])
	}

	png := get(t, b.ctx, "screenshot", chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "dashboard-cluster.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}

	// The second daemon stops: its record goes with it.
	if err := bsrv.Close(); err != nil {
		t.Fatal(err)
	}
	get(t, b.ctx, "see one daemon", chromedp.Poll[bool](
		`document.querySelectorAll('#cluster-servers > li').length === 1 && document.querySelector('#cluster-servers > li').dataset.server === '`+aID+`'`,
		chromedp.WithPollingTimeout(20*time.Second)))
	b.checkProblems()
}
