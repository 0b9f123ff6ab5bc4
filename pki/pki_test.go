package pki

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	oidBasicConstraints = asn1.ObjectIdentifier{2, 5, 29, 19}
	oidKeyUsage         = asn1.ObjectIdentifier{2, 5, 29, 15}
)

func mustParseCert(t *testing.T, pemData []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(pemData)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("no CERTIFICATE PEM block in %q", pemData)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("parse certificate: %v", err)
	}
	return c
}

func mustParseP256Key(t *testing.T, pemData []byte) *ecdsa.PrivateKey {
	t.Helper()
	block, _ := pem.Decode(pemData)
	if block == nil || block.Type != "PRIVATE KEY" {
		t.Fatalf("want PKCS#8 PEM \"PRIVATE KEY\", got %q", pemData)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatalf("parse PKCS#8: %v", err)
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok || ek.Curve != elliptic.P256() {
		t.Fatalf("want ECDSA P-256 key, got %T", k)
	}
	return ek
}

func rfc5280KeyID(t *testing.T, c *x509.Certificate) []byte {
	t.Helper()
	var spki struct {
		Algorithm        asn1.RawValue
		SubjectPublicKey asn1.BitString
	}
	if _, err := asn1.Unmarshal(c.RawSubjectPublicKeyInfo, &spki); err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum(spki.SubjectPublicKey.Bytes)
	return sum[:]
}

func criticalExt(t *testing.T, c *x509.Certificate, oid asn1.ObjectIdentifier) bool {
	t.Helper()
	for _, e := range c.Extensions {
		if e.Id.Equal(oid) {
			return e.Critical
		}
	}
	t.Fatalf("extension %v missing", oid)
	return false
}

func TestNewCA(t *testing.T) {
	start := time.Now()
	certPEM, keyPEM, err := NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ca := mustParseCert(t, certPEM)
	key := mustParseP256Key(t, keyPEM)
	if !key.PublicKey.Equal(ca.PublicKey) {
		t.Error("key does not match certificate")
	}
	if !criticalExt(t, ca, oidBasicConstraints) {
		t.Error("basicConstraints not critical")
	}
	if !criticalExt(t, ca, oidKeyUsage) {
		t.Error("keyUsage not critical")
	}
	if !ca.BasicConstraintsValid || !ca.IsCA {
		t.Error("not a CA")
	}
	if ca.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageCRLSign {
		t.Errorf("KeyUsage = %v", ca.KeyUsage)
	}
	if want := rfc5280KeyID(t, ca); !bytes.Equal(ca.SubjectKeyId, want) {
		t.Errorf("SubjectKeyId = %x, want SHA-1 of key bits %x", ca.SubjectKeyId, want)
	}
	if !bytes.Equal(ca.AuthorityKeyId, ca.SubjectKeyId) {
		t.Errorf("AuthorityKeyId %x != SubjectKeyId %x", ca.AuthorityKeyId, ca.SubjectKeyId)
	}
	if ca.SerialNumber.Sign() <= 0 || ca.SerialNumber.BitLen() > 128 {
		t.Errorf("serial %v not positive <=128 bits", ca.SerialNumber)
	}
	if ca.Subject.CommonName != "test CA" || !slices.Equal(ca.Subject.Organization, []string{"provisiond"}) {
		t.Errorf("subject = %v", ca.Subject)
	}
	if d := start.Sub(ca.NotBefore); d < 4*time.Minute || d > 6*time.Minute {
		t.Errorf("NotBefore is %v before now, want ~5m", d)
	}
	if err := ca.CheckSignatureFrom(ca); err != nil {
		t.Errorf("not self-signed: %v", err)
	}
	// A second CA gets a different serial.
	other, _, err := NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if mustParseCert(t, other).SerialNumber.Cmp(ca.SerialNumber) == 0 {
		t.Error("serial numbers repeat")
	}
	if _, _, err := NewCA("x", 0); err == nil {
		t.Error("zero validity accepted")
	}
}

func TestNewServerCert(t *testing.T) {
	caPEM, caKeyPEM, err := NewCA("test CA", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ca := mustParseCert(t, caPEM)
	hosts := []string{"[::1]:17070", "127.0.0.1:0", "api.example.com:17070", "API.example.com", "10.0.0.5", "[fd00::7]", "", "node1."}
	certPEM, keyPEM, err := NewServerCert(caPEM, caKeyPEM, hosts, 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf := mustParseCert(t, certPEM)
	key := mustParseP256Key(t, keyPEM)
	if !key.PublicKey.Equal(leaf.PublicKey) {
		t.Error("key does not match certificate")
	}

	wantDNS := []string{"juju-apiserver", "localhost", "api.example.com", "node1"}
	if !slices.Equal(leaf.DNSNames, wantDNS) {
		t.Errorf("DNSNames = %q, want %q", leaf.DNSNames, wantDNS)
	}
	var gotIPs []string
	for _, ip := range leaf.IPAddresses {
		gotIPs = append(gotIPs, ip.String())
	}
	if want := []string{"127.0.0.1", "::1", "10.0.0.5", "fd00::7"}; !slices.Equal(gotIPs, want) {
		t.Errorf("IPAddresses = %q, want %q", gotIPs, want)
	}
	if leaf.Subject.CommonName != "juju-apiserver" {
		t.Errorf("CommonName = %q", leaf.Subject.CommonName)
	}
	if !leaf.BasicConstraintsValid || leaf.IsCA {
		t.Error("leaf basic constraints must be valid with CA:FALSE")
	}
	if !criticalExt(t, leaf, oidBasicConstraints) {
		t.Error("leaf basicConstraints not critical")
	}
	if leaf.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Errorf("KeyUsage = %v", leaf.KeyUsage)
	}
	if !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
		t.Errorf("ExtKeyUsage = %v", leaf.ExtKeyUsage)
	}
	if want := rfc5280KeyID(t, leaf); !bytes.Equal(leaf.SubjectKeyId, want) {
		t.Errorf("SubjectKeyId = %x, want %x", leaf.SubjectKeyId, want)
	}
	if !bytes.Equal(leaf.AuthorityKeyId, ca.SubjectKeyId) {
		t.Errorf("AuthorityKeyId = %x, want CA SKID %x", leaf.AuthorityKeyId, ca.SubjectKeyId)
	}
	if leaf.NotAfter.After(ca.NotAfter) {
		t.Errorf("leaf NotAfter %v exceeds CA NotAfter %v", leaf.NotAfter, ca.NotAfter)
	}

	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, name := range []string{"juju-apiserver", "localhost", "127.0.0.1", "::1", "api.example.com", "10.0.0.5", "fd00::7"} {
		if _, err := leaf.Verify(x509.VerifyOptions{
			DNSName:   name,
			Roots:     roots,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}); err != nil {
			t.Errorf("verify for %q: %v", name, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "other.example.com", Roots: roots}); err == nil {
		t.Error("verified for a name not in the SANs")
	}
}

func TestNewServerCertErrors(t *testing.T) {
	caPEM, caKeyPEM, err := NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, otherKeyPEM, err := NewCA("other", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leafPEM, leafKeyPEM, err := NewServerCert(caPEM, caKeyPEM, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name          string
		caPEM, keyPEM []byte
		hosts         []string
	}{
		{"mismatched CA key", caPEM, otherKeyPEM, nil},
		{"leaf as CA", leafPEM, leafKeyPEM, nil},
		{"garbage CA", []byte("junk"), caKeyPEM, nil},
		{"invalid host", caPEM, caKeyPEM, []string{"https://x/y"}},
	}
	for _, c := range cases {
		if _, _, err := NewServerCert(c.caPEM, c.keyPEM, c.hosts, time.Hour); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

func readAll(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := make(map[string][]byte)
	for _, n := range []string{CACertFile, CAKeyFile, ServerCertFile, ServerKeyFile} {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = b
	}
	return out
}

func TestLoadOrCreateIdempotent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	hosts := []string{"10.1.2.3:17070", "ctl.example"}
	m1, err := LoadOrCreate(dir, hosts)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := LoadOrCreate(dir, hosts)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m1.CACertPEM, m2.CACertPEM) || !bytes.Equal(m1.CAKeyPEM, m2.CAKeyPEM) ||
		!bytes.Equal(m1.CertPEM, m2.CertPEM) || !bytes.Equal(m1.KeyPEM, m2.KeyPEM) {
		t.Error("second LoadOrCreate returned different material")
	}
	// A subset of hosts (and different spellings) also keeps the material.
	m3, err := LoadOrCreate(dir, []string{"CTL.example.", "[10.1.2.3]"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m1.CertPEM, m3.CertPEM) {
		t.Error("server certificate regenerated for already-covered hosts")
	}
	files := readAll(t, dir)
	if !bytes.Equal(files[CACertFile], m1.CACertPEM) || !bytes.Equal(files[ServerKeyFile], m1.KeyPEM) {
		t.Error("files on disk differ from returned material")
	}
	ca := mustParseCert(t, m1.CACertPEM)
	leaf := mustParseCert(t, m1.CertPEM)
	if got := ca.NotAfter.Sub(ca.NotBefore); got < CAValidity || got > CAValidity+10*time.Minute {
		t.Errorf("CA validity %v", got)
	}
	if got := leaf.NotAfter.Sub(leaf.NotBefore); got < ServerValidity || got > ServerValidity+10*time.Minute {
		t.Errorf("server validity %v", got)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 4 {
		t.Errorf("dir has %d entries, want 4 (temp files left behind?)", len(entries))
	}
}

func TestLoadOrCreateFileModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("POSIX permissions")
	}
	dir := t.TempDir()
	if _, err := LoadOrCreate(dir, nil); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{CACertFile, CAKeyFile, ServerCertFile, ServerKeyFile} {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0o600 {
			t.Errorf("%s mode %v, want 0600", n, perm)
		}
	}
}

func TestLoadOrCreateNewHostRegeneratesLeafOnly(t *testing.T) {
	dir := t.TempDir()
	m1, err := LoadOrCreate(dir, []string{"10.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	m2, err := LoadOrCreate(dir, []string{"10.0.0.1", "new.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m1.CACertPEM, m2.CACertPEM) || !bytes.Equal(m1.CAKeyPEM, m2.CAKeyPEM) {
		t.Fatal("CA changed")
	}
	if bytes.Equal(m1.CertPEM, m2.CertPEM) || bytes.Equal(m1.KeyPEM, m2.KeyPEM) {
		t.Fatal("server certificate not regenerated")
	}
	leaf := mustParseCert(t, m2.CertPEM)
	if !slices.Contains(leaf.DNSNames, "new.example.com") {
		t.Errorf("DNSNames %q lack new host", leaf.DNSNames)
	}
	if err := leaf.CheckSignatureFrom(mustParseCert(t, m1.CACertPEM)); err != nil {
		t.Errorf("new leaf not signed by existing CA: %v", err)
	}
	files := readAll(t, dir)
	if !bytes.Equal(files[ServerCertFile], m2.CertPEM) || !bytes.Equal(files[CACertFile], m1.CACertPEM) {
		t.Error("files on disk not updated consistently")
	}
}

func TestLoadOrCreateRepairsServerCert(t *testing.T) {
	dir := t.TempDir()
	m1, err := LoadOrCreate(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		m, err := LoadOrCreate(dir, nil)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !bytes.Equal(m.CACertPEM, m1.CACertPEM) {
			t.Fatalf("%s: CA changed", what)
		}
		if _, err := tls.X509KeyPair(m.CertPEM, m.KeyPEM); err != nil {
			t.Fatalf("%s: bad pair: %v", what, err)
		}
		if bytes.Equal(m.CertPEM, m1.CertPEM) {
			t.Fatalf("%s: server certificate not regenerated", what)
		}
	}

	if err := os.Remove(filepath.Join(dir, ServerCertFile)); err != nil {
		t.Fatal(err)
	}
	check("missing server.crt")

	// Expiring within 30 days.
	certPEM, keyPEM, err := NewServerCert(m1.CACertPEM, m1.CAKeyPEM, nil, 10*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeFilesAtomic(dir, []namedFile{{ServerCertFile, certPEM}, {ServerKeyFile, keyPEM}}); err != nil {
		t.Fatal(err)
	}
	m1.CertPEM = certPEM
	check("expiring server.crt")

	// Signed by a different CA.
	otherCA, otherKey, err := NewCA("other", time.Hour*24*365)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err = NewServerCert(otherCA, otherKey, nil, ServerValidity)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeFilesAtomic(dir, []namedFile{{ServerCertFile, certPEM}, {ServerKeyFile, keyPEM}}); err != nil {
		t.Fatal(err)
	}
	m1.CertPEM = certPEM
	check("foreign server.crt")
}

func TestLoadOrCreatePartialCA(t *testing.T) {
	for _, missing := range []string{CACertFile, CAKeyFile} {
		dir := t.TempDir()
		if _, err := LoadOrCreate(dir, nil); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, missing)); err != nil {
			t.Fatal(err)
		}
		_, err := LoadOrCreate(dir, nil)
		if err == nil {
			t.Fatalf("missing %s: no error", missing)
		}
		if !strings.Contains(err.Error(), missing) {
			t.Errorf("missing %s: error %q does not name it", missing, err)
		}
		if _, err := os.Stat(filepath.Join(dir, missing)); !os.IsNotExist(err) {
			t.Errorf("missing %s: file was recreated", missing)
		}
	}
}

func TestLoadOrCreateCleansTempFiles(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, ".ca.key"+tempInfix+"123")
	if err := os.WriteFile(stale, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreate(dir, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Error("stale temp file not removed")
	}
}

func TestTLSConfig(t *testing.T) {
	m, err := LoadOrCreate(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := m.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("MinVersion = %x", cfg.MinVersion)
	}
	if !slices.Equal(cfg.NextProtos, []string{"http/1.1"}) {
		t.Errorf("NextProtos = %q", cfg.NextProtos)
	}
	if cfg.GetCertificate != nil || cfg.GetConfigForClient != nil {
		t.Error("SNI-dependent certificate selection configured")
	}
	if len(cfg.CipherSuites) == 0 {
		t.Error("cipher suites not restricted")
	}
	for _, id := range cfg.CipherSuites {
		name := tls.CipherSuiteName(id)
		if !strings.HasPrefix(name, "TLS_ECDHE_") || !(strings.Contains(name, "_GCM_") || strings.Contains(name, "CHACHA20_POLY1305")) {
			t.Errorf("non-ECDHE-AEAD suite %s", name)
		}
	}
	if len(cfg.Certificates) != 1 || len(cfg.Certificates[0].Certificate) != 2 {
		t.Fatalf("want one certificate with chain [leaf, CA]")
	}
	ca := mustParseCert(t, m.CACertPEM)
	if !bytes.Equal(cfg.Certificates[0].Certificate[1], ca.Raw) {
		t.Error("second chain element is not the CA")
	}
	// Without a CA only the leaf is served.
	cfg, err = (&Material{CertPEM: m.CertPEM, KeyPEM: m.KeyPEM}).TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(cfg.Certificates[0].Certificate); n != 1 {
		t.Errorf("chain length %d without CA, want 1", n)
	}
	if _, err := (&Material{CertPEM: m.CertPEM, KeyPEM: m.CAKeyPEM}).TLSConfig(); err == nil {
		t.Error("mismatched key accepted")
	}
}

func TestCertPool(t *testing.T) {
	m, err := LoadOrCreate(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf := mustParseCert(t, m.CertPEM)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: m.CertPool(), DNSName: "juju-apiserver"}); err != nil {
		t.Errorf("leaf does not verify against CertPool: %v", err)
	}
	if (&Material{}).CertPool() == nil {
		t.Error("nil pool for material without CA")
	}
}

// handshake runs a TLS handshake over an in-memory pipe and returns the
// client's connection state and error.
func handshake(t *testing.T, serverCfg, clientCfg *tls.Config) (tls.ConnectionState, error) {
	t.Helper()
	sc, cc := net.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv := tls.Server(sc, serverCfg)
	cli := tls.Client(cc, clientCfg)
	srvErr := make(chan error, 1)
	go func() {
		err := srv.HandshakeContext(ctx)
		if err != nil {
			sc.Close()
		}
		srvErr <- err
	}()
	err := cli.HandshakeContext(ctx)
	if err != nil {
		cc.Close()
	}
	state := cli.ConnectionState()
	serr := <-srvErr
	if err == nil && serr != nil {
		err = serr
	}
	// Close the raw pipe ends: tls.Conn.Close would block sending
	// close_notify to a peer that is no longer reading.
	cc.Close()
	sc.Close()
	return state, err
}

func TestTLSHandshake(t *testing.T) {
	m, err := LoadOrCreate(t.TempDir(), []string{"192.0.2.10"})
	if err != nil {
		t.Fatal(err)
	}
	serverCfg, err := m.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	pool := m.CertPool()

	state, err := handshake(t, serverCfg, &tls.Config{RootCAs: pool, ServerName: "juju-apiserver"})
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if state.Version < tls.VersionTLS12 {
		t.Errorf("negotiated version %x", state.Version)
	}

	// Other names, and IPs (for which clients send no SNI), get the same certificate.
	for _, name := range []string{"localhost", "127.0.0.1", "192.0.2.10"} {
		if _, err := handshake(t, serverCfg, &tls.Config{RootCAs: pool, ServerName: name}); err != nil {
			t.Errorf("handshake as %q: %v", name, err)
		}
	}

	// TLS 1.2 with the restricted suites, and ALPN http/1.1 only.
	state, err = handshake(t, serverCfg, &tls.Config{
		RootCAs: pool, ServerName: "juju-apiserver",
		MaxVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"},
	})
	if err != nil {
		t.Fatalf("TLS 1.2 handshake: %v", err)
	}
	if !slices.Contains(tls12Suites, state.CipherSuite) {
		t.Errorf("negotiated suite %s", tls.CipherSuiteName(state.CipherSuite))
	}
	if state.NegotiatedProtocol != "http/1.1" {
		t.Errorf("ALPN = %q, want http/1.1", state.NegotiatedProtocol)
	}

	// TLS 1.1 is refused.
	if _, err := handshake(t, serverCfg, &tls.Config{
		RootCAs: pool, ServerName: "juju-apiserver", MaxVersion: tls.VersionTLS11,
	}); err == nil {
		t.Error("TLS 1.1 handshake succeeded")
	}

	// A client trusting a different CA rejects the server.
	otherCA, _, err := NewCA("other", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	otherPool := x509.NewCertPool()
	otherPool.AppendCertsFromPEM(otherCA)
	if _, err := handshake(t, serverCfg, &tls.Config{RootCAs: otherPool, ServerName: "juju-apiserver"}); err == nil {
		t.Error("handshake succeeded with the wrong CA")
	}
}

func TestTLSHandshakeLoopback(t *testing.T) {
	m, err := LoadOrCreate(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	serverCfg, err := m.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", serverCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if tc, ok := c.(*tls.Conn); ok && tc.Handshake() == nil {
					_, _ = tc.Write([]byte("ok"))
				}
			}()
		}
	}()
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: m.CertPool(), ServerName: "juju-apiserver"})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	buf := make([]byte, 2)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Read(buf); err != nil || string(buf) != "ok" {
		t.Errorf("read %q, %v", buf, err)
	}
	conn.Close()

	if c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{
		RootCAs: m.CertPool(), ServerName: "juju-apiserver", MaxVersion: tls.VersionTLS11,
	}); err == nil {
		c.Close()
		t.Error("TLS 1.1 dial succeeded")
	}
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadFiles(t *testing.T) {
	dir := t.TempDir()
	m, err := LoadOrCreate(filepath.Join(dir, "gen"), nil)
	if err != nil {
		t.Fatal(err)
	}
	certFile := writeFile(t, dir, "op.crt", m.CertPEM)
	keyFile := writeFile(t, dir, "op.key", m.KeyPEM)
	caFile := writeFile(t, dir, "op-ca.crt", m.CACertPEM)

	got, err := LoadFiles(certFile, keyFile, caFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.CAKeyPEM) != 0 {
		t.Error("CAKeyPEM set")
	}
	if !bytes.Equal(got.CertPEM, m.CertPEM) || !bytes.Equal(got.KeyPEM, m.KeyPEM) {
		t.Error("material differs from files")
	}
	if !bytes.Equal(mustParseCert(t, got.CACertPEM).Raw, mustParseCert(t, m.CACertPEM).Raw) {
		t.Error("CA differs from file")
	}
	if _, err := got.TLSConfig(); err != nil {
		t.Errorf("TLSConfig: %v", err)
	}

	noCA, err := LoadFiles(certFile, keyFile, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(noCA.CACertPEM) != 0 {
		t.Error("CACertPEM set without CA file")
	}

	// Mismatched key.
	_, otherKey, err := NewCA("other", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	badKey := writeFile(t, dir, "other.key", otherKey)
	if _, err := LoadFiles(certFile, badKey, caFile); err == nil {
		t.Error("mismatched key accepted")
	} else if !strings.Contains(err.Error(), badKey) {
		t.Errorf("error %q does not name %s", err, badKey)
	}

	// Certificate not issued by the CA.
	otherCA, _, err := NewCA("other", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	badCA := writeFile(t, dir, "other-ca.crt", otherCA)
	if _, err := LoadFiles(certFile, keyFile, badCA); err == nil {
		t.Error("foreign CA accepted")
	} else if !strings.Contains(err.Error(), badCA) {
		t.Errorf("error %q does not name %s", err, badCA)
	}

	// Unreadable / malformed files.
	junk := writeFile(t, dir, "junk.pem", []byte("not pem"))
	missing := filepath.Join(dir, "missing.pem")
	for _, c := range []struct{ cert, key, ca, want string }{
		{missing, keyFile, "", missing},
		{certFile, missing, "", missing},
		{certFile, keyFile, missing, missing},
		{junk, keyFile, "", junk},
		{certFile, junk, "", junk},
		{certFile, keyFile, junk, junk},
	} {
		_, err := LoadFiles(c.cert, c.key, c.ca)
		if err == nil {
			t.Errorf("LoadFiles(%s, %s, %s): no error", c.cert, c.key, c.ca)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %q does not name %s", err, c.want)
		}
	}
}
