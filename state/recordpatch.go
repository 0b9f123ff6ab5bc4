package state

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/provisiond/provisiond/internal/jsonscan"
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
	// spans[k] is where the value of set[k] is in raw; -1: not there.
	var spansBuf [4][2]int
	spans := spansBuf[:0]
	for range set {
		spans = append(spans, [2]int{-1, -1})
	}
	members := 0
	if !jsonscan.Members(raw, func(key []byte, vs, ve int) bool {
		for k, m := range set {
			switch {
			case string(key) == m.key:
				if spans[k][0] >= 0 {
					return false // a key of set twice
				}
				spans[k] = [2]int{vs, ve}
			case bytes.EqualFold(key, []byte(m.key)):
				return false
			}
		}
		members++
		return true
	}) {
		return nil, false // includes a key written with an escape
	}
	end := bytes.LastIndexByte(raw, '}') // the object's closing brace

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

// appendStatusJSON appends s as json.Marshal encodes it, byte for byte
// (TestAppendStatusJSON, FuzzAppendStatusJSON), without reflection: a
// status write encodes one or two, and json.Marshal of a Status was 4% of
// the daemon's CPU under provisionbench write. Data other than empty goes
// through json.Marshal.
func appendStatusJSON(b []byte, s *Status) ([]byte, error) {
	b = append(b, '{')
	if s.Status != "" {
		b = append(b, `"status":`...)
		b = appendJSONString(b, s.Status)
		b = append(b, ',')
	}
	if s.Message != "" {
		b = append(b, `"message":`...)
		b = appendJSONString(b, s.Message)
		b = append(b, ',')
	}
	b = append(b, `"data":`...)
	switch {
	case s.Data == nil:
		b = append(b, "null"...)
	case len(s.Data) == 0:
		b = append(b, "{}"...)
	default:
		d, err := json.Marshal(s.Data)
		if err != nil {
			return nil, err
		}
		b = append(b, d...)
	}
	if !s.Since.IsZero() {
		t, err := s.Since.MarshalJSON()
		if err != nil {
			return nil, err
		}
		b = append(b, `,"since":`...)
		b = append(b, t...)
	}
	return append(b, '}'), nil
}

// appendJSONString appends s quoted as encoding/json writes strings: the
// HTML characters, U+2028 and U+2029 escaped, invalid UTF-8 as U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
