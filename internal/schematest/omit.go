package schematest

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// Omissions checks which keys the Go type t, standing for definition def,
// sends when its fields are empty, against Juju's: Juju's struct sends
// every field without omitempty (the schema's required keys, with
// embedded structs flattened: RequiredWireKeys) and leaves out the empty
// omitempty ones. A key Juju always sends that t leaves out when empty
// (an omitempty Juju's field lacks, as AutoNoProxy once was), and a key t
// always sends that Juju leaves out when empty, both fail T. Populated
// values cannot show either: every key is there when every field is set.
//
// The check marshals the zero value of t (with its embedded pointers
// allocated, so their keys flatten in as Juju's servers fill them), then
// descends, by type, into every property that refers to another
// definition, directly or as the elements of a list or map.
func (k KeyCheck) Omissions(path, def string, t reflect.Type) {
	k.T.Helper()
	k.omissions(path, def, t, map[string]bool{})
}

func (k KeyCheck) omissions(path, def string, t reflect.Type, done map[string]bool) {
	k.T.Helper()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	id := t.String() + " " + def
	if done[id] {
		return
	}
	done[id] = true
	if k.Seen != nil {
		k.Seen[def] = true
	}
	zero := reflect.New(t).Elem()
	allocEmbedded(zero)
	b, err := json.Marshal(zero.Interface())
	if err != nil {
		k.T.Fatalf("%s: marshal the zero %s: %v", path, t, err)
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil || obj == nil {
		return // marshals itself as something else: not a struct on the wire
	}
	want := k.alwaysSent(def)
	for _, key := range want {
		if _, ok := obj[key]; ok {
			continue
		}
		k.T.Errorf("%s: %s key %q is left out when empty; Juju always sends it (no omitempty)", path, def, key)
	}
	for key := range obj {
		if !slices.Contains(want, key) && slices.Contains(k.S.WireKeys(k.Facade, k.Version, def), key) &&
			!slices.Contains(k.S.RequiredWireKeys(k.Facade, k.Version, def), key) {
			k.T.Errorf("%s: %s key %q is sent when empty; Juju leaves it out (omitempty)", path, def, key)
		}
	}
	for _, key := range k.S.WireKeys(k.Facade, k.Version, def) {
		if _, opaque := OpaqueKeys[DefKey{def, key}]; opaque {
			continue
		}
		p, ok := k.S.WireProperty(k.Facade, k.Version, def, key)
		if !ok {
			continue
		}
		ft, ok := jsonField(t, key)
		if !ok {
			continue // KeyCheck reports a key Go does not have
		}
		k.omissionsProp(path+"."+key, p, ft, done)
	}
}

func (k KeyCheck) omissionsProp(path string, p *Prop, t reflect.Type, done map[string]bool) {
	k.T.Helper()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case p.Ref != "":
		k.omissions(path, p.Ref, t, done)
	case p.Items != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		k.omissionsProp(path+"[]", p.Items, t.Elem(), done)
	case p.Values != nil && t.Kind() == reflect.Map:
		k.omissionsProp(path+"[*]", p.Values, t.Elem(), done)
	}
}

// allocEmbedded sets v's embedded struct pointers, recursively, to new
// zero structs.
func allocEmbedded(v reflect.Value) {
	for i := range v.NumField() {
		f, sf := v.Field(i), v.Type().Field(i)
		if !sf.Anonymous || !f.CanSet() {
			continue
		}
		if f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Struct {
			f.Set(reflect.New(f.Type().Elem()))
			f = f.Elem()
		}
		if f.Kind() == reflect.Struct {
			allocEmbedded(f)
		}
	}
}

// jsonField finds the type of the field of struct t that encoding/json
// writes under key, looking into embedded structs as encoding/json does.
func jsonField(t reflect.Type, key string) (reflect.Type, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, false
	}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			if ft, ok := jsonField(sf.Type, key); ok {
				return ft, true
			}
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if name == key {
			return sf.Type, true
		}
	}
	return nil, false
}
