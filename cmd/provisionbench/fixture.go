package main

import (
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// machineCred is a machine agent's login.
type machineCred struct {
	ID, Tag, Password, Nonce string
}

// fixture holds the simulated agents' machines, made through the API as
// Juju's provisioner makes them: the admin adds machines (ModelAdmin), the
// controller agent sets their passwords and records their instances and
// nonces (Provisioner).
type fixture struct {
	t        *target
	o        *options
	model    string
	salt     string
	admin    *client.Conn
	ctrl     *client.Conn
	machines []machineCred
}

func newFixture(t *target, o *options) *fixture {
	b := make([]byte, 8)
	_, _ = cryptoRand(b)
	return &fixture{t: t, o: o, model: t.creds.DefaultModelUUID, salt: hex.EncodeToString(b)}
}

var cryptoRand = crand.Read

func (f *fixture) close() {
	if f.admin != nil {
		f.admin.Close()
	}
	if f.ctrl != nil {
		f.ctrl.Close()
	}
}

// conns (re)opens the admin and controller agent connections.
func (f *fixture) conns(ctx context.Context) error {
	if f.admin != nil && f.admin.Err() != nil {
		f.admin.Close()
		f.admin = nil
	}
	if f.ctrl != nil && f.ctrl.Err() != nil {
		f.ctrl.Close()
		f.ctrl = nil
	}
	var err error
	if f.admin == nil {
		if f.admin, err = f.t.dialAdmin(ctx, f.model); err != nil {
			return err
		}
	}
	if f.ctrl == nil {
		if f.ctrl, err = f.t.dialController(ctx, f.model); err != nil {
			return err
		}
		// An agent connection that does not ping is closed after the
		// daemon's ping timeout (3 min); long runs outlast it.
		f.ctrl.StartPinger(time.Minute)
	}
	return nil
}

// ensureMachines makes sure n provisioned machines with known agent
// credentials exist and returns them.
func (f *fixture) ensureMachines(ctx context.Context, n int) ([]machineCred, error) {
	if len(f.machines) >= n {
		return f.machines[:n], nil
	}
	if err := f.conns(ctx); err != nil {
		return nil, err
	}
	need := n - len(f.machines)
	var done atomic.Int64
	f.o.progress.count(fmt.Sprintf("making %d machines", need), &done, int64(need), nil)
	const chunk = 100
	var (
		mu    sync.Mutex
		added []machineCred
	)
	// On etcd the adds run one at a time: each takes the model's next
	// machine numbers in one transaction, and eight at once conflict until
	// the store gives up ("too much contention"). Their passwords and
	// instances are set four chunks at a time all the same. A call, or a
	// bulk call's item, answered try again (a saturated etcd) is made
	// again after a backoff; an AddMachines answered try again may have
	// added some machines, which the run then leaves without credentials.
	var addMu sync.Mutex
	serialAdds := f.t.etcd != nil
	err := parallel(ctx, (need+chunk-1)/chunk, 4, func(ctx context.Context, i int) error {
		count := min(chunk, need-i*chunk)
		var res params.AddMachinesResult
		err := callAgain(ctx, func() error {
			if serialAdds {
				addMu.Lock()
				defer addMu.Unlock()
			}
			return f.admin.Call(ctx, "ModelAdmin", 1, "", "AddMachines", params.AddMachinesArgs{Count: count}, &res)
		})
		if err != nil {
			return fmt.Errorf("AddMachines: %w", err)
		}
		creds := make([]machineCred, len(res.Machines))
		for j, id := range res.Machines {
			creds[j] = machineCred{ID: id, Tag: "machine-" + id, Password: "bench-" + f.salt + "-" + id, Nonce: "bench:" + id}
		}
		err = bulkAgain(ctx, len(creds), func(idx []int) ([]params.ErrorResult, error) {
			pw := params.EntityPasswords{}
			for _, j := range idx {
				pw.Changes = append(pw.Changes, params.EntityPassword{Tag: creds[j].Tag, Password: creds[j].Password})
			}
			var r params.ErrorResults
			err := f.ctrl.Call(ctx, "Provisioner", 11, "", "SetPasswords", pw, &r)
			return r.Results, err
		})
		if err != nil {
			return fmt.Errorf("SetPasswords: %w", err)
		}
		err = bulkAgain(ctx, len(creds), func(idx []int) ([]params.ErrorResult, error) {
			info := params.InstancesInfo{}
			for _, j := range idx {
				c := creds[j]
				info.Machines = append(info.Machines, params.InstanceInfo{Tag: c.Tag, InstanceId: "bench-i-" + c.ID, Nonce: c.Nonce})
			}
			var r params.ErrorResults
			err := f.ctrl.Call(ctx, "Provisioner", 11, "", "SetInstanceInfo", info, &r)
			return r.Results, err
		})
		if err != nil {
			return fmt.Errorf("SetInstanceInfo: %w", err)
		}
		mu.Lock()
		added = append(added, creds...)
		mu.Unlock()
		done.Add(int64(len(creds)))
		return nil
	})
	if err != nil {
		return nil, err
	}
	f.machines = append(f.machines, added...)
	return f.machines[:n], nil
}

// parallel runs fn(i) for i in [0, n) on at most workers goroutines and
// returns the first error.
func parallel(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return firstErr
}

// connectStats counts what agents met while connecting.
type connectStats struct {
	tryAgain atomic.Int64 // logins and watch calls answered "try again"
	dialErr  atomic.Int64 // dial failures and connections cut (the daemon is down)
	// Of dialErr: connections refused (nothing listens), connections
	// reset (a daemon's listener closed them at accept: over a bound, or
	// shedding under overload), and binds that found no free port on the
	// agent's source address (must stay 0: the source addresses are
	// spread for that, limits.go).
	refused, reset, noPort, unavailable atomic.Int64
	otherErr                            atomic.Int64 // any other error
	lastOther                           atomic.Pointer[string]
}

// connErr counts a dial that failed or a connection cut.
func (s *connectStats) connErr(err error) {
	s.dialErr.Add(1)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		s.refused.Add(1)
	case errors.Is(err, syscall.ECONNRESET):
		s.reset.Add(1)
	case errors.Is(err, syscall.EADDRINUSE), errors.Is(err, syscall.EADDRNOTAVAIL):
		s.noPort.Add(1)
	default:
		if se := (*client.DialStatusError)(nil); errors.As(err, &se) && se.StatusCode == http.StatusServiceUnavailable {
			s.unavailable.Add(1)
		}
	}
}

