package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"

	"github.com/provisiond/provisiond/rpc/params"
)

// Registry maps (facade, version, method) to typed Go functions. C is the
// per-call context the facade layer passes to facade constructors (for
// provisiond, *facade.Context); rpc never looks inside it.
//
// Registration happens once at start-up and panics on a duplicate; lookups
// after that are read-only and safe for concurrent use. Each typed method is
// wrapped once into a closure at registration; per call, reflection only
// reads the lengths of the params' lists (see itemCounter).
type Registry[C any] struct {
	facades map[string]map[int]*facadeDef[C]
}

type facadeDef[C any] struct {
	name    string
	version int
	newF    func(C) (any, error)
	methods map[string]methodFunc
	// params is the params type of each method that takes params.
	params map[string]reflect.Type
}

// methodFunc decodes raw params and calls a method of facade instance f.
type methodFunc func(ctx context.Context, f any, raw json.RawMessage) (any, error)

// NewRegistry returns an empty registry.
func NewRegistry[C any]() *Registry[C] {
	return &Registry[C]{facades: make(map[string]map[int]*facadeDef[C])}
}

// Methods collects the methods of one facade version during Register.
type Methods[C, F any] struct {
	def *facadeDef[C]
}

// Register adds version of facade name. newF builds the facade instance for
// one call from the caller's context; it is where a facade refuses callers
// it does not serve (its error becomes the call's error). methods registers
// each method with Handle and friends.
func Register[C, F any](r *Registry[C], name string, version int, newF func(C) (F, error), methods func(*Methods[C, F])) {
	versions := r.facades[name]
	if versions == nil {
		versions = make(map[int]*facadeDef[C])
		r.facades[name] = versions
	}
	if _, dup := versions[version]; dup {
		panic(fmt.Sprintf("rpc: facade %s v%d registered twice", name, version))
	}
	def := &facadeDef[C]{
		name:    name,
		version: version,
		newF:    func(c C) (any, error) { return newF(c) },
		methods: make(map[string]methodFunc),
		params:  make(map[string]reflect.Type),
	}
	methods(&Methods[C, F]{def: def})
	versions[version] = def
}

func (m *Methods[C, F]) add(name string, params reflect.Type, fn methodFunc) {
	if _, dup := m.def.methods[name]; dup {
		panic(fmt.Sprintf("rpc: method %s v%d.%s registered twice", m.def.name, m.def.version, name))
	}
	m.def.methods[name] = fn
	if params != nil {
		m.def.params[name] = params
	}
}

// decodeParams fills a from raw. Missing or null params leave a at its zero
// value, as Juju does. params.Entities, the argument of most bulk calls,
// is decoded without encoding/json when it comes in the usual form (see
// decodeEntitiesFast).
func decodeParams[A any](raw json.RawMessage, a *A) error {
	if len(raw) == 0 {
		return nil
	}
	if e, ok := any(a).(*params.Entities); ok && decodeEntitiesFast(raw, e) {
		return nil
	}
	return json.Unmarshal(raw, a)
}

// decodeEntitiesFast decodes params.Entities written as
// {"entities":[{"tag":"..."},...]} (or with an empty list): keys spelled so,
// tags plain printable ASCII without escapes, JSON whitespace anywhere
// between tokens. For anything else it reports false and leaves e alone,
// and encoding/json, which defines the behaviour, decodes it;
// TestDecodeEntitiesFastAgreesWithJSON and FuzzDecodeEntities check that
// what it accepts encoding/json decodes to the same value.
func decodeEntitiesFast(data []byte, e *params.Entities) bool {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	key, i, ok := plainString(data, skipSpace(data, i+1))
	if !ok || string(key) != "entities" {
		return false
	}
	if i = skipSpace(data, i); i >= len(data) || data[i] != ':' {
		return false
	}
	if i = skipSpace(data, i+1); i >= len(data) || data[i] != '[' {
		return false
	}
	list := make([]params.Entity, 0, 1)
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		i++
	} else {
		for {
			if i >= len(data) || data[i] != '{' {
				return false
			}
			key, j, ok := plainString(data, skipSpace(data, i+1))
			if !ok || string(key) != "tag" {
				return false
			}
			if j = skipSpace(data, j); j >= len(data) || data[j] != ':' {
				return false
			}
			tag, j, ok := plainString(data, skipSpace(data, j+1))
			if !ok {
				return false
			}
			if j = skipSpace(data, j); j >= len(data) || data[j] != '}' {
				return false
			}
			list = append(list, params.Entity{Tag: string(tag)})
			if i = skipSpace(data, j+1); i < len(data) && data[i] == ']' {
				i++
				break
			}
			if i >= len(data) || data[i] != ',' {
				return false
			}
			i = skipSpace(data, i+1)
		}
	}
	if i = skipSpace(data, i); i >= len(data) || data[i] != '}' {
		return false
	}
	if skipSpace(data, i+1) != len(data) {
		return false
	}
	e.Entities = list
	return true
}

// Handle registers a method taking params A and returning R.
func Handle[C, F, A, R any](m *Methods[C, F], name string, fn func(F, context.Context, A) (R, error)) {
	count := itemCounter(reflect.TypeFor[A]())
	m.add(name, reflect.TypeFor[A](), func(ctx context.Context, f any, raw json.RawMessage) (any, error) {
		var a A
		if err := decodeParams(raw, &a); err != nil {
			return nil, err
		}
		if count != nil {
			if err := takeItems(ctx, count(&a)); err != nil {
				return nil, err
			}
		}
		return fn(f.(F), ctx, a)
	})
}

