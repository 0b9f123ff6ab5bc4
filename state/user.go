package state

import (
	"strings"
	"time"

	"github.com/juju/errors"
	"github.com/juju/names/v5"

	"github.com/provisiond/provisiond/watcher"
)

// Controller access levels of a user.
const (
	AccessSuperuser = "superuser"
	AccessLogin     = "login"
)

// AdminUser is the user made by Initialize.
const AdminUser = "admin"

// User is a local user of the controller.
type User struct {
	Name        string
	DisplayName string
	Access      string
	CreatedAt   time.Time
}

type userDoc struct {
	Name         string    `json:"name"`
	DisplayName  string    `json:"display-name,omitempty"`
	Access       string    `json:"access"`
	PasswordHash string    `json:"password-hash"`
	PasswordSalt string    `json:"password-salt"`
	CreatedAt    time.Time `json:"created-at"`
}

func (d *userDoc) user() User {
	return User{Name: d.Name, DisplayName: d.DisplayName, Access: d.Access, CreatedAt: d.CreatedAt}
}

// userName turns a user name or tag into the local user name the record is
// kept under: "admin", "admin@local" and "user-admin@local" are all
// "admin". Strings starting "user-" are read as tags, which is why AddUser
// refuses such names. Users of other domains are not supported.
func userName(s string) (string, error) {
	if strings.HasPrefix(s, names.UserTagKind+"-") {
		tag, err := names.ParseUserTag(s)
		if err != nil {
			return "", errors.NotValidf("user tag %q", s)
		}
		if !tag.IsLocal() {
			return "", errors.NotValidf("external user %q", s)
		}
		return tag.Name(), nil
	}
	name, domain, _ := strings.Cut(s, "@")
	if domain != "" && domain != "local" {
		return "", errors.NotValidf("external user %q", s)
	}
	if !names.IsValidUserName(name) {
		return "", errors.NotValidf("user name %q", s)
	}
	return name, nil
}

func validateAccess(access string) error {
	if access != AccessSuperuser && access != AccessLogin {
		return errors.NotValidf("access %q", access)
	}
	return nil
}

// AddUser adds a local user. access is AccessSuperuser or AccessLogin
// (the default when empty).
func (st *State) AddUser(name, displayName, password, access string) (User, error) {
	name, err := userName(name)
	if err != nil {
		return User{}, err
	}
	if strings.HasPrefix(name, names.UserTagKind+"-") {
		return User{}, errors.NotValidf("user name %q (looks like a tag)", name)
	}
	if access == "" {
		access = AccessLogin
	}
	if err := validateAccess(access); err != nil {
		return User{}, err
	}
	if password == "" {
		return User{}, errors.NotValidf("empty password")
	}
	hash, salt := newUserPasswordHash(password) // outside the txn: it is slow
	d := &userDoc{
		Name:         name,
		DisplayName:  displayName,
		Access:       access,
		PasswordSalt: salt,
		PasswordHash: hash,
		CreatedAt:    st.now().UTC().Round(0),
	}
	if err := st.update(func(tx *txn) error { return tx.addUser(d) }); err != nil {
		return User{}, err
	}
	return d.user(), nil
}

func (tx *txn) addUser(d *userDoc) error {
	if ok, err := exists(tx, KindUser, "", d.Name); err != nil {
		return err
	} else if ok {
		return errors.AlreadyExistsf("user %q", d.Name)
	}
	return tx.put(KindUser, "", d.Name, d, watcher.FieldCreated)
}

// User returns the user with the given name or tag.
func (st *State) User(name string) (User, error) {
	name, err := userName(name)
	if err != nil {
		return User{}, err
	}
	var d userDoc
	if err := st.view(func(r reader) error {
		d, err = getUser(r, name)
		return err
	}); err != nil {
		return User{}, err
	}
	return d.user(), nil
}

// Users returns every user, sorted by name.
func (st *State) Users() ([]User, error) {
	var docs []userDoc
	err := st.view(func(r reader) error {
		var err error
		docs, err = list[userDoc](r, KindUser, "")
		return err
	})
	if err != nil {
		return nil, err
	}
	users := make([]User, len(docs))
	for i := range docs {
		users[i] = docs[i].user()
	}
	return users, nil
}

// CheckUserPassword returns the user if password is theirs. An unknown
// user, a malformed name and a wrong password all give ErrBadCredentials,
// after as long a time; only a user who exists costs a hash (userhash.go).
func (st *State) CheckUserPassword(name, password string) (User, error) {
	var (
		d     userDoc
		found bool
	)
	if n, err := userName(name); err == nil {
		err = st.viewCurrent(func(r reader) error {
			var err error
			found, err = get(r, KindUser, "", n, &d)
			return err
		})
		if err != nil {
			return User{}, err
		}
	}
	if !found {
		st.unknownUserWait()
		return User{}, ErrBadCredentials
	}
	if verified.check(d.Name, d.PasswordHash, password) {
		return d.user(), nil
	}
	start := time.Now()
	ok, old := checkUserPasswordHash(password, d.PasswordHash, d.PasswordSalt)
	st.verifyTimes.add(time.Since(start))
	if !ok {
		return User{}, ErrBadCredentials
	}
	if old {
		_ = st.upgradeUserPasswordHash(d.Name, d.PasswordHash, password) // see userhash.go
	} else {
		verified.add(d.Name, d.PasswordHash, password)
	}
	return d.user(), nil
}

// SetUserPassword changes a user's password.
func (st *State) SetUserPassword(name, password string) error {
	name, err := userName(name)
	if err != nil {
		return err
	}
	if password == "" {
		return errors.NotValidf("empty password")
	}
	hash, salt := newUserPasswordHash(password)
	return st.update(func(tx *txn) error {
		d, err := getUser(tx, name)
		if err != nil {
			return err
		}
		d.PasswordSalt, d.PasswordHash = salt, hash
		return tx.put(KindUser, "", name, &d, FieldPassword)
	})
}

func getUser(r reader, name string) (userDoc, error) {
	var d userDoc
	ok, err := get(r, KindUser, "", name, &d)
	if err != nil {
		return userDoc{}, err
	}
	if !ok {
		return userDoc{}, errors.NotFoundf("user %q", name)
	}
	return d, nil
}
