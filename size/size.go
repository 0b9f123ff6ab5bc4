// Package size is the one parser and formatter of storage and memory
// sizes, shared by the daemon (constraints, charm metadata, storage and
// disk constraints) and provisionctl (which checks what it can before it
// calls), so 1G, 1GiB, 1GB, 1024 and 1024M mean the same everywhere.
//
// Sizes are counted in MiB, as Juju does. A size is a non-negative
// decimal number (fractions allowed, rounded up to a whole MiB) with an
// optional unit M, G, T, P, E, Z or Y, powers of 1024 (M when none), each
// optionally followed by B or iB: "512", "512M", "1.5G", "1GiB", "2TB".
// Units are upper case, as in Juju ("1g" is refused).
//
// It imports nothing of the module: a leaf, like watcher and environ.
package size

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Units are the unit letters, from MiB up; each is 1024 times the one
// before.
const Units = "MGTPEZY"

// Rule says what a size looks like, for error messages.
const Rule = "a number of MiB, or with a unit M, G, T, P, E, Z or Y (powers of 1024; B or iB may follow): 512M, 1G, 1.5GiB"

// Error is a size that does not parse; its message names the rule.
type Error struct {
	Input  string
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("size %q: %s; want %s", e.Input, e.Reason, Rule)
}

// ParseMiB parses a size into MiB (see the package documentation).
func ParseMiB(s string) (uint64, error) {
	num, shift := s, 0
	if i := strings.IndexFunc(s, func(r rune) bool { return r != '.' && (r < '0' || r > '9') }); i >= 0 {
		unit := s[i:]
		shift = -1
		for j, u := range Units {
			switch unit {
			case string(u), string(u) + "B", string(u) + "iB":
				shift = 10 * j
			}
		}
		if shift < 0 {
			if i == 0 && !strings.ContainsAny(unit[:1], Units) {
				return 0, &Error{s, "not a number"}
			}
			return 0, &Error{s, fmt.Sprintf("unknown unit %q", unit)}
		}
		num = s[:i]
	}
	if num == "" || num == "." || strings.Count(num, ".") > 1 {
		return 0, &Error{s, "not a number"}
	}
	tooLarge := &Error{s, "too large (at most 2^64-1 MiB)"}
	if !strings.Contains(num, ".") {
		// Whole numbers exactly.
		n, err := strconv.ParseUint(num, 10, 64)
		if err != nil {
			return 0, tooLarge // only digits: the one way it fails
		}
		if n > math.MaxUint64>>shift {
			return 0, tooLarge
		}
		return n << shift, nil
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || !(v >= 0) {
		return 0, &Error{s, "not a number"}
	}
	v = math.Ceil(math.Ldexp(v, shift))
	if v >= math.Ldexp(1, 64) {
		return 0, tooLarge
	}
	return uint64(v), nil
}

// FormatMiB shows a size in MiB in the largest unit that divides it
// ("1G", "512M", "3T"), so that ParseMiB reads it back; 0 is "0M".
func FormatMiB(mib uint64) string {
	unit := 0
	for mib != 0 && mib%1024 == 0 && unit < len(Units)-1 {
		mib /= 1024
		unit++
	}
	return strconv.FormatUint(mib, 10) + Units[unit:unit+1]
}
