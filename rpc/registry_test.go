package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/provisiond/provisiond/rpc/params"
)

type testCtx struct{ name string }

type testFacade struct{ c *testCtx }

type echoArgs struct {
	Entities []params.Entity `json:"entities"`
}

func (f *testFacade) Echo(_ context.Context, a echoArgs) (echoArgs, error) { return a, nil }
func (f *testFacade) Who(context.Context) (params.StringResult, error) {
	return params.StringResult{Result: f.c.name}, nil
}
func (f *testFacade) Nothing(context.Context) error { return nil }

// Wait is a Later method that replies at once, with the caller's name.
func (f *testFacade) Wait(_ context.Context, reply func(params.StringResult, error)) {
	reply(params.StringResult{Result: f.c.name}, nil)
}

func newTestRegistry() *Registry[*testCtx] {
	r := NewRegistry[*testCtx]()
	Register(r, "Test", 2, func(c *testCtx) (*testFacade, error) { return &testFacade{c: c}, nil },
		func(m *Methods[*testCtx, *testFacade]) {
			Handle(m, "Echo", (*testFacade).Echo)
			HandleNoArgs(m, "Who", (*testFacade).Who)
			HandleNone(m, "Nothing", (*testFacade).Nothing)
			HandleLater(m, "Wait", (*testFacade).Wait)
		})
	return r
}

func TestRegistryFind(t *testing.T) {
	r := newTestRegistry()
	tests := []struct {
		facade  string
		version int
		method  string
		msg     string
	}{
		{"Nope", 0, "X", `unknown facade type "Nope"`},
		{"Nope", 3, "X", `unknown version 3 for facade type "Nope"`},
		{"Test", 1, "Echo", `unknown version 1 for facade type "Test"`},
		{"Test", 2, "Missing", `unknown method "Missing" at version 2 for facade type "Test"`},
	}
	for _, tt := range tests {
		_, err := r.Find(tt.facade, tt.version, tt.method)
		pe, ok := err.(*params.Error)
		if !ok || pe.Message != tt.msg || pe.Code != params.CodeNotImplemented {
			t.Errorf("Find(%s, %d, %s) = %#v; want %q, not implemented", tt.facade, tt.version, tt.method, err, tt.msg)
		}
	}
}

func TestRegistryCall(t *testing.T) {
	r := newTestRegistry()
	m, err := r.Find("Test", 2, "Echo")
	if err != nil {
		t.Fatal(err)
	}
	// Keys match without regard to case; null and missing params are empty.
	for raw, want := range map[string]int{`{"Entities":[{"TAG":"a"}]}`: 1, `null`: 0, ``: 0} {
		res, err := m.Call(context.Background(), &testCtx{}, json.RawMessage(raw))
		if err != nil {
			t.Fatalf("Call(%q): %v", raw, err)
		}
		got := res.(echoArgs)
		if len(got.Entities) != want || (want == 1 && got.Entities[0].Tag != "a") {
			t.Errorf("Call(%q) = %+v", raw, got)
		}
	}
	if _, err := m.Call(context.Background(), &testCtx{}, json.RawMessage(`{"entities":"x"}`)); err == nil {
		t.Error("params of the wrong type decoded without error")
	}
	who, _ := r.Find("Test", 2, "Who")
	res, err := who.Call(context.Background(), &testCtx{name: "me"}, json.RawMessage(`{"ignored":true}`))
	if err != nil || res.(params.StringResult).Result != "me" {
		t.Errorf("Who = %v, %v", res, err)
	}
	if got := r.Facades(); len(got) != 1 || got[0].Name != "Test" || got[0].Versions[0] != 2 {
		t.Errorf("Facades() = %+v", got)
	}
	if got := r.MethodNames("Test", 2); len(got) != 4 {
		t.Errorf("MethodNames = %v", got)
	}
	wait, _ := r.Find("Test", 2, "Wait")
	res, err = wait.Call(context.Background(), &testCtx{name: "later"}, nil)
	l, ok := res.(*Later)
	if err != nil || !ok {
		t.Fatalf("Wait = %v, %v; want a Later", res, err)
	}
	var got any
	l.Start(context.Background(), func(res any, err error) { got = res })
	if got.(params.StringResult).Result != "later" {
		t.Errorf("Wait replied %v", got)
	}
}

