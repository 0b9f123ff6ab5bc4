package state

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/crypto/argon2"
)

// User passwords are hashed with argon2id (RFC 9106; golang.org/x/crypto),
// memory-hard where Juju's PBKDF2-SHA512 of 8,192 iterations is cheap to
// guess at on a GPU: our database need not match Juju's hashes. A record
// keeps the hash as a PHC string in password-hash, its salt inside it
// (password-salt empty):
//
//	$argon2id$v=19$m=19456,t=2,p=1$<salt>$<key>
//
// (base64 without padding). A record hashed before (PBKDF2, with a
// password-salt) still logs in, and the first successful login rewrites it
// as argon2id. Agent hashes stay a single SHA-512: their passwords are
// random and long, and thousands of agents log in at once.
//
// The parameters are OWASP's first argon2id choice (19 MiB, 2 passes, 1
// lane). Each hash holds its memory while it runs, so at most
// userHashSlots run at once (a flood of user logins waits for a slot
// instead of allocating 19 MiB each): memory is bounded by slots x 19 MiB.

const (
	argon2Memory  = 19 * 1024 // KiB
	argon2Time    = 2
	argon2Threads = 1
	argon2KeyLen  = 32
	argon2SaltLen = 16
	argon2Prefix  = "$argon2id$"

	// fieldPasswordHash is the change field of a hash upgraded at login:
	// not FieldPassword, so sessions that end when a password changes do
	// not end for it (the password is the same).
	fieldPasswordHash = "password-hash"
)

var userHashSlots = make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))

func argon2Key(password string, salt []byte, m, t uint32, p uint8, n uint32) []byte {
	userHashSlots <- struct{}{}
	defer func() { <-userHashSlots }()
	return argon2.IDKey([]byte(password), salt, t, m, p, n)
}

var b64 = base64.RawStdEncoding

// newUserPasswordHash hashes a new or changed user password: the record's
// password-hash and password-salt (empty: the salt is in the hash).
func newUserPasswordHash(password string) (hash, salt string) {
	s := make([]byte, argon2SaltLen)
	_, _ = rand.Read(s) // never fails
	key := argon2Key(password, s, argon2Memory, argon2Time, argon2Threads, argon2KeyLen)
	return fmt.Sprintf("%sv=%d$m=%d,t=%d,p=%d$%s$%s", argon2Prefix, argon2.Version, argon2Memory, argon2Time, argon2Threads,
		b64.EncodeToString(s), b64.EncodeToString(key)), ""
}

// dummyUserHash is checked against for unknown users, so that a failed
// login costs the same whether or not the user exists. Made at the first
// use, not when a program that imports state starts.
var dummyUserHash = sync.OnceValue(func() string {
	h, _ := newUserPasswordHash("no user has this password")
	return h
})

// checkUserPasswordHash says whether password matches a record's hash and
// salt, and whether the hash is of an older kind (PBKDF2) to be upgraded.
// A malformed hash matches nothing.
func checkUserPasswordHash(password, hash, salt string) (ok, old bool) {
	if !strings.HasPrefix(hash, argon2Prefix) {
		return hashEqual(userPasswordHash(password, salt), hash), true
	}
	var v int
	var m, t uint32
	var p uint8
	parts := strings.Split(strings.TrimPrefix(hash, argon2Prefix), "$")
	if len(parts) != 4 {
		return false, false
	}
	if _, err := fmt.Sscanf(parts[0]+","+parts[1], "v=%d,m=%d,t=%d,p=%d", &v, &m, &t, &p); err != nil || v != argon2.Version ||
		m < 8 || m > 1<<20 || t < 1 || t > 16 || p < 1 {
		return false, false
	}
	s, err1 := b64.DecodeString(parts[2])
	key, err2 := b64.DecodeString(parts[3])
	if err1 != nil || err2 != nil || len(key) < 16 || len(key) > 64 {
		return false, false
	}
	got := argon2Key(password, s, m, t, p, uint32(len(key)))
	return hashEqual(string(got), string(key)), m != argon2Memory || t != argon2Time || p != argon2Threads
}

// upgradeUserPasswordHash rewrites the record of a user who just logged in
// with password if its hash is still oldHash (no password was set since).
// A failure costs the user nothing (the old hash still works), so the
// caller ignores it.
func (st *State) upgradeUserPasswordHash(name, oldHash, password string) error {
	hash, salt := newUserPasswordHash(password) // outside the txn: it is slow
	return st.update(func(tx *txn) error {
		d, err := getUser(tx, name)
		if err != nil {
			return err
		}
		if d.PasswordHash != oldHash {
			return errNoChange
		}
		d.PasswordHash, d.PasswordSalt = hash, salt
		return tx.put(KindUser, "", name, &d, fieldPasswordHash)
	})
}
