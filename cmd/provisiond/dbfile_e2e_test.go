package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state/store/boltstore"
)

// configWriter sets model config key "seq" to 1, 2, 3, ... through the
// admin, one call at a time, until the daemon stops answering; acked is
// the last value acknowledged.
type configWriter struct {
	acked atomic.Int64
	done  chan struct{}
}

func startConfigWriter(t *testing.T, creds *daemon.Credentials, addr string) *configWriter {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	conn, err := client.Dial(ctx, client.Config{Addr: addr, ModelUUID: creds.DefaultModelUUID, CACert: []byte(creds.CACert)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.LoginUser(ctx, creds.AdminUser, creds.AdminPassword); err != nil {
		t.Fatal(err)
	}
	w := &configWriter{done: make(chan struct{})}
	admin := client.NewModelAdmin(conn)
	go func() {
		defer close(w.done)
		for i := int64(1); ; i++ {
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := admin.SetModelConfig(cctx, params.SetModelConfigArgs{Config: map[string]any{"seq": fmt.Sprint(i)}})
			ccancel()
			if err != nil {
				return
			}
			w.acked.Store(i)
		}
	}()
	return w
}

// waitAcked waits until the writer has n writes acknowledged.
func (w *configWriter) waitAcked(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for w.acked.Load() < n {
		select {
		case <-w.done:
			t.Fatalf("the writer stopped after %d writes", w.acked.Load())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d writes acknowledged in a minute", w.acked.Load())
		}
	}
}

// waitExit waits for the daemon to exit on its own and returns its exit
// status.
func (p *proc) waitExit(t *testing.T) int {
	t.Helper()
	select {
	case err := <-p.exit:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(60 * time.Second):
		t.Fatalf("the daemon did not exit within a minute; its log:\n%s", p.log())
		return -1
	}
}

// noCrash fails the test if the daemon's stderr holds a Go crash: a
// fatal error, a panic or a goroutine dump.
func noCrash(t *testing.T, log string) {
	t.Helper()
	for _, s := range []string{"fatal error:", "panic:", "goroutine ", "SIGBUS"} {
		if strings.Contains(log, s) {
			t.Fatalf("the daemon's stderr has %q:\n%s", s, log)
		}
	}
}

// The database file taken from under the built daemon while a client
// writes (docs/reliability.md, The database file under the daemon):
//
//   - removed: the daemon notices (at the next commit, or within seconds
//     when idle), acknowledges nothing after, copies what it holds to
//     provisiond.db.rescued, logs why, and exits 3; moved back, the copy
//     starts and holds every acknowledged write;
//   - truncated: reading the memory map faults; that is turned into the
//     same clean refusal and exit 3, with no Go stack dump.
func TestDatabaseTakenFromUnderTheDaemon(t *testing.T) {
	bin := buildDaemon(t)
	for _, tt := range []struct {
		name string
		take func(db string) error
		why  string
	}{
		{"removed", os.Remove, "was removed while the daemon held it"},
		{"truncated", func(db string) error { return os.Truncate(db, 16<<10) }, "truncated"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dataDir := filepath.Join(t.TempDir(), "data")
			p := startDaemon(t, bin, dataDir)
			creds, err := daemon.ReadCredentials(filepath.Join(dataDir, daemon.CredentialsFile))
			if err != nil {
				t.Fatal(err)
			}
			w := startConfigWriter(t, creds, p.addr)
			w.waitAcked(t, 50)
			db := filepath.Join(dataDir, daemon.DBFile)
			if err := tt.take(db); err != nil {
				t.Fatal(err)
			}
			code := p.waitExit(t)
			<-w.done
			log := p.log()
			if code != exitDataDir {
				t.Errorf("exit status %d; want %d", code, exitDataDir)
			}
			noCrash(t, log)
			if !strings.Contains(log, "the database cannot be used any more") || !strings.Contains(log, tt.why) {
				t.Errorf("the log does not say why:\n%s", log)
			}
			acked := w.acked.Load()
			t.Logf("%d writes acknowledged", acked)
			if tt.name != "removed" {
				return
			}
			rescued := boltstore.RescuePath(db)
			if !strings.Contains(log, rescued) {
				t.Errorf("the log does not name the copy %s", rescued)
			}
			// Without the database the daemon refuses to start, naming the copy.
			r := runBin(t, nil, "serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir)
			if r.code != exitDataDir || !strings.Contains(r.stderr, daemon.DBFile+boltstore.RescueSuffix) {
				t.Errorf("serve without the database: exit %d\n%s", r.code, r.stderr)
			}
			if err := os.Rename(rescued, db); err != nil {
				t.Fatal(err)
			}
			p = startDaemon(t, bin, dataDir)
			defer p.stop(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			conn, err := client.Dial(ctx, client.Config{Addr: p.addr, ModelUUID: creds.DefaultModelUUID, CACert: []byte(creds.CACert)})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.LoginUser(ctx, creds.AdminUser, creds.AdminPassword); err != nil {
				t.Fatal(err)
			}
			cfg, err := client.NewModelAdmin(conn).ModelConfig(ctx, params.ModelArgs{})
			if err != nil {
				t.Fatal(err)
			}
			// The last acknowledged value, or the one in flight when the
			// file went (written to the old file, never acknowledged).
			if got, want := fmt.Sprint(cfg.Config["seq"]), fmt.Sprint(acked); got != want && got != fmt.Sprint(acked+1) {
				t.Errorf("after restarting from the copy seq = %s; acknowledged %s", got, want)
			}
		})
	}
}