// BenchmarkHandleLater is a HandleLater method's call and reply, as a
// watcher's Next is answered (the connection's part aside): the facade
// made, its Later, the reply's result boxed.
func BenchmarkHandleLater(b *testing.B) {
	r := newTestRegistry()
	wait, err := r.Find("Test", 2, "Wait")
	if err != nil {
		b.Fatal(err)
	}
	ctx, tc := context.Background(), &testCtx{name: "0/lxd/1"}
	var got any
	reply := func(res any, _ error) { got = res }
	b.ReportAllocs()
	for b.Loop() {
		res, err := wait.Call(ctx, tc, nil)
		if err != nil {
			b.Fatal(err)
		}
		res.(*Later).Start(ctx, reply)
	}
	if got.(params.StringResult).Result != "0/lxd/1" {
		b.Fatal(got)
	}
}

func TestRegisterDuplicatePanics(t *testing.T) {
	r := newTestRegistry()
	defer func() {
		if recover() == nil {
			t.Fatal("duplicate registration did not panic")
		}
	}()
	Register(r, "Test", 2, func(c *testCtx) (*testFacade, error) { return nil, nil }, func(*Methods[*testCtx, *testFacade]) {})
}

func TestParsePath(t *testing.T) {
	for path, want := range map[string]string{"/": "", "/api": "", "/model/abc/api": "abc"} {
		got, ok := ParsePath(path)
		if !ok || got != want {
			t.Errorf("ParsePath(%q) = %q, %v", path, got, ok)
		}
	}
	for _, path := range []string{"/model//api", "/model/a/b/api", "/health", "/model/x", "/apix"} {
		if _, ok := ParsePath(path); ok {
			t.Errorf("ParsePath(%q) accepted", path)
		}
	}
}

func TestRegistryParamsType(t *testing.T) {
	r := newTestRegistry()
	if got := r.ParamsType("Test", 2, "Echo"); got != reflect.TypeFor[echoArgs]() {
		t.Errorf("ParamsType(Echo) = %v", got)
	}
	for _, m := range []string{"Who", "Nothing", "Missing"} {
		if got := r.ParamsType("Test", 2, m); got != nil {
			t.Errorf("ParamsType(%s) = %v; want nil", m, got)
		}
	}
	if got := r.ParamsType("Nope", 1, "Echo"); got != nil {
		t.Errorf("ParamsType of an unknown facade = %v", got)
	}
}

// fastArgs decodes "fast" itself and leaves anything else to encoding/json.
type fastArgs struct {
	Name string `json:"name"`
	fast bool
}

func (a *fastArgs) DecodeFast(data []byte) bool {
	if string(data) != `"fast"` {
		return false
	}
	a.Name, a.fast = "fast", true
	return true
}

func (f *testFacade) Fast(_ context.Context, a fastArgs) (fastArgs, error) { return a, nil }

// A params type implementing FastDecoder decodes its own form; anything
// else goes to encoding/json, whose error (a *ParamsError, no code) keeps
// encoding/json's text.
func TestHandleUsesFastDecoder(t *testing.T) {
	r := NewRegistry[*testCtx]()
	Register(r, "Test", 1, func(c *testCtx) (*testFacade, error) { return &testFacade{c: c}, nil },
		func(m *Methods[*testCtx, *testFacade]) { Handle(m, "Fast", (*testFacade).Fast) })
	m, err := r.Find("Test", 1, "Fast")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := r.Find("Test", 1, "Fast"); again != m {
		t.Error("Find returned a new Method for the same method")
	}
	for _, tt := range []struct {
		raw  string
		want fastArgs
	}{
		{`"fast"`, fastArgs{Name: "fast", fast: true}},
		{`{"name":"slow"}`, fastArgs{Name: "slow"}},
		{``, fastArgs{}},
		{`null`, fastArgs{}},
	} {
		res, err := m.Call(context.Background(), &testCtx{}, json.RawMessage(tt.raw))
		if err != nil || res.(fastArgs) != tt.want {
			t.Errorf("Call(%s) = %+v, %v; want %+v", tt.raw, res, err, tt.want)
		}
	}
	_, err = m.Call(context.Background(), &testCtx{}, json.RawMessage(`7`))
	var pe *ParamsError
	want := json.Unmarshal([]byte(`7`), new(fastArgs))
	if !errors.As(err, &pe) || want == nil || err.Error() != want.Error() || pe.ErrorCode() != "" {
		t.Errorf("Call(7) = %v; want a *ParamsError with encoding/json's text %q", err, want)
	}
}
