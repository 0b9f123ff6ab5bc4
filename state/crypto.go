package state

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"regexp"
)

// MinAgentPasswordLength is the shortest password an agent may have. Agent
// passwords are random and long, so a single fast hash is safe for them.
const MinAgentPasswordLength = 18

// Parameters of Juju's UserPasswordHash.
const (
	userHashIterations = 8192
	userHashKeyLen     = 18
	userSaltBytes      = 12
)

// userPasswordHash is Juju's UserPasswordHash: PBKDF2-HMAC-SHA512 of the
// password with the (base64 text) salt, 8192 iterations, 18 bytes, base64.
// Only records hashed before argon2id (userhash.go) are checked with it.
func userPasswordHash(password, salt string) string {
	key, err := pbkdf2.Key(sha512.New, password, []byte(salt), userHashIterations, userHashKeyLen)
	if err != nil {
		// Only possible for a key length out of range, which ours is not.
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(key)
}

// newSalt returns 12 random bytes as base64 text, as Juju's RandomSalt.
func newSalt() string {
	b := make([]byte, userSaltBytes)
	_, _ = rand.Read(b) // never fails; crashes the program if it cannot read
	return base64.StdEncoding.EncodeToString(b)
}

// agentPasswordHash is Juju's AgentPasswordHash: the first 18 bytes of the
// SHA-512 of the password, base64.
func agentPasswordHash(password string) string {
	sum := sha512.Sum512([]byte(password))
	return base64.StdEncoding.EncodeToString(sum[:18])
}

// hashEqual compares two hashes in constant time.
func hashEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

var validUUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// IsValidUUID reports whether s is a UUID in canonical lowercase form.
func IsValidUUID(s string) bool { return validUUID.MatchString(s) }
