package dashboard_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// browserTest is a daemon, the operator CLI and a logged-in chromium.
type browserTest struct {
	t        *testing.T
	srv      *provisiondtest.Server
	ctl      string
	ctx      context.Context
	base     string
	problems func() []string
}

// startBrowserTest logs a headless chromium in to srv's dashboard; the
// test then has 120 s.
func startBrowserTest(t *testing.T, srv *provisiondtest.Server) *browserTest {
	t.Helper()
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("-short: the browser test builds provisionctl and runs chromium")
	}
	chrome := chromium(t)
	b := &browserTest{t: t, srv: srv, ctl: buildProvisionctl(t), base: "https://" + srv.Addr() + "/dashboard/"}
	ctx, problems := newBrowser(t, chrome, serverSPKI(t, srv.Addr()))
	ctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	t.Cleanup(cancel)
	b.ctx, b.problems = ctx, problems
	creds := srv.Credentials()
	do(t, ctx, "log in", chromedp.Navigate(b.base), chromedp.WaitVisible(chromedp.ID("user")),
		chromedp.SendKeys(chromedp.ID("user"), creds.AdminUser),
		chromedp.SendKeys(chromedp.ID("password"), creds.AdminPassword+"\r"),
		chromedp.WaitVisible(chromedp.CSS(`#model-head h2`)))
	return b
}

// provisionctl runs the CLI against the daemon and returns its stdout.
func (b *browserTest) provisionctl(args ...string) string {
	b.t.Helper()
	cmd := exec.Command(b.ctl, append(args, "--credentials", b.srv.CredentialsFile())...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.t.Fatalf("provisionctl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// open shows model (a name) in the page.
func (b *browserTest) open(model string) {
	b.t.Helper()
	do(b.t, b.ctx, "open model "+model, chromedp.Navigate(b.base+"?model="+model))
	get(b.t, b.ctx, "see model "+model, chromedp.Poll[bool](
		`document.querySelector('#model-head h2')?.textContent === `+strconv.Quote(model), chromedp.WithPollingTimeout(20*time.Second)))
}

// checkProblems fails the test on what the page logged as errors.
func (b *browserTest) checkProblems() {
	b.t.Helper()
	if p := b.problems(); len(p) > 0 {
		b.t.Errorf("the page logged errors (CSP violations, failed loads, exceptions):\n%s", strings.Join(p, "\n"))
	}
}

// A charm whose units may lose their storage (as provisionctl's storage
// walk-through deploys).
const filesMetadata = `name: files
summary: a file server
storage:
  data:
    type: filesystem
    location: /srv
    multiple:
      range: 0-2
`

// reportPods reports n pods of app "files", each with a filesystem and
// its volume, as the unit provisioner does (UpdateApplicationsUnits),
// straight into the daemon's state: the cloud is the boundary.
func reportPods(t *testing.T, st *state.State, model string, n int, gen int64) {
	t.Helper()
	var pods []state.Pod
	for i := range n {
		id := string(rune('a'+i)) + "-pod"
		pods = append(pods, state.Pod{ProviderID: id, Address: "10.0.0." + string(rune('1'+i)), Ports: []string{"80"},
			Status: "running", Stateful: true, Filesystems: []state.PodFilesystem{{StorageName: "data", Size: 1024,
				FilesystemID: "pv-" + id, Status: "attached", MountPoint: "/srv",
				Volume: &state.PodVolume{VolumeID: "vol-" + id, Size: 1024, Persistent: true, Status: "attached"}}}})
	}
	if _, err := st.UpdateCAASUnits(t.Context(), model, "files", state.UnitsUpdate{Scale: &n, Generation: gen, Pods: pods}); err != nil {
		t.Fatal(err)
	}
}

// domStorageRow is a row of the page's storage table, as read from the
// DOM.
type domStorageRow struct {
	Key, Class, ID, State, To, Pool, Size, FS, Vol, Status, Location string
}

func (b *browserTest) storageRows() []domStorageRow {
	b.t.Helper()
	js := get(b.t, b.ctx, "read the storage table", chromedp.Evaluate[string](`JSON.stringify([...document.querySelectorAll('#storage tbody tr')].map((tr) => {
		const td = tr.querySelectorAll('td');
		const text = (i) => { const x = td[i].querySelector('.badge'); return (x || td[i]).textContent.trim(); };
		return {Key: tr.dataset.key, Class: tr.className, ID: text(0), State: td[2].dataset.state, To: td[2].textContent.trim(),
			Pool: text(4), Size: text(5), FS: text(6), Vol: text(7), Status: text(8), Location: text(9)};
	}))`))
	var rows []domStorageRow
	if err := json.Unmarshal([]byte(js), &rows); err != nil {
		b.t.Fatal(err)
	}
	return rows
}

var columns = regexp.MustCompile(`\s{2,}`)

// cliSection returns the rows of the table in out whose header starts
// with header, split into columns.
func cliSection(t *testing.T, out, header string) [][]string {
	t.Helper()
	var rows [][]string
	in := false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, header):
			in = true
		case in && strings.TrimSpace(l) == "":
			return rows
		case in:
			rows = append(rows, columns.Split(strings.TrimSpace(l), -1))
		}
	}
	if !in {
		t.Fatalf("no %q table in:\n%s", header, out)
	}
	return rows
}

