package storage

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/size"
)

// Constraints are the storage constraints of one charm storage name: the
// pool to draw from, the minimum size of each instance and how many
// instances to make.
type Constraints struct {
	// Pool is the pool (or provider type) name; "" means the model's
	// default (see DefaultPool).
	Pool string
	// Size is the minimum size of each instance in MiB; 0 means the
	// default (see ConstraintsWithDefaults).
	Size uint64
	// Count is the number of instances; 0 means the default.
	Count uint64
}

var (
	countRE = regexp.MustCompile(`^-?[0-9]+$`)
	// A size needs a suffix: a bare number is a count.
	sizeRE = regexp.MustCompile(`^-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[MGTPEZY](?:i?B)?$`)
)

// ParseConstraints parses storage constraints written as a comma-separated
// list of up to three fields in any order, as Juju's --storage flag:
//
//	POOL   a pool or provider name (IsValidPoolName): "ebs", "tmpfs"
//	COUNT  a positive integer: "3"
//	SIZE   a number with a binary multiplier suffix M, G, T, P, E, Z or Y
//	       (optionally followed by "B" or "iB"): "512M", "10G", "1.5T"
//
// Sizes are in MiB, rounded up. Empty fields are ignored. At least one
// field must be given; the count defaults to 1. Each field may be given
// once. All errors satisfy errors.Is(err, errors.NotValid).
func ParseConstraints(s string) (Constraints, error) {
	var cons Constraints
	for _, field := range strings.Split(s, ",") {
		if field == "" {
			continue
		}
		if IsValidPoolName(field) {
			if cons.Pool != "" {
				return Constraints{}, errors.NotValidf("pool name is already set to %q, new value %q", cons.Pool, field)
			}
			cons.Pool = field
			continue
		}
		if count, ok, err := parseCount(field); ok {
			if err != nil {
				return Constraints{}, errors.NewNotValid(err, "cannot parse count")
			}
			if cons.Count != 0 {
				return Constraints{}, errors.NotValidf("storage instance count is already set to %d, new value %d", cons.Count, count)
			}
			cons.Count = count
			continue
		}
		if sizeRE.MatchString(field) {
			mib, err := size.ParseMiB(field)
			if err != nil {
				return Constraints{}, errors.NewNotValid(err, "cannot parse size")
			}
			if cons.Size != 0 && mib != 0 {
				return Constraints{}, errors.NotValidf("storage size is already set to %d, new value %d", cons.Size, mib)
			}
			cons.Size = mib
			continue
		}
		return Constraints{}, errors.NotValidf("unrecognized storage constraint %q", field)
	}
	if cons == (Constraints{}) {
		return Constraints{}, errors.NewNotValid(nil, "storage constraints require at least one field to be specified")
	}
	if cons.Count == 0 {
		cons.Count = 1
	}
	return cons, nil
}

// parseCount reports whether s is a count (ok) and, if so, its value or
// why it is not a valid one. A number too large for uint64 is not a count
// (Juju then reports it as an unrecognized constraint).
func parseCount(s string) (n uint64, ok bool, err error) {
	if !countRE.MatchString(s) {
		return 0, false, nil
	}
	if s[0] != '-' {
		n, err = strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, false, nil
		}
		if n > 0 {
			return n, true, nil
		}
	}
	return 0, true, fmt.Errorf("count must be greater than zero, got %q", s)
}

// String formats c so that ParseConstraints reads it back: the non-zero
// fields of "POOL,COUNT,SIZEM". The zero value formats as "".
func (c Constraints) String() string {
	var parts []string
	if c.Pool != "" {
		parts = append(parts, c.Pool)
	}
	if c.Count > 0 {
		parts = append(parts, strconv.FormatUint(c.Count, 10))
	}
	if c.Size > 0 {
		parts = append(parts, strconv.FormatUint(c.Size, 10)+"M")
	}
	return strings.Join(parts, ",")
}

// ParseNamedConstraints parses one "NAME=CONSTRAINTS" argument, or a bare
// "NAME", which stands for NAME=1 unless mustHaveConstraints is set.
func ParseNamedConstraints(arg string, mustHaveConstraints bool) (string, Constraints, error) {
	name, s, err := splitNamed(arg, mustHaveConstraints)
	if err != nil {
		return "", Constraints{}, err
	}
	cons, err := parseNamed(name, s)
	return name, cons, err
}

func splitNamed(arg string, mustHaveConstraints bool) (name, cons string, err error) {
	parts := strings.Split(arg, "=")
	name = parts[0]
	if len(parts) > 2 || name == "" {
		return "", "", errors.NewNotValid(nil, fmt.Sprintf(`expected "name=constraints" or "name", got %q`, arg))
	}
	if len(parts) == 1 {
		if mustHaveConstraints {
			return "", "", errors.NewNotValid(nil, fmt.Sprintf(`expected "name=constraints" where "constraints" must be specified, got %q`, arg))
		}
		return name, "1", nil
	}
	return name, parts[1], nil
}

func parseNamed(name, s string) (Constraints, error) {
	cons, err := ParseConstraints(s)
	if err != nil {
		return Constraints{}, fmt.Errorf("cannot parse constraints for storage %q: %w", name, err)
	}
	return cons, nil
}

// ParseConstraintsMap parses "NAME=CONSTRAINTS" (or "NAME") arguments, as
// given to juju deploy --storage, into constraints by storage name. A name
// given twice is an error. All errors satisfy errors.Is(err, errors.NotValid).
func ParseConstraintsMap(args []string, mustHaveConstraints bool) (map[string]Constraints, error) {
	out := make(map[string]Constraints, len(args))
	for _, arg := range args {
		name, s, err := splitNamed(arg, mustHaveConstraints)
		if err != nil {
			return nil, err
		}
		if _, dup := out[name]; dup {
			return nil, errors.NewNotValid(nil, fmt.Sprintf("storage %q specified more than once", name))
		}
		if out[name], err = parseNamed(name, s); err != nil {
			return nil, err
		}
	}
	return out, nil
}
