package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// TestEtcdSpaceQuota: a daemon on an etcd with a 4 MiB space quota, its
// admin rewriting a model config key with 32 KiB values. /metrics shows
// the database's size against the quota all along (what to alert on);
// once etcd's quota is reached, writes fail with code "quota limit
// exceeded" (not "try again", which Juju's agents retry for ever) and a
// message saying an operator must free space, reads go on, and /health
// answers 503 "store out of space" naming the NOSPACE alarm, at once
// (not an ok from before the write). The built
// `provisiond reclaim-etcd-space` compacts, defragments and disarms the
// alarm; writes go through again and /health is 200.
func TestEtcdSpaceQuota(t *testing.T) {
	t.Parallel()
	const quota = 4 << 20
	cluster := etcdtest.NewWith(t, etcdtest.Options{QuotaBackendBytes: quota})
	eps := cluster.Endpoints()
	d := startDaemon(t, "d", eps, "/space/")
	creds := d.credentials(t)
	admin := client.NewModelAdmin(mustDial(t, creds, d.addr, false, ""))
	ctx := ctxT(t)

	quotaMetric := fmt.Sprintf("provisiond_store_etcd_db_quota_bytes{endpoint=%q}", eps[0])
	sizeMetric := fmt.Sprintf("provisiond_store_etcd_db_size_bytes{endpoint=%q}", eps[0])
	waitFor(t, "the quota in /metrics", func() bool { return hasMetric(t, creds, d, quotaMetric) })
	if q := metric(t, creds, d, quotaMetric); q != quota {
		t.Errorf("%s = %v; want %d", quotaMetric, q, quota)
	}
	before := metric(t, creds, d, sizeMetric)

	value := strings.Repeat("x", 32<<10)
	set := func(i int) error {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		_, err := admin.SetModelConfig(cctx, params.SetModelConfigArgs{Model: "default", Config: map[string]any{"e2e-space": fmt.Sprint(i, value)}})
		return err
	}
	// /health is asked before each write, so the answer after the write
	// refused is asked within the second its last ok is reused for: a
	// write refused for want of space must show at once, not after it.
	var werr error
	for i := 0; werr == nil; i++ {
		if i == 1000 {
			t.Fatal("1000 writes of 32 KiB within a 4 MiB quota")
		}
		if code, body := health(t, creds, d); code != http.StatusOK {
			t.Fatalf("/health before write %d, under the quota: %d %q", i, code, body)
		}
		werr = set(i)
	}
	if !client.IsCode(werr, params.CodeQuotaLimitExceeded) || !strings.Contains(werr.Error(), "out of space") {
		t.Fatalf("a write past etcd's quota: %v; want code %q, saying the store is out of space", werr, params.CodeQuotaLimitExceeded)
	}
	t.Logf("past the quota: %v", werr)
	if size := metric(t, creds, d, sizeMetric); size <= before {
		t.Errorf("%s: %v before the writes, %v after", sizeMetric, before, size)
	}
	if _, err := admin.ListModels(ctx); err != nil {
		t.Errorf("a read with etcd out of space: %v", err)
	}
	if code, body := health(t, creds, d); code != http.StatusServiceUnavailable || !strings.Contains(body, "store out of space") || !strings.Contains(body, "NOSPACE") {
		t.Errorf("/health with etcd out of space: %d %q", code, body)
	}

	out, err := exec.Command(bin(t, "provisiond"), "reclaim-etcd-space", "--etcd-endpoints", strings.Join(eps, ",")).CombinedOutput()
	if err != nil {
		t.Fatalf("provisiond reclaim-etcd-space: %v\n%s", err, out)
	}
	t.Logf("provisiond reclaim-etcd-space:\n%s", out)
	if !strings.Contains(string(out), "disarmed the NOSPACE alarm") {
		t.Errorf("reclaim-etcd-space did not say it disarmed the alarm:\n%s", out)
	}
	if err := set(-1); err != nil {
		t.Fatalf("a write after reclaim-etcd-space: %v", err)
	}
	waitFor(t, "/health to be 200 again", func() bool {
		code, _ := health(t, creds, d)
		return code == http.StatusOK
	})
}

// hasMetric reports whether d's /metrics has a line for name.
func hasMetric(t *testing.T, creds *credentials.Credentials, d *daemonProc, name string) bool {
	t.Helper()
	resp := getMetrics(t, creds, d)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(body), "\n"+name+" ")
}
