package schematest

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
)

// DefKey names one key of one schema definition.
type DefKey struct{ Def, Key string }

// SchemaOnlyKeys are schema keys provisiond's Go types leave out on
// purpose, with why. The properties the schema names after an embedded Go
// struct (HostPort's Address, ProvisioningInfo's
// ProvisioningNetworkTopology, ContainerConfig's UpdateBehavior) are not
// listed: the check applies encoding/json's flattening to them
// (Prop.Embedded).
var SchemaOnlyKeys = map[DefKey]string{
	{"LoginResult", "discharge-required"}: "Macaroon-typed: the macaroon login challenge, " +
		"which a password-only server never sends (specs/rpc.md §3.2, §3.6)",
	{"LoginResult", "bakery-discharge-required"}: "Macaroon-typed: as discharge-required",
	{"LoginResult", "discharge-required-error"}: "the reason string of the Macaroon-typed discharge " +
		"challenge above, never sent without it (specs/rpc.md §3.6)",
}

// AlwaysSentKeys are omitempty keys of Juju's structs that encoding/json
// sends all the same (omitempty does not leave out a struct value), so the
// schema does not list them as required though Juju sends them empty,
// with why. Omissions takes them as Juju sends them.
var AlwaysSentKeys = map[DefKey]string{
	{"KubernetesProvisioningInfo", "image-repo"}: "Juju's ImageRepo is a DockerImageInfo value " +
		"(not a pointer) tagged omitempty: encoding/json sends it, {\"image-name\":\"\"} when empty",
}

// OpaqueKeys are keys present in both whose values are not checked, with
// why.
var OpaqueKeys = map[DefKey]string{
	{"BytesResult", "result"}: "[]byte: the schema says an array of integers, encoding/json sends base64 " +
		"(specs/provisioner.md §0.1)",
	{"FindToolsParams", "number"}: "version.Number encodes as a string such as \"3.3.0\" (specs/provisioner.md §0.1)",
	{"Tools", "version"}:          "version.Binary encodes as a string such as \"3.3.0-ubuntu-amd64\" (specs/provisioner.md §0.1)",
	{"CharmMeta", "assumes-expr"}: "Juju's ExpressionTree marshals itself as the assumes block's expression " +
		"list, not the {Expression} object the schema shows (specs/caasunitprovisioner.md §3.3)",
	{"LoginRequest", "macaroons"}: "Macaroon-typed: Go holds them as opaque JSON ([]any); " +
		"provisiond accepts and ignores them",
}

// KeyCheck compares decoded JSON with the definitions of one facade
// version of the schema, recursively, failing T for every difference.
//
// Exact (the default) wants every wire key of a definition present: it is
// for a Go value filled by Populated, where omitempty leaves nothing out.
// Subset refuses keys the schema does not have and wants only the keys
// Juju always sends (its fields without omitempty: RequiredWireKeys, and
// AlwaysSentKeys), nulls nowhere: it is for what a live server or client
// actually sent.
type KeyCheck struct {
	T       testing.TB
	S       *Schema
	Facade  string
	Version int
	Subset  bool
	// Seen, when not nil, records every definition the check reached.
	Seen map[string]bool
}

// Value marshals v (a Go value; see Populated) and checks its JSON against
// definition def.
func (k KeyCheck) Value(path, def string, v any) {
	k.T.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		k.T.Fatalf("%s: marshal %T: %v", path, v, err)
	}
	k.JSON(path, def, b)
}

// JSON checks the JSON text b against definition def.
func (k KeyCheck) JSON(path, def string, b []byte) {
	k.T.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		k.T.Fatalf("%s: %v", path, err)
	}
	k.Def(path, def, v)
}

