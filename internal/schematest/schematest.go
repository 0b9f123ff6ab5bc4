// Package schematest reads Juju's facade schema (protocol/facades-schema.json
// in the shared specs) for conformance tests: which methods a facade version
// has, and which JSON keys its params, results and definitions carry.
//
// The schema is read in place and never copied into the module. It is found
// at ../shared/protocol/facades-schema.json relative to the module root, or
// wherever $PROVISIOND_SCHEMA points; Open skips the test when it is absent,
// or fails it in CI (CI=true).
package schematest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// EnvPath names the environment variable that overrides the schema path.
const EnvPath = "PROVISIOND_SCHEMA"

// RelPath is where the schema lives relative to the module root.
const RelPath = "../shared/protocol/facades-schema.json"

// Schema is the parsed schema: one entry per facade version.
type Schema struct {
	path    string
	facades map[FacadeVersion]*facade
}

// FacadeVersion names one facade version of the schema.
type FacadeVersion struct {
	Name    string
	Version int
}

type facade struct {
	methods map[string]method
	defs    map[string]definition
}

type method struct {
	params, result string // definition names; "" when absent
}

type definition struct {
	Properties map[string]*Prop `json:"properties"`
	// Required are the keys Juju's struct has without omitempty: the
	// schema generator lists every field that is always sent.
	Required []string `json:"required"`
}

// Prop is the schema of one property of a definition: a plain Type, a Ref
// to another definition, an array of Items, or a map (an object with
// patternProperties) of Values.
type Prop struct {
	Type   string // "string", "integer", "boolean", "object", "array", or ""
	Ref    string // definition name, without "#/definitions/"
	Items  *Prop  // element schema when Type is "array"
	Values *Prop  // value schema of a map ("patternProperties": {".*": …})
}

