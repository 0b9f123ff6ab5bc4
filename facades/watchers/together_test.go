package watchers_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/tlsrecord"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// recordProxy forwards one TCP connection to the daemon and counts the
// TLS records the daemon sends on it (each record is one write of the
// daemon's: it writes a batch as one record of up to 16 KiB).
type recordProxy struct {
	ln net.Listener
	wg sync.WaitGroup

	mu      sync.Mutex
	records tlsrecord.Counter
	conns   []net.Conn
}

func startRecordProxy(t *testing.T, target string) *recordProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &recordProxy{ln: ln}
	p.wg.Add(1)
	go p.serve(target)
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *recordProxy) serve(target string) {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(out, in)
			_ = out.Close()
		}()
		go func() {
			defer p.wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := out.Read(buf)
				p.count(buf[:n])
				if n > 0 {
					if _, werr := in.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					_ = in.Close()
					return
				}
			}
		}()
	}
}

// count adds the TLS records that start in b.
func (p *recordProxy) count(b []byte) {
	p.mu.Lock()
	p.records.Add(b)
	p.mu.Unlock()
}

func (p *recordProxy) recordCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.records.Records()
}

// waitWorkersIdle waits (bounded) until every worker goroutine of the
// daemon's rpc server is idle, waiting for work: every call read so far
// has been run to its end, so every Next read has registered with its
// watcher and waits (a function handed to a worker that has not run it
// yet shows as a runnable or running worker, or a new one).
func waitWorkersIdle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 4<<20)
	for {
		n := runtime.Stack(buf, true)
		busy := 0
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			header, _, _ := strings.Cut(g, "\n")
			if strings.Contains(g, "provisiond/rpc.(*workerPool).worker(") && !strings.Contains(header, "[select") {
				busy++
			}
		}
		if busy == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rpc workers still busy after 10s", busy)
		}
		time.Sleep(time.Millisecond) // polling a bounded condition
	}
}

// One commit that wakes ten watchers of one agent reaches the agent in
// one TLS record, one write of the daemon's, change after change: the hub
// holds the connection's replies until its publish has woken every
// watcher (before, the first reply started the connection's worker,
// which often wrote it before the publisher had given the other nine, so
// a change left in two writes). Real daemon, its TLS websocket and our
// client, the records counted on the wire by a proxy.
func TestCommitWakingTenWatchersIsOneWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a daemon")
	}
	srv := provisiondtest.Start(t)
	model := srv.DefaultModel()
	login := srv.ProvisionMachine(t, model, "0")
	proxy := startRecordProxy(t, srv.Addr())
	creds := srv.Credentials()
	creds.APIAddresses = []string{proxy.ln.Addr().String()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	agent, err := client.DialCredentials(ctx, creds, client.Config{ModelUUID: model})
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	if _, err := agent.LoginAgent(ctx, login.Tag, login.Password, login.Nonce); err != nil {
		t.Fatal(err)
	}
	admin := srv.Admin(t, model)

	const k = 10
	args := params.WatchContainers{}
	for range k {
		args.Params = append(args.Params, params.WatchContainer{MachineTag: login.Tag})
	}
	var res params.StringsWatchResults
	if err := agent.Call(ctx, "Provisioner", 11, "", "WatchContainers", args, &res); err != nil {
		t.Fatal(err)
	}
	watchers := make([]*client.StringsWatcher, k)
	for i, r := range res.Results {
		if r.Error != nil {
			t.Fatal(r.Error)
		}
		watchers[i] = client.NewStringsWatcher(agent, r.StringsWatcherId)
	}

	type delivery struct {
		ids []string
		err error
	}
	for round := range 15 {
		got := make(chan delivery, k)
		for _, w := range watchers {
			w.GoNext(func(ids []string, err error) { got <- delivery{ids, err} })
		}
		// Every Next has been read (a Ping behind them is answered) and
		// has registered with its watcher.
		if err := agent.Call(ctx, "Pinger", 1, "", "Ping", nil, nil); err != nil {
			t.Fatal(err)
		}
		waitWorkersIdle(t)
		before := proxy.recordCount()

		var added params.AddMachinesResult
		if err := admin.Call(ctx, "ModelAdmin", 1, "", "AddMachines", params.AddMachinesArgs{Placement: "lxd:0"}, &added); err != nil {
			t.Fatal(err)
		}
		if len(added.Machines) != 1 {
			t.Fatalf("AddMachines: %+v", added)
		}
		for range k {
			select {
			case d := <-got:
				if d.err != nil || fmt.Sprint(d.ids) != fmt.Sprint(added.Machines) {
					t.Fatalf("round %d: Next gave %v, %v; want %v", round, d.ids, d.err, added.Machines)
				}
			case <-ctx.Done():
				t.Fatal(errors.New("watchers not woken within a minute"))
			}
		}
		if n := proxy.recordCount() - before; n != 1 {
			t.Fatalf("round %d: the %d replies of one commit came in %d TLS records, want 1", round, k, n)
		}
	}
}
