package robustness_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/daemonproc"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// TestBboltFullDisk runs a daemon on bbolt as a process of its own, its
// data dir on a small tmpfs (it skips, saying why, where it cannot mount
// one), under writes through the API from several clients: models of
// 200 KiB of config added (which need new space) and machine statuses
// set. The disk is filled under them. Then: writes are refused with the
// full-disk error (no crash, no panic: the process serves on); every
// acknowledged write reads back; once the space is freed writes succeed
// again; and after a SIGKILL and a restart every acknowledged write is
// still there, and the database passes provisiond check.
func TestBboltFullDisk(t *testing.T) {
	provisiond, _ := bins(t)
	dir := filepath.Join(daemonproc.MountTmpfs(t, "48m"), "data")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	start := func() *daemonproc.Process {
		t.Helper()
		p, err := daemonproc.Start(provisiond, dir, nil, "--store", "bbolt")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.WaitServing(ctx); err != nil {
			t.Fatalf("daemon: %v\n%s", err, p.LogTail())
		}
		return p
	}
	p := start()
	defer func() { _ = p.Kill() }()
	creds, err := credentials.Read(filepath.Join(dir, credentials.File))
	if err != nil {
		t.Fatal(err)
	}
	dial := func(agent bool) *client.Conn {
		t.Helper()
		c, err := client.DialCredentials(ctx, creds, client.Config{ModelUUID: creds.DefaultModelUUID})
		if err != nil {
			t.Fatal(err)
		}
		if agent {
			_, err = c.LoginControllerAgent(ctx, creds)
		} else {
			_, err = c.LoginAdmin(ctx, creds)
		}
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	admin := dial(false)
	defer admin.Close()
	added, err := client.NewModelAdmin(admin).AddMachines(ctx, params.AddMachinesArgs{Model: "default", Count: 2})
	if err != nil {
		t.Fatal(err)
	}

	// What was acknowledged, and how writes were refused.
	var mu sync.Mutex
	models := map[string]bool{}   // name -> acknowledged
	status := map[string]string{} // machine -> last acknowledged status
	inDoubt := map[string][]string{}
	refused, other := 0, []string{}
	note := func(err error) {
		switch {
		case err == nil:
		case strings.Contains(err.Error(), "no space left on device"):
			refused++
		default:
			other = append(other, err.Error())
		}
	}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 2 {
		c := dial(false)
		defer c.Close()
		wg.Go(func() {
			for i := 0; wctx.Err() == nil; i++ {
				name := fmt.Sprintf("fill-%d-%d", w, i)
				_, err := client.NewModelAdmin(c).AddModel(wctx, params.AddModelArgs{Name: name,
					Config: map[string]any{"big": strings.Repeat("x", 200<<10)}})
				mu.Lock()
				if err == nil {
					models[name] = true
				} else if wctx.Err() == nil {
					note(err)
				}
				mu.Unlock()
			}
		})
	}
	for _, m := range added.Machines {
		c := dial(true)
		defer c.Close()
		wg.Go(func() {
			for i := 0; wctx.Err() == nil; i++ {
				v := fmt.Sprintf("s-%d", i)
				err := client.NewProvisioner(c).Machine("machine-"+m).SetStatus(wctx, "started", v, nil)
				mu.Lock()
				switch {
				case err == nil:
					status[m], inDoubt[m] = v, nil
				case wctx.Err() != nil: // cut short by the stop: in doubt
					inDoubt[m] = append(inDoubt[m], v)
				default:
					note(err)
					if !strings.Contains(err.Error(), "no space left on device") {
						inDoubt[m] = append(inDoubt[m], v)
					}
				}
				mu.Unlock()
			}
		})
	}
	filler := daemonproc.FillDisk(t, filepath.Dir(dir))
	// Writes go on until a few have been refused.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		mu.Lock()
		n := refused
		mu.Unlock()
		if n >= 5 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("on a full disk: %d writes refused; %d models and %d statuses acknowledged; other errors %q", refused, len(models), len(status), other)
	if refused == 0 {
		t.Fatal("no write was refused on a full disk")
	}
	if len(other) > 0 {
		t.Errorf("writes on a full disk failed otherwise than with the full-disk error: %q", other)
	}
	if p.Exited() {
		t.Fatalf("the daemon died on a full disk:\n%s", p.LogTail())
	}

	// check reads every acknowledged write back (a status may also be a
	// write in doubt after it).
	check := func(when string) {
		t.Helper()
		c := dial(true)
		defer c.Close()
		for m, v := range status {
			st, err := client.NewProvisioner(c).Machine("machine-" + m).Status(ctx)
			if err != nil {
				t.Fatalf("%s: reading machine %s: %v", when, m, err)
			}
			if st.Info != v && !slices.Contains(inDoubt[m], st.Info) {
				t.Errorf("%s: machine %s status %q; acknowledged %q", when, m, st.Info, v)
			}
		}
		ms, err := client.NewModelAdmin(admin).ListModels(ctx)
		if err != nil {
			t.Fatalf("%s: listing models: %v", when, err)
		}
		have := map[string]bool{}
		for _, m := range ms.Models {
			have[m.Name] = true
		}
		for name := range models {
			if !have[name] {
				t.Errorf("%s: model %s was acknowledged and is gone", when, name)
			}
		}
	}
	check("on a full disk")

	// Room again: writes succeed.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	c := dial(true)
	defer c.Close()
	for _, m := range added.Machines {
		if err := client.NewProvisioner(c).Machine("machine-"+m).SetStatus(ctx, "started", "after", nil); err != nil {
			t.Fatalf("a write once there is room: %v", err)
		}
		status[m], inDoubt[m] = "after", nil
	}
	check("space freed")

	// A crash and a restart keep every acknowledged write.
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	admin.Close()
	p = start()
	// The restart took a new port, which credentials.yaml now names.
	if creds, err = credentials.Read(filepath.Join(dir, credentials.File)); err != nil {
		t.Fatal(err)
	}
	admin = dial(false)
	check("after a restart")

	// And the file passes the daemon's own consistency check.
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, provisiond, "check", "--data-dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("provisiond check after a full disk: %v\n%s", err, out)
	}
}
