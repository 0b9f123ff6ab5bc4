// Package jsonscan holds the small JSON scanners behind rpc's fast paths
// (the request header, params.Entities): each reads one token of a form
// that clients usually send and reports false for anything else, which
// the caller then leaves to encoding/json. They never allocate and do not
// validate beyond what they say.
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
// object or array up to its matching bracket, a string up to its closing
// quote, anything else up to the next delimiter. It does not validate.
func ValueEnd(data []byte, i int) (int, bool) {
	if i >= len(data) {
		return 0, false
	}
	switch data[i] {
	case '{', '[', '"':
	default:
		j := i
		for j < len(data) {
			switch data[j] {
			case ' ', '\t', '\n', '\r', ',', '}', ']':
				return j, j > i
			}
			j++
		}
		return 0, false
	}
	depth := 0
	inString := false
	for j := i; j < len(data); j++ {
		c := data[j]
		if inString {
			switch c {
			case '\\':
				j++
			case '"':
				inString = false
				if depth == 0 {
					return j + 1, true
				}
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return j + 1, true
			}
		}
	}
	return 0, false
}