// HandleNoArgs registers a method without params returning R. Any params
// sent are ignored, as Juju ignores them.
func HandleNoArgs[C, F, R any](m *Methods[C, F], name string, fn func(F, context.Context) (R, error)) {
	m.add(name, nil, func(ctx context.Context, f any, _ json.RawMessage) (any, error) {
		return fn(f.(F), ctx)
	})
}

// HandleNoResult registers a method taking params A that returns only an
// error; its reply is "response": {}.
func HandleNoResult[C, F, A any](m *Methods[C, F], name string, fn func(F, context.Context, A) error) {
	count := itemCounter(reflect.TypeFor[A]())
	m.add(name, reflect.TypeFor[A](), func(ctx context.Context, f any, raw json.RawMessage) (any, error) {
		var a A
		if err := decodeParams(raw, &a); err != nil {
			return nil, err
		}
		if count != nil {
			if err := takeItems(ctx, count(&a)); err != nil {
				return nil, err
			}
		}
		return nil, fn(f.(F), ctx, a)
	})
}

// HandleNone registers a method with neither params nor result.
func HandleNone[C, F any](m *Methods[C, F], name string, fn func(F, context.Context) error) {
	m.add(name, nil, func(ctx context.Context, f any, _ json.RawMessage) (any, error) {
		return nil, fn(f.(F), ctx)
	})
}

// Later is the result of a call whose reply comes after the method
// returns (HandleLater, HandleLaterNone): a watcher's Next waits for a
// change without a goroutine waiting on its behalf. The connection keeps
// the call's MaxRequests slot until the reply is sent.
type Later struct {
	start func(ctx context.Context, reply func(any, error))
}

// LaterFunc makes a Later for a Root that resolves methods without the
// Registry: start must see to it that reply is called exactly once, from
// any goroutine; reply never blocks.
func LaterFunc(start func(ctx context.Context, reply func(any, error))) *Later {
	return &Later{start: start}
}

// MapErr returns a Later whose error, if any, passes through f first (the
// facade layer's mapping of errors to wire codes).
func (l *Later) MapErr(f func(error) error) *Later {
	return &Later{start: func(ctx context.Context, reply func(any, error)) {
		l.start(ctx, func(res any, err error) {
			if err != nil {
				err = f(err)
			}
			reply(res, err)
		})
	}}
}

// HandleLater registers a method without params whose result R comes
// later. fn must see to it that reply is called exactly once, before or
// after fn returns, from any goroutine; reply never blocks (the reply is
// encoded and written on a worker goroutine). Params sent are ignored.
func HandleLater[C, F, R any](m *Methods[C, F], name string, fn func(F, context.Context, func(R, error))) {
	m.add(name, nil, func(_ context.Context, f any, _ json.RawMessage) (any, error) {
		return &Later{start: func(ctx context.Context, reply func(any, error)) {
			fn(f.(F), ctx, func(r R, err error) {
				if err != nil {
					reply(nil, err)
					return
				}
				reply(r, nil)
			})
		}}, nil
	})
}

// HandleLaterNone is HandleLater for a method with neither params nor
// result: its reply is "response": {} or the error.
func HandleLaterNone[C, F any](m *Methods[C, F], name string, fn func(F, context.Context, func(error))) {
	m.add(name, nil, func(_ context.Context, f any, _ json.RawMessage) (any, error) {
		return &Later{start: func(ctx context.Context, reply func(any, error)) {
			fn(f.(F), ctx, func(err error) { reply(nil, err) })
		}}, nil
	})
}

// Method is one resolved (facade, version, method).
type Method[C any] struct {
	Facade  string
	Version int
	Name    string
	def     *facadeDef[C]
	call    methodFunc
}

// Call builds the facade instance for c and runs the method with raw
// params. A facade constructor error is returned as the call's error.
func (m *Method[C]) Call(ctx context.Context, c C, raw json.RawMessage) (any, error) {
	f, err := m.def.newF(c)
	if err != nil {
		return nil, err
	}
	return m.call(ctx, f, raw)
}

// Find resolves a method, or returns the "not implemented" error Juju gives
// for an unknown facade, version or method.
func (r *Registry[C]) Find(facade string, version int, method string) (*Method[C], error) {
	versions, ok := r.facades[facade]
	if !ok {
		return nil, UnknownFacadeError(facade, version)
	}
	def, ok := versions[version]
	if !ok {
		return nil, UnknownFacadeError(facade, version)
	}
	fn, ok := def.methods[method]
	if !ok {
		return nil, UnknownMethodError(facade, version, method)
	}
	return &Method[C]{Facade: facade, Version: version, Name: method, def: def, call: fn}, nil
}

// FacadeVersions is one facade and the versions registered for it.
type FacadeVersions struct {
	Name     string
	Versions []int
}

// Facades lists every facade with its versions, sorted by name and version.
func (r *Registry[C]) Facades() []FacadeVersions {
	out := make([]FacadeVersions, 0, len(r.facades))
	for name, versions := range r.facades {
		fv := FacadeVersions{Name: name}
		for v := range versions {
			fv.Versions = append(fv.Versions, v)
		}
		slices.Sort(fv.Versions)
		out = append(out, fv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// MethodNames lists the methods of one facade version, sorted (for the
// schema conformance test).
func (r *Registry[C]) MethodNames(facade string, version int) []string {
	def := r.facades[facade][version]
	if def == nil {
		return nil
	}
	names := make([]string, 0, len(def.methods))
	for n := range def.methods {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ParamsType returns the Go type a method decodes its params into, or nil
// for a method without params (whose params are ignored) or an unknown
// method. It is for tests that enumerate every method's input.
func (r *Registry[C]) ParamsType(facade string, version int, method string) reflect.Type {
	def := r.facades[facade][version]
	if def == nil {
		return nil
	}
	return def.params[method]
}
