package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1" // RFC 5280 section 4.2.1.2 method (1) key identifiers.
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"strings"
	"time"
)

const (
	// Organization is the subject organization of every generated certificate.
	Organization = "provisiond"
	// ServerCommonName is the subject common name of generated server
	// certificates, and a DNS SAN they always carry.
	ServerCommonName = "juju-apiserver"

	// CAValidity is the lifetime of a CA created by LoadOrCreate.
	CAValidity = 10 * 365 * 24 * time.Hour
	// ServerValidity is the lifetime of a server certificate created by
	// LoadOrCreate (capped at the CA's expiry).
	ServerValidity = 2 * 365 * 24 * time.Hour
	// RenewBefore is how long before expiry LoadOrCreate replaces the server
	// certificate.
	RenewBefore = 30 * 24 * time.Hour

	// clockSkew backdates NotBefore to tolerate peers with slow clocks.
	clockSkew = 5 * time.Minute
)

// defaultDNSNames and defaultIPs are always included in server certificates.
var (
	defaultDNSNames = []string{ServerCommonName, "localhost"}
	defaultIPs      = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}
)

// NewCA creates a self-signed certificate authority with an ECDSA P-256 key.
// It returns the certificate as PEM "CERTIFICATE" and the key as PKCS#8 PEM
// "PRIVATE KEY". The certificate is valid from five minutes ago for validFor.
func NewCA(commonName string, validFor time.Duration) (certPEM, keyPEM []byte, err error) {
	if commonName == "" {
		return nil, nil, errors.New("pki: CA common name must not be empty")
	}
	if validFor <= 0 {
		return nil, nil, fmt.Errorf("pki: CA validity must be positive, got %v", validFor)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: generating CA key: %w", err)
	}
	skid, err := subjectKeyID(&key.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{Organization}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
		SubjectKeyId:          skid,
		// Self-signed: the authority is the subject itself.
		AuthorityKeyId: skid,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: creating CA certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: encoding CA key: %w", err)
	}
	return encodePEM("CERTIFICATE", der), encodePEM("PRIVATE KEY", keyDER), nil
}

// NewServerCert creates a server certificate with an ECDSA P-256 key signed
// by the given CA. Its SANs are the DNS names "juju-apiserver" and
// "localhost", the IPs 127.0.0.1 and ::1, and every entry of hosts: IP
// literals become IP SANs and anything else a DNS SAN. Entries may carry
// brackets and ports ("[::1]:17070", "example.com:17070"), which are
// stripped; duplicates are removed. The validity is capped at the CA's
// expiry.
func NewServerCert(caCertPEM, caKeyPEM []byte, hosts []string, validFor time.Duration) (certPEM, keyPEM []byte, err error) {
	if validFor <= 0 {
		return nil, nil, fmt.Errorf("pki: server certificate validity must be positive, got %v", validFor)
	}
	caCert, caKey, err := parseCA(caCertPEM, caKeyPEM)
	if err != nil {
		return nil, nil, err
	}
	dnsNames, ips, err := subjectAltNames(hosts)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	notBefore := now.Add(-clockSkew)
	if notBefore.Before(caCert.NotBefore) {
		notBefore = caCert.NotBefore
	}
	notAfter := now.Add(validFor)
	if notAfter.After(caCert.NotAfter) {
		notAfter = caCert.NotAfter
	}
	if !notAfter.After(now) {
		return nil, nil, fmt.Errorf("pki: CA certificate expired at %v", caCert.NotAfter)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: generating server key: %w", err)
	}
	skid, err := subjectKeyID(&key.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: ServerCommonName, Organization: []string{Organization}},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  false,
		SubjectKeyId:          skid,
		AuthorityKeyId:        caCert.SubjectKeyId,
		DNSNames:              dnsNames,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: creating server certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: encoding server key: %w", err)
	}
	return encodePEM("CERTIFICATE", der), encodePEM("PRIVATE KEY", keyDER), nil
}

// parseCA parses and sanity-checks a CA certificate and its private key.
func parseCA(caCertPEM, caKeyPEM []byte) (*x509.Certificate, crypto.Signer, error) {
	certs, err := parseCertsPEM(caCertPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	caCert := certs[0]
	if !caCert.BasicConstraintsValid || !caCert.IsCA {
		return nil, nil, errors.New("pki: CA certificate is not a CA (basic constraints CA:FALSE or missing)")
	}
	if caCert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, nil, errors.New("pki: CA certificate lacks the keyCertSign key usage")
	}
	if len(caCert.SubjectKeyId) == 0 {
		return nil, nil, errors.New("pki: CA certificate has no subject key identifier")
	}
	caKey, err := parsePrivateKeyPEM(caKeyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: CA key: %w", err)
	}
	pub, ok := caKey.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(caCert.PublicKey) {
		return nil, nil, errors.New("pki: CA key does not match CA certificate")
	}
	return caCert, caKey, nil
}

