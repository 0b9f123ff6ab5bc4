package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// The failover workload: agents spread over --daemons daemons on one
// etcd, each with its two watchers (as conns and storm hold them); the
// last daemon is killed with SIGKILL; its agents log in again at the
// other addresses their login listed and watch again. The figure is the
// time from the kill until every one of them is back.
var failoverWorkload = &workload{
	sizeName: "agents per daemon",
	sizes:    "100,1000,3000",
	describe: func(o *options) map[string]any {
		return map[string]any{"daemons": o.daemons, "watchers-per-agent": o.connsWatchers(), "kill": "SIGKILL of the last daemon", "resume": o.resume,
			"reconnect":  "as a Juju agent (api/apiclient.go, worker/apicaller): the addresses it knows (each login's LoginResult.servers) shuffled, dialled one more every 200 ms, the first connection made kept; full jitter backoff once all failed or on try again",
			"login-rate": fmt.Sprintf("%d burst, 1 per %s, per daemon", o.loginRateMax, o.loginRateRefill)}
	},
	prepare: func(ctx context.Context, e *env, n int) error {
		_, err := e.fix.ensureMachines(ctx, n*len(e.targets))
		return err
	},
	run: runFailover,
	notes: func(*options) []string {
		return []string{
			"all back: from the SIGKILL until every agent of the killed daemon is logged in again on another daemon with both its watchers (target: 3,000 agents per daemon, 3 daemons, within 10 s)",
			"the agents of the other daemons must not notice: survivors dropped must be 0; other errors are errors but try again and connections refused",
			"between runs the killed daemon is started again on its data dir (it joins the controller) and every agent reconnects afresh",
			"--resume: the moved agents open their watchers resumed after the lowest revision their events covered (a watcher reset: afresh); the watch call's response bytes are its JSON; the history figures are the surviving daemons' counters (provisiond_history_*_total) from the kill until all are back",
		}
	},
}

func runFailover(ctx context.Context, e *env, n int) (*values, error) {
	if e.o.loadgens > 0 {
		return runFailoverSpread(ctx, e, n)
	}
	d := len(e.targets)
	ms, err := e.fix.ensureMachines(ctx, n*d)
	if err != nil {
		return nil, err
	}
	// The last daemon dies: the first holds the fixture's connections.
	last := d - 1
	victim := e.targets[last]
	if victim.cmd == nil { // killed in the previous run
		e.o.progress.set("failover: starting the killed daemon again")
		if err := victim.start(ctx); err != nil {
			return nil, fmt.Errorf("restart the killed daemon: %w", err)
		}
	}
	var first connectStats
	ss, err := e.connectSessions(ctx, ms, &first, 2) // agent i on daemon i mod d
	if err != nil {
		return nil, err
	}
	var (
		mu      sync.Mutex
		current = ss
	)
	defer func() {
		mu.Lock()
		closeSessions(current)
		mu.Unlock()
	}()
	servers := make([][]string, len(ss))
	for i, s := range ss {
		servers[i] = loginServers(s.c.LoginResult())
		if i%d == last && len(servers[i]) < 2 {
			return nil, fmt.Errorf("agent %d: its login lists %v: no other daemon to go to", i, servers[i])
		}
	}

	var (
		killedAt atomic.Pointer[time.Time]
		back     atomic.Int64
		dropped  atomic.Int64
		lat      latencies
		st       connectStats
	)
	drops := newDropWatch(ctx)
	defer drops.stop() // before the sessions close
	victims := 0
	for i := range ss {
		if i%d != last {
			drops.on(ss[i].c, func(context.Context) { dropped.Add(1) }) // a survivor: its connection must stay up
			continue
		}
		victims++
		drops.on(ss[i].c, func(ctx context.Context) {
			var ns *session
			_, err := e.failOver(ctx, i, ms[i], servers[i], &st, func(ctx context.Context, c *client.Conn) error {
				s, err := startSession(ctx, c, ms[i], 2, &st)
				ns = s
				return err
			})
			if err != nil {
				return // cancelled
			}
			if t0 := killedAt.Load(); t0 != nil {
				lat.add(time.Since(*t0))
			}
			mu.Lock()
			current[i] = ns
			mu.Unlock()
			back.Add(1)
		})
	}
	e.o.progress.setWith(fmt.Sprintf("failover: killing daemon %d of %d under %d agents each", d, d, n), func() string {
		return fmt.Sprintf("back %d/%d (try again %d, connection errors %d, other %d)",
			back.Load(), victims, st.tryAgain.Load(), st.dialErr.Load(), st.otherErr.Load())
	})
	victim.foldEnds()
	t0 := time.Now()
	killedAt.Store(&t0)
	if err := victim.kill(); err != nil {
		return nil, err
	}
	timeout := time.After(10 * time.Minute)
	for back.Load() < int64(victims) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timeout:
			return nil, fmt.Errorf("only %d of %d agents back after 10 minutes", back.Load(), victims)
		case <-time.After(10 * time.Millisecond):
		}
	}
	all := time.Since(t0)
	ds := lat.snapshot()
	v := newValues()
	v.set("agents moved", "", float64(victims))
	v.set("all back", "s", all.Seconds())
	v.set("agent back p50", "s", percentile(ds, 50).Seconds())
	v.set("agent back p99", "s", percentile(ds, 99).Seconds())
	v.set("logins/s", "", float64(victims)/max(all, time.Millisecond).Seconds())
	v.set("try again", "", float64(st.tryAgain.Load()))
	v.set("connection errors", "", float64(st.dialErr.Load()))
	v.set("other errors", "", float64(st.otherErr.Load()))
	v.set("survivors dropped", "", float64(dropped.Load()))
	e.setConnEnds(v)
	return v, nil
}

