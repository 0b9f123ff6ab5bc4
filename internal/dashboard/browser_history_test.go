package dashboard_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state/store"
)

// hostileInfo is a status message an agent could send: markup that would
// run if the page ever parsed a value as HTML.
const hostileInfo = `<script>window.__pwned=1</script><img src=x id=pwned>`

// TestBrowserHistoryPanels: the model's History panel shows its changes
// newest first with who made them, in the words of provisionctl history,
// live; a machine's row opens its own history; a hostile value is text.
func TestBrowserHistoryPanels(t *testing.T) {
	srv := provisiondtest.Start(t)
	b := startBrowserTest(t, srv)
	d := testkit.Daemon(srv)
	model := srv.DefaultModel()
	if got := strings.TrimSpace(b.provisionctl("add-machine")); got != "0" {
		t.Fatalf("add-machine printed %q, want 0", got)
	}
	b.open("default")
	do(t, b.ctx, "see machine 0's creation in the history",
		chromedp.WaitVisible(chromedp.CSS(`#timeline li[data-rev] .hist-call`)))
	line := get(t, b.ctx, "read the history", chromedp.Text(chromedp.CSS(`#timeline li[data-rev]`)))
	for _, want := range []string{"ModelAdmin.AddMachines", "machine/0", "created {", "user-admin@127.0.0.1:", "/" + d.ServerID()} {
		if !strings.Contains(line, want) {
			t.Errorf("the history's line %q lacks %q", line, want)
		}
	}

	// The agent sets a status with markup in its message: it comes in
	// live, at the top, as text; nothing of it runs or becomes an element.
	prov := client.NewProvisioner(srv.ControllerAgent(t, model))
	res, err := prov.SetInstanceStatus(t.Context(), params.SetStatus{Entities: []params.EntityStatusArgs{
		{Tag: "machine-0", Status: "running", Info: hostileInfo}}})
	if err != nil || len(res.Results) != 1 || res.Results[0].Error != nil {
		t.Fatalf("SetInstanceStatus = %+v, %v", res, err)
	}
	get(t, b.ctx, "see the status change at the top", chromedp.Poll[bool](
		`(document.querySelector('#timeline li[data-rev]')?.textContent || '').includes('Provisioner.SetInstanceStatus')`,
		chromedp.WithPollingTimeout(20*time.Second)))
	top := get(t, b.ctx, "read the newest line", chromedp.Text(chromedp.CSS(`#timeline li[data-rev]`)))
	if !strings.Contains(top, "instance-status: ") || !strings.Contains(top, "machine-0@127.0.0.1:") {
		t.Errorf("the newest line %q: want the agent's instance-status change", top)
	}
	// The message is in the JSON of the status, escaped as JSON (< as
	// \u003c) or not; either way the page shows the daemon's text.
	what := get(t, b.ctx, "read the newest change", chromedp.Evaluate[string](
		`document.querySelector('#timeline li[data-rev] .hist-what').textContent`))
	if !strings.Contains(what, "script") || !strings.Contains(what, "pwned") {
		t.Errorf("the change %q does not show the message", what)
	}
	if get(t, b.ctx, "check nothing ran", chromedp.Evaluate[bool](
		`window.__pwned === 1 || document.getElementById('pwned') !== null || document.querySelector('#timeline script, #timeline img') !== null`)) {
		t.Error("a value from the store became markup in the page")
	}

	// Machine 0's row opens its history: its creation and its status.
	do(t, b.ctx, "open machine 0's history",
		chromedp.Click(chromedp.CSS(`#machines tr[data-key="machine/0"] button[data-history-kind]`)),
		chromedp.WaitVisible(chromedp.CSS(`#entity-history li[data-rev]`)))
	title := get(t, b.ctx, "read its title", chromedp.Text(chromedp.ID("entity-history-title")))
	if title != "History of machine 0" {
		t.Errorf("the entity history's title %q", title)
	}
	lines := get(t, b.ctx, "read its lines", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('#entity-history li[data-rev]')].map((li) => li.textContent)`))
	if len(lines) < 2 || !strings.Contains(lines[0], "Provisioner.SetInstanceStatus") || !strings.Contains(lines[len(lines)-1], "ModelAdmin.AddMachines") {
		t.Errorf("machine 0's history, newest first: %q", lines)
	}
	for _, l := range lines {
		if !strings.Contains(l, "machine/0") {
			t.Errorf("machine 0's history holds another entity's change: %q", l)
		}
	}
	// The store's values are untrusted too: a record holding the markup
	// as it is (JSON does not have to escape it, and encoding/json's
	// \u003c is not what keeps the page safe) is shown as text. Written
	// straight into the store, as a hostile or broken writer would.
	key := "machine/" + model + "/0"
	if _, err := d.State().Store().Update(t.Context(), func(tx store.Txn) error {
		v, ok, err := tx.Get(key)
		if err != nil || !ok {
			return fmt.Errorf("machine 0's record: %v, %v", ok, err)
		}
		return tx.Put(key, []byte(strings.NewReplacer(`\u003c`, "<", `\u003e`, ">").Replace(string(v))))
	}); err != nil {
		t.Fatal(err)
	}
	// A second machine's changes come to the panel, not to machine 0's;
	// the raw write comes to both, on the stream.
	if got := strings.TrimSpace(b.provisionctl("add-machine")); got != "1" {
		t.Fatalf("add-machine printed %q, want 1", got)
	}
	get(t, b.ctx, "see machine 1 in the model's history", chromedp.Poll[bool](
		`(document.querySelector('#timeline li[data-rev]')?.textContent || '').includes('machine/1')`,
		chromedp.WithPollingTimeout(20*time.Second)))
	if n := get(t, b.ctx, "count machine 0's lines", chromedp.Evaluate[int](
		`document.querySelectorAll('#entity-history li[data-rev]').length`)); n != len(lines)+1 {
		t.Errorf("machine 0's history went from %d lines to %d on its raw write and machine 1's creation", len(lines), n)
	}
	for _, sel := range []string{"#timeline", "#entity-history"} {
		raw := get(t, b.ctx, "read the raw write in "+sel, chromedp.Evaluate[string](
			`[...document.querySelectorAll('`+sel+` li[data-rev] .hist-what')].map((e) => e.textContent).join('\n')`))
		if !strings.Contains(raw, hostileInfo) {
			t.Errorf("%s does not show the markup as text: %q", sel, raw)
		}
	}
	if get(t, b.ctx, "check nothing ran", chromedp.Evaluate[bool](
		`window.__pwned === 1 || document.getElementById('pwned') !== null || document.querySelector('.timeline script, .timeline img, #machines script, #machines img') !== null`)) {
		t.Error("a raw value from the store became markup in the page")
	}
	png := get(t, b.ctx, "screenshot", chromedp.FullScreenshot(100))
	shot := filepath.Join(t.ArtifactDir(), "dashboard-history.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d KiB)", shot, len(png)>>10)
	do(t, b.ctx, "close it", chromedp.Click(chromedp.ID("entity-history-close")),
		chromedp.WaitNotVisible(chromedp.ID("entity-history-section")))
	b.checkProblems()
}
