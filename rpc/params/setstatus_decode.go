package params

import "github.com/provisiond/provisiond/internal/jsonscan"

// DecodeFast decodes SetStatus, the params of SetInstanceStatus,
// SetStatus and their kin (the most frequent writes an agent makes), when
// they come in the usual form:
//
//	{"entities":[{"tag":"machine-0","status":"running","info":"","data":{"k":"v"}},...]}
//
// or with an empty list: the keys of each entity among tag, status, info
// and data, spelled so, each at most once, in any order; strings plain
// printable ASCII without escapes; data null or an object whose values
// are such strings, true, false or null (a key given twice: the last
// wins, as encoding/json does); JSON whitespace anywhere between tokens.
// For anything else (a number or a nested value in data, an escape, an
// unknown key) it reports false and leaves s alone; encoding/json, which
// defines the behaviour and the error texts, then decodes it. It
// implements rpc.FastDecoder. TestSetStatusDecodeFastAgreesWithJSON and
// FuzzDecodeSetStatus check that what it accepts encoding/json decodes to
// the same value.
func (s *SetStatus) DecodeFast(data []byte) bool {
	list, ok := decodeEntityList(data, decodeEntityStatus)
	if ok {
		s.Entities = list
	}
	return ok
}

// decodeEntityStatus decodes the object at data[i] (see
// SetStatus.DecodeFast) and returns the index after it.
func decodeEntityStatus(data []byte, i int) (EntityStatusArgs, int, bool) {
	var e EntityStatusArgs
	const (
		seenTag = 1 << iota
		seenStatus
		seenInfo
		seenData
	)
	skip := jsonscan.SkipSpace
	if i >= len(data) || data[i] != '{' {
		return e, 0, false
	}
	if i = skip(data, i+1); i < len(data) && data[i] == '}' {
		return e, i + 1, true
	}
	seen := 0
	for {
		key, j, ok := objectKey(data, i)
		if !ok {
			return e, 0, false
		}
		var bit int
		var str []byte
		switch string(key) {
		case "tag":
			bit = seenTag
			if str, j, ok = jsonscan.PlainString(data, j); ok {
				e.Tag = string(str)
			}
		case "status":
			bit = seenStatus
			if str, j, ok = jsonscan.PlainString(data, j); ok {
				e.Status = string(str)
			}
		case "info":
			bit = seenInfo
			if str, j, ok = jsonscan.PlainString(data, j); ok {
				e.Info = string(str)
			}
		case "data":
			bit = seenData
			j, ok = decodeStatusData(data, j, &e.Data)
		}
		if bit == 0 || !ok || seen&bit != 0 {
			return e, 0, false
		}
		seen |= bit
		if i = skip(data, j); i < len(data) && data[i] == '}' {
			return e, i + 1, true
		}
		if i >= len(data) || data[i] != ',' {
			return e, 0, false
		}
		i = skip(data, i+1)
	}
}

// decodeStatusData decodes null or a flat object of plain strings, true,
// false and null at data[i] into *m (see SetStatus.DecodeFast).
func decodeStatusData(data []byte, i int, m *map[string]any) (int, bool) {
	skip := jsonscan.SkipSpace
	if j, ok := literal(data, i, "null"); ok {
		return j, true // encoding/json leaves the map as it was: nil
	}
	if i >= len(data) || data[i] != '{' {
		return 0, false
	}
	out := map[string]any{}
	if i = skip(data, i+1); i < len(data) && data[i] == '}' {
		*m = out
		return i + 1, true
	}
	for {
		key, j, ok := objectKey(data, i)
		if !ok || j >= len(data) {
			return 0, false
		}
		switch data[j] {
		case '"':
			var str []byte
			if str, j, ok = jsonscan.PlainString(data, j); !ok {
				return 0, false
			}
			out[string(key)] = string(str)
		case 't':
			if j, ok = literal(data, j, "true"); !ok {
				return 0, false
			}
			out[string(key)] = true
		case 'f':
			if j, ok = literal(data, j, "false"); !ok {
				return 0, false
			}
			out[string(key)] = false
		case 'n':
			if j, ok = literal(data, j, "null"); !ok {
				return 0, false
			}
			out[string(key)] = nil
		default:
			return 0, false
		}
		if i = skip(data, j); i < len(data) && data[i] == '}' {
			*m = out
			return i + 1, true
		}
		if i >= len(data) || data[i] != ',' {
			return 0, false
		}
		i = skip(data, i+1)
	}
}

// literal reads the literal lit (true, false, null) at data[i], which must
// be followed by whitespace, ',', '}' or ']'.
func literal(data []byte, i int, lit string) (int, bool) {
	j := i + len(lit)
	if j >= len(data) || string(data[i:j]) != lit {
		return 0, false
	}
	switch data[j] {
	case ' ', '\t', '\n', '\r', ',', '}', ']':
		return j, true
	}
	return 0, false
}
