package main

import (
	"bytes"
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/provisiond/provisiond/pki"
	"github.com/provisiond/provisiond/rpc/client"
)

func TestFileLimitPlan(t *testing.T) {
	// Enough below the hard limit: the soft limit goes up to it.
	lim, err := fileLimitPlan{max: 20000, need: 5000}.limit(4000)
	if err != nil || lim.Cur != 20000 || lim.Max != 20000 {
		t.Errorf("need under the hard limit: %+v, %v", lim, err)
	}
	// Over it, not root: an error naming the limit and the commands.
	_, err = fileLimitPlan{max: 20000, need: 101024}.limit(100000)
	if err == nil {
		t.Fatal("over the hard limit, not root: no error")
	}
	for _, want := range []string{"RLIMIT_NOFILE", "100000 agents need 101024", "hard limit is 20000", "only root can raise it", "ulimit -Hn 101024", "prlimit --pid", "--nofile=101024:101024", "LimitNOFILE=101024", "--ulimit nofile=101024:101024"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// Root in a container without CAP_SYS_RESOURCE: says so.
	_, err = fileLimitPlan{max: 20000, need: 101024, root: true}.limit(100000)
	if err == nil || !strings.Contains(err.Error(), "without CAP_SYS_RESOURCE") || !strings.Contains(err.Error(), "RLIMIT_NOFILE") {
		t.Errorf("root without CAP_SYS_RESOURCE: %v", err)
	}
	// With it: the hard limit is raised, up to fs.nr_open.
	lim, err = fileLimitPlan{max: 20000, need: 101024, nrOpen: 1 << 20, canRaise: true, root: true}.limit(100000)
	if err != nil || lim.Cur != 101024 || lim.Max != 101024 {
		t.Errorf("root: %+v, %v", lim, err)
	}
	_, err = fileLimitPlan{max: 20000, need: 2001024, nrOpen: 1 << 20, canRaise: true, root: true}.limit(2000000)
	if err == nil || !strings.Contains(err.Error(), "fs.nr_open (1048576)") || !strings.Contains(err.Error(), "sysctl -w fs.nr_open=2001024") {
		t.Errorf("root over fs.nr_open: %v", err)
	}
}

// A run that needs more open files than the box allows fails before it
// starts anything, saying which limit and how to raise it.
func TestFileLimitRefusedBeforeTheRun(t *testing.T) {
	const agents = 2000000
	if hasCapability(capSysResource) && readSysctl("fs/nr_open") >= agents+fileMargin {
		t.Skip("this box would let the run have the files: it would really start 2,000,000 agents")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	start := time.Now()
	code := run(ctx, []string{"conns", "-n", "2000000"}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "RLIMIT_NOFILE") {
		t.Errorf("exit %d, stderr:\n%s", code, errb.String())
	}
	t.Logf("refused in %v: %s", time.Since(start), errb.String())
}

func TestSourcePlan(t *testing.T) {
	p, err := sourcePlanFor(32768, 60999, 100000)
	if err != nil {
		t.Fatal(err)
	}
	if p.ports != 28232 || p.perAddr != 28232/portsPerAgent || p.addrs != 18 {
		t.Errorf("plan %+v", p)
	}
	for _, tc := range []struct {
		agent int
		want  string
	}{
		{0, "127.0.0.2"}, {p.perAddr - 1, "127.0.0.2"}, {p.perAddr, "127.0.0.3"},
		{253 * p.perAddr, "127.0.0.255"}, {254 * p.perAddr, "127.0.1.0"}, {99999, "127.0.0.19"},
	} {
		if got := p.sourceAddr(tc.agent).String(); got != tc.want {
			t.Errorf("agent %d: source %s, want %s", tc.agent, got, tc.want)
		}
	}
	// No two of the largest run's agents past perAddr share an address.
	seen := map[string]int{}
	for i := range 100000 {
		seen[p.sourceAddr(i).String()]++
	}
	if len(seen) != p.addrs || slices.Max(mapValues(seen)) > p.perAddr {
		t.Errorf("%d addresses, at most %d agents each", len(seen), slices.Max(mapValues(seen)))
	}
	if _, err := sourcePlanFor(60000, 60009, 1000000); err == nil || !strings.Contains(err.Error(), "ip_local_port_range") {
		t.Errorf("too few ports: %v", err)
	}
	if s := p.describe(); !strings.Contains(s, "18 addresses from 127.0.0.2") {
		t.Errorf("describe: %q", s)
	}
}

func mapValues(m map[string]int) []int {
	var out []int
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// Agents bind a loopback source address only when the daemon is on IPv4
// loopback, and each source address can reach the daemon's.
func TestLocalAddr(t *testing.T) {
	o := &options{}
	var err error
	if o.sources, err = sourcePlanFor(32768, 60999, 10); err != nil {
		t.Fatal(err)
	}
	for addr, bind := range map[string]bool{"127.0.0.1:17070": true, "127.3.4.5:1": true, "10.0.0.1:17070": false, "[::1]:17070": false, "nonsense": false} {
		if got := o.localAddr(addr, 0) != nil; got != bind {
			t.Errorf("%s: bind %v, want %v", addr, got, bind)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, i := range []int{0, o.sources.perAddr * 300} { // 127.0.0.2 and 127.0.1.46
		d := net.Dialer{LocalAddr: o.localAddr(ln.Addr().String(), i), Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatalf("agent %d from %v: %v", i, d.LocalAddr, err)
		}
		if got := c.LocalAddr().(*net.TCPAddr).IP.String(); got != o.sources.sourceAddr(i).String() {
			t.Errorf("agent %d dialled from %s", i, got)
		}
		c.Close()
	}
}

func TestMaxConnsFlag(t *testing.T) {
	o := &options{sizes: []int{10}, setFlags: map[string]bool{}}
	if f := o.daemonFlags(); slices.Contains(f, "--max-connections") {
		t.Errorf("10 agents: %v", f)
	}
	o.sizes = []int{1 << 30} // above any box's default cap
	f := o.daemonFlags()
	if i := slices.Index(f, "--max-connections"); i < 0 || f[i+1] != "1073742848" {
		t.Errorf("2^30 agents: %v", f)
	}
}

func TestCountLine(t *testing.T) {
	for _, tc := range []struct {
		done, total int64
		elapsed     time.Duration
		want        string
	}{
		{0, 100000, 0, "[                    ]   0% 0/100000"},
		{40000, 100000, 20 * time.Second, "[========            ]  40% 40000/100000 2000/s, 30s left"},
		{100000, 100000, 50 * time.Second, "[====================] 100% 100000/100000 2000/s"},
		{5, 0, time.Second, "5"},
	} {
		if got := countLine(tc.done, tc.total, tc.elapsed); got != tc.want {
			t.Errorf("countLine(%d, %d, %v) = %q, want %q", tc.done, tc.total, tc.elapsed, got, tc.want)
		}
	}
}

// The storm's health watch sees a port listen from /proc/net/tcp.
func TestListeningOn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	c, err := net.Dial("tcp", ln.Addr().String()) // an established socket too
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, known := listeningOn(port)
	if !known {
		t.Skip("no /proc/net/tcp")
	}
	if !l {
		t.Errorf("port %d listens: not seen", port)
	}
	ln.Close()
	if l, _ := listeningOn(port); l {
		t.Errorf("port %d closed: still seen listening", port)
	}
	if l, _ := listeningOn(c.LocalAddr().(*net.TCPAddr).Port); l {
		t.Error("a connected socket's port seen listening")
	}
}

// A dial to a port nothing listens on counts as refused, through the
// client's wrapping.
func TestConnErrRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mat, err := pki.LoadOrCreate(t.TempDir(), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Dial(ctx, client.Config{Addr: addr, CACert: mat.CACertPEM, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}})
	if err == nil {
		t.Fatal("dial of a closed port succeeded")
	}
	var st connectStats
	st.connErr(err)
	if st.dialErr.Load() != 1 || st.refused.Load() != 1 || st.noPort.Load() != 0 {
		t.Errorf("%v: counted %d/%d/%d", err, st.dialErr.Load(), st.refused.Load(), st.noPort.Load())
	}
}
