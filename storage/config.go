package storage

import (
	"fmt"
	"maps"
	"regexp"
	"strconv"

	"github.com/juju/errors"
)

// poolNameRE is Juju's pool name rule: a letter first, then letters,
// digits, '-' and (a quirk of Juju's pattern, kept for compatibility) '?'.
var poolNameRE = regexp.MustCompile(`^[a-zA-Z]+[-?a-zA-Z0-9]*$`)

// IsValidPoolName reports whether s is a valid pool name. The same rule
// tells a pool name from a count or a size in a storage constraint.
func IsValidPoolName(s string) bool {
	return poolNameRE.MatchString(s)
}

// Config is a storage pool: a name, the type of the provider that makes
// its storage, and the provider's attributes.
//
// Attributes are kept as given (strings from the CLI, or decoded JSON
// values); providers coerce what they read. Config values are copied by
// the functions of this package that take or return them, so a caller
// may keep and change the Attrs map it passed or got.
type Config struct {
	Name     string
	Provider ProviderType
	Attrs    map[string]any
}

// clone returns c with its own copy of the attributes (nil stays nil).
func (c Config) clone() Config {
	c.Attrs = maps.Clone(c.Attrs)
	return c
}

// Persistent reports the pool's "persistent" attribute. It is false when
// the attribute is absent or not a valid boolean.
func (c Config) Persistent() bool {
	b, _ := boolAttr(c.Attrs, AttrPersistent)
	return b
}

// validateCommon checks the attributes every pool may carry, whatever
// its provider: "persistent" must be a boolean (or a string that parses
// as one), and a machine-scoped provider cannot offer persistent storage.
func validateCommon(c Config, p Provider) error {
	persistent, err := boolAttr(c.Attrs, AttrPersistent)
	if err != nil {
		return errors.NewNotValid(err, "validating common storage config")
	}
	if persistent && p != nil && p.Scope() == ScopeMachine {
		// Juju names the pool here, not the provider.
		return errors.NewNotValid(nil, fmt.Sprintf(
			"machine scoped storage provider %q does not support persistent storage", c.Name))
	}
	return nil
}

// boolAttr reads a boolean attribute; strings are parsed as Go booleans
// ("true", "false", "1", "0", ...). An absent attribute is false.
func boolAttr(attrs map[string]any, key string) (bool, error) {
	v, ok := attrs[key]
	if !ok {
		return false, nil
	}
	switch v := v.(type) {
	case bool:
		return v, nil
	case string:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("%s: expected bool, got string(%q)", key, v)
		}
		return b, nil
	}
	return false, fmt.Errorf("%s: expected bool, got %s", key, describe(v))
}

// stringAttr reads a string attribute; absent is "". Any other type is
// an error (as Juju's schema.String checker).
func stringAttr(attrs map[string]any, key string) (string, error) {
	v, ok := attrs[key]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s: expected string, got %s", key, describe(v))
	}
	return s, nil
}

// describe renders a value the way Juju's schema errors do: type(value).
func describe(v any) string {
	if v == nil {
		return "nothing"
	}
	return fmt.Sprintf("%T(%#v)", v, v)
}
