package facade

import (
	"fmt"
	"strings"

	"github.com/juju/names/v5"

	"github.com/provisiond/provisiond/state"
)

// Tag parsing for input from the wire. juju/names' parsers panic on some
// strings that pass their own validation: "controller-" followed by digits
// that overflow an int (NewControllerAgentTag), which every Parse*Tag
// reaches through ParseTag. These wrappers turn any such panic into the
// parse error juju/names gives for an invalid tag, so bad input is an
// error, never a panic. Facades parse client-supplied tags only through
// them.

// ParseTag is names.ParseTag without panics.
func ParseTag(s string) (names.Tag, error) { return parseSafely(s, "", names.ParseTag) }

// ParseMachineTag is names.ParseMachineTag without panics. The usual
// "machine-N" is parsed without names' regular expression (same result).
func ParseMachineTag(s string) (names.MachineTag, error) {
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
	defer func() {
		if recover() != nil {
			var zero T
			t, err = zero, invalidTag(s, kind)
		}
	}()
	return parse(s)
}

// invalidTag is juju/names' error text for an invalid tag.
func invalidTag(s, kind string) error {
	if kind == "" {
		return fmt.Errorf("%q is not a valid tag", s)
	}
	return fmt.Errorf("%q is not a valid %s tag", s, kind)
}
