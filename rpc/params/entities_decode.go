package params

import "github.com/provisiond/provisiond/internal/jsonscan"

// DecodeFast decodes Entities, the params of most bulk calls, when they
// come in the usual form: {"entities":[{"tag":"..."},...]} (or with an
// empty list), keys spelled so, tags plain printable ASCII without
// escapes, JSON whitespace anywhere between tokens. For anything else it
// reports false and leaves e alone; encoding/json, which defines the
// behaviour (and the error texts), then decodes it. It implements
// rpc.FastDecoder. TestDecodeFastAgreesWithJSON and FuzzDecodeEntities
// check that what it accepts encoding/json decodes to the same value.
func (e *Entities) DecodeFast(data []byte) bool {
	list, ok := decodeEntityList(data, func(data []byte, i int) (Entity, int, bool) {
		skip := jsonscan.SkipSpace
		if i >= len(data) || data[i] != '{' {
			return Entity{}, 0, false
		}
		key, j, ok := objectKey(data, skip(data, i+1))
		if !ok || string(key) != "tag" {
			return Entity{}, 0, false
		}
		tag, j, ok := jsonscan.PlainString(data, j)
		if !ok {
			return Entity{}, 0, false
		}
		if j = skip(data, j); j >= len(data) || data[j] != '}' {
			return Entity{}, 0, false
		}
		return Entity{Tag: string(tag)}, j + 1, true
	})
	if ok {
		e.Entities = list
	}
	return ok
}

// decodeEntityList decodes the usual envelope of the bulk params,
// {"entities":[...]}, alone in data (JSON whitespace around its tokens),
// with elem decoding each element at data[i] and returning the index
// after it. The list of an empty array is empty, not nil, as
// encoding/json makes it.
func decodeEntityList[T any](data []byte, elem func(data []byte, i int) (T, int, bool)) ([]T, bool) {
	skip := jsonscan.SkipSpace
	i := skip(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, false
	}
	key, i, ok := objectKey(data, skip(data, i+1))
	if !ok || string(key) != "entities" {
		return nil, false
	}
	if i >= len(data) || data[i] != '[' {
		return nil, false
	}
	list := make([]T, 0, 1)
	i = skip(data, i+1)
	if i < len(data) && data[i] == ']' {
		i++
	} else {
		for {
			v, j, ok := elem(data, i)
			if !ok {
				return nil, false
			}
			list = append(list, v)
			if i = skip(data, j); i < len(data) && data[i] == ']' {
				i++
				break
			}
			if i >= len(data) || data[i] != ',' {
				return nil, false
			}
			i = skip(data, i+1)
		}
	}
	if i = skip(data, i); i >= len(data) || data[i] != '}' {
		return nil, false
	}
	if skip(data, i+1) != len(data) {
		return nil, false
	}
	return list, true
}

// objectKey reads a member's key at data[i], a plain string, and the
// colon after it; it returns the key and the index of the value.
func objectKey(data []byte, i int) ([]byte, int, bool) {
	key, j, ok := jsonscan.PlainString(data, i)
	if !ok {
		return nil, 0, false
	}
	if j = jsonscan.SkipSpace(data, j); j >= len(data) || data[j] != ':' {
		return nil, 0, false
	}
	return key, jsonscan.SkipSpace(data, j+1), true
}