// sanTarget is one normalised host: either an IP address or a DNS name.
type sanTarget struct {
	ip   netip.Addr // valid for IP literals
	name string     // lower-case DNS name otherwise
}

// normalizeHost strips brackets, ports, zones and a trailing dot from h and
// classifies it. ok is false for empty entries, which are ignored.
func normalizeHost(h string) (t sanTarget, ok bool, err error) {
	orig := h
	h = strings.TrimSpace(h)
	if host, port, err := net.SplitHostPort(h); err == nil && isPort(port) {
		h = host
	}
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if h == "" {
		return sanTarget{}, false, nil
	}
	if addr, err := netip.ParseAddr(h); err == nil {
		return sanTarget{ip: addr.WithZone("").Unmap()}, true, nil
	}
	name := strings.TrimSuffix(strings.ToLower(h), ".")
	if !validDNSName(name) {
		return sanTarget{}, false, fmt.Errorf("pki: invalid host %q: not an IP address or DNS name", orig)
	}
	return sanTarget{name: name}, true, nil
}

// isPort reports whether s is a decimal port number.
func isPort(s string) bool {
	if s == "" || len(s) > 5 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// validDNSName reports whether name is plausible as a dNSName SAN: ASCII
// letters, digits, '-', '_' and '.', with an optional leading "*." wildcard.
func validDNSName(name string) bool {
	name = strings.TrimPrefix(name, "*.")
	if name == "" || len(name) > 253 {
		return false
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			switch {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			default:
				return false
			}
		}
	}
	return true
}

// requiredSANs returns the de-duplicated SANs a server certificate for hosts
// must carry, defaults first.
func requiredSANs(hosts []string) ([]sanTarget, error) {
	var out []sanTarget
	seen := make(map[sanTarget]bool)
	add := func(t sanTarget) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	for _, n := range defaultDNSNames {
		add(sanTarget{name: n})
	}
	for _, ip := range defaultIPs {
		add(sanTarget{ip: ip})
	}
	for _, h := range hosts {
		t, ok, err := normalizeHost(h)
		if err != nil {
			return nil, err
		}
		if ok {
			add(t)
		}
	}
	return out, nil
}

// subjectAltNames splits the required SANs for hosts into x509 fields.
func subjectAltNames(hosts []string) (dnsNames []string, ips []net.IP, err error) {
	sans, err := requiredSANs(hosts)
	if err != nil {
		return nil, nil, err
	}
	for _, s := range sans {
		if s.ip.IsValid() {
			ips = append(ips, net.IP(s.ip.AsSlice()))
		} else {
			dnsNames = append(dnsNames, s.name)
		}
	}
	return dnsNames, ips, nil
}

// coversHosts reports whether cert carries every SAN required for hosts
// (compared exactly, not by wildcard matching).
func coversHosts(cert *x509.Certificate, hosts []string) (bool, error) {
	sans, err := requiredSANs(hosts)
	if err != nil {
		return false, err
	}
	have := make(map[sanTarget]bool)
	for _, n := range cert.DNSNames {
		have[sanTarget{name: strings.TrimSuffix(strings.ToLower(n), ".")}] = true
	}
	for _, ip := range cert.IPAddresses {
		if a, ok := netip.AddrFromSlice(ip); ok {
			have[sanTarget{ip: a.Unmap()}] = true
		}
	}
	for _, s := range sans {
		if !have[s] {
			return false, nil
		}
	}
	return true, nil
}

// subjectKeyID computes an RFC 5280 section 4.2.1.2 method (1) key
// identifier: the SHA-1 hash of the subjectPublicKey BIT STRING contents.
func subjectKeyID(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("pki: encoding public key: %w", err)
	}
	var spki struct {
		Algorithm        pkix.AlgorithmIdentifier
		SubjectPublicKey asn1.BitString
	}
	if _, err := asn1.Unmarshal(der, &spki); err != nil {
		return nil, fmt.Errorf("pki: decoding public key: %w", err)
	}
	sum := sha1.Sum(spki.SubjectPublicKey.Bytes)
	return sum[:], nil
}

// newSerial returns a random positive serial number of at most 128 bits.
func newSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("pki: generating serial number: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

func encodePEM(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// parseCertsPEM parses every CERTIFICATE block in data, ignoring other
// blocks. It fails if there are none.
func parseCertsPEM(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing certificate: %w", err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block found")
	}
	return certs, nil
}

// parsePrivateKeyPEM parses the first private key block in data (PKCS#8,
// SEC 1 or PKCS#1).
func parsePrivateKeyPEM(data []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("no PEM private key block found")
		}
		var (
			key any
			err error
		)
		switch block.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", block.Type, err)
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("unsupported private key type %T", key)
		}
		return signer, nil
	}
}
