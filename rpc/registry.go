package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
)

// Registry maps (facade, version, method) to typed Go functions. C is the
// per-call context the facade layer passes to facade constructors (for
// provisiond, *facade.Context); rpc never looks inside it.
//
// Registration happens once at start-up and panics on a duplicate; lookups
// after that are read-only and safe for concurrent use. Each typed method is
// composed once, at registration, into one function that builds the facade
// instance, decodes the params, charges their list items to the
// connection's budget, checks their free-form values and calls the
// method. A lookup allocates nothing; per call, reflection only reads the
// lengths of the params' lists (see itemCounter) and walks the parts that
// can hold a free-form value (see valueChecker).
type Registry[C any] struct {
	facades map[string]map[int]*facadeDef[C]
}

type facadeDef[C any] struct {
	name    string
	version int
	methods map[string]*Method[C]
}

// Method is one registered (facade, version, method).
type Method[C any] struct {
	Facade  string
	Version int
	Name    string
	// Params is the Go type the params decode into; nil for a method that
	// takes none (params sent are ignored, as Juju ignores them).
	Params reflect.Type
	call   func(ctx context.Context, c C, raw json.RawMessage) (any, error)
}

// Call runs the method for one request: it builds the facade instance from
// c (a constructor error is the call's error: that is where a facade
// refuses callers it does not serve), decodes raw into the method's params
// (a failure is a *ParamsError) and calls the method.
func (m *Method[C]) Call(ctx context.Context, c C, raw json.RawMessage) (any, error) {
	return m.call(ctx, c, raw)
}

// NewRegistry returns an empty registry.
func NewRegistry[C any]() *Registry[C] {
	return &Registry[C]{facades: make(map[string]map[int]*facadeDef[C])}
}

// Methods collects the methods of one facade version during Register.
type Methods[C, F any] struct {
	def  *facadeDef[C]
	newF func(C) (F, error)
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
	def := &facadeDef[C]{name: name, version: version, methods: make(map[string]*Method[C])}
	methods(&Methods[C, F]{def: def, newF: newF})
	versions[version] = def
	names := []string{name}
	for m := range def.methods {
		names = append(names, m)
	}
	internNames(names)
}

func (m *Methods[C, F]) add(name string, params reflect.Type, call func(context.Context, C, json.RawMessage) (any, error)) {
	if _, dup := m.def.methods[name]; dup {
		panic(fmt.Sprintf("rpc: method %s v%d.%s registered twice", m.def.name, m.def.version, name))
	}
	m.def.methods[name] = &Method[C]{Facade: m.def.name, Version: m.def.version, Name: name, Params: params, call: call}
}

// FastDecoder is implemented (on the pointer) by params types that decode
// their usual wire form without encoding/json. DecodeFast reports false,
// leaving the value untouched, for any other form; encoding/json then
// decodes it, so it alone defines the behaviour and the error texts. What
// DecodeFast accepts, encoding/json must decode to the same value.
// params.Entities, the argument of most bulk calls, and params.SetStatus,
// of the status writes, implement it.
type FastDecoder interface {
	DecodeFast(data []byte) bool
}

// ParamsError is a request whose params do not decode into the method's
// params type. Its text is encoding/json's, and it has no code
// (specs/rpc.md §1.6).
type ParamsError struct{ Err error }

func (e *ParamsError) Error() string { return e.Err.Error() }

// Unwrap returns encoding/json's error.
func (e *ParamsError) Unwrap() error { return e.Err }

// ErrorCode implements the wire coder: no code.
func (e *ParamsError) ErrorCode() string { return "" }

// decoder returns the params decoding of A, chosen once at registration.
// Missing or null params leave a at its zero value, as Juju does.
func decoder[A any]() func(raw json.RawMessage, a *A) error {
	if _, fast := any((*A)(nil)).(FastDecoder); fast {
		return func(raw json.RawMessage, a *A) error {
			if len(raw) == 0 || any(a).(FastDecoder).DecodeFast(raw) {
				return nil
			}
			return decodeJSON(raw, a)
		}
	}
	return func(raw json.RawMessage, a *A) error {
		if len(raw) == 0 {
			return nil
		}
		return decodeJSON(raw, a)
	}
}

