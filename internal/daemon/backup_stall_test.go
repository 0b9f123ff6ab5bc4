package daemon_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/boltstore"
)

// A backup client that stops reading holds no read
// transaction while it stalls: the snapshot was copied to a temporary
// file first. So no read transaction is open while the client stalls
// (bbolt's count of them), writes that overwrite the same record reuse
// the pages they free and the database does not grow; logins and /health
// go on; when the client goes, the temporary file is removed. (The write
// timeout dropping a stalled client is TestBackupStalledClientDropped's;
// here it is longer than the test, so every overwrite runs while the
// client stalls however slow the machine.)
//
// The growth is bbolt's own size (its high-water page, tx.Size), not the
// file's: bbolt grows the file 16 MiB (its AllocSize) past the high-water
// page whenever that page passes the end of the file, so the file's size
// jumps by 16-19 MiB or not at all for the same few pages of growth (what
// made this test fail at random before, with no reader held). The
// high-water page moves a little without any backup too: a commit that
// overlaps a reader cannot reuse the pages the commit before it freed.
// The overwritten value and the filler are each alone in a bucket of
// their own: in a shared leaf (bbolt does not split a leaf of four keys or
// fewer, whatever their size) each overwrite would rewrite the megabytes
// of its neighbours too. The growth alone would not show a held reader
// for sure: bbolt 1.4 also reuses the pages of versions written and freed
// after a reader began (the same overwrites with a reader held grew the
// database by 0-7.8 MiB), hence the count of readers.
func TestBackupStalledClient(t *testing.T) {
	const (
		overwrites = 200
		valueSize  = 64 << 10
		// Measured on a loaded machine: 0-76 KiB while a backup client
		// stalls.
		maxGrowth = 1 << 20
	)
	d := start(t, func(c *daemon.Config) { c.WriteTimeout = time.Hour })
	creds := d.Credentials()
	bs := boltStore(t, d)
	fillBackup(t, bs)
	value := bytes.Repeat([]byte("y"), valueSize)
	overwrite := func() {
		t.Helper()
		for i := 0; i < overwrites; i++ {
			value[0] = byte(i)
			if _, err := bs.Update(context.Background(), func(tx store.Txn) error {
				return tx.Put("backupchurn/x", value)
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The file's size less what the history of commits takes: each
	// overwrite's record keeps the value before and after (128 KiB), and
	// is kept, where the value's freed pages are for reuse.
	boltSize := func() int64 {
		t.Helper()
		in, err := bs.Inspect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		hs, err := bs.HistoryStats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return in.SizeBytes - hs.Bytes
	}
	// The measure sees a reader.
	held, release := make(chan struct{}), make(chan struct{})
	viewDone := make(chan error, 1)
	go func() {
		viewDone <- bs.View(context.Background(), func(store.Reader) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	if n := bs.OpenReaders(); n < 1 {
		t.Fatalf("%d read transactions open while one is held", n)
	}
	close(release)
	if err := <-viewDone; err != nil {
		t.Fatal(err)
	}
	overwrite() // the value in place, its freed pages on the freelist

	// A client that reads the response's first bytes, then nothing.
	conn := stalledBackup(t, d)
	defer conn.Close()
	// Nothing else reads here but for moments (a login, a probe): a
	// reader held for the stall never lets the count reach 0.
	waitFor(t, "no read transaction open while the backup client stalls", func() bool { return bs.OpenReaders() == 0 })
	before := boltSize()
	overwrite()
	grown := boltSize() - before
	t.Logf("%d overwrites of a %d KiB value while a backup client stalls: database +%d KiB", overwrites, valueSize>>10, grown>>10)
	if grown > maxGrowth {
		t.Errorf("the database grew by %d KiB while a backup client stalled: a read transaction is held", grown>>10)
	}
	if m, _ := filepath.Glob(filepath.Join(d.DataDir(), ".backup-*")); len(m) != 1 {
		t.Fatalf("temporary snapshots while the client stalls: %v; want one", m)
	}
	loginAdmin(t, d, creds.DefaultModelUUID)
	if code, body := httpGet(t, d, "/health"); code != http.StatusOK {
		t.Errorf("/health while a backup client stalls: %d %s", code, body)
	}
	// The client goes: the handler's write fails, and it removes the
	// snapshot's temporary file.
	conn.Close()
	waitFor(t, "the snapshot's temporary file to go", func() bool {
		m, _ := filepath.Glob(filepath.Join(d.DataDir(), ".backup-*"))
		return len(m) == 0
	})
}

// A backup client that stops reading is dropped after --write-timeout:
// the handler gives up and removes the snapshot's temporary file; what the
// client then reads ends short of the archive; the next backup works.
func TestBackupStalledClientDropped(t *testing.T) {
	const writeTimeout = 2 * time.Second
	d := start(t, func(c *daemon.Config) { c.WriteTimeout = writeTimeout })
	creds := d.Credentials()
	fillBackup(t, boltStore(t, d))
	conn := stalledBackup(t, d)
	defer conn.Close()
	stalled := time.Now()
	waitFor(t, "the snapshot's temporary file to go", func() bool {
		m, _ := filepath.Glob(filepath.Join(d.DataDir(), ".backup-*"))
		return len(m) == 0
	})
	t.Logf("the stalled client was dropped %v after its first 4 KiB (write timeout %v)", time.Since(stalled).Round(time.Millisecond), writeTimeout)
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	if n, _ := io.Copy(io.Discard, conn); n >= fillerSize {
		t.Errorf("the stalled client read %d more bytes after the write timeout: the whole archive", n)
	}
	if code, _ := httpGetAuth(t, d, "/backup", "admin", creds.AdminPassword); code != http.StatusOK {
		t.Fatalf("a backup after the stalled one: %d", code)
	}
}

// fillerSize is what fillBackup adds to the database.
const fillerSize = 8 << 20

// fillBackup adds 8 MiB to the database, more than the socket buffers:
// a 1 MiB value in each of 8 kinds of their own, so no commit rewrites
// another's (writing them to one bucket would rewrite the leaf holding
// the others, and leave megabytes of free pages behind).
func fillBackup(t *testing.T, bs *boltstore.Store) {
	t.Helper()
	big := bytes.Repeat([]byte("x"), fillerSize/8)
	if _, err := bs.Update(context.Background(), func(tx store.Txn) error {
		for i := 0; i < 8; i++ {
			if err := tx.Put(fmt.Sprintf("backupfiller%d/x", i), big); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// boltStore returns d's store, which must be bbolt.
func boltStore(t *testing.T, d *daemon.Daemon) *boltstore.Store {
	t.Helper()
	bs, ok := d.State().Store().(*boltstore.Store)
	if !ok {
		t.Fatalf("the daemon's store is a %T, not bbolt", d.State().Store())
	}
	return bs
}

// stalledBackup sends GET /backup and reads its status line and 4 KiB of
// body, then leaves the rest unread; it returns the connection.
func stalledBackup(t *testing.T, d *daemon.Daemon) *tls.Conn {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(d.Credentials().CACert))
	// A small receive buffer, so the archive does not fit in the socket
	// buffers and the server's writes block.
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10) })
	}}
	conn, err := tls.DialWithDialer(dialer, "tcp", d.Addr(), &tls.Config{RootCAs: pool, ServerName: "juju-apiserver"})
	if err != nil {
		t.Fatal(err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte("admin:" + d.Credentials().AdminPassword))
	fmt.Fprintf(conn, "GET /backup HTTP/1.1\r\nHost: juju-apiserver\r\nAuthorization: Basic %s\r\n\r\n", auth)
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReaderSize(conn, 4096)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("backup response %q: %v", line, err)
	}
	if _, err := br.Peek(4096); err != nil {
		t.Fatal(err)
	}
	return conn
}

func httpGet(t *testing.T, d *daemon.Daemon, path string) (int, string) {
	return httpGetAuth(t, d, path, "", "")
}

func httpGetAuth(t *testing.T, d *daemon.Daemon, path, user, password string) (int, string) {
	t.Helper()
	tr := httpsTransport(d)
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, "https://"+d.Addr()+path, nil)
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// /health reports a store that cannot commit: while one transaction takes
// longer than Config.HealthTimeout (here 20 ms, against a CAAS report of
// 300 units in one transaction), a probe queued behind it does not come back in time, and
// /health says 503 "store cannot commit: ..."; once the writer is free it
// says ok again.
func TestHealthReportsAStoreThatCannotCommit(t *testing.T) {
	d := start(t, func(c *daemon.Config) { c.HealthTimeout = 20 * time.Millisecond })
	if code, body := httpGet(t, d, "/health"); code != http.StatusOK {
		t.Fatalf("/health before: %d %s", code, body)
	}
	// A commit that does not come back: its function holds the store's
	// writer until released, so every later write (the probe's too) queues
	// behind it, as behind a disk that stopped answering.
	release := make(chan struct{})
	held := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := d.State().Store().Update(context.Background(), func(store.Txn) error {
			close(held)
			<-release
			return nil
		})
		done <- err
	}()
	<-held
	unhealthy := ""
	waitFor(t, "/health to say 503 while the writer is held", func() bool {
		code, body := httpGet(t, d, "/health")
		unhealthy = body
		return code == http.StatusServiceUnavailable
	})
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(unhealthy, "store cannot commit: a write has waited ") {
		t.Fatalf("/health while the writer is held: %q; want 503 store cannot commit", unhealthy)
	}
	t.Logf("/health while the writer is held: %s", strings.TrimSpace(unhealthy))
	waitFor(t, "/health to say ok again", func() bool {
		code, _ := httpGet(t, d, "/health")
		return code == http.StatusOK
	})
}
