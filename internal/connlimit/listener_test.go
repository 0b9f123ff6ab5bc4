package connlimit

import (
	"net/netip"
	"testing"
)

// The default connection cap follows the file limit and the memory, and
// never drops below 64.
func TestDefaultMaxConns(t *testing.T) {
	for _, tc := range []struct {
		files, memory int64
		want          int
	}{
		{1024, 0, 896},
		{1024, 64 << 30, 896},
		{1 << 20, 1 << 30, 1638},
		{20000, 24 << 30, 19872},
		{0, 0, 1 << 20},
		{100, 0, 64},
		{1 << 20, 16 << 20, 64},
	} {
		if got := defaultMaxConns(tc.files, tc.memory); got != tc.want {
			t.Errorf("defaultMaxConns(%d files, %d bytes) = %d; want %d", tc.files, tc.memory, got, tc.want)
		}
	}
	if n := DefaultMaxConns(); n < minDefaultConns {
		t.Errorf("DefaultMaxConns() = %d", n)
	}
}

// The bounds derived from the cap: the operator's eighth (at most 8),
// half the cap for connections that have not logged in, a sixteenth (at
// least 8, at most a quarter of the half) of it for one client; set
// bounds are kept within the cap.
func TestConnLimits(t *testing.T) {
	for _, tc := range []struct {
		max, pending, perClient int
		want                    connLimits
	}{
		{300, 0, 0, connLimits{max: 300, reserve: 8, maxPending: 150, perClient: 18}},
		{896, 0, 0, connLimits{max: 896, reserve: 8, maxPending: 448, perClient: 56}},
		{64, 0, 0, connLimits{max: 64, reserve: 8, maxPending: 32, perClient: 8}},
		{16, 0, 0, connLimits{max: 16, reserve: 2, maxPending: 8, perClient: 2}},
		{3, 0, 0, connLimits{max: 3, reserve: 0, maxPending: 1, perClient: 1}},
		{300, 1000, 500, connLimits{max: 300, reserve: 8, maxPending: 292, perClient: 292}},
		{300, 100, 4, connLimits{max: 300, reserve: 8, maxPending: 100, perClient: 4}},
	} {
		if got := newConnLimits(tc.max, tc.pending, tc.perClient); got != tc.want {
			t.Errorf("newConnLimits(%d, %d, %d) = %+v; want %+v", tc.max, tc.pending, tc.perClient, got, tc.want)
		}
	}
}

// Admission at accept: a client may hold perClient connections that have
// not logged in, all clients maxPending, everyone but the local operator
// the cap less its share; a login or a close gives the pending place
// back; the operator counts against the cap alone.
func TestAdmission(t *testing.T) {
	l := newListener(nil, connLimits{max: 10, reserve: 2, maxPending: 5, perClient: 3}, nil)
	var port uint16
	conn := func(client string, operator bool) *limitConn {
		port++
		return &limitConn{l: l, client: client, operator: operator,
			remote: netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), port)}
	}
	admit := func(c *limitConn, want string) *limitConn {
		t.Helper()
		if got := l.admit(c, false); got != want {
			t.Fatalf("%s (operator %v): refused %q; want %q", c.client, c.operator, got, want)
		}
		return c
	}
	a1, a2, _ := admit(conn("a", false), ""), admit(conn("a", false), ""), admit(conn("a", false), "")
	admit(conn("a", false), RefusedAddress)
	b1 := admit(conn("b", false), "")
	admit(conn("c", false), "")
	admit(conn("d", false), RefusedPending)
	// A login frees a pending place, also for its own client.
	unpend := func(c *limitConn) {
		l.mu.Lock()
		l.unpend(c)
		l.mu.Unlock()
	}
	unpend(a1)
	admit(conn("a", false), "")
	l.closed(b1)
	admit(conn("a", false), RefusedAddress)
	unpend(a2)
	admit(conn("d", false), "")
	if l.Open() != 6 || l.Pending() != 4 {
		t.Fatalf("open %d, pending %d; want 6, 4", l.Open(), l.Pending())
	}
	// Logged in, e leaves its place; f takes the last one the cap less
	// the operator's share has.
	e := admit(conn("e", false), "")
	unpend(e)
	admit(conn("f", false), "")
	admit(conn("g", false), RefusedCap)
	op1 := admit(conn("local user 0", true), "")
	admit(conn("local user 0", true), "")
	admit(conn("local user 0", true), RefusedCap)
	l.closed(op1)
	admit(conn("local user 0", true), "")
	if l.Open() != 10 || l.Pending() != 5 {
		t.Fatalf("open %d, pending %d; want 10, 5", l.Open(), l.Pending())
	}
	if lc := l.lookup("192.0.2.1:1"); lc != a1 {
		t.Fatalf("lookup by remote address: %v", lc)
	}
	if lc := l.lookup("192.0.2.1:5"); lc != nil {
		t.Fatal("lookup found a closed connection")
	}
	// Once the listener is closed (a stop), closes are not counted out.
	l.stopped.Store(true)
	l.closed(a1)
	if l.Open() != 10 {
		t.Fatalf("closed after the listener: open %d, want 10", l.Open())
	}
}

// While the overload gate sheds, everyone is refused for overload but
// the local operator while it holds fewer connections than its share of
// the cap (reserve); a closed operator connection makes room again.
func TestAdmissionWhileShedding(t *testing.T) {
	l := newListener(nil, connLimits{max: 100, reserve: 2, maxPending: 50, perClient: 10}, nil)
	var port uint16
	admit := func(operator, shed bool, want string) *limitConn {
		t.Helper()
		port++
		c := &limitConn{l: l, client: "x", operator: operator, remote: netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), port)}
		if operator {
			c.client = "local user 0"
		}
		if got := l.admit(c, shed); got != want {
			t.Fatalf("operator %v, shedding %v: refused %q; want %q", operator, shed, got, want)
		}
		return c
	}
	admit(false, true, RefusedOverload)
	for range 5 { // the operator's connections made before the overload count too
		admit(true, false, "")
	}
	admit(true, true, RefusedOverload)
	l2 := newListener(nil, connLimits{max: 100, reserve: 2, maxPending: 50, perClient: 10}, nil)
	l = l2
	op := admit(true, true, "")
	admit(true, true, "")
	admit(true, true, RefusedOverload)
	admit(false, false, "")
	l.closed(op)
	admit(true, true, "")
	if l.Open() != 3 || l.Pending() != 1 {
		t.Fatalf("open %d, pending %d; want 3, 1", l.Open(), l.Pending())
	}
}