func decodeJSON[A any](raw json.RawMessage, a *A) error {
	if err := json.Unmarshal(raw, a); err != nil {
		return &ParamsError{Err: err}
	}
	return nil
}

// Handle registers a method taking params A and returning R.
func Handle[C, F, A, R any](m *Methods[C, F], name string, fn func(F, context.Context, A) (R, error)) {
	newF, decode := m.newF, decoder[A]()
	count, values := itemCounter(reflect.TypeFor[A]()), valueChecker(reflect.TypeFor[A]())
	m.add(name, reflect.TypeFor[A](), func(ctx context.Context, c C, raw json.RawMessage) (any, error) {
		f, err := newF(c)
		if err != nil {
			return nil, err
		}
		var a A
		if err := decode(raw, &a); err != nil {
			return nil, err
		}
		if count != nil {
			if err := takeItems(ctx, count(&a)); err != nil {
				return nil, err
			}
		}
		if values != nil {
			if err := values(&a); err != nil {
				return nil, err
			}
		}
		return fn(f, ctx, a)
	})
}

// HandleNoArgs registers a method without params returning R. Any params
// sent are ignored, as Juju ignores them.
func HandleNoArgs[C, F, R any](m *Methods[C, F], name string, fn func(F, context.Context) (R, error)) {
	newF := m.newF
	m.add(name, nil, func(ctx context.Context, c C, _ json.RawMessage) (any, error) {
		f, err := newF(c)
		if err != nil {
			return nil, err
		}
		return fn(f, ctx)
	})
}

// HandleNoResult registers a method taking params A that returns only an
// error; its reply is "response": {}.
func HandleNoResult[C, F, A any](m *Methods[C, F], name string, fn func(F, context.Context, A) error) {
	Handle(m, name, func(f F, ctx context.Context, a A) (any, error) { return nil, fn(f, ctx, a) })
}

// HandleNone registers a method with neither params nor result.
func HandleNone[C, F any](m *Methods[C, F], name string, fn func(F, context.Context) error) {
	newF := m.newF
	m.add(name, nil, func(ctx context.Context, c C, _ json.RawMessage) (any, error) {
		f, err := newF(c)
		if err != nil {
			return nil, err
		}
		return nil, fn(f, ctx)
	})
}

// Later is the result of a call whose reply comes after the method
// returns (HandleLater, HandleLaterNone): a watcher's Next waits for a
// change without a goroutine waiting on its behalf. The connection keeps
// the call's MaxRequests slot until the reply is sent.
type Later struct {
	// start starts the call of f (the facade's instance, or LaterFunc's
	// function): one function per method, made at registration.
	start func(f any, ctx context.Context, r replier)
	f     any
	// mapErr, if set, maps the reply's error (MapErr).
	mapErr func(req Request, err error) error
}

// replier receives the reply of a Later call: the connection's call
// itself, so that starting a call makes no function to reply with.
type replier interface{ reply(res any, err error) }

// replyFunc is a reply function as a replier.
type replyFunc func(any, error)

func (f replyFunc) reply(res any, err error) { f(res, err) }

// newLater returns the Later of the call running with ctx: the one the
// connection keeps with the call (callCtx), so that a call's Later is no
// allocation of its own; a new one outside a connection.
func newLater(ctx context.Context) *Later {
	if cc, _ := ctx.Value(callKey{}).(*callCtx); cc != nil {
		return &cc.later
	}
	return new(Later)
}

// LaterFunc makes a Later for a Root that resolves methods without the
// Registry: start must see to it that reply is called exactly once, from
// any goroutine; reply never blocks.
func LaterFunc(start func(ctx context.Context, reply func(any, error))) *Later {
	return &Later{start: startFunc, f: start}
}

// startFunc is the start of a LaterFunc's Later: f is its function.
func startFunc(f any, ctx context.Context, r replier) {
	f.(func(context.Context, func(any, error)))(ctx, r.reply)
}