// loginServers are the API addresses a login listed (this daemon first).
func loginServers(r *params.LoginResult) []string {
	var out []string
	if r == nil {
		return nil
	}
	for _, hps := range r.Servers {
		for _, hp := range hps {
			out = append(out, net.JoinHostPort(hp.Value, strconv.Itoa(hp.Port)))
		}
	}
	return out
}

// failOver logs agent i in again at one of servers and opens its
// watchers (open; on its error the connection is closed and it goes on),
// as a Juju agent reconnects (api/apiclient.go dialAPI, with
// worker/apicaller's options): every attempt shuffles the addresses it
// knows, the one it was on among them, and dials them in that order, the
// next one DialAddressInterval after the one before whether or not that
// one has answered, keeping the first connection made (TCP, TLS and the
// websocket) and closing any other; then it logs in. Once every address
// has failed, or at "try again", it backs off and tries again.
func (e *env) failOver(ctx context.Context, i int, m machineCred, servers []string, st *connectStats,
	open func(context.Context, *client.Conn) error) (*client.Conn, error) {
	for attempt := 0; ; attempt++ {
		order := slices.Clone(servers)
		rand.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		c, err := e.dialFirst(ctx, i, order, st)
		if err == nil {
			if _, err = c.LoginAgent(ctx, m.Tag, m.Password, m.Nonce); err == nil {
				if err = open(ctx, c); err == nil {
					return c, nil
				}
			}
			c.Close()
		}
		var de *dialError
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.As(err, &de):
			// every address failed, each counted
		case errors.Is(err, client.ErrConnClosed):
			st.connErr(err)
		case client.IsCode(err, params.CodeTryAgain):
			st.tryAgain.Add(1)
		default:
			st.other(err)
		}
		if err := sleepCtx(ctx, backoff(attempt)); err != nil {
			return nil, err
		}
	}
}

// dialInterval is how long an agent's dial of one address goes on alone
// before it dials the next as well: worker/apicaller's
// DialAddressInterval (about a TLS handshake).
const dialInterval = 200 * time.Millisecond

// defaultDials bounds the dials under way at once in one process of the
// tool (a load generator's agents, or the tool's own; --dials): a dial
// waits for a slot first. Real agents each dial from a machine of their own; here
// thousands share one process's memory, and a dial whose TLS handshake
// waits for a saturated daemon holds its key shares and stack: in a storm
// of 100,000 agents on 7 daemons, each agent's up to 7 dials under way
// grew load generators of 14,300 agents from 1.4 GB to over 4 GB, and the
// kernel killed one. The daemons admit a few handshakes per core at a
// time, so this many waiting does not slow them (docs/performance.md,
// "storm": the bound also spares the daemons handshakes the agents then
// abandon).
const defaultDials = 2048

// dialSlots holds a slot per dial under way (nil: no bound). Set once,
// before any agent dials (setDialSlots).
var dialSlots chan struct{}

// setDialSlots bounds the dials under way at once at n (0: no bound).
func setDialSlots(n int) {
	dialSlots = nil
	if n > 0 {
		dialSlots = make(chan struct{}, n)
	}
}

// dialFirst dials addrs in order, one more every dialInterval (whether
// or not the dials before have failed, as Juju's), and returns the first
// connection made; any other made is closed as it comes. Each failed dial
// is counted in st. Once all have failed, the error is one of them (a
// dialError), not a refusal where another was met.
func (e *env) dialFirst(ctx context.Context, i int, addrs []string, st *connectStats) (*client.Conn, error) {
	type result struct {
		c   *client.Conn
		err error
	}
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan result, len(addrs))
	started, received := 0, 0
	defer func() { // the dials still under way: closed as they come
		if rest := started - received; rest > 0 {
			go func() {
				for range rest {
					if r := <-results; r.c != nil {
						r.c.Close()
					}
				}
			}()
		}
	}()
	var last error
	tick := time.NewTimer(0)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			cfg := e.agentConfig(e.fix.model, i)
			cfg.Addr = addrs[started]
			started++
			go func() {
				if slots := dialSlots; slots != nil {
					select {
					case slots <- struct{}{}:
						defer func() { <-slots }()
					case <-dctx.Done():
						results <- result{nil, dctx.Err()}
						return
					}
				}
				c, err := client.Dial(dctx, cfg)
				results <- result{c, err}
			}()
			if started < len(addrs) {
				tick.Reset(dialInterval)
			}
		case r := <-results:
			received++
			if r.err == nil {
				return r.c, nil
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			st.connErr(r.err)
			if last == nil || !errors.Is(r.err, syscall.ECONNREFUSED) {
				last = r.err
			}
			if received == len(addrs) {
				return nil, &dialError{last}
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
