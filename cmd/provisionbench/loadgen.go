package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/connlimit"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// Load generators in processes of their own (--loadgens N): every process
// may hold at most 20,000 open files here, so 100,000 agents cannot live
// in one. The tool re-executes itself as N load generators
// (childLoadgenCmd), each running a contiguous block of the agents from
// loopback source addresses of its own (sourcePlan's base), and drives
// them over their stdin and stdout: one JSON request a line, one JSON
// reply a line, in turn. The parent keeps the fixture, the driver, the
// daemons and the report; the children hold the agents and say what they
// saw (counts, deliveries with their wall-clock times, reconnections), so
// the figures are computed once, in the parent, over all of them. Times
// cross processes as Unix nanoseconds: one kernel clock on one box.

// childLoadgenCmd is the hidden command of a load generator process.
const childLoadgenCmd = "internal-loadgen"

// The kinds of agent a load generator runs.
const (
	// lgConns: conns' agents (session: WatchContainers on itself and
	// WatchForModelConfigChanges alternately, a Next always pending).
	lgConns = "conns"
	// lgWatch: watch's agents: K WatchContainers watchers on the agent's
	// own machine, each delivery recorded (agent, watcher, container,
	// time); after a reconnection the new watchers' first event is
	// checked against what each watcher had seen, so a change made while
	// the agent was away is found or counted lost.
	lgWatch = "watch"
)

// lgRequest is one command to a load generator.
type lgRequest struct {
	Op string `json:"op"`
	// init
	Model   string   `json:"model,omitempty"`
	CACert  string   `json:"ca,omitempty"`
	Addrs   []string `json:"addrs,omitempty"` // the daemons, agent i on i mod len
	Buffer  int      `json:"buffer,omitempty"`
	Dials   int      `json:"dials,omitempty"`
	PerAddr int      `json:"per-addr,omitempty"`
	Base    int      `json:"base,omitempty"`
	Nice    int      `json:"nice,omitempty"` // every thread's nice value (--loadgen-nice)
	// PingTimeout is the agents' --agent-ping-timeout.
	PingTimeout time.Duration `json:"ping-timeout,omitempty"`
	// KeyExchange is the agents' --agent-key-exchange.
	KeyExchange string `json:"key-exchange,omitempty"`
	// connect
	Kind     string        `json:"kind,omitempty"`
	Watchers int           `json:"watchers,omitempty"`
	First    int           `json:"first,omitempty"`
	Agents   []machineCred `json:"agents,omitempty"` // agent First+j is Agents[j]
	// Sched: status also gives the waits to run since arm (results and
	// close always do); not on every poll, which reads the runtime.
	Sched bool `json:"sched,omitempty"`
	// Resume: lgWatch's agents open their watchers again after a
	// reconnection resumed from the revision their events covered
	// (provisiond's "from-revision" header key), as the reference agent
	// does, rather than afresh.
	Resume bool `json:"resume,omitempty"`
}

// lgReply is a load generator's answer; Err is set when the command
// failed.
type lgReply struct {
	Err string `json:"err,omitempty"`

	Seconds       float64 `json:"seconds,omitempty"`
	TryAgain      int64   `json:"try-again,omitempty"`
	ConnErrors    int64   `json:"conn-errors,omitempty"`
	Refused       int64   `json:"refused,omitempty"`
	ResetAtAccept int64   `json:"reset-at-accept,omitempty"`
	NoPort        int64   `json:"no-port,omitempty"`
	Unavailable   int64   `json:"unavailable,omitempty"`
	Other         int64   `json:"other,omitempty"`
	LastOther     string  `json:"last-other,omitempty"`

	Deliveries int64 `json:"deliveries,omitempty"`
	Duplicates int64 `json:"duplicates,omitempty"`
	Spurious   int64 `json:"spurious,omitempty"`
	Down       int64 `json:"down,omitempty"` // agents without a daemon now
	Back       int64 `json:"back,omitempty"` // reconnections made since arm
	// Ends are the agents' connections ended since arm, by why, as each
	// agent's client saw it (agentEndReason).
	Ends connEnds `json:"ends,omitempty"`
	// Sched is the load generator's goroutines' waits to run since arm
	// (sched.go).
	Sched connEnds `json:"sched,omitempty"`
	// Watching is the watchers with a Next loop running (lgConns).
	Watching int64 `json:"watching,omitempty"`

	// lgWatch: the Watch calls made again after a reconnection: resumed,
	// answered watcher reset (then made afresh), and the bytes of their
	// responses; FirstBytes: those of the agents' first Watch calls.
	Resumed      int64 `json:"resumed,omitempty"`
	Reset        int64 `json:"reset,omitempty"`
	RewatchBytes int64 `json:"rewatch-bytes,omitempty"`
	FirstBytes   int64 `json:"first-bytes,omitempty"`

	GCCycles  uint64         `json:"gc-cycles,omitempty"`
	Delivered []lgDelivery   `json:"delivered,omitempty"`
	Events    []lgReconnect  `json:"events,omitempty"`
	PerDaemon map[int]int    `json:"per-daemon,omitempty"` // agents on each daemon now
	Extra     map[string]any `json:"extra,omitempty"`
}

