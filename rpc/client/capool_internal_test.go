package client

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

// TestCAPool: a CA is parsed once per process and its pool shared by
// later dials; a PEM holding no certificate is refused every time, and
// the cache stays bounded.
func TestCAPool(t *testing.T) {
	// The cache is the process's: start from an empty one (with -count
	// above 1 the previous run left it full, and a full cache keeps no
	// new pool).
	caPools.Lock()
	caPools.m = nil
	caPools.Unlock()
	if _, err := caPool([]byte("not a certificate")); err == nil || !strings.Contains(err.Error(), "no CA certificate") {
		t.Fatalf("caPool of garbage: %v", err)
	}
	if _, err := caPool([]byte("not a certificate")); err == nil {
		t.Fatal("garbage accepted the second time")
	}
	ca := testCA(t)
	a, err := caPool(ca)
	if err != nil {
		t.Fatal(err)
	}
	b, err := caPool(ca)
	if err != nil || a != b {
		t.Fatalf("second caPool: %p %v, want the first pool %p", b, err, a)
	}
	for range 2 * maxCAPools {
		if _, err := caPool(testCA(t)); err != nil {
			t.Fatal(err)
		}
	}
	caPools.Lock()
	n := len(caPools.m)
	caPools.Unlock()
	if n > maxCAPools {
		t.Errorf("%d pools cached, at most %d", n, maxCAPools)
	}
}

// testCA is a new self-signed CA certificate in PEM.
func testCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