// storageLikeCLI checks the page's storage rows against provisionctl
// status's storage section and storage --volume's attachments, for the
// same model: every row, each value.
func (b *browserTest) storageLikeCLI(model string) []domStorageRow {
	b.t.Helper()
	t := b.t
	cli := cliSection(t, b.provisionctl("status", "-m", model), "STORAGE ")
	dom := b.storageRows()
	if len(dom) != len(cli) {
		t.Fatalf("the page has %d storage rows, provisionctl status %d:\n%+v\n%q", len(dom), len(cli), dom, cli)
	}
	for i, c := range cli {
		c = append(c, "") // LOCATION is left empty when there is none
		d := dom[i]
		unit := d.To
		if d.State != "attached" {
			unit = "(" + d.State + ")"
		}
		loc := strings.TrimPrefix(d.Location, "-")
		got := []string{d.ID, unit, d.Pool, d.Size, d.FS, d.Vol, d.Status, loc}
		if strings.Join(got, "|") != strings.Join(c[:8], "|") {
			t.Errorf("storage row %d: the page shows %q, provisionctl status %q", i, got, c[:8])
		}
	}
	// The volumes' attachments: ATTACHED is a unit, or (detached).
	byKey := map[string]domStorageRow{}
	for _, d := range dom {
		byKey[d.Key] = d
	}
	for _, v := range cliSection(t, b.provisionctl("storage", "--volume", "-m", model), "VOLUME ") {
		attached, storage := v[1], v[2]
		d, ok := byKey["storage/"+storage]
		if !ok { // its instance went: the volume backs an orphaned filesystem
			for _, r := range dom {
				if r.Vol == v[3] {
					d, ok = r, true
				}
			}
		}
		switch {
		case !ok:
			t.Errorf("volume %s (%s) of storage %s: no row on the page", v[0], v[3], storage)
		case attached == "(detached)" && d.State == "attached", attached != "(detached)" && (d.State != "attached" || d.To != attached):
			t.Errorf("volume %s of storage %s: provisionctl says %s, the page %s %s", v[0], storage, attached, d.State, d.To)
		}
	}
	return dom
}

