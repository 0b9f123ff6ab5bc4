package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// File names used by LoadOrCreate inside its directory.
const (
	CACertFile     = "ca.crt"
	CAKeyFile      = "ca.key"
	ServerCertFile = "server.crt"
	ServerKeyFile  = "server.key"
)

// caCommonName is the subject common name of CAs created by LoadOrCreate.
const caCommonName = "provisiond CA"

// tempInfix marks the temporary files written by writeFilesAtomic.
const tempInfix = ".tmp-"

// Material is a server certificate and key in PEM form, with the CA that
// issued it. CAKeyPEM is empty when the CA key is not known (LoadFiles), and
// CACertPEM is empty when no CA was supplied.
type Material struct {
	CACertPEM []byte
	CAKeyPEM  []byte
	CertPEM   []byte
	KeyPEM    []byte
}

// LoadOrCreate loads the CA and server certificate kept in dir (ca.crt,
// ca.key, server.crt, server.key), creating what is missing:
//
//   - If neither CA file exists, a new CA (valid 10 years) and server
//     certificate (valid 2 years) are created, replacing any stale server
//     files.
//   - If exactly one CA file exists, an error is returned: generating a new
//     CA would silently invalidate every client that pinned the old one.
//   - If the CA exists, the server certificate is reissued by that CA when it
//     is missing, unreadable, does not match its key, does not chain to the
//     CA, lacks a SAN for any of hosts (or the built-in names), or expires
//     within 30 days. The CA files are never rewritten.
//
// hosts are interpreted as by NewServerCert. Files are written with mode 0600
// atomically (temporary file, fsync, rename, directory fsync); dir is
// created with mode 0700 if needed. LoadOrCreate must not run concurrently
// on the same directory.
func LoadOrCreate(dir string, hosts []string) (*Material, error) {
	if dir == "" {
		return nil, errors.New("pki: certificate directory must not be empty")
	}
	// Reject bad hosts before touching the disk.
	if _, err := requiredSANs(hosts); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pki: creating certificate directory: %w", err)
	}
	removeStaleTemps(dir)

	caCertPath := filepath.Join(dir, CACertFile)
	caKeyPath := filepath.Join(dir, CAKeyFile)
	caCertPEM, haveCACert, err := readOptional(caCertPath)
	if err != nil {
		return nil, err
	}
	caKeyPEM, haveCAKey, err := readOptional(caKeyPath)
	if err != nil {
		return nil, err
	}

	switch {
	case !haveCACert && !haveCAKey:
		return createAll(dir, hosts)
	case haveCACert && !haveCAKey:
		return nil, fmt.Errorf("pki: CA certificate %s exists but CA key %s is missing; "+
			"restore the key, or remove both CA files to generate a new CA (clients trusting the old CA will need the new one)",
			caCertPath, caKeyPath)
	case !haveCACert && haveCAKey:
		return nil, fmt.Errorf("pki: CA key %s exists but CA certificate %s is missing; "+
			"restore the certificate, or remove both CA files to generate a new CA (clients trusting the old CA will need the new one)",
			caKeyPath, caCertPath)
	}

	caCert, _, err := parseCA(caCertPEM, caKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s / %s)", err, caCertPath, caKeyPath)
	}
	now := time.Now()
	if !now.Before(caCert.NotAfter) {
		return nil, fmt.Errorf("pki: CA certificate %s expired at %v; remove both CA files to generate a new CA",
			caCertPath, caCert.NotAfter)
	}

	m := &Material{CACertPEM: caCertPEM, CAKeyPEM: caKeyPEM}
	certPEM, haveCert, err := readOptional(filepath.Join(dir, ServerCertFile))
	if err != nil {
		return nil, err
	}
	keyPEM, haveKey, err := readOptional(filepath.Join(dir, ServerKeyFile))
	if err != nil {
		return nil, err
	}
	if haveCert && haveKey && serverCertUsable(certPEM, keyPEM, caCert, hosts, now) {
		m.CertPEM, m.KeyPEM = certPEM, keyPEM
		return m, nil
	}

	m.CertPEM, m.KeyPEM, err = NewServerCert(caCertPEM, caKeyPEM, hosts, ServerValidity)
	if err != nil {
		return nil, err
	}
	if err := writeFilesAtomic(dir, []namedFile{
		{ServerKeyFile, m.KeyPEM},
		{ServerCertFile, m.CertPEM},
	}); err != nil {
		return nil, err
	}
	return m, nil
}