func (s *connectStats) other(err error) {
	s.otherErr.Add(1)
	msg := err.Error()
	s.lastOther.Store(&msg)
}

// agentConfig is the client config of agent i: small buffers, and a
// source address among 127.0.0.2... (limits.go) when the daemon is on a
// loopback address, so thousands of agents do not exhaust one address's
// ephemeral ports.
func (e *env) agentConfig(model string, i int) client.Config {
	cfg := e.t.clientConfig(model)
	cfg.Addr = e.agentTarget(i).addr // the CA and logins are every daemon's
	cfg.ReadBufferSize, cfg.WriteBufferSize = e.o.bufferSize, e.o.bufferSize
	cfg.LocalAddr = e.o.localAddr(cfg.Addr, i)
	cfg.PingTimeout = e.o.agentPingTimeout
	cfg.CurvePreferences = e.o.agentCurves()
	return cfg
}

// The agents' key exchanges (--agent-key-exchange).
const (
	keyExchangeGo   = "go"
	keyExchangeJuju = "juju"
)

// agentCurves are the key exchanges the agents' handshakes offer: nil
// (Go's defaults) or those of Juju's agents (client.JujuAgentCurves).
func (o *options) agentCurves() []tls.CurveID {
	if o.agentKeyExchange == keyExchangeJuju {
		return client.JujuAgentCurves
	}
	return nil
}

// localAddr is the address agent i binds to when dialling addr: its
// loopback source address if addr is on IPv4 loopback (127.0.0.0/8
// reaches every address of it), else none (the kernel's choice).
func (o *options) localAddr(addr string, i int) *net.TCPAddr {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || ip.To4() == nil || !ip.IsLoopback() {
		return nil
	}
	return &net.TCPAddr{IP: o.sources.sourceAddr(i)}
}