// lgDelivery is one container a watcher saw for the first time: in a
// Next (Rewatch false) or in the first event of a watcher opened again
// after a reconnection (Rewatch true: its time is when the agent was back,
// not when the change reached the daemon).
type lgDelivery struct {
	Agent   int    `json:"a"`
	Watcher int    `json:"w"`
	Daemon  int    `json:"d"`
	ID      string `json:"id"`
	At      int64  `json:"t"`
	Rewatch bool   `json:"r,omitempty"`
}

// lgReconnect is one agent's connection lost (Drop) and made again with
// its watchers (Back) on daemon To, Unix nanoseconds.
type lgReconnect struct {
	Agent int   `json:"a"`
	From  int   `json:"from"`
	To    int   `json:"to"`
	Drop  int64 `json:"drop"`
	Back  int64 `json:"back"`
}

// loadgenProc is one load generator process, driven by the parent.
type loadgenProc struct {
	k   int
	cmd *exec.Cmd
	in  io.WriteCloser
	enc *json.Encoder
	dec *json.Decoder
	mu  sync.Mutex
	// its share of the current run: agents first .. first+count-1
	first, count int
}

// call sends req and waits for the reply.
func (p *loadgenProc) call(req lgRequest) (*lgReply, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.enc.Encode(req); err != nil {
		return nil, fmt.Errorf("load generator %d: %s: %w", p.k+1, req.Op, err)
	}
	var r lgReply
	if err := p.dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("load generator %d: %s: no reply: %w", p.k+1, req.Op, err)
	}
	if r.Err != "" {
		return &r, fmt.Errorf("load generator %d: %s: %s", p.k+1, req.Op, r.Err)
	}
	return &r, nil
}

// loadgenMemoryLimit is the soft memory limit (GOMEMLIMIT) of each of n
// load generators: five eighths of the box's memory shared among them,
// the rest left to the daemons and etcd. Without it each one's collector
// lets its heap grow to twice what it holds (GOGC=100), and seven load
// generators of 14,300 agents each (1.4 GB live) restarting their agents
// at once ran the box out of memory (storm of 100,000 agents: one killed
// at 3.3 GB). 0 (none set) for one load generator, or when $GOMEMLIMIT is
// set (the children have it then) or the box's memory is not known.
func loadgenMemoryLimit(n int) int64 {
	if n < 2 || os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	return connlimit.MemoryLimit() * 5 / 8 / int64(n)
}

// loadgens are the run's load generator processes.
type loadgens struct {
	procs []*loadgenProc
	// stop ends the goroutine that kills the load generators when the
	// run's context ends (a command waiting for a reply would otherwise
	// wait for the whole of it: a connect of thousands of agents).
	stop chan struct{}
}

