package environ

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
)

// Number is a Juju version number: major.minor.patch[.build] or
// major.minor-tag+patch.
type Number struct {
	Major, Minor, Patch, Build int
	Tag                        string
}

var numberRE = regexp.MustCompile(`^(\d{1,9})\.(\d{1,9})(?:\.|-([a-z]+))(\d{1,9})(?:\.(\d{1,9}))?$`)

// ParseNumber parses a version number such as "3.3.0" or "2.0-beta1".
func ParseNumber(s string) (Number, error) {
	m := numberRE.FindStringSubmatch(s)
	if m == nil {
		return Number{}, fmt.Errorf("invalid version %q", s)
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	n := Number{Major: atoi(m[1]), Minor: atoi(m[2]), Tag: m[3], Patch: atoi(m[4])}
	if m[5] != "" {
		n.Build = atoi(m[5])
	}
	return n, nil
}

// String formats n as Juju does.
func (n Number) String() string {
	var s string
	if n.Tag == "" {
		s = fmt.Sprintf("%d.%d.%d", n.Major, n.Minor, n.Patch)
	} else {
		s = fmt.Sprintf("%d.%d-%s%d", n.Major, n.Minor, n.Tag, n.Patch)
	}
	if n.Build > 0 {
		s += fmt.Sprintf(".%d", n.Build)
	}
	return s
}

// Compare orders numbers; a tagged (pre-release) number sorts before the
// release of the same major.minor.
func (n Number) Compare(o Number) int {
	if c := cmp.Compare(n.Major, o.Major); c != 0 {
		return c
	}
	if c := cmp.Compare(n.Minor, o.Minor); c != 0 {
		return c
	}
	if n.Tag != o.Tag {
		switch {
		case n.Tag == "":
			return 1
		case o.Tag == "":
			return -1
		}
		return cmp.Compare(n.Tag, o.Tag)
	}
	if c := cmp.Compare(n.Patch, o.Patch); c != 0 {
		return c
	}
	return cmp.Compare(n.Build, o.Build)
}

// Binary is a version of the agent binaries for one OS (v11: "ubuntu";
// 2015: a series such as "trusty") and architecture.
type Binary struct {
	Number
	Release string
	Arch    string
}

var binaryRE = regexp.MustCompile(`^(.+)-([a-z][a-z0-9]*)-([a-z0-9]+)$`)

// ParseBinary parses "3.3.0-ubuntu-amd64".
func ParseBinary(s string) (Binary, error) {
	m := binaryRE.FindStringSubmatch(s)
	if m == nil {
		return Binary{}, fmt.Errorf("invalid binary version %q", s)
	}
	n, err := ParseNumber(m[1])
	if err != nil {
		return Binary{}, fmt.Errorf("invalid binary version %q", s)
	}
	return Binary{Number: n, Release: m[2], Arch: m[3]}, nil
}

// String formats b as Juju does.
func (b Binary) String() string { return fmt.Sprintf("%s-%s-%s", b.Number, b.Release, b.Arch) }

// Tools is one entry of the agent binaries catalog.
type Tools struct {
	Version Binary
	SHA256  string
	Size    int64
}

// ToolsFilter selects catalog entries; zero fields match anything. Major
// and Minor are used only when Number is zero (Minor -1: any). Release is
// an OS ("ubuntu") or a 2015 series ("jammy"); a series also matches the
// entries of its OS (Juju 3 keeps agent binaries by OS, so "3.3.0-ubuntu-
// amd64" serves a jammy machine).
type ToolsFilter struct {
	Number  Number
	Major   int
	Minor   int
	Release string
	Arch    string
}

// FindTools returns the catalog entries matching f, sorted by version.
func FindTools(catalog []Tools, f ToolsFilter) []Tools {
	var out []Tools
	for _, t := range catalog {
		v := t.Version
		if f.Number != (Number{}) {
			if v.Number.Compare(f.Number) != 0 {
				continue
			}
		} else {
			if f.Major > 0 && v.Major != f.Major {
				continue
			}
			if f.Major > 0 && f.Minor >= 0 && f.Minor != v.Minor {
				continue
			}
		}
		if f.Release != "" && v.Release != f.Release && v.Release != SeriesOS(f.Release) {
			continue
		}
		if f.Arch != "" && v.Arch != f.Arch {
			continue
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Tools) int {
		if c := a.Version.Number.Compare(b.Version.Number); c != 0 {
			return c
		}
		return cmp.Compare(a.Version.String(), b.Version.String())
	})
	return out
}

// ForSeries returns b as a 2015 client asks for it: an entry kept by OS
// named by the series asked for ("3.3.0-ubuntu-amd64" for jammy is
// "3.3.0-jammy-amd64"); 2015 agents read the series out of the version.
// Entries of another release, and an empty series, leave b as it is.
func (b Binary) ForSeries(series string) Binary {
	if series != "" && b.Release != series && b.Release == SeriesOS(series) {
		b.Release = series
	}
	return b
}

// ToolsURL is where an agent downloads t from this controller.
func ToolsURL(apiAddr, modelUUID string, t Binary) string {
	return fmt.Sprintf("https://%s/model/%s/tools/%s", apiAddr, modelUUID, t)
}