// Def checks that v (decoded JSON), at path, is an object with the wire
// keys of definition name (WireKeys: an embedded definition's keys at the
// top level, never the property named after it), then descends into
// properties that refer to others.
func (k KeyCheck) Def(path, name string, v any) {
	t := k.T
	t.Helper()
	if k.Seen != nil {
		k.Seen[name] = true
	}
	obj, ok := v.(map[string]any)
	if !ok {
		t.Errorf("%s: schema %s is an object; got %T", path, name, v)
		return
	}
	want := k.S.WireKeys(k.Facade, k.Version, name)
	for _, e := range k.S.EmbeddedProperties(k.Facade, k.Version, name) {
		if k.Seen != nil {
			k.Seen[e] = true
		}
		if _, nested := obj[e]; nested {
			t.Errorf("%s: embedded %s is nested under key %q; Juju's encoding/json flattens it into %s", path, e, e, name)
		}
	}
	for key := range obj {
		if !slices.Contains(want, key) {
			t.Errorf("%s: key %q is not on the wire of schema %s %v", path, key, name, want)
		}
	}
	if !k.Subset {
		for _, key := range want {
			if _, ok := obj[key]; ok {
				continue
			}
			if why, ok := SchemaOnlyKeys[DefKey{name, key}]; ok {
				t.Logf("%s: schema %s key %q left out: %s", path, name, key, why)
				continue
			}
			t.Errorf("%s: schema %s key %q is missing", path, name, key)
		}
	} else {
		for _, key := range k.alwaysSent(name) {
			if _, ok := obj[key]; !ok {
				t.Errorf("%s: schema %s key %q is missing; Juju always sends it (no omitempty)", path, name, key)
			}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		if _, opaque := OpaqueKeys[DefKey{name, key}]; opaque {
			continue
		}
		if p, ok := k.S.WireProperty(k.Facade, k.Version, name, key); ok {
			k.prop(path+"."+key, p, obj[key])
		}
	}
}

// alwaysSent lists the keys Juju sends for definition def whatever their
// values: RequiredWireKeys and AlwaysSentKeys, less SchemaOnlyKeys.
func (k KeyCheck) alwaysSent(def string) []string {
	var out []string
	for _, key := range k.S.RequiredWireKeys(k.Facade, k.Version, def) {
		if _, ok := SchemaOnlyKeys[DefKey{def, key}]; !ok {
			out = append(out, key)
		}
	}
	for dk := range AlwaysSentKeys {
		if dk.Def == def && !slices.Contains(out, dk.Key) {
			out = append(out, dk.Key)
		}
	}
	slices.Sort(out)
	return out
}

func (k KeyCheck) prop(path string, p *Prop, v any) {
	switch {
	case v == nil:
		if !k.Subset {
			k.T.Errorf("%s: null; the populated value should have filled it", path)
		}
	case p.Ref != "":
		k.Def(path, p.Ref, v)
	case p.Items != nil:
		if a, ok := v.([]any); ok {
			for i, e := range a {
				k.prop(fmt.Sprintf("%s[%d]", path, i), p.Items, e)
			}
		} else {
			k.T.Errorf("%s: schema has an array; got %T", path, v)
		}
	case p.Values != nil:
		if m, ok := v.(map[string]any); ok {
			for _, key := range slices.Sorted(maps.Keys(m)) {
				k.prop(fmt.Sprintf("%s[%q]", path, key), p.Values, m[key])
			}
		} else {
			k.T.Errorf("%s: schema has a map; got %T", path, v)
		}
	}
}

// Populated returns a copy of v with every field, recursively, set to a
// non-zero value (one element per slice and map), so that omitempty keys
// appear when it is marshalled.
func Populated(v any) any {
	return PopulatedValue(reflect.TypeOf(v)).Interface()
}

// PopulatedValue is Populated for a type.
func PopulatedValue(t reflect.Type) reflect.Value {
	p := reflect.New(t)
	fill(p.Elem(), 0)
	return p.Elem()
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

func fill(v reflect.Value, depth int) {
	if depth > 20 { // recursive types
		return
	}
	if v.Type() == rawMessageType {
		v.SetBytes([]byte(`"x"`))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i), depth+1)
		}
	case reflect.Map:
		m := reflect.MakeMapWithSize(v.Type(), 1)
		key := reflect.New(v.Type().Key()).Elem()
		fill(key, depth+1)
		val := reflect.New(v.Type().Elem()).Elem()
		fill(val, depth+1)
		m.SetMapIndex(key, val)
		v.Set(m)
	case reflect.Interface:
		if v.NumMethod() == 0 {
			v.Set(reflect.ValueOf("x"))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				fill(f, depth+1)
			}
		}
	}
}
