package params

import "github.com/provisiond/provisiond/rpc/internal/jsonscan"

// DecodeFast decodes Entities, the params of most bulk calls, when they
// come in the usual form: {"entities":[{"tag":"..."},...]} (or with an
// empty list), keys spelled so, tags plain printable ASCII without
// escapes, JSON whitespace anywhere between tokens. For anything else it
// reports false and leaves e alone; encoding/json, which defines the
// behaviour (and the error texts), then decodes it. It implements
// rpc.FastDecoder. TestDecodeFastAgreesWithJSON and FuzzDecodeEntities
// check that what it accepts encoding/json decodes to the same value.
func (e *Entities) DecodeFast(data []byte) bool {
	skip := jsonscan.SkipSpace
	i := skip(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	key, i, ok := jsonscan.PlainString(data, skip(data, i+1))
	if !ok || string(key) != "entities" {
		return false
	}
	if i = skip(data, i); i >= len(data) || data[i] != ':' {
		return false
	}
	if i = skip(data, i+1); i >= len(data) || data[i] != '[' {
		return false
	}
	list := make([]Entity, 0, 1)
	i = skip(data, i+1)
	if i < len(data) && data[i] == ']' {
		i++
	} else {
		for {
			if i >= len(data) || data[i] != '{' {
				return false
			}
			key, j, ok := jsonscan.PlainString(data, skip(data, i+1))
			if !ok || string(key) != "tag" {
				return false
			}
			if j = skip(data, j); j >= len(data) || data[j] != ':' {
				return false
			}
			tag, j, ok := jsonscan.PlainString(data, skip(data, j+1))
			if !ok {
				return false
			}
			if j = skip(data, j); j >= len(data) || data[j] != '}' {
				return false
			}
			list = append(list, Entity{Tag: string(tag)})
			if i = skip(data, j+1); i < len(data) && data[i] == ']' {
				i++
				break
			}
			if i >= len(data) || data[i] != ',' {
				return false
			}
			i = skip(data, i+1)
		}
	}
	if i = skip(data, i); i >= len(data) || data[i] != '}' {
		return false
	}
	if skip(data, i+1) != len(data) {
		return false
	}
	e.Entities = list
	return true
}
