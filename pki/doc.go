// Package pki creates, persists and loads the TLS certificate material used
// by the provisiond API server.
//
// provisiond speaks the Juju API protocol, so its server certificate follows
// Juju's conventions: it always carries the DNS names "juju-apiserver" and
// "localhost" and the loopback IP addresses, and it is signed by a
// deployment-local certificate authority whose certificate clients pin.
//
// All generated certificates use ECDSA P-256 keys (PKCS#8 PEM) and are
// strictly RFC 5280 compliant (random positive 128-bit serials, critical
// basic constraints, key usage, subject and authority key identifiers), so
// that clients with strict X.509 verification, such as Python 3.13's
// ssl.VERIFY_X509_STRICT default, accept them.
//
// LoadOrCreate manages a self-generated CA and server certificate in a
// directory, regenerating only the server certificate when it is missing,
// expiring, or does not cover the configured hosts. LoadFiles loads
// operator-supplied material instead. Material.TLSConfig builds the server
// configuration and Material.CertPool the client trust pool.
package pki