// dialAgent connects machine agent m (index i) and logs it in once.
func (e *env) dialAgent(ctx context.Context, i int, m machineCred) (*client.Conn, error) {
	c, err := client.Dial(ctx, e.agentConfig(e.fix.model, i))
	if err != nil {
		return nil, &dialError{err}
	}
	if _, err := c.LoginAgent(ctx, m.Tag, m.Password, m.Nonce); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

type dialError struct{ err error }

func (d *dialError) Error() string { return d.err.Error() }
func (d *dialError) Unwrap() error { return d.err }

// connectAgent dials and logs in, retrying with jittered backoff until it
// succeeds or ctx ends, counting what it met in st.
func (e *env) connectAgent(ctx context.Context, i int, m machineCred, st *connectStats) (*client.Conn, error) {
	for attempt := 0; ; attempt++ {
		c, err := e.dialAgent(ctx, i, m)
		if err == nil {
			return c, nil
		}
		var de *dialError
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case client.IsCode(err, params.CodeTryAgain):
			st.tryAgain.Add(1)
		case errors.As(err, &de), errors.Is(err, client.ErrConnClosed):
			st.connErr(err)
		default:
			st.other(err)
		}
		if err := sleepCtx(ctx, backoff(attempt)); err != nil {
			return nil, err
		}
	}
}

// cleanupTimeout bounds removing the run's machines at the end.
const cleanupTimeout = time.Minute

// cleanup leaves a daemon the tool did not start (--credentials) as it
// found it: it removes the machines the run added, and with them the
// containers the workloads put on them (remove-machine --force --no-wait:
// no agent runs for them). With --keep-machines, or when the removal
// fails, it says which machines it leaves behind and how to remove them.
// A daemon the tool started is thrown away whole; nothing to do.
func (f *fixture) cleanup() {
	if f.t.mode != modeExternal || len(f.machines) == 0 {
		return
	}
	ids := make([]string, len(f.machines))
	for i, m := range f.machines {
		ids[i] = m.ID
	}
	leave := func(why string) {
		fmt.Fprintf(f.o.stderr, "provisionbench: %s: left behind in model %s: machines %s (and the containers on them); remove them with\n"+
			"  provisionctl --credentials %s remove-machine -m %s --force --no-wait %s\n",
			why, f.model, compactIDs(ids), f.o.credentials, f.model, strings.Join(ids, " "))
	}
	if f.o.keepMachines {
		leave("--keep-machines")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := f.conns(ctx); err != nil {
		leave(fmt.Sprintf("cannot remove them (%v)", err))
		return
	}
	removed := 0
	for chunk := range slices.Chunk(ids, 100) {
		var res params.RemoveMachinesResult
		err := f.admin.Call(ctx, "ModelAdmin", 1, "", "RemoveMachines",
			params.RemoveMachinesArgs{Model: f.model, Machines: chunk, Force: true, NoWait: true}, &res)
		if err != nil {
			leave(fmt.Sprintf("cannot remove them (%v; %d removed)", err, removed))
			return
		}
		removed += len(chunk)
	}
	fmt.Fprintf(f.o.stderr, "provisionbench: removed the %d machines this run added to model %s (%s) and the containers on them\n",
		len(ids), f.model, compactIDs(ids))
	f.machines = nil
}

// compactIDs shows machine ids with runs of consecutive numbers as
// ranges: "3-102, 110".
func compactIDs(ids []string) string {
	var out []string
	for i := 0; i < len(ids); {
		a, err := strconv.Atoi(ids[i])
		j := i + 1
		if err == nil {
			for j < len(ids) {
				n, err := strconv.Atoi(ids[j])
				if err != nil || n != a+(j-i) {
					break
				}
				j++
			}
		}
		if j-i > 2 {
			out = append(out, ids[i]+"-"+ids[j-1])
		} else {
			out = append(out, ids[i:j]...)
		}
		i = j
	}
	return strings.Join(out, ", ")
}