// createAll generates a fresh CA and server certificate and writes all four
// files to dir.
func createAll(dir string, hosts []string) (*Material, error) {
	caCertPEM, caKeyPEM, err := NewCA(caCommonName, CAValidity)
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := NewServerCert(caCertPEM, caKeyPEM, hosts, ServerValidity)
	if err != nil {
		return nil, err
	}
	// CA files first: if we crash before the server files land, the next
	// run finds a complete CA and only reissues the server certificate.
	if err := writeFilesAtomic(dir, []namedFile{
		{CAKeyFile, caKeyPEM},
		{CACertFile, caCertPEM},
		{ServerKeyFile, keyPEM},
		{ServerCertFile, certPEM},
	}); err != nil {
		return nil, err
	}
	return &Material{CACertPEM: caCertPEM, CAKeyPEM: caKeyPEM, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// serverCertUsable reports whether the stored server certificate can be kept.
func serverCertUsable(certPEM, keyPEM []byte, caCert *x509.Certificate, hosts []string, now time.Time) bool {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return false
	}
	if leaf.NotAfter.Before(now.Add(RenewBefore)) {
		return false
	}
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots:       roots,
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return false
	}
	ok, err := coversHosts(leaf, hosts)
	return err == nil && ok
}

// LoadFiles loads operator-supplied material: a PEM certificate (optionally
// followed by intermediates), its private key, and optionally (caFile != "")
// the CA bundle the certificate must chain to. It checks that the key
// matches the certificate, that the certificate has not expired and, when a
// CA is given, that it verifies for server authentication against it.
// Errors name the offending file. The returned CAKeyPEM is empty.
func LoadFiles(certFile, keyFile, caFile string) (*Material, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("pki: both a certificate file and a key file are required")
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("pki: reading certificate file: %w", err)
	}
	chain, err := parseCertsPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: certificate file %s: %w", certFile, err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("pki: reading key file: %w", err)
	}
	if _, err := parsePrivateKeyPEM(keyPEM); err != nil {
		return nil, fmt.Errorf("pki: key file %s: %w", keyFile, err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, fmt.Errorf("pki: key file %s does not match certificate file %s: %w", keyFile, certFile, err)
	}
	leaf := chain[0]
	now := time.Now()
	if now.After(leaf.NotAfter) {
		return nil, fmt.Errorf("pki: certificate file %s: certificate expired at %v", certFile, leaf.NotAfter)
	}
	m := &Material{CertPEM: certPEM, KeyPEM: keyPEM}
	if caFile == "" {
		return m, nil
	}

	caData, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("pki: reading CA file: %w", err)
	}
	cas, err := parseCertsPEM(caData)
	if err != nil {
		return nil, fmt.Errorf("pki: CA file %s: %w", caFile, err)
	}
	roots := x509.NewCertPool()
	var caPEM bytes.Buffer
	for _, ca := range cas {
		roots.AddCert(ca)
		caPEM.Write(encodePEM("CERTIFICATE", ca.Raw))
	}
	intermediates := x509.NewCertPool()
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: intermediates,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return nil, fmt.Errorf("pki: certificate file %s does not verify against CA file %s: %w", certFile, caFile, err)
	}
	m.CACertPEM = caPEM.Bytes()
	return m, nil
}

