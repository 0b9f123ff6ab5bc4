package rpc

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/provisiond/provisiond/rpc/params"
)

// Free-form values (docs/reliability.md, Free-form values). What a client
// stores without the server parsing it (status data, config values, pool
// and volume attributes, error info) arrives as an `any` in the params: an
// entry of a map[string]any, an element of a []any, an `any` field. Each
// such value is bounded when it arrives, before the method runs:
//
//   - nested at most MaxValueDepth objects and arrays deep;
//   - at most MaxValueBytes bytes of JSON.
//
// A call holding one over either bound is refused as a whole with code
// "not valid", naming the value's place in the params
// (`entities[0].data["k"]: nested deeper than 64 objects and arrays`).
// The bounds are the wire's; state bounds what holds the values per kind
// as well (a whole config, a whole status).
//
// The depth bound is what keeps every reader able to read what was
// stored: a status whose data was nested 9,995 deep was accepted (under
// encoding/json's decoding limit of 10,000) and then made every status
// reply fail in clients, whose replies wrap it a few levels deeper
// (encoding/json: 10,000; Python's json: about 1,000, its recursion
// limit). Juju's own values are shallow: machine status data is flat
// ({"transient": true}), the data of CAAS units and their storage is the
// Kubernetes reason and message, config values are strings, numbers and
// booleans; a raw Kubernetes spec with a custom resource's schema nests
// about 30 deep, and that is YAML text (facades bound it on its own). 64
// is twice that, and leaves a reply's wrapping far under Python's 1,000.
const (
	// MaxValueDepth is how many objects and arrays deep a free-form
	// value may nest: {"a":{"b":1}} is 2.
	MaxValueDepth = 64
	// MaxValueBytes is the largest free-form value, in bytes of JSON
	// (state.MaxConfigValue, the largest a kind allows).
	MaxValueBytes = 256 << 10
)

// ValueError refuses a free-form value over MaxValueDepth or
// MaxValueBytes: code "not valid".
func ValueError(place, why string) error {
	return &params.Error{Message: place + ": " + why, Code: params.CodeNotValid}
}

// CheckValue checks one free-form value, as decoded from JSON (nil,
// bool, float64, string, []any or map[string]any), against MaxValueDepth
// and MaxValueBytes. place names it in the error ("" for none).
func CheckValue(place string, v any) error {
	budget := MaxValueBytes
	if p := checkAny(v, 0, &budget); p != nil {
		return p.err(place)
	}
	return nil
}

// valueCheck checks the free-form values inside a params value; see
// valueChecker.
type valueCheck func(v reflect.Value) *badValue

// badValue is a free-form value over a bound: why, and the path to it,
// innermost segment first (built only on the way out of a failed check,
// so a check that passes allocates nothing).
type badValue struct {
	why  string
	path []string
}

func (b *badValue) at(seg string) *badValue {
	b.path = append(b.path, seg)
	return b
}

// err is the call's error for a value found in the params of a method.
func (b *badValue) err(prefix string) error {
	var sb strings.Builder
	sb.WriteString(prefix)
	for i := len(b.path) - 1; i >= 0; i-- {
		seg := b.path[i]
		if sb.Len() > 0 && !strings.HasPrefix(seg, "[") {
			sb.WriteByte('.')
		}
		sb.WriteString(seg)
	}
	place := sb.String()
	if place == "" {
		place = "value"
	}
	return ValueError(place, b.why)
}

var (
	tooDeep  = fmt.Sprintf("nested deeper than %d objects and arrays (limit %d)", MaxValueDepth, MaxValueDepth)
	tooLarge = fmt.Sprintf("over %d bytes of JSON (limit %d)", MaxValueBytes, MaxValueBytes)
)

// valueChecker returns a function that checks every free-form value in a
// params value of type t (a pointer to it), or nil when t holds none. It
// is built once per method at registration, as itemCounter is; a call
// walks only the parts of its params that can hold a free-form value.
func valueChecker(t reflect.Type) func(any) error {
	check := checkerOf(t, map[reflect.Type]*valueCheck{})
	if check == nil {
		return nil
	}
	return func(a any) error {
		if b := check(reflect.ValueOf(a).Elem()); b != nil {
			return b.err("")
		}
		return nil
	}
}