// startLoadgens starts o.loadgens load generators for the daemons of e
// and initialises each with its own source addresses.
func startLoadgens(ctx context.Context, e *env) (*loadgens, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	l := &loadgens{stop: make(chan struct{})}
	addrs := make([]string, len(e.targets))
	for i, t := range e.targets {
		addrs[i] = t.addr
	}
	d := e.o.division(maxInt(e.o.sizes))
	for k := range e.o.loadgens {
		cmd := exec.Command(self, childLoadgenCmd)
		cmd.Stderr = e.o.stderr
		if limit := loadgenMemoryLimit(e.o.loadgens); limit > 0 {
			cmd.Env = append(os.Environ(), "GOMEMLIMIT="+strconv.FormatInt(limit, 10))
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		in, err := cmd.StdinPipe()
		if err != nil {
			l.close()
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			l.close()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			l.close()
			return nil, fmt.Errorf("load generator %d: %w", k+1, err)
		}
		p := &loadgenProc{k: k, cmd: cmd, in: in, enc: json.NewEncoder(in), dec: json.NewDecoder(bufio.NewReader(out))}
		l.procs = append(l.procs, p)
		if _, err := p.call(lgRequest{Op: "init", Model: e.fix.model, CACert: e.t.creds.CACert, Addrs: addrs,
			Buffer: e.o.bufferSize, Dials: e.o.dials, PerAddr: e.o.sources.perAddr, Base: k * d.addrsPerLoadgen,
			Nice: e.o.loadgenNice, PingTimeout: e.o.agentPingTimeout, KeyExchange: e.o.agentKeyExchange}); err != nil {
			l.close()
			return nil, err
		}
	}
	go func() {
		select {
		case <-ctx.Done():
			for _, p := range l.procs {
				_ = p.cmd.Process.Kill()
			}
		case <-l.stop:
		}
	}()
	return l, ctx.Err()
}

// share divides agents 0..n-1 into contiguous blocks, one per load
// generator, and records each one's.
func (l *loadgens) share(n int) {
	for k, p := range l.procs {
		p.first = k * n / len(l.procs)
		p.count = (k+1)*n/len(l.procs) - p.first
	}
}

// each runs fn on every load generator at once; the first error wins.
func (l *loadgens) each(fn func(p *loadgenProc) error) error {
	errs := make([]error, len(l.procs))
	var wg sync.WaitGroup
	for i, p := range l.procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(p)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// all sends req to every load generator and returns their replies.
func (l *loadgens) all(req lgRequest) ([]*lgReply, error) {
	out := make([]*lgReply, len(l.procs))
	err := l.each(func(p *loadgenProc) error {
		r, err := p.call(req)
		out[p.k] = r
		return err
	})
	return out, err
}

// connect connects agents ms (agent i is ms[i]), each load generator its
// share, with watchers watchers of kind (resume: see lgRequest.Resume).
func (l *loadgens) connect(ms []machineCred, kind string, watchers int, resume bool) ([]*lgReply, error) {
	l.share(len(ms))
	out := make([]*lgReply, len(l.procs))
	err := l.each(func(p *loadgenProc) error {
		r, err := p.call(lgRequest{Op: "connect", Kind: kind, Watchers: watchers, Resume: resume, First: p.first, Agents: ms[p.first : p.first+p.count]})
		out[p.k] = r
		return err
	})
	return out, err
}

// sum adds up the counters of replies.
func sumReplies(rs []*lgReply) lgReply {
	var s lgReply
	for _, r := range rs {
		if r == nil {
			continue
		}
		s.Seconds = max(s.Seconds, r.Seconds)
		s.TryAgain += r.TryAgain
		s.ConnErrors += r.ConnErrors
		s.Refused += r.Refused
		s.ResetAtAccept += r.ResetAtAccept
		s.NoPort += r.NoPort
		s.Unavailable += r.Unavailable
		s.Other += r.Other
		if r.LastOther != "" {
			s.LastOther = r.LastOther
		}
		s.Deliveries += r.Deliveries
		s.Duplicates += r.Duplicates
		s.Spurious += r.Spurious
		s.Down += r.Down
		s.Back += r.Back
		if r.Ends != nil {
			s.Ends = s.Ends.plus(r.Ends, nil)
		}
		if r.Sched != nil {
			s.Sched = s.Sched.plus(r.Sched, nil)
		}
		s.Watching += r.Watching
		s.Resumed += r.Resumed
		s.Reset += r.Reset
		s.RewatchBytes += r.RewatchBytes
		s.FirstBytes += r.FirstBytes
		s.GCCycles += r.GCCycles
		s.Delivered = append(s.Delivered, r.Delivered...)
		s.Events = append(s.Events, r.Events...)
		for d, n := range r.PerDaemon {
			if s.PerDaemon == nil {
				s.PerDaemon = map[int]int{}
			}
			s.PerDaemon[d] += n
		}
	}
	return s
}

// close ends every load generator (its agents' connections close with
// it) and waits for it.
func (l *loadgens) close() {
	if l == nil {
		return
	}
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	for _, p := range l.procs {
		p.in.Close() // the child exits at the end of its input
	}
	for _, p := range l.procs {
		waitOrKill(p.cmd, 30*time.Second)
	}
}

// waitOrKill waits for child process cmd to exit, and kills it if it has
// not within d.
func waitOrKill(cmd *exec.Cmd, d time.Duration) {
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
	}
}

// lgChild is a load generator's state: its agents and what they saw.
type lgChild struct {
	e     *env
	addrs map[string]int // daemon address -> index

	kind   string
	k      int
	resume bool
	agents []*lgAgent
	st     *connectStats

	mu         sync.Mutex
	delivered  []lgDelivery
	events     []lgReconnect
	ends       connEnds // lgReply.Ends
	sched0     connEnds // the waits to run at arm (lgReply.Sched)
	deliveries atomic.Int64
	duplicates atomic.Int64
	spurious   atomic.Int64
	down, back atomic.Int64
	// lgWatch's Watch calls (lgReply.Resumed and after)
	resumed, reset, rewatchBytes, firstBytes atomic.Int64

	drops *dropWatch // the agents' reconnections, once armed
	win   *toolWindow
}

// lgAgent is one simulated agent of a load generator.
type lgAgent struct {
	i int
	m machineCred

	mu      sync.Mutex
	c       *client.Conn
	on      int // the daemon it is on
	servers []string
	sess    *session // lgConns
	// want is the watchers an lgConns session holds: its watch request's
	// (the "watch" op sets it), opened on every session made after that.
	// Who opens them is decided under mu: the op on the session it finds,
	// or the reconnection that replaces a session the op found dropped.
	want int
	seen []map[string]bool // lgWatch: per watcher, the containers seen
	revs []uint64          // lgWatch with resume: per watcher, the revision its events covered
}

// childLoadgen is the hidden command of a load generator: requests on
// stdin, replies on stdout, until stdin ends.
func childLoadgen(stdin io.Reader, stdout, stderr io.Writer) int {
	ctx := context.Background()
	lg := &lgChild{st: &connectStats{}}
	dec := json.NewDecoder(bufio.NewReader(stdin))
	enc := json.NewEncoder(stdout)
	for {
		var req lgRequest
		if err := dec.Decode(&req); err != nil {
			if !errors.Is(err, io.EOF) {
				fmt.Fprintln(stderr, "provisionbench load generator:", err)
			}
			break
		}
		r, err := lg.handle(ctx, req)
		if r == nil {
			r = &lgReply{}
		}
		if err != nil {
			r.Err = err.Error()
		}
		if err := enc.Encode(r); err != nil {
			fmt.Fprintln(stderr, "provisionbench load generator:", err)
			break
		}
	}
	lg.closeAgents()
	return 0
}

func (lg *lgChild) handle(ctx context.Context, req lgRequest) (*lgReply, error) {
	if req.Op != "init" && lg.e == nil {
		return nil, errors.New("not initialised")
	}
	switch req.Op {
	case "init":
		return nil, lg.init(req)
	case "connect":
		return lg.connect(ctx, req)
	case "watch": // lgConns: open the watchers on the logged-in agents
		start := time.Now()
		err := parallel(ctx, len(lg.agents), 64, func(ctx context.Context, j int) error {
			a := lg.agents[j]
			a.mu.Lock()
			a.want = req.Watchers
			s := a.sess
			a.mu.Unlock()
			err := s.watch(ctx, a.m, req.Watchers)
			if err != nil && lg.drops != nil && errors.Is(err, client.ErrConnClosed) {
				// Dropped: counted (down, back), and its reconnection
				// opens the watchers on the session that replaces s.
				return nil
			}
			return err
		})
		return &lgReply{Seconds: time.Since(start).Seconds()}, err
	case "status":
		r := lg.counts()
		if req.Sched {
			r.Sched = lg.schedSinceArm()
		}
		r.PerDaemon = map[int]int{}
		for _, a := range lg.agents {
			a.mu.Lock()
			r.PerDaemon[a.on]++
			if a.sess != nil {
				r.Watching += a.sess.watching.Load()
			}
			a.mu.Unlock()
		}
		return r, nil
	case "window-open":
		lg.win.mark(true)
		return nil, nil
	case "window-close":
		lg.win.mark(false)
		return &lgReply{GCCycles: lg.win.cycles}, nil
	case "results": // the counts, every delivery and every reconnection
		r := lg.counts()
		r.Sched = lg.schedSinceArm()
		lg.mu.Lock()
		r.Delivered, r.Events = lg.delivered, lg.events
		lg.mu.Unlock()
		return r, nil
	case "arm":
		lg.arm()
		return nil, nil
	case "close":
		r := lg.counts()
		r.Sched = lg.schedSinceArm()
		lg.closeAgents()
		return r, nil
	}
	return nil, fmt.Errorf("unknown request %q", req.Op)
}

// init makes the env the agents are dialled through: the daemons'
// addresses and CA, this load generator's source addresses.
func (lg *lgChild) init(req lgRequest) error {
	if len(req.Addrs) == 0 || req.PerAddr < 1 {
		return errors.New("init: no daemon address or source plan")
	}
	if req.Nice != 0 {
		if err := reniceSelf(req.Nice); err != nil {
			return fmt.Errorf("init: %w", err)
		}
	}
	setDialSlots(req.Dials)
	o := &options{bufferSize: req.Buffer, dials: req.Dials, stderr: io.Discard, loadgenGC: loadgenGCQuiet, agentPingTimeout: req.PingTimeout,
		agentKeyExchange: req.KeyExchange,
		sources:          sourcePlan{perAddr: req.PerAddr, base: req.Base}}
	creds := &credentials.Credentials{CACert: req.CACert}
	lg.addrs = map[string]int{}
	var targets []*target
	for i, a := range req.Addrs {
		targets = append(targets, &target{addr: a, creds: creds})
		lg.addrs[a] = i
	}
	lg.e = &env{o: o, t: targets[0], fix: &fixture{model: req.Model, o: o}, targets: targets}
	lg.win = o.newToolWindow()
	return nil
}

func (lg *lgChild) counts() *lgReply {
	lg.mu.Lock()
	ends := maps.Clone(lg.ends)
	lg.mu.Unlock()
	return &lgReply{Ends: ends, TryAgain: lg.st.tryAgain.Load(), ConnErrors: lg.st.dialErr.Load(), Refused: lg.st.refused.Load(), ResetAtAccept: lg.st.reset.Load(), Unavailable: lg.st.unavailable.Load(),
		NoPort: lg.st.noPort.Load(), Other: lg.st.otherErr.Load(), LastOther: deref(lg.st.lastOther.Load()),
		Deliveries: lg.deliveries.Load(), Duplicates: lg.duplicates.Load(), Spurious: lg.spurious.Load(),
		Down: lg.down.Load(), Back: lg.back.Load(),
		Resumed: lg.resumed.Load(), Reset: lg.reset.Load(), RewatchBytes: lg.rewatchBytes.Load(), FirstBytes: lg.firstBytes.Load()}
}

// schedSinceArm is this load generator's goroutines' waits to run since
// arm (nil before it).
func (lg *lgChild) schedSinceArm() connEnds {
	lg.mu.Lock()
	sched0 := lg.sched0
	lg.mu.Unlock()
	if sched0 == nil {
		return nil
	}
	return connEnds{}.plus(readOwnSched(), sched0)
}

// Why an agent's connection ended, as its client saw it (agentEndReason).
const (
	endAgentPing    = "the agent's ping failed or went unanswered (--agent-ping-timeout)"
	endCloseFrame   = "the daemon's close frame, code "
	endNoCloseFrame = "broken without a close frame (the daemon killed, a read or write error)"
)

// agentEndReason classifies err, a client connection's Err once it has
// ended: the agent's own pinger ended it (as Juju's client does when a
// Ping takes over 30 s: under starvation the agents, not the daemons,
// may be the ones that give up), the daemon's close frame (with its
// code), or neither.
func agentEndReason(err error) string {
	var ce *websocket.CloseError
	switch {
	case errors.Is(err, client.ErrPingFailed):
		return endAgentPing
	case errors.As(err, &ce) && ce.Code != websocket.CloseAbnormalClosure: // 1006: gorilla's for none
		return endCloseFrame + strconv.Itoa(ce.Code)
	}
	return endNoCloseFrame
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// connect dials and logs in its agents (agent req.First+j is
// req.Agents[j], on daemon (req.First+j) mod daemons) and opens their
// watchers, 64 at a time.
func (lg *lgChild) connect(ctx context.Context, req lgRequest) (*lgReply, error) {
	lg.closeAgents()
	lg.kind, lg.k, lg.resume = req.Kind, req.Watchers, req.Resume
	lg.e.o.sources.first = req.First
	lg.agents = make([]*lgAgent, len(req.Agents))
	for j, m := range req.Agents {
		lg.agents[j] = &lgAgent{i: req.First + j, m: m}
	}
	start := time.Now()
	err := parallel(ctx, len(lg.agents), 64, func(ctx context.Context, j int) error {
		a := lg.agents[j]
		for attempt := 0; ; attempt++ {
			c, err := lg.e.connectAgent(ctx, a.i, a.m, lg.st)
			if err != nil {
				return err
			}
			err = lg.open(ctx, a, c)
			if err == nil {
				return nil
			}
			c.Close()
			// A connection the daemon ended before the agent had its
			// watchers (its login not done in the daemon's login
			// timeout, the change feed reset under its credentials'
			// watch, a saturated box) is dialled again, as an agent
			// would: counted with the connection errors.
			if !errors.Is(err, client.ErrConnClosed) || attempt+1 == againAttempts {
				return fmt.Errorf("agent %d: %w", a.i, err)
			}
			lg.st.dialErr.Add(1)
			if err := sleepCtx(ctx, backoff(attempt+1)); err != nil {
				return err
			}
		}
	})
	r := lg.counts()
	r.Seconds = time.Since(start).Seconds()
	return r, err
}

// open makes c agent a's connection and opens its watchers on it.
func (lg *lgChild) open(ctx context.Context, a *lgAgent, c *client.Conn) error {
	on := lg.addrs[c.RemoteAddr().String()]
	switch lg.kind {
	case lgConns:
		// Under a.mu: the watch op reads want and the session together
		// (want).
		a.mu.Lock()
		s, err := startSession(ctx, c, a.m, max(lg.k, a.want), lg.st)
		if err != nil {
			a.mu.Unlock()
			return err
		}
		a.sess = s
	default:
		c.StartPinger(time.Minute) // before the watch call: see startSession
		ws, err := lg.watchContainers(ctx, a, c, on)
		if err != nil {
			return err
		}
		for w, sw := range ws {
			lg.loopWatch(a, sw, w, on)
		}
		a.mu.Lock()
	}
	a.c, a.on = c, on
	a.servers = mergeServers(loginServers(c.LoginResult()), a.servers)
	a.mu.Unlock()
	return nil
}

// mergeServers is the addresses an agent keeps after a login: the
// login's list (its daemon first), then those it knew that the list
// leaves out. A daemon that is down is off the list its peers give, so
// an agent that logged in meanwhile would otherwise never go back to it
// (a Juju agent keeps its addresses up to date from a watcher; this one
// keeps every address it has seen).
func mergeServers(login, known []string) []string {
	out := slices.Clone(login)
	for _, s := range known {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// watchContainers opens lg.k WatchContainers watchers on a's machine (one
// bulk call) and checks their first event against what a's watchers had
// seen: the first time it is what they start from; after a reconnection
// each container not seen yet is a delivery, late. With lg.resume, the
// call after a reconnection resumes after the lowest revision a's
// watchers' events covered (the reference agent's way, internal/agent);
// answered watcher reset, it watches afresh. A call, or a bulk call's
// item, answered try again (the daemon's store did not answer in time)
// is made again after a backoff, as an agent would: only the items that
// failed, so no watcher is opened twice.
func (lg *lgChild) watchContainers(ctx context.Context, a *lgAgent, c *client.Conn, on int) ([]*client.StringsWatcher, error) {
	a.mu.Lock()
	first := a.seen == nil
	var from uint64
	if lg.resume && !first && len(a.revs) > 0 {
		from = slices.Min(a.revs)
	}
	a.mu.Unlock()
	out := make([]*client.StringsWatcher, lg.k)
	again := func(n int64) { lg.st.tryAgain.Add(n) }
	err := retryAgain(ctx, lg.k, 0, again, func(ws []int) ([]int, error) {
		return lg.watchSome(ctx, a, c, on, first, from, ws, out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// watchSome makes one WatchContainers call for the watchers of a whose
// indices are in ws and puts the opened ones in out. Items answered try
// again: their indices, with that error (retryAgain's call).
func (lg *lgChild) watchSome(ctx context.Context, a *lgAgent, c *client.Conn, on int, first bool, from uint64, ws []int, out []*client.StringsWatcher) ([]int, error) {
	args := params.WatchContainers{Params: make([]params.WatchContainer, len(ws))}
	for i := range args.Params {
		args.Params[i] = params.WatchContainer{MachineTag: a.m.Tag}
	}
	var raw json.RawMessage
	var rev uint64
	var err error
	switch {
	case !lg.resume:
		err = c.Call(ctx, "Provisioner", 11, "", "WatchContainers", args, &raw)
	case from > 0:
		rev, err = c.CallFrom(ctx, "Provisioner", 11, "", "WatchContainers", from, args, &raw)
		if err == nil {
			lg.resumed.Add(1)
		} else if errors.Is(err, client.ErrWatcherReset) {
			lg.reset.Add(1)
			rev, err = c.CallFrom(ctx, "Provisioner", 11, "", "WatchContainers", 0, args, &raw)
		}
	default:
		rev, err = c.CallFrom(ctx, "Provisioner", 11, "", "WatchContainers", 0, args, &raw)
	}
	if err != nil {
		return nil, err
	}
	if first {
		lg.firstBytes.Add(int64(len(raw)))
	} else {
		lg.rewatchBytes.Add(int64(len(raw)))
	}
	var res params.StringsWatchResults
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("WatchContainers: %w", err)
	}
	if len(res.Results) != len(ws) {
		return nil, fmt.Errorf("WatchContainers: %d results for %d", len(res.Results), len(ws))
	}
	now := time.Now().UnixNano()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen == nil {
		a.seen = make([]map[string]bool, lg.k)
	}
	if lg.resume && len(a.revs) != lg.k {
		a.revs = make([]uint64, lg.k)
	}
	var failed []int
	var again error
	for i, r := range res.Results {
		w := ws[i]
		if r.Error != nil {
			if client.IsCode(r.Error, params.CodeTryAgain) {
				failed, again = append(failed, w), r.Error
				continue
			}
			return nil, fmt.Errorf("WatchContainers: %w", r.Error)
		}
		if a.seen[w] == nil {
			a.seen[w] = map[string]bool{}
		}
		for _, id := range r.Changes {
			if a.seen[w][id] {
				continue
			}
			a.seen[w][id] = true
			if !first {
				lg.deliver(lgDelivery{Agent: a.i, Watcher: w, Daemon: on, ID: id, At: now, Rewatch: true})
			}
		}
		out[w] = client.NewStringsWatcher(c, r.StringsWatcherId)
		if lg.resume {
			a.revs[w] = rev
		}
	}
	return failed, again
}

func (lg *lgChild) deliver(d lgDelivery) {
	lg.deliveries.Add(1)
	lg.mu.Lock()
	lg.delivered = append(lg.delivered, d)
	lg.mu.Unlock()
}

// loopWatch keeps a Next pending on watcher w of a until one fails (its
// connection ended), recording every container not seen before (and,
// with lg.resume, the revision the event covered). Called without a.mu
// held; the completions run on the connection's reader.
func (lg *lgChild) loopWatch(a *lgAgent, sw *client.StringsWatcher, w, on int) {
	got := func(ids []string, rev uint64, err error) {
		now := time.Now().UnixNano()
		if err != nil {
			return
		}
		fresh := 0
		a.mu.Lock()
		for _, id := range ids {
			if a.seen[w][id] {
				lg.duplicates.Add(1)
				continue
			}
			a.seen[w][id] = true
			fresh++
			lg.deliver(lgDelivery{Agent: a.i, Watcher: w, Daemon: on, ID: id, At: now})
		}
		if rev > 0 && w < len(a.revs) {
			a.revs[w] = rev
		}
		a.mu.Unlock()
		if fresh == 0 {
			lg.spurious.Add(1)
		}
		lg.loopWatch(a, sw, w, on)
	}
	if lg.resume {
		sw.GoNextRevision(got)
		return
	}
	sw.GoNext(func(ids []string, err error) { got(ids, 0, err) })
}

// arm makes every agent reconnect when its connection ends: through the
// addresses its login listed (failOver), its watchers opened again, the
// time it was without a daemon recorded; until close. No goroutine waits
// on an agent's connection: its end starts the reconnection's
// (dropWatch), which ends once the agent is back.
func (lg *lgChild) arm() {
	if lg.drops != nil {
		return
	}
	lg.drops = newDropWatch(context.Background())
	lg.mu.Lock()
	lg.sched0 = readOwnSched()
	lg.mu.Unlock()
	for _, a := range lg.agents {
		lg.onDrop(lg.drops, a)
	}
}

// onDrop arms agent a's current connection: when it ends, a is brought
// back (reconnect) and its new connection armed.
func (lg *lgChild) onDrop(drops *dropWatch, a *lgAgent) {
	a.mu.Lock()
	c, from, servers := a.c, a.on, a.servers
	a.mu.Unlock()
	if c == nil {
		return
	}
	drops.on(c, func(ctx context.Context) {
		if lg.reconnect(ctx, a, c, from, servers) {
			lg.onDrop(drops, a)
		}
	})
}

// reconnect brings agent a back after its connection c to daemon from
// ended, recording the drop; it reports false if the reconnections ended
// first.
func (lg *lgChild) reconnect(ctx context.Context, a *lgAgent, c *client.Conn, from int, servers []string) bool {
	drop := time.Now()
	lg.down.Add(1)
	lg.mu.Lock()
	if lg.ends == nil {
		lg.ends = connEnds{}
	}
	lg.ends[agentEndReason(c.Err())]++
	lg.mu.Unlock()
	_, err := lg.e.failOver(ctx, a.i, a.m, servers, lg.st, func(ctx context.Context, nc *client.Conn) error {
		return lg.open(ctx, a, nc)
	})
	if err != nil {
		return false // closing
	}
	back := time.Now()
	lg.down.Add(-1)
	lg.back.Add(1)
	a.mu.Lock()
	to := a.on
	a.mu.Unlock()
	lg.mu.Lock()
	lg.events = append(lg.events, lgReconnect{Agent: a.i, From: from, To: to, Drop: drop.UnixNano(), Back: back.UnixNano()})
	lg.mu.Unlock()
	return true
}

// closeAgents ends the reconnections and closes every agent, and forgets
// what they saw.
func (lg *lgChild) closeAgents() {
	if lg.drops != nil {
		lg.drops.stop()
		lg.drops = nil
	}
	conns := make([]*client.Conn, 0, len(lg.agents))
	for _, a := range lg.agents {
		a.mu.Lock()
		if a.c != nil {
			conns = append(conns, a.c)
		}
		a.mu.Unlock()
	}
	closeAll(conns)
	lg.agents = nil
	lg.mu.Lock()
	lg.delivered, lg.events, lg.ends = nil, nil, nil
	lg.mu.Unlock()
	lg.deliveries.Store(0)
	lg.duplicates.Store(0)
	lg.spurious.Store(0)
	lg.down.Store(0)
	lg.back.Store(0)
	lg.resumed.Store(0)
	lg.reset.Store(0)
	lg.rewatchBytes.Store(0)
	lg.firstBytes.Store(0)
	lg.st = &connectStats{}
}