// tls12Suites are the TLS 1.2 cipher suites the server accepts: ECDHE key
// exchange with AEAD ciphers only. TLS 1.3 suites are not configurable and
// are all AEAD.
var tls12Suites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// TLSConfig returns a server TLS configuration presenting m's certificate
// (followed by the issuing CA certificate when known and not already in the
// chain) to every client regardless of SNI. It requires TLS 1.2 or later,
// restricts TLS 1.2 to ECDHE AEAD cipher suites and advertises only the
// "http/1.1" ALPN protocol, as the Juju API is websocket over HTTP/1.1.
func (m *Material) TLSConfig() (*tls.Config, error) {
	if m == nil {
		return nil, errors.New("pki: nil Material")
	}
	pair, err := tls.X509KeyPair(m.CertPEM, m.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: loading server key pair: %w", err)
	}
	if len(m.CACertPEM) > 0 {
		cas, err := parseCertsPEM(m.CACertPEM)
		if err != nil {
			return nil, fmt.Errorf("pki: CA certificate: %w", err)
		}
		pair.Certificate = appendIssuer(pair.Certificate, cas)
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("pki: parsing server certificate: %w", err)
		}
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{pair},
		CipherSuites: append([]uint16(nil), tls12Suites...),
		NextProtos:   []string{"http/1.1"},
	}, nil
}

// appendIssuer appends to chain the CA among cas that issued its last
// certificate, unless that CA is already present.
func appendIssuer(chain [][]byte, cas []*x509.Certificate) [][]byte {
	last, err := x509.ParseCertificate(chain[len(chain)-1])
	if err != nil {
		return chain
	}
	for _, ca := range cas {
		for _, der := range chain {
			if bytes.Equal(der, ca.Raw) {
				return chain
			}
		}
	}
	for _, ca := range cas {
		if last.CheckSignatureFrom(ca) == nil {
			return append(chain, ca.Raw)
		}
	}
	return chain
}

// CertPool returns a pool holding the CA certificate(s) of m, for clients to
// use as RootCAs. The pool is empty (never nil) when m has no CA certificate.
func (m *Material) CertPool() *x509.CertPool {
	pool := x509.NewCertPool()
	if m != nil {
		pool.AppendCertsFromPEM(m.CACertPEM)
	}
	return pool
}

// readOptional reads path, reporting ok=false if it does not exist.
func readOptional(path string) (data []byte, ok bool, err error) {
	data, err = os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("pki: reading %s: %w", path, err)
	}
	return data, true, nil
}

type namedFile struct {
	name string
	data []byte
}

// writeFilesAtomic writes each file into dir with mode 0600. All contents
// are written to temporary files and fsynced first, then renamed into place
// in order, and finally the directory is fsynced.
func writeFilesAtomic(dir string, files []namedFile) (err error) {
	temps := make([]string, 0, len(files))
	defer func() {
		if err != nil {
			for _, t := range temps {
				_ = os.Remove(t)
			}
		}
	}()
	for _, f := range files {
		tmp, err := writeTemp(dir, f)
		if tmp != "" {
			temps = append(temps, tmp)
		}
		if err != nil {
			return err
		}
	}
	for i, f := range files {
		if err := os.Rename(temps[i], filepath.Join(dir, f.name)); err != nil {
			return fmt.Errorf("pki: installing %s: %w", f.name, err)
		}
	}
	return syncDir(dir)
}

// writeTemp writes f to a new temporary file in dir and fsyncs it. It
// returns the temporary file's path whenever the file was created.
func writeTemp(dir string, f namedFile) (string, error) {
	tmp, err := os.CreateTemp(dir, "."+f.name+tempInfix+"*")
	if err != nil {
		return "", fmt.Errorf("pki: creating temporary file for %s: %w", f.name, err)
	}
	name := tmp.Name()
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.Write(f.data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return name, fmt.Errorf("pki: writing %s: %w", f.name, err)
	}
	return name, nil
}

func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil // directories cannot be fsynced on Windows.
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("pki: opening %s for sync: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pki: syncing %s: %w", dir, err)
	}
	return nil
}

// removeStaleTemps deletes temporary files left in dir by an interrupted
// writeFilesAtomic. Errors are ignored: leftovers are harmless.
func removeStaleTemps(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		for _, name := range []string{CACertFile, CAKeyFile, ServerCertFile, ServerKeyFile} {
			if e.Type().IsRegular() && strings.HasPrefix(e.Name(), "."+name+tempInfix) {
				_ = os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
}