// TestBrowserStorageMessagesRatesAndFeed: what an operator reads on the
// page is true, in a real browser: storage rows and their attachment
// states as provisionctl prints them (before and after remove-application),
// leftovers flagged; a message the agent and the instance share shown once
// and readable whole; rates over a window with a scale and a peak; model
// names and 24-hour UTC dated times in the feed.
func TestBrowserStorageMessagesRatesAndFeed(t *testing.T) {
	srv := provisiondtest.Start(t)
	b := startBrowserTest(t, srv)
	st := testkit.Daemon(srv).State()

	// Storage, as provisionctl's storage walk-through leaves it: scale
	// 3 to 1 (two instances detached), then a new pod claims c-pod's
	// filesystem (its instance goes; the filesystem is orphaned).
	b.provisionctl("add-model", "k8s", "--type", "caas", "--config", "workload-storage=standard")
	meta := t.TempDir() + "/files.yaml"
	if err := os.WriteFile(meta, []byte(filesMetadata), 0o600); err != nil {
		t.Fatal(err)
	}
	b.provisionctl("create-storage-pool", "fast", "kubernetes", "-m", "k8s")
	b.provisionctl("deploy", "files", "--charm-metadata", meta, "-m", "k8s", "--scale", "3", "--storage", "data=fast,1G,1")
	k8s, err := st.ModelByName(t.Context(), "k8s")
	if err != nil {
		t.Fatal(err)
	}
	reportPods(t, st, k8s.UUID, 3, 1)
	reportPods(t, st, k8s.UUID, 1, 2)
	one := 1
	if _, err := st.UpdateCAASUnits(t.Context(), k8s.UUID, "files", state.UnitsUpdate{Scale: &one, Generation: 3, Pods: []state.Pod{
		{ProviderID: "a-pod", Status: "running", Stateful: true},
		{ProviderID: "d-pod", Status: "running", Stateful: true, Filesystems: []state.PodFilesystem{{StorageName: "data", Size: 1024,
			FilesystemID: "pv-c-pod", Status: "attached", MountPoint: "/srv",
			Volume: &state.PodVolume{VolumeID: "vol-d-pod", Size: 1024, Persistent: true, Status: "attached"}}}}}}); err != nil {
		t.Fatal(err)
	}
	rev := st.Revision()
	b.open("k8s")
	get(t, b.ctx, "see the storage", chromedp.Poll[bool](
		`document.querySelector('#storage tr[data-key="filesystem/files/2/0"]') !== null`, chromedp.WithPollingTimeout(10*time.Second)))
	srv.WaitRevision(t, rev)
	dom := b.storageLikeCLI("k8s")
	states := map[string]string{}
	for _, d := range dom {
		states[d.ID] = d.State
		if d.State != "attached" && !strings.Contains(d.Class, "warn") {
			t.Errorf("leftover storage row %s (%s) is not flagged: class %q", d.ID, d.State, d.Class)
		}
	}
	if states["data/0"] != "attached" || states["data/1"] != "detached" || states["filesystem-files-2-0"] != "orphaned" {
		t.Errorf("storage states %v", states)
	}
	attention := get(t, b.ctx, "read what needs attention", chromedp.Text(chromedp.ID("attention")))
	for _, want := range []string{"storage data/1 is detached", "filesystem files/2/0 is orphaned"} {
		if !strings.Contains(attention, want) {
			t.Errorf("needs attention %q does not say %q", attention, want)
		}
	}

	// remove-application: every unit goes, all storage is detached (the
	// volumes too, whatever status the cloud last reported for them).
	b.provisionctl("remove-application", "files", "-m", "k8s")
	get(t, b.ctx, "see the storage detached", chromedp.Poll[bool](
		`[...document.querySelectorAll('#storage td[data-state]')].every((td) => td.dataset.state !== 'attached')`,
		chromedp.WithPollingTimeout(10*time.Second)))
	for _, d := range b.storageLikeCLI("k8s") {
		if d.State == "attached" {
			t.Errorf("after remove-application %s is still attached to %s", d.ID, d.To)
		}
	}

	// A machine whose start failed: Juju's provisioner sets the same
	// message on the machine's status and its instance status. Machine
	// 0's agent is not connected, so its agent status says that: two
	// messages, each labelled. Machine 1's agent is connected: the one
	// message is shown once, unlabelled, cut, and whole a click away.
	b.provisionctl("add-machine")
	srv.ProvisionMachine(t, srv.DefaultModel(), "1")
	srv.MachineAgent(t, srv.DefaultModel(), "1")
	long := "failed to allocate an instance: no capacity in zone a; no capacity in zone b; the cloud said: " +
		strings.Repeat("quota exceeded for instances of this size; ", 3) + "giving up"
	prov := client.NewProvisioner(srv.ControllerAgent(t, srv.DefaultModel()))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, m := range []string{"machine-0", "machine-1"} {
		for _, set := range []struct {
			name   string
			call   func(context.Context, params.SetStatus) (params.ErrorResults, error)
			status string
		}{{"SetStatus", prov.SetStatus, "error"}, {"SetInstanceStatus", prov.SetInstanceStatus, "provisioning error"}} {
			res, err := set.call(ctx, params.SetStatus{Entities: []params.EntityStatusArgs{{Tag: m, Status: set.status, Info: long}}})
			if err == nil && len(res.Results) == 1 && res.Results[0].Error != nil {
				err = res.Results[0].Error
			}
			if err != nil {
				t.Fatalf("%s %s: %v", set.name, m, err)
			}
		}
	}
	b.open("default")
	get(t, b.ctx, "see the machines' errors", chromedp.Poll[bool](
		`document.querySelectorAll('#machines td.msg details').length >= 2`, chromedp.WithPollingTimeout(10*time.Second)))
	type message struct {
		Lines          int
		Labels         []string
		Summary, Title string
		Shown          bool
	}
	read := func(id string) message {
		t.Helper()
		var msg message
		js := `(() => { const td = document.querySelector('#machines tr[data-key="machine/` + id + `"] td.msg'); const d = td.querySelector('details');
			return JSON.stringify({Lines: td.querySelectorAll('.msg-line').length, Labels: [...td.querySelectorAll('.msg-who')].map((e) => e.textContent),
				Summary: d.querySelector('summary').textContent, Title: d.title, Shown: d.open && d.querySelector('.msg-full').textContent === d.title}); })()`
		if err := json.Unmarshal([]byte(get(t, b.ctx, "read machine "+id+"'s message", chromedp.Evaluate[string](js))), &msg); err != nil {
			t.Fatal(err)
		}
		return msg
	}
	if msg := read("0"); msg.Lines != 2 || strings.Join(msg.Labels, "|") != "agent: |instance: " {
		t.Errorf("machine 0's two messages: %+v, want each labelled", msg)
	}
	msg := read("1")
	if msg.Lines != 1 || len(msg.Labels) != 0 || msg.Title != long || !strings.HasSuffix(msg.Summary, "…") || len(msg.Summary) >= len(long) || msg.Shown {
		t.Errorf("machine 1's repeated message: %+v, want it once, unlabelled, cut, whole in the title and closed", msg)
	}
	do(t, b.ctx, "open the message", chromedp.Click(chromedp.CSS(`#machines tr[data-key="machine/1"] td.msg summary`)))
	if !read("1").Shown {
		t.Error("opening the message does not show it whole")
	}

	// Rates over a window: a burst of requests, then none. A sample
	// taken seconds after the burst still shows it (a per-second rate
	// would read 0).
	ma := client.NewModelAdmin(srv.Admin(t, ""))
	for range 30 {
		if _, err := ma.Status(ctx, params.ModelArgs{Model: "default"}); err != nil {
			t.Fatal(err)
		}
	}
	after := time.Now().Add(3 * time.Second).UnixMilli()
	get(t, b.ctx, "wait for a sample 3 s after the burst", chromedp.Poll[bool](
		`Number(document.getElementById('metrics').dataset.last || 0) >= `+strconv.FormatInt(after, 10), chromedp.WithPollingTimeout(20*time.Second)))
	var chart struct {
		Title, Value, Top, Peak, Window string
	}
	js := get(t, b.ctx, "read the chart", chromedp.Evaluate[string](`(() => { const m = document.querySelector('#metrics [data-metric="requestsPerS"]');
		return JSON.stringify({Title: m.querySelector('h3').textContent, Value: m.querySelector('.value').textContent,
			Top: m.querySelector('.axis-top').textContent, Peak: m.querySelector('.peak').textContent,
			Window: document.getElementById('metrics-window').textContent}); })()`))
	if err := json.Unmarshal([]byte(js), &chart); err != nil {
		t.Fatal(err)
	}
	value, _ := strconv.ParseFloat(chart.Value, 64)
	top, _ := strconv.ParseFloat(chart.Top, 64)
	peakRe := regexp.MustCompile(`^peak ([0-9.]+) at \d\d:\d\d:\d\d$`)
	pm := peakRe.FindStringSubmatch(chart.Peak)
	if pm == nil {
		t.Fatalf("requests/s chart %+v: no peak with its time", chart)
	}
	peak, _ := strconv.ParseFloat(pm[1], 64)
	win := regexp.MustCompile(`^Requests/s · (\d+) s$`).FindStringSubmatch(chart.Title)
	if value <= 0 || peak < value || top < peak || win == nil || !strings.Contains(chart.Window, "over the last "+win[1]+" s") {
		t.Errorf("requests/s chart %+v: want a rate over a window (named in the title and above) above 0 seconds after the burst, a peak at least that, a scale to at least the peak", chart)
	}

	// The feed: a change of the model itself is named by the model's
	// name, at a 24-hour UTC time with its date.
	b.provisionctl("model-config", "-m", "default", "ftp-proxy=http://proxy.example:3128")
	get(t, b.ctx, "see the model's change", chromedp.Poll[bool](
		`[...document.querySelectorAll('#activity li .what')].some((e) => e.textContent === 'model default')`, chromedp.WithPollingTimeout(10*time.Second)))
	feed := get(t, b.ctx, "read the feed", chromedp.Text(chromedp.ID("activity")))
	if strings.Contains(feed, srv.DefaultModel()) {
		t.Errorf("the feed shows the model's UUID:\n%s", feed)
	}
	times := get(t, b.ctx, "read the feed's times", chromedp.Evaluate[string](`JSON.stringify([...document.querySelectorAll('#activity time')].map((e) => e.textContent))`))
	var ts []string
	if err := json.Unmarshal([]byte(times), &ts); err != nil || len(ts) == 0 {
		t.Fatalf("feed times %s: %v", times, err)
	}
	utc := regexp.MustCompile(`^\d{4}-\d\d-\d\d ([01]\d|2[0-3]):[0-5]\d:[0-5]\d UTC$`)
	for _, s := range ts {
		if !utc.MatchString(s) {
			t.Errorf("feed time %q is not a 24-hour UTC time with its date", s)
		}
	}
	b.checkProblems()
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }
