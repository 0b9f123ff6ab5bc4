package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/provisiond/provisiond/rpc/client"
)

// healthWatch measures, during a storm, when the restarted daemon starts
// listening and how long its /health takes to answer from then on,
// however many agents are queueing at the same address.
//
// Listening is when a socket listens on the daemon's port: seen in
// /proc/net/tcp every 1 ms (or, where that is not there, the first TCP
// connect that succeeds). From then on /health is asked in a loop, one
// request at a time on a new connection from 127.0.0.1 (the agents come
// from 127.0.0.2 and up), each given healthProbeTimeout; its own
// goroutine runs until ctx ends.
//
// The watch runs in a process of its own (childHealth, the tool
// re-executed): in the tool's process its timers and reads would wait
// behind the goroutines of 100,000 agents, and the figures would be the
// load generator's scheduling as much as the daemon's answer.
type healthWatch struct {
	addr  string
	httpc *http.Client

	mu        sync.Mutex
	listening time.Time     // zero: not seen yet
	firstOK   time.Time     // the end of the first 200 after listening
	probes    []healthProbe // after firstOK
	failed    int           // probes after firstOK that failed or were not 200
	done      chan struct{}
}

type healthProbe struct {
	took time.Duration
	ok   bool
	// The probe's phases: TCP connect, TLS handshake, and from the
	// request written to the first byte of the answer.
	connect, handshake, answer time.Duration
}

const (
	listenProbeEvery   = time.Millisecond
	listenProbeTimeout = 100 * time.Millisecond
	healthProbeTimeout = 30 * time.Second
	healthProbeEvery   = 50 * time.Millisecond
)

// newHealthWatch returns a healthWatch of addr, whose TLS is verified
// with the CA in caPEM.
func newHealthWatch(addr string, caPEM []byte) *healthWatch {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	hc := &http.Client{
		Timeout: healthProbeTimeout,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: client.DefaultServerName},
			DisableKeepAlives: true,
		},
	}
	return &healthWatch{addr: addr, httpc: hc, done: make(chan struct{})}
}

// listeningOn reports whether a TCP socket listens on port, from
// /proc/net/tcp, whose listening sockets come first (so reading stops at
// the first other one); known is false where it cannot be read.
func listeningOn(port int) (listening, known bool) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return false, false
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", port)
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 4 || fs[3] != "0A" { // past the listening sockets
			return false, true
		}
		if strings.HasSuffix(fs[1], want) {
			return true, true
		}
	}
	return false, true
}

// healthReport is what the health watch process tells the tool: times
// as Unix nanoseconds (0: not seen).
type healthReport struct {
	Listening int64 `json:"listening"`
	FirstOK   int64 `json:"first-ok"`
	MaxProbe  int64 `json:"max-probe"`
	// The slowest probe's phases (nanoseconds).
	MaxConnect   int64 `json:"max-connect"`
	MaxHandshake int64 `json:"max-handshake"`
	MaxAnswer    int64 `json:"max-answer"`
	Probes       int   `json:"probes"`
	Failed       int   `json:"failed"`
}

// childHealthCmd is the hidden command of the health watch process: it
// watches --addr (TLS verified with --ca-pem), says "watching" once it
// does, and when its stdin ends (and /health has answered once, or
// healthProbeTimeout has passed) prints a healthReport as JSON.
const childHealthCmd = "internal-health"

func childHealth(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(childHealthCmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "", "")
	ca := fs.String("ca-pem", "", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := newHealthWatch(*addr, []byte(*ca))
	go h.run(ctx)
	fmt.Fprintln(stdout, "watching")
	_, _ = io.Copy(io.Discard, stdin)
	f := h.figures()
	for deadline := time.Now().Add(healthProbeTimeout); f.firstOK.IsZero() && time.Now().Before(deadline); f = h.figures() {
		time.Sleep(10 * time.Millisecond) // a small storm can be all back first
	}
	cancel()
	<-h.done
	rep := healthReport{MaxProbe: int64(f.maxProbe), Probes: f.probes, Failed: f.failed,
		MaxConnect: int64(f.slowest.connect), MaxHandshake: int64(f.slowest.handshake), MaxAnswer: int64(f.slowest.answer)}
	if !f.listening.IsZero() {
		rep.Listening = f.listening.UnixNano()
	}
	if !f.firstOK.IsZero() {
		rep.FirstOK = f.firstOK.UnixNano()
	}
	if err := json.NewEncoder(stdout).Encode(rep); err != nil {
		return 1
	}
	return 0
}

// healthProc is a running health watch process.
type healthProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// watchHealth starts the health watch process on t's address and waits
// until it watches; call it once the old daemon has stopped listening.
func (t *target) watchHealth(ctx context.Context) (*healthProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	hp := &healthProc{cmd: exec.Command(self, childHealthCmd, "--addr", t.addr, "--ca-pem", t.creds.CACert)}
	hp.cmd.Stderr = t.logw
	hp.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if hp.stdin, err = hp.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := hp.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	hp.out = bufio.NewReader(out)
	if err := hp.cmd.Start(); err != nil {
		return nil, err
	}
	line := make(chan string, 1)
	go func() { l, _ := hp.out.ReadString('\n'); line <- l }()
	select {
	case l := <-line:
		if strings.TrimSpace(l) == "watching" {
			return hp, nil
		}
		err = fmt.Errorf("health watch said %q", l)
	case <-ctx.Done():
		err = ctx.Err()
	case <-time.After(time.Minute):
		err = errors.New("health watch did not start within a minute")
	}
	hp.stdin.Close()
	_ = hp.cmd.Process.Kill()
	_ = hp.cmd.Wait()
	return nil, err
}

// finish ends the watch and returns what it saw.
func (hp *healthProc) finish() (healthFigures, error) {
	hp.stdin.Close()
	data, rerr := io.ReadAll(hp.out)
	if err := hp.cmd.Wait(); err != nil {
		return healthFigures{}, fmt.Errorf("health watch: %w", err)
	}
	var r healthReport
	if err := json.Unmarshal(data, &r); err != nil {
		return healthFigures{}, fmt.Errorf("health watch said %q (%v): %w", data, rerr, err)
	}
	f := healthFigures{maxProbe: time.Duration(r.MaxProbe), probes: r.Probes, failed: r.Failed,
		slowest: healthProbe{connect: time.Duration(r.MaxConnect), handshake: time.Duration(r.MaxHandshake), answer: time.Duration(r.MaxAnswer)}}
	if r.Listening != 0 {
		f.listening = time.Unix(0, r.Listening)
	}
	if r.FirstOK != 0 {
		f.firstOK = time.Unix(0, r.FirstOK)
	}
	return f, nil
}

func (h *healthWatch) run(ctx context.Context) {
	defer close(h.done)
	d := net.Dialer{Timeout: listenProbeTimeout}
	_, portStr, _ := net.SplitHostPort(h.addr)
	port, _ := strconv.Atoi(portStr)
	for {
		if l, known := listeningOn(port); known {
			if l {
				break
			}
		} else if c, err := d.DialContext(ctx, "tcp", h.addr); err == nil {
			c.Close()
			break
		}
		if sleepCtx(ctx, listenProbeEvery) != nil {
			return
		}
	}
	h.mu.Lock()
	h.listening = time.Now()
	h.mu.Unlock()
	for ctx.Err() == nil {
		t0 := time.Now()
		p := h.probe(ctx)
		ok := p.ok
		now := time.Now()
		p.took = now.Sub(t0)
		h.mu.Lock()
		switch {
		case !h.firstOK.IsZero():
			h.probes = append(h.probes, p)
			if !ok && ctx.Err() == nil {
				h.failed++
			}
		case ok:
			h.firstOK = now
		}
		h.mu.Unlock()
		if sleepCtx(ctx, healthProbeEvery) != nil {
			return
		}
	}
}

// probe asks /health once and reports whether it said 200, and how long
// its phases took. (The trace's callbacks may run on the transport's dial
// goroutine after Do has returned: they take mu.)
func (h *healthWatch) probe(ctx context.Context) healthProbe {
	var (
		mu                        sync.Mutex
		p                         healthProbe
		connStart, tlsStart, sent time.Time
	)
	at := func(f func()) { mu.Lock(); f(); mu.Unlock() }
	trace := &httptrace.ClientTrace{
		ConnectStart:         func(string, string) { at(func() { connStart = time.Now() }) },
		ConnectDone:          func(string, string, error) { at(func() { p.connect = time.Since(connStart) }) },
		TLSHandshakeStart:    func() { at(func() { tlsStart = time.Now() }) },
		TLSHandshakeDone:     func(tls.ConnectionState, error) { at(func() { p.handshake = time.Since(tlsStart) }) },
		WroteRequest:         func(httptrace.WroteRequestInfo) { at(func() { sent = time.Now() }) },
		GotFirstResponseByte: func() { at(func() { p.answer = time.Since(sent) }) },
	}
	ok := false
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodGet, "https://"+h.addr+"/health", nil)
	if err == nil {
		var resp *http.Response
		if resp, err = h.httpc.Do(req); err == nil {
			resp.Body.Close()
			ok = resp.StatusCode == http.StatusOK
		}
	}
	mu.Lock()
	defer mu.Unlock()
	p.ok = ok
	return p
}

// healthFigures is what a healthWatch saw.
type healthFigures struct {
	listening, firstOK time.Time // zero: not seen
	maxProbe           time.Duration
	slowest            healthProbe // the phases of the slowest probe
	probes, failed     int
}

// figures returns what was seen so far (the watch goes on).
func (h *healthWatch) figures() healthFigures {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := healthFigures{listening: h.listening, firstOK: h.firstOK, probes: len(h.probes), failed: h.failed}
	for _, p := range h.probes {
		if p.took > f.maxProbe {
			f.maxProbe, f.slowest = p.took, p
		}
	}
	return f
}