// begin runs l's start.
func (l *Later) begin(ctx context.Context, r replier) { l.start(l.f, ctx, r) }

// Start runs the call outside a connection (tests, in-process callers):
// reply is called exactly once, from any goroutine, and must not block.
// Its error has been through MapErr's function, with a zero Request.
func (l *Later) Start(ctx context.Context, reply func(any, error)) {
	if l.mapErr == nil {
		l.begin(ctx, replyFunc(reply))
		return
	}
	l.begin(ctx, replyFunc(func(res any, err error) {
		if err != nil {
			err = l.mapErr(Request{}, err)
		}
		reply(res, err)
	}))
}

// MapErr makes l's error, if any, pass through f (the facade layer's
// mapping of errors to wire codes), after any function an earlier MapErr
// gave, and returns l. f gets the request the call answers: the
// connection applies it when the reply comes, so nothing of the call's
// own state need be kept while it waits.
func (l *Later) MapErr(f func(req Request, err error) error) *Later {
	if prev := l.mapErr; prev != nil {
		l.mapErr = func(req Request, err error) error { return f(req, prev(req, err)) }
	} else {
		l.mapErr = f
	}
	return l
}

// HandleLater registers a method without params whose result R comes
// later. fn must see to it that reply is called exactly once, before or
// after fn returns, from any goroutine; reply never blocks (the reply is
// encoded and written on a worker goroutine). Params sent are ignored.
func HandleLater[C, F, R any](m *Methods[C, F], name string, fn func(F, context.Context, func(R, error))) {
	HandleLaterAs(m, name, fn, func(r R) R { return r })
}

// HandleLaterAs is HandleLater for a method whose reply function takes a
// V, of which wrap makes the result R once the reply comes: the method
// can hand its reply function as it is to what replies with a V (a
// watcher's NextAsync, with the ids of a strings watcher's result)
// instead of making a function of its own to adapt it at each call.
func HandleLaterAs[C, F, V, R any](m *Methods[C, F], name string, fn func(F, context.Context, func(V, error)), wrap func(V) R) {
	addLater(m, name, func(f any, ctx context.Context, rep replier) {
		fn(f.(F), ctx, func(v V, err error) {
			if err != nil {
				rep.reply(nil, err)
				return
			}
			rep.reply(wrap(v), nil)
		})
	})
}

// HandleLaterNone is HandleLater for a method with neither params nor
// result: its reply is "response": {} or the error. The function it
// replies with is the only one a waiting call holds (HandleLater's
// wrapped in another was two).
func HandleLaterNone[C, F any](m *Methods[C, F], name string, fn func(F, context.Context, func(error))) {
	addLater(m, name, func(f any, ctx context.Context, rep replier) {
		fn(f.(F), ctx, func(err error) { rep.reply(nil, err) })
	})
}

// addLater registers a method without params whose reply start gives
// later, on the facade instance of the call.
func addLater[C, F any](m *Methods[C, F], name string, start func(f any, ctx context.Context, rep replier)) {
	newF := m.newF
	m.add(name, nil, func(ctx context.Context, c C, _ json.RawMessage) (any, error) {
		f, err := newF(c)
		if err != nil {
			return nil, err
		}
		l := newLater(ctx)
		*l = Later{start: start, f: f}
		return l, nil
	})
}

// Find resolves a method, or returns the "not implemented" error Juju gives
// for an unknown facade, version or method. It allocates nothing.
func (r *Registry[C]) Find(facade string, version int, method string) (*Method[C], error) {
	versions, ok := r.facades[facade]
	if !ok {
		return nil, UnknownFacadeError(facade, version)
	}
	def, ok := versions[version]
	if !ok {
		return nil, UnknownFacadeError(facade, version)
	}
	m, ok := def.methods[method]
	if !ok {
		return nil, UnknownMethodError(facade, version, method)
	}
	return m, nil
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
	if m := def.methods[method]; m != nil {
		return m.Params
	}
	return nil
}
