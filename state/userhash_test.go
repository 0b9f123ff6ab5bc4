package state

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/watcher"
)

// User passwords are hashed with argon2id; a record
// hashed with Juju's PBKDF2 still logs in, and its first successful login
// rewrites it as argon2id without ending the user's sessions (the
// password is the same); agent hashes stay a single SHA-512.
func TestUserPasswordsArgon2id(t *testing.T) {
	t.Parallel()
	st, _ := openInitialized(t)
	stored := func(name string) userDoc {
		t.Helper()
		var d userDoc
		if err := st.view(t.Context(), func(r reader) error {
			d = must[userDoc](t)(getUser(r, name))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return d
	}
	isArgon2 := func(d userDoc) bool {
		return strings.HasPrefix(d.PasswordHash, "$argon2id$v=19$m=19456,t=2,p=1$") && d.PasswordSalt == "" &&
			len(strings.Split(d.PasswordHash, "$")) == 6
	}

	// Initialize, AddUser and SetUserPassword hash with argon2id.
	if d := stored(AdminUser); !isArgon2(d) {
		t.Errorf("admin's hash %q (salt %q), want argon2id", d.PasswordHash, d.PasswordSalt)
	}
	must[User](t)(st.AddUser(t.Context(), "bob", "", "bob-password", ""))
	if d := stored("bob"); !isArgon2(d) {
		t.Errorf("new user's hash %q", d.PasswordHash)
	}
	first := stored("bob").PasswordHash
	if err := st.SetUserPassword(t.Context(), "bob", "bob-password"); err != nil {
		t.Fatal(err)
	}
	if d := stored("bob"); !isArgon2(d) || d.PasswordHash == first {
		t.Errorf("changed password's hash %q (before %q): want a new argon2id hash (a new salt)", d.PasswordHash, first)
	}
	if _, err := st.CheckUserPassword(t.Context(), "bob", "bob-password"); err != nil {
		t.Errorf("right password: %v", err)
	}
	for _, c := range []struct{ user, pw string }{{"bob", "wrong"}, {"bob", ""}, {"nobody", "bob-password"}, {"user-", "x"}} {
		if _, err := st.CheckUserPassword(t.Context(), c.user, c.pw); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("CheckUserPassword(%q, %q) = %v, want ErrBadCredentials", c.user, c.pw, err)
		}
	}

	// A record from before: PBKDF2 with a salt of its own.
	legacy := func(name, pw string) string {
		salt := newSalt()
		hash := userPasswordHash(pw, salt)
		if err := st.update(t.Context(), func(tx *txn) error {
			d, err := getUser(tx, name)
			if err != nil {
				return err
			}
			d.PasswordHash, d.PasswordSalt = hash, salt
			return tx.put(KindUser, "", name, &d, FieldPassword)
		}); err != nil {
			t.Fatal(err)
		}
		return hash
	}
	old := legacy("bob", "old-password")
	var ended atomic.Int32 // what would end bob's sessions
	stop := st.Hub().Subscribe(watcher.Filter{Kind: KindUser, ID: "bob", Fields: []string{FieldPassword, watcher.FieldRemoved}},
		func(uint64, watcher.Change) { ended.Add(1) })
	defer stop()
	rev := st.Revision()
	if _, err := st.CheckUserPassword(t.Context(), "bob", "wrong"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("wrong password against a PBKDF2 hash: %v", err)
	}
	if d := stored("bob"); d.PasswordHash != old || st.Revision() != rev {
		t.Errorf("a failed login rewrote the hash (or committed)")
	}
	if _, err := st.CheckUserPassword(t.Context(), "bob", "old-password"); err != nil {
		t.Fatalf("right password against a PBKDF2 hash: %v", err)
	}
	if d := stored("bob"); !isArgon2(d) {
		t.Errorf("after a login the hash is %q (salt %q), want it upgraded", d.PasswordHash, d.PasswordSalt)
	}
	if _, err := st.CheckUserPassword(t.Context(), "bob", "old-password"); err != nil {
		t.Errorf("the upgraded hash: %v", err)
	}
	if _, err := st.CheckUserPassword(t.Context(), "bob", "wrong"); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("the upgraded hash takes a wrong password: %v", err)
	}
	if n := ended.Load(); n != 0 {
		t.Errorf("the upgrade published %d password changes: sessions would end", n)
	}

	// The upgrade writes nothing when the password was set meanwhile
	// (which does end sessions: the subscription is live).
	old = legacy("bob", "old-password")
	if err := st.SetUserPassword(t.Context(), "bob", "newer-password"); err != nil {
		t.Fatal(err)
	}
	if n := ended.Load(); n != 2 {
		t.Errorf("%d password changes seen, want 2 (the legacy record and the new password)", n)
	}
	newer := stored("bob").PasswordHash
	if err := st.upgradeUserPasswordHash(t.Context(), "bob", old, "old-password"); err != nil {
		t.Fatal(err)
	}
	if stored("bob").PasswordHash != newer {
		t.Error("a late upgrade overwrote a password set meanwhile")
	}
}

