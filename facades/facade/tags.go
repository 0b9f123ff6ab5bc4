package facade

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/juju/names/v5"

	"github.com/provisiond/provisiond/state"
)

// Tag parsing for input from the wire. juju/names' parsers panic on some
// strings that pass their own validation: "controller-" followed by digits
// that overflow an int (NewControllerAgentTag), which every Parse*Tag
// reaches through ParseTag. These wrappers turn any such panic into the
// parse error juju/names gives for an invalid tag, so bad input is an
// error, never a panic; every parse error is a *TagError. Facades parse
// client-supplied tags only through them.
//
// A tag longer than MaxTagLength is refused before any parsing (a 3 MB
// auth tag cost 1.7 s of regular expressions), and its error and log lines
// quote only its first bytes (Bounded).

// MaxTagLength is the longest tag accepted from the wire, in bytes. Juju's
// tags are far shorter: a model tag is 42 bytes, an application name a
// Kubernetes label of at most 63, a nested container's machine tag under
// 100.
const MaxTagLength = 1024

// boundedPrefix is how much of a client's string errors and logs quote.
const boundedPrefix = 64

// Bounded returns s for a log line or an error message: s itself if short,
// else its first 64 bytes (cut at a rune boundary) and its length.
func Bounded(s string) string {
	if len(s) <= boundedPrefix {
		return s
	}
	cut := boundedPrefix
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s...(%d bytes)", s[:cut], len(s))
}

// ParseTag is names.ParseTag without panics.
func ParseTag(s string) (names.Tag, error) { return parseSafely(s, "", names.ParseTag) }

// ParseMachineTag is names.ParseMachineTag without panics. The usual
// "machine-N" is parsed without names' regular expression (same result).
func ParseMachineTag(s string) (names.MachineTag, error) {
	if len(s) > MaxTagLength {
		return names.MachineTag{}, invalidTag(s, names.MachineTagKind)
	}
	if id, ok := strings.CutPrefix(s, "machine-"); ok && state.IsTopLevelMachineID(id) {
		return names.NewMachineTag(id), nil
	}
	return parseSafely(s, names.MachineTagKind, names.ParseMachineTag)
}

// ParseModelTag is names.ParseModelTag without panics.
func ParseModelTag(s string) (names.ModelTag, error) {
	return parseSafely(s, names.ModelTagKind, names.ParseModelTag)
}

// ParseApplicationTag is names.ParseApplicationTag without panics.
func ParseApplicationTag(s string) (names.ApplicationTag, error) {
	return parseSafely(s, names.ApplicationTagKind, names.ParseApplicationTag)
}

// ParseUnitTag is names.ParseUnitTag without panics.
func ParseUnitTag(s string) (names.UnitTag, error) {
	return parseSafely(s, names.UnitTagKind, names.ParseUnitTag)
}

// ParseVolumeTag is names.ParseVolumeTag without panics.
func ParseVolumeTag(s string) (names.VolumeTag, error) {
	return parseSafely(s, names.VolumeTagKind, names.ParseVolumeTag)
}

func parseSafely[T any](s, kind string, parse func(string) (T, error)) (t T, err error) {
	if len(s) > MaxTagLength {
		return t, &TagError{Err: invalidTag(s, kind)}
	}
	defer func() {
		if recover() != nil {
			var zero T
			t, err = zero, &TagError{Err: invalidTag(s, kind)}
		}
	}()
	if t, err = parse(s); err != nil {
		return t, &TagError{Err: err}
	}
	return t, nil
}

// QuoteTag quotes a client's tag for an error message, as %q does; a tag
// over MaxTagLength is quoted by its first bytes only.
func QuoteTag(s string) string {
	if len(s) > MaxTagLength {
		return fmt.Sprintf("%q (%d bytes, over the limit of %d)", Bounded(s), len(s), MaxTagLength)
	}
	return fmt.Sprintf("%q", s)
}

// invalidTag is juju/names' error text for an invalid tag (QuoteTag).
func invalidTag(s, kind string) error {
	q := QuoteTag(s)
	if kind == "" {
		return fmt.Errorf("%s is not a valid tag", q)
	}
	return fmt.Errorf("%s is not a valid %s tag", q, kind)
}

// TagError is a tag from the wire that does not parse. Its text is
// juju/names' ("%q is not a valid tag", "%q is not a valid machine tag"),
// which the specs give with no code; it is a wire error as it is (see the
// error table).
type TagError struct{ Err error }

func (e *TagError) Error() string { return e.Err.Error() }

// Unwrap returns juju/names' error.
func (e *TagError) Unwrap() error { return e.Err }

// ErrorCode implements the wire coder: the parse error has no code.
func (e *TagError) ErrorCode() string { return "" }