// UnmarshalJSON reads the JSON-schema form of a property.
func (p *Prop) UnmarshalJSON(b []byte) error {
	var raw struct {
		Type              string           `json:"type"`
		Ref               string           `json:"$ref"`
		Items             *Prop            `json:"items"`
		PatternProperties map[string]*Prop `json:"patternProperties"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*p = Prop{Type: raw.Type, Ref: defName(raw.Ref), Items: raw.Items, Values: raw.PatternProperties[".*"]}
	return nil
}

// Embedded reports whether p, the schema of property key, stands for a
// Go struct Juju embeds in the enclosing one: the schema generator names
// such a property after the definition it refers to (ContainerConfig's
// "UpdateBehavior": {"$ref": "#/definitions/UpdateBehavior"}, HostPort's
// "Address", ProvisioningInfo's "ProvisioningNetworkTopology"), while
// encoding/json puts the embedded struct's keys at the top level of the
// enclosing object and sends no such key.
func (p *Prop) Embedded(key string) bool { return p.Ref != "" && p.Ref == key }

// Path returns where the schema is expected: $PROVISIOND_SCHEMA, else
// RelPath from the module root (the nearest directory above the working
// directory holding go.mod; go test runs in the package directory).
func Path() (string, error) {
	if p := os.Getenv(EnvPath); p != "" {
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, filepath.FromSlash(RelPath)), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("schematest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Open loads the schema for a test, failing it when the file cannot be
// read or parsed. When the file is absent the test fails in CI (the
// environment variable CI is "true", as .ci/run sets it: conformance must
// not go unchecked there) and is skipped elsewhere, saying why (go test
// -v shows it; make test prints a note before the run).
func Open(t testing.TB) *Schema {
	t.Helper()
	path, err := Path()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if errors.Is(err, fs.ErrNotExist) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Juju facade schema not found at %s, and CI=true: the schema conformance tests must run in CI "+
				"(check out the shared specs next to the repository, or set %s)", path, EnvPath)
		}
		t.Skipf("SKIP: Juju facade schema not found at %s, so the schema conformance tests do not run "+
			"(set %s to its path; in CI, CI=true makes this a failure)", path, EnvPath)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Load reads and parses the schema at path. A missing file gives an error
// matching fs.ErrNotExist.
func Load(path string) (*Schema, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var entries []struct {
		Name    string
		Version int
		Schema  struct {
			Properties map[string]struct {
				Properties struct {
					Params *Prop
					Result *Prop
				} `json:"properties"`
			} `json:"properties"`
			Definitions map[string]definition `json:"definitions"`
		}
	}
	if err := json.Unmarshal(b, &entries); err != nil {
		return nil, fmt.Errorf("schematest: parse %s: %w", path, err)
	}
	s := &Schema{path: path, facades: make(map[FacadeVersion]*facade, len(entries))}
	for _, e := range entries {
		fv := FacadeVersion{e.Name, e.Version}
		if _, dup := s.facades[fv]; dup {
			return nil, fmt.Errorf("schematest: %s: %s v%d listed twice", path, e.Name, e.Version)
		}
		f := &facade{methods: make(map[string]method), defs: e.Schema.Definitions}
		for name, m := range e.Schema.Properties {
			var mm method
			if p := m.Properties.Params; p != nil {
				mm.params = p.Ref
			}
			if r := m.Properties.Result; r != nil {
				mm.result = r.Ref
			}
			f.methods[name] = mm
		}
		s.facades[fv] = f
	}
	return s, nil
}

func defName(ref string) string { return strings.TrimPrefix(ref, "#/definitions/") }

// Path is the file the schema was read from.
func (s *Schema) Path() string { return s.path }

// Facades lists the facade versions of the schema, sorted.
func (s *Schema) Facades() []FacadeVersion {
	out := slices.Collect(maps.Keys(s.facades))
	slices.SortFunc(out, func(a, b FacadeVersion) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return a.Version - b.Version
	})
	return out
}

// Has reports whether the schema describes facade version.
func (s *Schema) Has(facade string, version int) bool {
	_, ok := s.facades[FacadeVersion{facade, version}]
	return ok
}

// Methods lists the methods of facade version, sorted; nil when the schema
// does not describe it.
func (s *Schema) Methods(facade string, version int) []string {
	f := s.facades[FacadeVersion{facade, version}]
	if f == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(f.methods))
}

// HasMethod reports whether the schema lists method of facade version.
func (s *Schema) HasMethod(facade string, version int, method string) bool {
	f := s.facades[FacadeVersion{facade, version}]
	if f == nil {
		return false
	}
	_, ok := f.methods[method]
	return ok
}

// ParamsKeys resolves the params $ref of a method to its definition and
// returns the definition's property keys, sorted. ok is false when the
// method is unknown, takes no params, or its $ref does not resolve.
func (s *Schema) ParamsKeys(facade string, version int, method string) (keys []string, defName string, ok bool) {
	return s.methodKeys(facade, version, method, false)
}

// ResultKeys is ParamsKeys for the method's result.
func (s *Schema) ResultKeys(facade string, version int, method string) (keys []string, defName string, ok bool) {
	return s.methodKeys(facade, version, method, true)
}

func (s *Schema) methodKeys(facade string, version int, name string, result bool) ([]string, string, bool) {
	f := s.facades[FacadeVersion{facade, version}]
	if f == nil {
		return nil, "", false
	}
	m, ok := f.methods[name]
	if !ok {
		return nil, "", false
	}
	def := m.params
	if result {
		def = m.result
	}
	d, ok := f.defs[def]
	if def == "" || !ok {
		return nil, def, false
	}
	return slices.Sorted(maps.Keys(d.Properties)), def, true
}

// DefinitionKeys lists the property keys of definition defName in the
// schema of facade version, sorted; nil when there is no such definition
// (or it has no properties).
func (s *Schema) DefinitionKeys(facade string, version int, defName string) []string {
	f := s.facades[FacadeVersion{facade, version}]
	if f == nil {
		return nil
	}
	d, ok := f.defs[defName]
	if !ok {
		return nil
	}
	return slices.Sorted(maps.Keys(d.Properties))
}

// WireKeys lists the keys definition defName has on the wire, sorted: its
// property keys, with each embedded property (Prop.Embedded) replaced by
// the wire keys of the definition it refers to, recursively.
func (s *Schema) WireKeys(facade string, version int, defName string) []string {
	return s.flatKeys(facade, version, defName, false)
}

// RequiredWireKeys lists the keys Juju always sends for definition
// defName, sorted: its required properties (those without omitempty),
// each required embedded property replaced by the required wire keys of
// the definition it refers to, recursively (WireKeys' flattening).
func (s *Schema) RequiredWireKeys(facade string, version int, defName string) []string {
	return s.flatKeys(facade, version, defName, true)
}

func (s *Schema) flatKeys(facade string, version int, defName string, required bool) []string {
	f := s.facades[FacadeVersion{facade, version}]
	if f == nil {
		return nil
	}
	keys := map[string]bool{}
	f.flatKeys(defName, keys, required, 0)
	return slices.Sorted(maps.Keys(keys))
}

// flatKeys adds the keys of definition defName (its required ones only,
// when required) to keys, embedded properties flattened.
func (f *facade) flatKeys(defName string, keys map[string]bool, required bool, depth int) {
	d := f.defs[defName]
	for key, p := range d.Properties {
		if required && !slices.Contains(d.Required, key) {
			continue
		}
		if p.Embedded(key) && depth < 8 {
			f.flatKeys(p.Ref, keys, required, depth+1)
			continue
		}
		keys[key] = true
	}
}

// EmbeddedProperties lists the embedded properties of definition defName
// (Prop.Embedded), sorted: keys the schema shows that never go on the wire.
func (s *Schema) EmbeddedProperties(facade string, version int, defName string) []string {
	f := s.facades[FacadeVersion{facade, version}]
	if f == nil {
		return nil
	}
	var out []string
	for key, p := range f.defs[defName].Properties {
		if p.Embedded(key) {
			out = append(out, key)
		}
	}
	slices.Sort(out)
	return out
}

// Definitions lists the definition names of facade version, sorted.
func (s *Schema) Definitions(facade string, version int) []string {
	f := s.facades[FacadeVersion{facade, version}]
	if f == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(f.defs))
}

// WireProperty returns the schema of wire key key of definition defName:
// its own property, or that of a definition it embeds (WireKeys).
func (s *Schema) WireProperty(facade string, version int, defName, key string) (*Prop, bool) {
	f := s.facades[FacadeVersion{facade, version}]
	if f == nil {
		return nil, false
	}
	return f.wireProperty(defName, key, 0)
}

func (f *facade) wireProperty(defName, key string, depth int) (*Prop, bool) {
	props := f.defs[defName].Properties
	if p, ok := props[key]; ok && !p.Embedded(key) {
		return p, true
	}
	if depth >= 8 {
		return nil, false
	}
	for _, k := range slices.Sorted(maps.Keys(props)) {
		if p := props[k]; p.Embedded(k) {
			if q, ok := f.wireProperty(p.Ref, key, depth+1); ok {
				return q, true
			}
		}
	}
	return nil, false
}

// Property returns the schema of property key of definition defName, for
// walking nested definitions.
func (s *Schema) Property(facade string, version int, defName, key string) (*Prop, bool) {
	f := s.facades[FacadeVersion{facade, version}]
	if f == nil {
		return nil, false
	}
	p, ok := f.defs[defName].Properties[key]
	return p, ok
}
