// Package jsonscan holds the project's one set of small JSON scanners:
// rpc's fast paths (the request header, params.Entities, SetStatus) and
// the state layer's readers of stored records (patching a record in
// place, the history's field diffs, redaction) all read JSON through it.
// Each reads one token or one object's members, of a form that writers
// usually produce, and reports false for anything else, which the caller
// then leaves to encoding/json. They never allocate, never read outside
// the slice they are given, and do not validate beyond what they say.
package jsonscan

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func SkipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// PlainString reads the string at data[i] if it holds only printable
// ASCII and no escape; it returns its contents (pointing into data) and
// the index after it.
func PlainString(data []byte, i int) ([]byte, int, bool) {
	if i >= len(data) || data[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			return data[i+1 : j], j + 1, true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// PlainUint reads the integer at data[i] if it is written as plain decimal
// digits without a leading zero (other than "0" itself), at most 19 of
// them (so it fits a uint64), followed by whitespace, ',' or '}'.
func PlainUint(data []byte, i int) (uint64, int, bool) {
	var n uint64
	j := i
	for j < len(data) && data[j] >= '0' && data[j] <= '9' && j-i < 19 {
		n = n*10 + uint64(data[j]-'0')
		j++
	}
	if j == i || (data[i] == '0' && j-i > 1) || j >= len(data) {
		return 0, 0, false
	}
	switch data[j] {
	case ' ', '\t', '\n', '\r', ',', '}':
		return n, j, true
	}
	return 0, 0, false
}

// ValueEnd returns the index after the JSON value starting at data[i]: an
// object or array up to its matching bracket (brackets inside strings do
// not count), a string up to its closing quote, anything else (a number,
// true, false, null) up to the next delimiter or the end of data. It
// reports false when the value does not end within data. It does not
// validate.
func ValueEnd(data []byte, i int) (int, bool) {
	if i >= len(data) {
		return 0, false
	}
	switch data[i] {
	case '"':
		return stringEnd(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				var ok bool
				if i, ok = stringEnd(data, i); !ok {
					return 0, false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return 0, false
	default:
		start := i
		for i < len(data) {
			switch data[i] {
			case ' ', '\t', '\n', '\r', ',', '}', ']':
				return i, i > start
			}
			i++
		}
		return i, i > start
	}
}

// stringEnd returns the index after the JSON string whose opening quote
// is data[i].
func stringEnd(data []byte, i int) (int, bool) {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

// Members calls fn with each top-level member of the JSON object in data,
// in order: its name (without quotes, pointing into data) and where its
// value is (data[v0:v1]). It stops when fn returns false, and returns
// true when it has read the whole object (data holds it alone, with
// whitespace around) and fn never said stop. It returns false for
// anything it cannot read plainly: not an object, a member name written
// with an escape, a structure that is not JSON as far as it looks (it
// checks the structure, not every literal). A name twice is read twice:
// callers to which that matters check.
func Members(data []byte, fn func(name []byte, v0, v1 int) bool) bool {
	i := SkipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = SkipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return SkipSpace(data, i+1) == len(data)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return false
		}
		k0 := i + 1
		k1 := k0
		for k1 < len(data) && data[k1] != '"' {
			if data[k1] == '\\' {
				return false
			}
			k1++
		}
		if k1 >= len(data) {
			return false
		}
		i = SkipSpace(data, k1+1)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		v0 := SkipSpace(data, i+1)
		v1, ok := ValueEnd(data, v0)
		if !ok {
			return false
		}
		if !fn(data[k0:k1], v0, v1) {
			return false
		}
		i = SkipSpace(data, v1)
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = SkipSpace(data, i+1)
		case '}':
			return SkipSpace(data, i+1) == len(data)
		default:
			return false
		}
	}
}
