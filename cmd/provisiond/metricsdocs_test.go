package main

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"regexp"
	"testing"

	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
)

// Every provisiond_ metric a daemon serves is described in
// docs/operator-guide.md. Those of etcd mode alone (provisiond_store_etcd_*,
// the store's quota) are not served on bbolt and not checked here; the
// metrics table lists them. A metric with labels has no series before its
// first event, so the test logs in, calls and watches first.
func TestEveryMetricIsInTheOperatorGuide(t *testing.T) {
	guide, err := os.ReadFile("../../docs/operator-guide.md")
	if err != nil {
		t.Fatal(err)
	}
	body := servedMetrics(t)
	names := regexp.MustCompile(`(?m)^# HELP (provisiond_\w+) `).FindAllSubmatch(body, -1)
	if len(names) == 0 {
		t.Fatalf("/metrics serves no provisiond_ metric:\n%s", body)
	}
	for _, m := range names {
		name := string(m[1])
		// A whole name: provisiond_connections is not provisiond_connections_total.
		if !regexp.MustCompile(`\b` + name + `\b`).Match(guide) {
			t.Errorf("metric %s is not in docs/operator-guide.md (HTTP endpoints and metrics)", name)
		}
	}
	t.Logf("%d metrics served, each in the guide", len(names))
}

// servedMetrics is what a daemon's /metrics serves once an agent has
// logged in, called and watched (a metric with labels has no series
// before its first event).
func servedMetrics(t *testing.T) []byte {
	t.Helper()
	srv := provisiondtest.Start(t)
	p := client.NewProvisioner(srv.ControllerAgent(t, srv.DefaultModel()))
	w, err := p.WatchModelMachines(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	provisiondtest.Next(t, w)
	creds := srv.Credentials()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(creds.CACert)) {
		t.Fatal("credentials.yaml: no CA certificate")
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "juju-apiserver"}}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+creds.APIAddresses[0]+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req) // from loopback: open (--metrics-auth local)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s, %v", resp.Status, err)
	}
	return body
}
