package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/provisiond/provisiond/state/store"
)

// Prefixes of controllers sharing one etcd must not nest: a store's
// replica holds every key under its prefix, so a controller on /a/ would
// load the records of one on /a/b/ (the other's password hashes and, in
// its identity record, its CA key and passwords), and its backups would
// hold them. So each controller's prefix is registered in etcd under a
// key of its own outside every prefix (prefixes begin with "/", the
// registry does not): PrefixRegistry + prefix. ClaimPrefix registers the
// store's prefix in one transaction that fails if a prefix containing it
// or contained in it is registered: of two controllers starting at once on
// nested prefixes, one commits first and the other is refused.
//
// A registration stays when its controller's keys are removed (etcdctl
// del --prefix): remove it too (etcdctl del PrefixRegistry+prefix), or a
// controller nesting with it is refused, with a message saying so.

// PrefixRegistry is the etcd key prefix under which each controller's
// prefix is registered (the key is PrefixRegistry + prefix, e.g.
// "provisiond/prefixes/provisiond/" for "/provisiond/").
const PrefixRegistry = "provisiond/prefixes"

// ErrNestedPrefix is returned by ClaimPrefix for a prefix that contains,
// or is contained in, another controller's.
var ErrNestedPrefix = errors.New("the etcd prefix nests with another controller's")

// registration is the value of a prefix's registry key.
type registration struct {
	Since time.Time `json:"since"` // when it was registered
	By    string    `json:"by"`    // the host and process that registered it
	Store string    `json:"store"` // the id of the store that registered it
}

// RegistryKey is the registry key of a controller's prefix.
func RegistryKey(prefix string) string { return PrefixRegistry + prefix }

