package state

import (
	"bytes"
	"encoding/json"
)

// Patching a stored record in place (recordpatch.go). A status write
// changes one or two members of a machine's record and leaves the rest
// alone, yet decoding the record and encoding it again is most of what the
// write costs the daemon (a provisioned machine's record takes about 17 µs
// to decode and 8 µs to encode; the write does little else). patchRecord
// replaces the values of some top-level members of the stored JSON object
// and copies every other byte as it is, so the record decodes to what the
// whole round trip would have written.

// patchMember is one top-level member patchRecord sets: its key and its
// value, JSON as json.Marshal writes it.
type patchMember struct {
	key string
	val []byte
}

// patchRecord returns raw, a stored record (a JSON object), with the value
// of each member of set replaced, or added at the end of the object when
// raw has no member of that key. It returns ok false, and the caller
// decodes and encodes the record whole, when raw is not a valid JSON
// object, or when it is one that encoding/json would not decode as its
// plain reading: a key written with an escape, a key that matches a key of
// set only case-insensitively (encoding/json would decode it into the same
// field), or a key of set twice (encoding/json keeps the last).
//
// The new record decodes (into any type) to what decoding raw and then
// setting the members would give: TestPatchRecordMatchesRoundTrip and
// FuzzPatchRecord compare the two.
func patchRecord(raw []byte, set []patchMember) (out []byte, ok bool) {
	if !json.Valid(raw) {
		return nil, false
	}
	i := skipSpace(raw, 0)
	if i == len(raw) || raw[i] != '{' {
		return nil, false
	}
	// spans[k] is where the value of set[k] is in raw; -1: not there.
	var spansBuf [4][2]int
	spans := spansBuf[:0]
	for range set {
		spans = append(spans, [2]int{-1, -1})
	}
	members := 0
	i = skipSpace(raw, i+1)
	for raw[i] != '}' {
		// raw is valid JSON: a member is "key" : value, then , or }.
		ks := i + 1
		ke := ks
		for raw[ke] != '"' {
			if raw[ke] == '\\' {
				return nil, false
			}
			ke++
		}
		key := raw[ks:ke]
		i = skipSpace(raw, ke+1) // at ':'
		vs := skipSpace(raw, i+1)
		ve := skipValue(raw, vs)
		for k, m := range set {
			switch {
			case string(key) == m.key:
				if spans[k][0] >= 0 {
					return nil, false
				}
				spans[k] = [2]int{vs, ve}
			case bytes.EqualFold(key, []byte(m.key)):
				return nil, false
			}
		}
		members++
		i = skipSpace(raw, ve)
		if raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	end := i // the object's closing brace

	size := len(raw)
	for k, m := range set {
		size += len(m.val) + len(m.key) + 4 - (spans[k][1] - spans[k][0])
	}
	out = make([]byte, 0, size)
	at := 0
	for {
		// The next replaced value in raw's order.
		next := -1
		for k := range set {
			if s := spans[k][0]; s >= at && (next < 0 || s < spans[next][0]) {
				next = k
			}
		}
		if next < 0 {
			break
		}
		out = append(out, raw[at:spans[next][0]]...)
		out = append(out, set[next].val...)
		at = spans[next][1]
	}
	out = append(out, raw[at:end]...)
	for k, m := range set {
		if spans[k][0] >= 0 {
			continue
		}
		if members > 0 {
			out = append(out, ',')
		}
		members++
		out = append(out, '"')
		out = append(out, m.key...)
		out = append(out, '"', ':')
		out = append(out, m.val...)
	}
	out = append(out, raw[end:]...)
	return out, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the JSON value starting at b[i]; b is valid
// JSON (json.Valid), so only strings need care: brackets inside them do
// not count.
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	default: // a number, true, false or null
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// skipString returns the end of the JSON string starting at b[i] (its
// opening quote).
func skipString(b []byte, i int) int {
	for i++; ; i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}
