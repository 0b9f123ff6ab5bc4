package etcdtest

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// TestProxyBlocksAndHeals: bytes pass through the proxy; blocked, none do
// (the sockets stay open); healed, what was sent meanwhile arrives.
func TestProxyBlocksAndHeals(t *testing.T) {
	addr := serveTCP(t, func(c net.Conn) { // an echo server of lines
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if _, err := c.Write([]byte(line)); err != nil {
				return
			}
		}
	})
	p, err := NewProxy("127.0.0.1", "http://"+addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	echo := func(s string, within time.Duration) (string, error) {
		if _, err := c.Write([]byte(s + "\n")); err != nil {
			return "", err
		}
		_ = c.SetReadDeadline(time.Now().Add(within))
		return r.ReadString('\n')
	}
	if got, err := echo("one", 10*time.Second); err != nil || got != "one\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	p.Block(true)
	if got, err := echo("two", 200*time.Millisecond); err == nil {
		t.Fatalf("blocked, yet %q came back", got)
	}
	p.Block(false)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "two\n" {
		t.Fatalf("healed: %q, %v; want what was sent while blocked", got, err)
	}
}

// TestProxyReset: a reset closes the connections through the proxy (the
// client reads EOF); a new connection passes again.
func TestProxyReset(t *testing.T) {
	addr := serveTCP(t, func(c net.Conn) { // one line per connection, then held until it ends
		_, _ = c.Write([]byte("hello\n"))
		_, _ = c.Read(make([]byte, 1))
	})
	p, err := NewProxy("127.0.0.1", "http://"+addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", p.ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(c)
		if got, err := r.ReadString('\n'); err != nil || got != "hello\n" {
			t.Fatalf("through the proxy: %q, %v", got, err)
		}
		return c, r
	}
	c, r := dial()
	defer c.Close()
	p.Reset()
	if got, err := r.ReadString('\n'); err == nil {
		t.Fatalf("reset, yet %q came", got)
	}
	c2, _ := dial()
	c2.Close()
}

// serveTCP serves each connection of a loopback listener with handle, on
// a goroutine that ends with it (handle's connection is closed after it);
// the listener closes when the test ends. It returns the listener's
// address.
func serveTCP(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() { // ends with the listener
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { // ends with the connection
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().String()
}