// A malformed argon2id hash matches nothing (no panic, no huge
// allocation from its parameters), and parameters other than ours still
// verify and are marked for an upgrade.
func TestCheckUserPasswordHashMalformed(t *testing.T) {
	t.Parallel()
	good, _ := newUserPasswordHash("pw")
	if ok, old := checkUserPasswordHash("pw", good, ""); !ok || old {
		t.Fatalf("own hash: ok=%v old=%v", ok, old)
	}
	parts := strings.Split(good, "$") // "", argon2id, v=19, params, salt, key
	if len(parts) != 6 {
		t.Fatalf("%q is not a PHC string", good)
	}
	for _, bad := range []string{
		"$argon2id$", "$argon2id$v=19$m=19456,t=2,p=1$" + parts[4], "$argon2id$v=18$m=19456,t=2,p=1$" + parts[4] + "$" + parts[5],
		"$argon2id$v=19$m=4294967295,t=2,p=1$" + parts[4] + "$" + parts[5], "$argon2id$v=19$m=19456,t=0,p=1$" + parts[4] + "$" + parts[5],
		"$argon2id$v=19$m=19456,t=2,p=1$!!$" + parts[5], "$argon2id$v=19$m=19456,t=2,p=1$" + parts[4] + "$c2hvcnQ",
		"$argon2id$v=19$m=19456,t=2,p=0$" + parts[4] + "$" + parts[5],
	} {
		if ok, _ := checkUserPasswordHash("pw", bad, ""); ok {
			t.Errorf("%q matched", bad)
		}
	}
	// The same key with other (weaker) parameters would not verify; a
	// hash made with other parameters verifies and asks for an upgrade.
	s := make([]byte, argon2SaltLen)
	key := argon2Key("pw", s, 64, 1, 1, 32)
	other := "$argon2id$v=19$m=64,t=1,p=1$" + b64.EncodeToString(s) + "$" + b64.EncodeToString(key)
	if ok, old := checkUserPasswordHash("pw", other, ""); !ok || !old {
		t.Errorf("hash with other parameters: ok=%v old=%v, want true true", ok, old)
	}
}

// Logins without valid credentials cannot spend the hashing budget: a
// login as a user who does not exist runs no hash (it waits as long as a
// verification takes, on a timer), and a user's second login with the
// same password is answered from the remembered verification; both
// return while every hashing slot is taken. A wrong password, a changed
// one and a first login still hash. Not parallel: it holds the
// process's slots.
func TestUserLoginsBoundHashing(t *testing.T) {
	st, _ := openInitialized(t)
	must[User](t)(st.AddUser(t.Context(), "bob", "", "bob-password", ""))
	if _, err := st.CheckUserPassword(t.Context(), "bob", "bob-password"); err != nil { // remembered from here
		t.Fatal(err)
	}
	check := func(name, pw string) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := st.CheckUserPassword(t.Context(), name, pw)
			done <- err
		}()
		return done
	}
	wait := func(what string, done <-chan error) error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			t.Fatalf("%s did not return", what)
			return nil
		}
	}
	// Every slot taken, as by a flood of guesses at users who exist.
	for range cap(userHashSlots) {
		userHashSlots <- struct{}{}
	}
	runs := argon2Runs.Load()
	for _, name := range []string{"nobody", "user-nobody", "no body"} {
		if err := wait("an unknown user's login", check(name, "guess")); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("%q: %v; want ErrBadCredentials", name, err)
		}
	}
	if err := wait("bob's second login", check("bob", "bob-password")); err != nil {
		t.Errorf("bob's second login: %v", err)
	}
	if n := argon2Runs.Load() - runs; n != 0 {
		t.Errorf("%d hashes run for unknown users and a remembered login", n)
	}
	wrong := check("bob", "wrong")
	for range cap(userHashSlots) {
		<-userHashSlots
	}
	if err := wait("a wrong password", wrong); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("wrong password: %v", err)
	}
	if n := argon2Runs.Load() - runs; n != 1 {
		t.Errorf("a wrong password ran %d hashes; want 1", n)
	}
	// A changed password is not answered from memory.
	if err := st.SetUserPassword(t.Context(), "bob", "new-password"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CheckUserPassword(t.Context(), "bob", "bob-password"); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("the old password after a change: %v", err)
	}
	if _, err := st.CheckUserPassword(t.Context(), "bob", "new-password"); err != nil {
		t.Errorf("the new password: %v", err)
	}
}
