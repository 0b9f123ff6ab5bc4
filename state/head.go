package state

import (
	"strings"

	"github.com/provisiond/provisiond/internal/jsonscan"
)

// A record's head is the few members a hot path needs of it (a login's
// machine, a container's host, the controller's identity), read without
// decoding the rest: decodeHead reads them with jsonscan where it can, and
// leaves the record to encoding/json where it cannot read it the same way.

// headField is one member of a record that decodeHead reads: a string, a
// list of strings or a bool, into the one target set.
type headField struct {
	name string
	str  *string
	list *[]string
	flag *bool
}

// decodeHead reads the members of record b that fields name into their
// targets, as encoding/json decodes them (jsonscan), skipping the other
// members without validating them (records are written by encoding/json).
// It reports false for anything it does not read as encoding/json would,
// which the caller leaves to encoding/json: a string with an escape or
// outside printable ASCII, a null, a value of another type, a member
// named as one of fields in other case (encoding/json matches names
// without case).
func decodeHead(b []byte, fields []headField) bool {
	return jsonscan.Members(b, func(name []byte, v0, v1 int) bool {
		v := b[v0:v1]
		for _, f := range fields {
			if string(name) != f.name {
				continue
			}
			switch {
			case f.str != nil:
				s, end, ok := jsonscan.PlainString(v, 0)
				if !ok || end != len(v) {
					return false
				}
				*f.str = string(s)
			case f.list != nil:
				l, ok := plainStrings(v)
				if !ok {
					return false
				}
				*f.list = l
			default:
				switch string(v) {
				case "true":
					*f.flag = true
				case "false":
					*f.flag = false
				default:
					return false
				}
			}
			return true
		}
		for _, f := range fields {
			if strings.EqualFold(string(name), f.name) {
				return false
			}
		}
		return true
	})
}

// plainStrings reads v, a JSON array of plain strings (jsonscan.
// PlainString), as encoding/json decodes it into a []string (an empty
// array is an empty slice, not nil).
func plainStrings(v []byte) ([]string, bool) {
	i := jsonscan.SkipSpace(v, 0)
	if i >= len(v) || v[i] != '[' {
		return nil, false
	}
	out := []string{}
	i = jsonscan.SkipSpace(v, i+1)
	if i < len(v) && v[i] == ']' {
		return out, jsonscan.SkipSpace(v, i+1) == len(v)
	}
	for {
		s, end, ok := jsonscan.PlainString(v, i)
		if !ok {
			return nil, false
		}
		out = append(out, string(s))
		i = jsonscan.SkipSpace(v, end)
		switch {
		case i >= len(v):
			return nil, false
		case v[i] == ',':
			i = jsonscan.SkipSpace(v, i+1)
		case v[i] == ']':
			return out, jsonscan.SkipSpace(v, i+1) == len(v)
		default:
			return nil, false
		}
	}
}