// ClaimPrefix registers the store's prefix as a controller's (see above),
// unless it is registered already; it fails with ErrNestedPrefix,
// naming the other prefix, if a prefix containing it or contained in it
// is registered. A daemon calls it before it serves, as do migrate and
// restore on their etcd side. It needs read and write access to the keys
// under PrefixRegistry when etcd's auth is enabled.
func (s *Store) ClaimPrefix(ctx context.Context) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	if !strings.HasPrefix(s.prefix, "/") {
		return fmt.Errorf("etcdstore: prefix %q does not begin with /", s.prefix)
	}
	key := RegistryKey(s.prefix)
	var cmps []clientv3.Cmp
	var others []clientv3.Op // what conflicts, read when the compares fail
	for _, a := range ancestors(s.prefix) {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(RegistryKey(a)), "=", 0))
		others = append(others, clientv3.OpGet(RegistryKey(a)))
	}
	from, to := key+"\x00", clientv3.GetPrefixRangeEnd(key)
	cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(from), "=", 0).WithRange(to))
	others = append(others, clientv3.OpGet(from, clientv3.WithRange(to), clientv3.WithLimit(1)))
	host, _ := os.Hostname()
	val, err := json.Marshal(registration{Since: time.Now().UTC().Round(time.Second), By: fmt.Sprintf("%s/%d", host, os.Getpid()), Store: s.id})
	if err != nil {
		return err
	}
	// The transaction is idempotent (it puts the key only where it is
	// missing), so one that failed for want of an answer (etcd slow or
	// electing a leader, the connection cut by the member watch) is sent
	// again until ctx ends: a daemon starting while etcd is slow starts.
	backoff := 100 * time.Millisecond
	var resp *clientv3.TxnResponse
	for {
		rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		resp, err = s.cli.Txn(rctx).If(cmps...).Then(
			clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
				[]clientv3.Op{clientv3.OpPut(key, string(val))}, []clientv3.Op{clientv3.OpGet(key)}),
		).Else(others...).Commit()
		cancel()
		if err == nil || !unanswered(err) {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("etcdstore: registering the prefix: %w: etcd did not answer before %w: %v", store.ErrUnavailable, ctx.Err(), err)
		}
		s.log.Warn("registering the etcd prefix: trying again", "key", key, "err", err, "retry-in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		backoff = min(2*backoff, time.Second)
	}
	if errors.Is(err, rpctypes.ErrPermissionDenied) {
		return fmt.Errorf("etcdstore: registering the prefix %s: etcd refuses this user the prefix registry (%v): grant its role readwrite on the keys under %s/ (etcdctl role grant-permission ROLE --prefix=true readwrite %s/)",
			s.prefix, err, PrefixRegistry, PrefixRegistry)
	}
	if err != nil {
		return s.fail(ctx, "registering the prefix", err)
	}
	if resp.Succeeded {
		inner := resp.Responses[0].GetResponseTxn()
		switch {
		case inner.GetSucceeded():
			s.claimed.Store(resp.Header.Revision)
			s.log.Info("registered the etcd prefix", "key", key)
		case registeredBy(inner) == s.id:
			// An earlier try of ours committed; its answer was lost.
			s.claimed.Store(inner.Responses[0].GetResponseRange().Kvs[0].CreateRevision)
			s.log.Info("registered the etcd prefix", "key", key)
		}
		return nil
	}
	var conflict *mvccpb.KeyValue
	for _, r := range resp.Responses {
		if kvs := r.GetResponseRange().GetKvs(); conflict == nil && len(kvs) > 0 {
			conflict = kvs[0]
		}
	}
	if conflict != nil {
		other := strings.TrimPrefix(string(conflict.Key), PrefixRegistry)
		rel := "is inside"
		if strings.HasPrefix(other, s.prefix) {
			rel = "contains"
		}
		var reg registration
		_ = json.Unmarshal(conflict.Value, &reg)
		return fmt.Errorf("etcdstore: %w: %s %s %s, another controller's (registered %s by %s): a controller's replica holds every key under its prefix, "+
			"so one would load the other's records, secrets included; use a prefix that neither contains nor is contained in another's "+
			"(etcdctl get --prefix --keys-only %s/ lists them); if the controller on %s is gone, remove its registration: etcdctl del %s",
			ErrNestedPrefix, s.prefix, rel, other, reg.Since.Format(time.RFC3339), reg.By, PrefixRegistry, other, string(conflict.Key))
	}
	// The conflicting registration went between the compare and the read.
	return fmt.Errorf("etcdstore: %w: %s nests with a prefix registered under %s/ (etcdctl get --prefix --keys-only %s/)",
		ErrNestedPrefix, s.prefix, PrefixRegistry, PrefixRegistry)
}

// registeredBy is the store that made the registration an inner
// transaction of ClaimPrefix that failed read ("" if unknown).
func registeredBy(inner *etcdserverpb.TxnResponse) string {
	if len(inner.GetResponses()) == 0 {
		return ""
	}
	var reg registration
	if kvs := inner.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 0 || json.Unmarshal(kvs[0].Value, &reg) != nil {
		return ""
	}
	return reg.Store
}

// unanswered reports whether err of an etcd request is its want of an
// answer (etcd unreachable, without a leader or too slow; the connection
// closed under it), which the same request may not meet again.
func unanswered(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// ancestors are the prefixes that contain prefix, shortest first: "/",
// "/a/" and "/a/b/" for "/a/b/c/".
func ancestors(prefix string) []string {
	var out []string
	for i := 0; i < len(prefix)-1; i++ {
		if prefix[i] == '/' {
			out = append(out, prefix[:i+1])
		}
	}
	return out
}

// releaseClaim is a comparison and removal of the prefix's registration if
// this store made it (AbortLoad: a migrate or restore whose load was undone
// leaves the prefix as it found it); nil otherwise.
func (s *Store) releaseClaim() []clientv3.Op {
	rev := s.claimed.Load()
	if rev == 0 {
		return nil
	}
	key := RegistryKey(s.prefix)
	return []clientv3.Op{clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", rev)},
		[]clientv3.Op{clientv3.OpDelete(key)}, nil)}
}
