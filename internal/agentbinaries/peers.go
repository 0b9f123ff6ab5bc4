package agentbinaries

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/provisiond/provisiond/internal/blobstore"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/watcher"
)

// Agent binaries on a controller of several daemons. The
// catalog is in the shared store; the tarballs are not (a 50 MiB value
// per version in etcd would sit in every daemon's replica). Each daemon
// keeps its own copy in its data dir:
//
//   - an upload is acknowledged once it is durable on the daemon that took
//     it (as on one daemon); every other daemon copies it from a peer as
//     soon as it sees the catalog entry (follow), so it survives the loss
//     of the daemon that took it once any other has copied it;
//   - a download from a daemon that has no copy yet fetches it from a peer
//     first (fetchFromPeers), checked against the catalog's SHA-256 and
//     size, then serves it;
//   - peers are the live API servers (state.APIServers), reached over the
//     controller's own TLS (every daemon presents the controller's
//     certificate); a peer asked with the peerHeader serves only what it
//     holds, so no request goes round the daemons.
//
// On every store, follow also removes the copies of entries no longer in
// the catalog (remove-agent-binaries), except blobs being stored now.

// peerHeader marks a download by another daemon of the controller: it is
// answered from this daemon's own copy only. Anyone may send it; it only
// narrows what the request can do.
const peerHeader = "X-Provisiond-Peer"

// peerTimeout bounds one copy from a peer.
const peerTimeout = fetchTimeout

// Start starts the goroutine that keeps this daemon's copies in line with
// the catalog; the daemon's Shutdown stops it (Stop) before the state
// closes.
func (a *Server) Start() {
	if a.cfg.Shared {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(a.cfg.CACertPEM)
		a.peers = &http.Client{Timeout: peerTimeout, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "juju-apiserver", MinVersion: tls.VersionTLS12},
		}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.stopFollow = cancel
	a.followWG.Add(1)
	go func() {
		defer a.followWG.Done()
		a.follow(ctx)
	}()
}

// Stop stops what Start started and waits for it; a nil Server (a daemon
// that failed to start) or one never started is a no-op.
func (a *Server) Stop() {
	if a == nil || a.stopFollow == nil {
		return
	}
	a.stopFollow()
	a.followWG.Wait()
	if a.peers != nil {
		a.peers.CloseIdleConnections()
	}
}

// follow syncs at start and on every change of the catalog.
func (a *Server) follow(ctx context.Context) {
	w := watcher.NewNotify()
	w.OnStop(a.cfg.Hub.Subscribe(watcher.Filter{Kind: state.KindTools, AllModels: true}, w.Sink()))
	defer w.Stop()
	w.Trigger() // what the catalog held before this daemon subscribed
	backoff := time.Second
	for {
		if err := w.Next(ctx); err != nil {
			return
		}
		if err := a.reconcile(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("agent binaries: cannot bring this daemon's copies in line with the catalog; trying again",
				"err", err, "in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, time.Minute)
			w.Trigger()
			continue
		}
		backoff = time.Second
	}
}

// reconcile removes the copies of entries gone from the catalog and, on a
// shared store, copies the stored entries this daemon lacks from peers.
func (a *Server) reconcile(ctx context.Context) error {
	held, err := a.store.List(ctx)
	if err != nil {
		return err
	}
	a.mu.Lock()
	catalog, err := a.state.AgentBinaryCatalog(ctx)
	if err != nil {
		a.mu.Unlock()
		return err
	}
	want := map[string]state.AgentBinary{}
	for _, b := range catalog {
		if b.Stored {
			want[blobName(b)] = b
		}
	}
	// Under a.mu: a blob being stored is marked busy until its catalog
	// entry commits, so it is either in the catalog read above or busy.
	var removed []string
	for _, name := range held {
		if _, ok := want[name]; ok || a.busy[name] > 0 {
			continue
		}
		if err := a.store.Remove(ctx, name); err != nil && !errors.Is(err, blobstore.ErrNotFound) {
			a.mu.Unlock()
			return err
		}
		removed = append(removed, name)
	}
	a.mu.Unlock()
	for _, name := range removed {
		a.log.Info("agent binaries: removed this daemon's copy of an entry no longer in the catalog", "blob", name)
	}
	if a.peers == nil {
		return nil
	}
	var errs []error
	for name, b := range want {
		if slices.Contains(held, name) {
			continue
		}
		if err := a.fetchFromPeers(ctx, b); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// markBusy keeps a blob being stored from reconcile's removal until done is
// called (after its catalog entry commits, or it failed).
func (a *Server) markBusy(name string) (done func()) {
	a.mu.Lock()
	a.busy[name]++
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		if a.busy[name]--; a.busy[name] <= 0 {
			delete(a.busy, name)
		}
		a.mu.Unlock()
	}
}

// versionLock is the per-version mutex of fetches into the store.
func (a *Server) versionLock(version string) func() {
	a.mu.Lock()
	m := a.fetching[version]
	if m == nil {
		m = new(sync.Mutex)
		a.fetching[version] = m
	}
	a.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// fetchFromPeers copies b from the first live peer that has it. It
// returns nil if this daemon holds b already.
func (a *Server) fetchFromPeers(ctx context.Context, b state.AgentBinary) error {
	unlock := a.versionLock(b.Version)
	defer unlock()
	name := blobName(b)
	if f, _, err := a.store.Open(ctx, name); err == nil {
		f.Close()
		return nil // copied while this one waited
	}
	servers, err := a.state.APIServers(ctx)
	if err != nil {
		return err
	}
	var tried []string
	for _, s := range servers {
		if s.ID == a.cfg.ServerID {
			continue
		}
		for _, hp := range s.Addresses {
			addr := net.JoinHostPort(hp.Value, strconv.Itoa(hp.Port))
			err := a.copyFrom(ctx, addr, b)
			if err == nil {
				a.log.Info("agent binaries: copied from a peer", "version", b.Version, "peer", s.ID, "addr", addr)
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			tried = append(tried, fmt.Sprintf("%s (%s): %v", s.ID, addr, err))
		}
	}
	if len(tried) == 0 {
		return fmt.Errorf("agent binaries %s: no other daemon to copy them from", b.Version)
	}
	return fmt.Errorf("agent binaries %s: no other daemon could give them: %s", b.Version, tried)
}

// copyFrom downloads b from the daemon at addr into the store.
func (a *Server) copyFrom(ctx context.Context, addr string, b state.AgentBinary) error {
	ctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/tools/"+b.Version, nil)
	if err != nil {
		return err
	}
	req.Header.Set(peerHeader, a.cfg.ServerID)
	resp, err := a.peers.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	done := a.markBusy(blobName(b))
	defer done()
	return a.store.Put(ctx, blobName(b), resp.Body, b.Size, b.SHA256)
}
