package etcdstore_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/etcdstore"
)

// TestSpaceQuota: an etcd with a 2 MiB space quota, a key rewritten with
// 64 KiB values until etcd refuses. The write fails with ErrNoSpace (and
// ErrUnavailable), saying what to do; so does a removal (every commit
// writes the feed key); Health reports the NOSPACE alarm; the member's
// status gives its database's size against the quota and the alarm.
// ReclaimSpace compacts, defragments and disarms, and writes go on.
func TestSpaceQuota(t *testing.T) {
	t.Parallel()
	const quota = 2 << 20
	c := etcdtest.NewWith(t, etcdtest.Options{QuotaBackendBytes: quota})
	cfg := config(c, "/space/", store.Feed{})
	s := open(t, cfg)
	ctx := bounded(t, 2*time.Minute)
	if m := s.Members()[0]; m.DBQuota != quota {
		waitFor(t, ctx, "the member's status", func() bool { return s.Members()[0].DBQuota == quota })
	}

	big := bytes.Repeat([]byte("x"), 64<<10)
	put := func(tx store.Txn) error { return tx.Put("k/big", big) }
	var err2 error
	for i := 0; ; i++ {
		if _, err2 = s.Update(ctx, put); err2 != nil {
			break
		}
		if i == 1000 {
			t.Fatal("1000 writes of 64 KiB within a 2 MiB quota")
		}
	}
	if !errors.Is(err2, store.ErrNoSpace) || !errors.Is(err2, store.ErrUnavailable) || !strings.Contains(err2.Error(), "reclaim-etcd-space") {
		t.Fatalf("a write past etcd's quota: %v; want ErrNoSpace and ErrUnavailable, saying what to do", err2)
	}
	if _, err := s.Update(ctx, func(tx store.Txn) error { return tx.Delete("k/big") }); !errors.Is(err, store.ErrNoSpace) {
		t.Errorf("a removal with the NOSPACE alarm raised: %v; want ErrNoSpace", err)
	}
	if err := s.Health(ctx); !errors.Is(err, store.ErrNoSpace) || !strings.Contains(err.Error(), "NOSPACE") {
		t.Errorf("Health with the NOSPACE alarm raised: %v", err)
	}
	waitFor(t, ctx, "the member's status to show the alarm", func() bool {
		return slices.Contains(s.Members()[0].Alarms, "NOSPACE")
	})
	if m := s.Members()[0]; m.DBSize < quota*3/4 || m.DBSizeInUse <= 0 {
		t.Errorf("member at the quota: %+v", m)
	}
	if err := s.View(ctx, func(r store.Reader) error { _, _, err := r.Get("k/big"); return err }); err != nil {
		t.Errorf("a read with the NOSPACE alarm raised: %v", err)
	}

	rep, err := etcdstore.ReclaimSpace(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("reclaimed: before %+v, after %+v, compacted to %d, disarmed %v", rep.Before, rep.After, rep.Compacted, rep.Disarmed)
	if len(rep.Disarmed) != 1 || len(rep.Full) != 0 || rep.Compacted == 0 || rep.After[0].DBSize >= rep.Before[0].DBSize {
		t.Errorf("ReclaimSpace: %+v", rep)
	}
	if _, err := s.Update(ctx, put); err != nil {
		t.Fatalf("a write after ReclaimSpace: %v", err)
	}
	if err := s.Health(ctx); err != nil {
		t.Errorf("Health after ReclaimSpace: %v", err)
	}
	waitFor(t, ctx, "the member's status to show no alarm", func() bool { return len(s.Members()[0].Alarms) == 0 })
}