// checkerOf builds the check of type t; seen holds the checks being built,
// so a recursive type refers to its own check.
func checkerOf(t reflect.Type, seen map[reflect.Type]*valueCheck) valueCheck {
	if c, ok := seen[t]; ok {
		if c == nil {
			return nil
		}
		return func(v reflect.Value) *badValue { return (*c)(v) }
	}
	if !mayHoldValue(t, map[reflect.Type]bool{}) {
		seen[t] = nil
		return nil
	}
	slot := new(valueCheck)
	seen[t] = slot
	var c valueCheck
	switch t.Kind() {
	case reflect.Interface:
		c = func(v reflect.Value) *badValue {
			if v.IsNil() {
				return nil
			}
			budget := MaxValueBytes
			return checkAny(v.Interface(), 0, &budget)
		}
	case reflect.Pointer:
		elem := checkerOf(t.Elem(), seen)
		c = func(v reflect.Value) *badValue {
			if v.IsNil() {
				return nil
			}
			return elem(v.Elem())
		}
	case reflect.Struct:
		type field struct {
			index int
			name  string
			check valueCheck
		}
		var fields []field
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if fc := checkerOf(f.Type, seen); fc != nil {
				fields = append(fields, field{i, jsonFieldName(f), fc})
			}
		}
		c = func(v reflect.Value) *badValue {
			for _, f := range fields {
				if b := f.check(v.Field(f.index)); b != nil {
					return b.at(f.name)
				}
			}
			return nil
		}
	case reflect.Slice, reflect.Array:
		elem := checkerOf(t.Elem(), seen)
		c = func(v reflect.Value) *badValue {
			for i := range v.Len() {
				if b := elem(v.Index(i)); b != nil {
					return b.at("[" + strconv.Itoa(i) + "]")
				}
			}
			return nil
		}
	case reflect.Map:
		if t == reflect.TypeFor[map[string]any]() {
			// The usual one (status data, config): ranged without
			// reflect's map iterator, which allocates.
			c = func(v reflect.Value) *badValue {
				for k, e := range v.Interface().(map[string]any) {
					budget := MaxValueBytes
					if b := checkAny(e, 0, &budget); b != nil {
						return b.at("[" + quoteKey(k) + "]")
					}
				}
				return nil
			}
			break
		}
		elem := checkerOf(t.Elem(), seen)
		c = func(v reflect.Value) *badValue {
			for it := v.MapRange(); it.Next(); {
				if b := elem(it.Value()); b != nil {
					return b.at("[" + quoteKey(fmt.Sprint(it.Key().Interface())) + "]")
				}
			}
			return nil
		}
	}
	*slot = c
	return c
}

// mayHoldValue reports whether a value of type t can hold an `any`.
func mayHoldValue(t reflect.Type, visiting map[reflect.Type]bool) bool {
	if visiting[t] {
		return false // the type's other parts decide
	}
	visiting[t] = true
	defer delete(visiting, t)
	switch t.Kind() {
	case reflect.Interface:
		return t.NumMethod() == 0
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return mayHoldValue(t.Elem(), visiting)
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && mayHoldValue(f.Type, visiting) {
				return true
			}
		}
	}
	return false
}

// jsonFieldName is the key a struct field has on the wire.
func jsonFieldName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" || name == "-" {
		return f.Name
	}
	return name
}

// quoteKey quotes a map key of a client's value, at most its first 64
// bytes.
func quoteKey(k string) string {
	if len(k) <= 64 {
		return strconv.Quote(k)
	}
	return strconv.Quote(k[:64]) + "..."
}

// checkAny checks a value decoded from JSON at depth levels inside its
// free-form value, charging its size to budget (a lower bound of its JSON:
// escapes are not counted). It stops at the first bound it finds over.
func checkAny(v any, depth int, budget *int) *badValue {
	switch v := v.(type) {
	case map[string]any:
		if depth >= MaxValueDepth {
			return &badValue{why: tooDeep}
		}
		*budget -= 2 + len(v)
		for k, e := range v {
			if *budget -= len(k) + 3; *budget < 0 {
				return &badValue{why: tooLarge}
			}
			if b := checkAny(e, depth+1, budget); b != nil {
				return b // the path names the value, not its inside
			}
		}
	case []any:
		if depth >= MaxValueDepth {
			return &badValue{why: tooDeep}
		}
		*budget -= 2 + len(v)
		for _, e := range v {
			if b := checkAny(e, depth+1, budget); b != nil {
				return b
			}
		}
	case string:
		*budget -= len(v) + 2
	case float64:
		var buf [32]byte
		*budget -= len(strconv.AppendFloat(buf[:0], v, 'g', -1, 64))
	case bool:
		*budget -= 5
	case nil:
		*budget -= 4
	default:
		// Not a decoded JSON value (an in-process caller's): its size
		// is not known here, and its type bounds its depth.
		*budget -= 8
	}
	if *budget < 0 {
		return &badValue{why: tooLarge}
	}
	return nil
}
