package daemon_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
)

// Bad input, everywhere: every method of every facade version
// the daemon registers gets null, missing and empty params, params of the
// wrong JSON type (whole and field by field), malformed, unknown and
// wrong-kind tags, tags of another model's entities, huge lists, deep
// nesting, invalid UTF-8, and free-form values (an `any` anywhere in the
// params: status data, config values) nested too deep or too large. The
// methods come from the registry, so a new one cannot be missed. For every
// call:
//
//   - a reply comes, framed as specs/rpc.md §1.3 and valid UTF-8;
//   - the connection still answers afterwards;
//   - no handler panicked (the daemon's log is checked);
//   - the state revision did not move: a bad call changes nothing.
//
// What must hold is checked against an oracle independent of the code
// under test (see oracle): a params decoding error has no code and says
// exactly what encoding/json says decoding the same params into the
// method's params type (specs/rpc.md §1.6); a bad tag fails every item with
// the spec's answers (permission denied, not found, or the tag's parse
// error text with no code: specs/provisioner.md §1.2-1.3,
// caasunitprovisioner.md); one result per item; and so on per class.
//
// The outcome of each call (error code and message, call-level or per
// item) is also recorded in testdata/badinput.golden, which pins, among the
// rest, encoding/json's error texts. It is a record, not the oracle: when
// only it differs (say a Go release rewords encoding/json's messages), the
// test says so, and regenerating it is a deliberate step: `go test
// ./internal/daemon -run TestBadInputEverywhere -update`, which refuses to
// write while the oracle fails; review the diff of the golden file and
// commit it saying why it changed (docs/reliability.md, Bad input).

// badInputCaller says which login each facade's bad input is sent as: one
// that gets past the facade's access check, so the input itself is
// exercised. A registered facade missing here fails the test.
var badInputCaller = map[string]string{
	"Admin":               "anonymous",
	"Pinger":              "controller",
	"NotifyWatcher":       "controller",
	"StringsWatcher":      "controller",
	"Provisioner":         "controller",
	"CAASUnitProvisioner": "controller@k8s",
	"ModelAdmin":          "admin",
	"MachineUndertaker":   "controller",
}

// tagClasses are the bad strings sent in every string field of the params
// of facades that name entities by tag.
var tagClasses = []struct{ name, value string }{
	{"tag/malformed", "not a tag!"},
	{"tag/unknown-machine", "machine-42"},
	{"tag/unit", "unit-wordpress-0"},
	{"tag/application", "application-wordpress"},
	{"tag/user", "user-admin"},
	{"tag/other-model-machine", "machine-2"},
	{"tag/other-model-application", "application-elsewhere"},
	// juju/names' ParseTag panics on a controller agent id that
	// overflows an int (found by FuzzTags).
	{"tag/controller-agent-overflow", "controller-10000000000000000000"},
	// Over facade.MaxTagLength: refused before parsing, quoted by its first
	// 64 bytes only.
	{"tag/over-length", "machine-" + strings.Repeat("1", 2000)},
}

// byTag lists the facades whose params name entities by tag; the others
// (ModelAdmin names models and machines by name) get only malformed
// strings, which are invalid in every field.
var byTag = map[string]bool{"Admin": true, "Provisioner": true, "CAASUnitProvisioner": true, "MachineUndertaker": true}

// tagStillOK are (method, class) pairs where a bulk call legitimately
// leaves an item without an error, with the spec's reason.
var tagStillOK = map[string]string{
	"CAASUnitProvisioner/v2/WatchPodSpec": "the application's existence is not checked (caasunitprovisioner.md §3.3); " +
		"only a tag that does not parse as an application fails",
}

// validEmpty are methods for which empty params are a valid request that
// writes (sent on the scratch model, so the world is not disturbed).
var validEmpty = map[string]string{
	"ModelAdmin/v1/AddMachines": "an empty request adds one machine with the model's defaults (provisionctl add-machine)",
}

const (
	hugeItems   = 5000
	deepNesting = 5000 // under encoding/json's limit of 10000
	utf8Mark    = "BAD-UTF8-MARK"
)

type badCase struct {
	class  string
	params []byte // nil: no "params" key
	items  int    // items in the top-level list, for huge
	field  reflect.Type
	value  string // the bad string every string field holds (tag/*, huge, name/*)
}

func badCases(facadeName string, pt reflect.Type) []badCase {
	cases := []badCase{
		{class: "null", params: []byte(`null`)},
		{class: "missing"},
		{class: "type/string", params: []byte(`"x"`)},
	}
	if pt == nil {
		return cases // params are ignored, as in Juju
	}
	cases = append(cases,
		badCase{class: "empty", params: []byte(`{}`)},
		badCase{class: "type/number", params: []byte(`7`)},
		badCase{class: "type/array", params: []byte(`[]`)},
		badCase{class: "type/bool", params: []byte(`true`)},
		badCase{class: "deep", params: []byte(strings.Repeat("[", deepNesting) + strings.Repeat("]", deepNesting))},
	)
	if pt.Kind() == reflect.Struct {
		for i := range pt.NumField() {
			f := pt.Field(i)
			name := jsonName(f)
			if name == "" {
				continue
			}
			wrong := wrongJSON(f.Type)
			if wrong == "" {
				continue
			}
			cases = append(cases, badCase{class: "field/" + name, params: fmt.Appendf(nil, `{%q:%s}`, name, wrong), field: f.Type})
		}
	}
	values := tagClasses[:1]
	if byTag[facadeName] {
		values = tagClasses
	}
	for _, c := range values {
		cases = append(cases, badCase{class: c.name, params: mustJSON(filled(pt, c.value, 1)), value: c.value})
	}
	if !byTag[facadeName] && pt.Kind() == reflect.Struct {
		// Names that are bad in every field but the model, which is the
		// connection's: the other fields are checked too.
		var obj map[string]any
		if err := json.Unmarshal(mustJSON(filled(pt, "not a tag!", 1)), &obj); err == nil {
			if _, ok := obj["model"]; ok {
				obj["model"] = ""
				cases = append(cases, badCase{class: "name/malformed-in-own-model", params: mustJSON(obj)})
			}
		}
	}
	// Huge lists: as many items as fit well under the read limit.
	one := mustJSON(filled(pt, "not a tag!", 1))
	if n := topSlices(pt); n > 0 {
		items := min(hugeItems, (2<<20)/max(1, len(one)))
		cases = append(cases, badCase{class: "huge", params: mustJSON(filled(pt, "not a tag!", items)), items: items, value: "not a tag!"})
	}
	utf := bytes.ReplaceAll(mustJSON(filled(pt, utf8Mark, 1)), []byte(utf8Mark), []byte("bad\xff\xfe-\xc3"))
	cases = append(cases, badCase{class: "utf8", params: utf})
	// Free-form values (status data, config values, attributes: an `any`
	// anywhere in the params) one level deeper than they may nest, and
	// one byte larger than they may be: the call is refused as a whole
	// (code not valid) whatever else it holds, so nothing can store a
	// value that makes a later read fail. Before login the read limit
	// (64 KiB) refuses a large one first.
	if holdsFreeForm(pt, map[reflect.Type]bool{}) {
		cases = append(cases, badCase{class: "value/deep", params: mustJSON(filledWith(pt, "not a tag!", 1, deepValue(rpc.MaxValueDepth+1)))})
		if badInputCaller[facadeName] != "anonymous" {
			cases = append(cases, badCase{class: "value/huge", params: mustJSON(filledWith(pt, "not a tag!", 1, strings.Repeat("x", rpc.MaxValueBytes)))})
		}
	}
	return cases
}

// deepValue is a JSON object nested depth objects deep.
func deepValue(depth int) any {
	var v any = "bottom"
	for range depth {
		v = map[string]any{"a": v}
	}
	return v
}

// holdsFreeForm reports whether a value of type t can hold an `any` (the
// test's own walk of the params types, not rpc's).
func holdsFreeForm(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Interface:
		return t.NumMethod() == 0
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return holdsFreeForm(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && holdsFreeForm(f.Type, seen) {
				return true
			}
		}
	}
	return false
}

func TestBadInputEverywhere(t *testing.T) {
	w := newWorld(t)
	reg := buildRegistry()
	creds := w.D.Credentials()
	agent := params.LoginRequest{AuthTag: creds.ControllerAgent.Tag, Credentials: creds.ControllerAgent.Password, Nonce: creds.ControllerAgent.Nonce}
	// Each facade gets fresh connections: a raw connection answers the
	// server's websocket pings only while it reads, so one left idle
	// while other facades run (over a minute on a loaded machine) would
	// be dropped for a missing pong.
	dialAs := func(who string) *rawConn {
		switch who {
		case "anonymous":
			return newRawConn(t, w.D, w.Model)
		case "controller":
			c := newRawConn(t, w.D, w.Model)
			c.login(agent)
			return c
		case "controller@k8s":
			c := newRawConn(t, w.D, w.caas)
			c.login(agent)
			return c
		case "admin":
			c := newRawConn(t, w.D, w.scratch)
			c.login(params.LoginRequest{AuthTag: "user-admin", Credentials: creds.AdminPassword})
			return c
		}
		t.Fatalf("no connection for %q", who)
		return nil
	}

	var golden strings.Builder
	calls := 0
	for _, fv := range reg.Facades() {
		who, ok := badInputCaller[fv.Name]
		if !ok {
			t.Errorf("facade %s has no entry in badInputCaller: add one", fv.Name)
			continue
		}
		c := dialAs(who)
		for _, v := range fv.Versions {
			for _, m := range reg.MethodNames(fv.Name, v) {
				name := fmt.Sprintf("%s/v%d/%s", fv.Name, v, m)
				pt := reg.ParamsType(fv.Name, v, m)
				outcomes := map[string]string{}
				for _, bc := range badCases(fv.Name, pt) {
					rev := w.St.Revision()
					r, err := c.call(fv.Name, v, "", m, bc.params)
					calls++
					if err != nil {
						t.Fatalf("%s %s: %v", name, bc.class, err)
					}
					r.decodeItems() // for outcome and oracle
					out := outcome(r)
					outcomes[bc.class] = out
					fmt.Fprintf(&golden, "%s %s: %s\n", name, bc.class, w.normalise(out))
					writes := validEmpty[name] != "" && (bc.class == "null" || bc.class == "missing" || bc.class == "empty")
					if got := w.St.Revision(); got != rev && !writes {
						t.Errorf("%s %s: revision %d -> %d: bad input changed state (%s)", name, bc.class, rev, got, out)
					}
					if err := c.alive(who != "anonymous"); err != nil {
						t.Fatalf("%s %s: connection after the call: %v", name, bc.class, err)
					}
					oracle(t, fv.Name, name, pt, bc, r)
				}
				if pt != nil && (outcomes["null"] != outcomes["empty"] || outcomes["missing"] != outcomes["empty"]) {
					t.Errorf("%s: null params %s, missing %s, {} %s: want all the same", name,
						outcomes["null"], outcomes["missing"], outcomes["empty"])
				}
				if pt == nil && (outcomes["null"] != outcomes["missing"] || outcomes["type/string"] != outcomes["missing"]) {
					t.Errorf("%s takes no params, so they are ignored: null %s, missing %s, \"x\" %s",
						name, outcomes["null"], outcomes["missing"], outcomes["type/string"])
				}
			}
		}
	}
	w.noPanics(t)
	t.Logf("%d bad calls", calls)
	checkGolden(t, filepath.Join("testdata", "badinput.golden"), golden.String())
}

// jsonOracle is what encoding/json says decoding data into a new value of
// t: the wire text of a params decoding error (nil if it decodes).
func jsonOracle(t reflect.Type, data []byte) error {
	return json.Unmarshal(data, reflect.New(t).Interface())
}

// badTagAnswer reports whether e is one of the answers the specs give to
// a bad tag: permission denied (or, for Admin.Login, invalid credentials)
// with code unauthorized access, a not-found error, or the tag's parse
// error text with no code.
func badTagAnswer(e *params.Error, value string) bool {
	switch e.Code {
	case params.CodeUnauthorized:
		return e.Message == "permission denied" || e.Message == "invalid entity name or password"
	case params.CodeNotFound:
		return true
	case "":
		// juju/names' text, the tag quoted as facade.QuoteTag does (%q,
		// or its first bytes when over facade.MaxTagLength).
		m, ok := strings.CutPrefix(e.Message, facade.QuoteTag(value)+" is not a valid ")
		return ok && strings.HasSuffix(m, "tag")
	}
	return false
}

// oracle checks what must hold for a class of bad input, independently
// of what the code happened to produce (which the golden file records).
func oracle(t *testing.T, facadeName, name string, pt reflect.Type, bc badCase, r rawReply) {
	t.Helper()
	// A params decoding error: the call fails with encoding/json's own
	// text for these params and this params type, and no code.
	decodeErr := func() {
		t.Helper()
		want := jsonOracle(pt, bc.params)
		if want == nil {
			t.Errorf("%s %s: encoding/json decodes %s into %v: not a bad input", name, bc.class, bc.params, pt)
			return
		}
		if r.err == nil || r.err.Code != "" || r.err.Message != want.Error() {
			t.Errorf("%s %s: %s; want encoding/json's %q without a code (rpc.md §1.6)", name, bc.class, outcome(r), want)
		}
	}
	// Every item of a bulk reply fails with one of the spec's answers to a
	// bad tag, and (items > 0) there is one result per item sent.
	badItems := func(items int) {
		t.Helper()
		if r.err != nil {
			if byTag[facadeName] && !badTagAnswer(r.err, bc.value) {
				t.Errorf("%s %s: %s; not an answer the specs give to a bad tag", name, bc.class, outcome(r))
			}
			return
		}
		errs, ok := r.itemErrors()
		if !ok {
			return
		}
		if items > 0 && len(errs) != items {
			t.Errorf("%s %s: %d results for %d items", name, bc.class, len(errs), items)
		}
		for i, e := range errs {
			switch {
			case e == nil && tagStillOK[name] == "":
				t.Errorf("%s %s: item %d succeeded: a bad tag must fail (%s)", name, bc.class, i, outcome(r))
				return
			case e != nil && byTag[facadeName] && !badTagAnswer(e, bc.value):
				t.Errorf("%s %s: item %d: %s; not an answer the specs give to a bad tag", name, bc.class, i, errString(e))
				return
			}
		}
	}
	switch {
	case pt == nil:
	case strings.HasPrefix(bc.class, "type/"), bc.class == "deep":
		decodeErr()
	case strings.HasPrefix(bc.class, "field/"):
		if bc.field.Kind() != reflect.Interface {
			decodeErr()
		}
	case bc.class == "huge":
		badItems(bc.items)
	case strings.HasPrefix(bc.class, "tag/"):
		badItems(0) // the count is checked by huge: not every list in the params is one of items
	case bc.class == "value/deep", bc.class == "value/huge":
		// The whole call is refused, with the bound in the message.
		want := fmt.Sprintf("nested deeper than %d objects and arrays", rpc.MaxValueDepth)
		if bc.class == "value/huge" {
			want = fmt.Sprintf("over %d bytes of JSON", rpc.MaxValueBytes)
		}
		if r.err == nil || r.err.Code != params.CodeNotValid || !strings.Contains(r.err.Message, want) {
			t.Errorf("%s %s: %s; want the call refused: %q (not valid)", name, bc.class, outcome(r), want)
		}
	}
}

// outcome summarises a reply for the golden file: the call-level error, or
// the item errors of a bulk result grouped with their counts, or ok.
func outcome(r rawReply) string {
	if r.err != nil {
		msg := r.err.Message
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		return fmt.Sprintf("error %q (%s)", msg, r.err.Code)
	}
	errs, ok := r.itemErrors()
	if !ok {
		return "ok"
	}
	if len(errs) == 0 {
		return "ok, no items"
	}
	var keys []string
	count := map[string]int{}
	for _, e := range errs {
		k := errString(e)
		if count[k] == 0 {
			keys = append(keys, k)
		}
		count[k]++
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d× %s", count[k], k)
	}
	return "items: " + strings.Join(parts, ", ")
}

var updateBadInput = flag.Bool("update", false, "rewrite the golden files (bad input, audited methods)")

// checkGolden compares got with the golden file at path. With -update it
// writes got instead, but only if the test has not failed so far: the
// oracle must hold before a record of the outcomes is renewed.
func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *updateBadInput {
		if t.Failed() {
			t.Fatalf("not rewriting %s: the test failed above; fix that first", path)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s: review its diff and say in the commit why it changed", path)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) == got {
		return
	}
	// Report by key (the text before ": "), so an added line does not
	// shift every later one.
	index := func(text string) (map[string]string, []string) {
		m := map[string]string{}
		var keys []string
		for _, l := range strings.Split(text, "\n") {
			if l == "" {
				continue
			}
			k, _, _ := strings.Cut(l, ": ")
			m[k] = l
			keys = append(keys, k)
		}
		return m, keys
	}
	oracleFailed := t.Failed()
	wm, wkeys := index(string(want))
	gm, gkeys := index(got)
	n := 0
	report := func(format string, args ...any) {
		if n < 30 {
			t.Errorf(format, args...)
		}
		n++
	}
	for _, k := range gkeys {
		switch w, ok := wm[k]; {
		case !ok:
			report("new: %s", gm[k])
		case w != gm[k]:
			report("changed:\n want %s\n  got %s", w, gm[k])
		}
	}
	for _, k := range wkeys {
		if _, ok := gm[k]; !ok {
			report("gone: %s", wm[k])
		}
	}
	if oracleFailed {
		t.Errorf("%s differs in %d lines, and the checks above failed: the outcomes are wrong, not only their texts", path, n)
		return
	}
	t.Errorf("%s differs in %d lines, but every check of what the specs require passed: only the recorded texts "+
		"moved (an encoding/json wording, a new method or class). Review the change, rerun with -update and say "+
		"why in the commit", path, n)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func jsonName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return ""
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	return name
}

// wrongJSON is a JSON value that cannot decode into t ("" if any can).
func wrongJSON(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[json.RawMessage]() {
		return ""
	}
	switch t.Kind() {
	case reflect.String:
		return `7`
	case reflect.Bool, reflect.Slice, reflect.Array, reflect.Map, reflect.Int, reflect.Int8, reflect.Int16,
		reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return `7` // []byte takes a base64 string
		}
		return `"x"`
	case reflect.Struct:
		return `[1]`
	case reflect.Interface:
		return `[1]` // decodes: see checkClass
	}
	return ""
}

// topSlices counts the top-level slice fields of t.
func topSlices(t reflect.Type) int {
	n := 0
	if t.Kind() != reflect.Struct {
		return 0
	}
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() && f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() != reflect.Uint8 {
			n++
		}
	}
	return n
}

// filled returns a value of type t with every string set to s, every
// number to 1, every bool true; top-level slices get n elements, nested
// ones 1; maps one entry keyed s.
func filled(t reflect.Type, s string, n int) any {
	return filledWith(t, s, n, nil)
}

// filledWith is filled with every `any` set to value (nil: to s).
func filledWith(t reflect.Type, s string, n int, value any) any {
	v := reflect.New(t).Elem()
	fillWith(v, s, n, 0, value)
	return v.Interface()
}

func fillWith(v reflect.Value, s string, n, depth int, value any) {
	if depth > 12 {
		return
	}
	if v.Type() == reflect.TypeFor[json.RawMessage]() {
		v.SetBytes(mustJSON(s))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillWith(p.Elem(), s, 1, depth+1, value)
		v.Set(p)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte(s))
			return
		}
		k := 1
		if depth == 1 {
			k = n
		}
		sl := reflect.MakeSlice(v.Type(), k, k)
		fillWith(sl.Index(0), s, 1, depth+1, value)
		for i := 1; i < k; i++ {
			sl.Index(i).Set(sl.Index(0))
		}
		v.Set(sl)
	case reflect.Map:
		m := reflect.MakeMapWithSize(v.Type(), 1)
		key := reflect.New(v.Type().Key()).Elem()
		fillWith(key, s, 1, depth+1, value)
		val := reflect.New(v.Type().Elem()).Elem()
		fillWith(val, s, 1, depth+1, value)
		m.SetMapIndex(key, val)
		v.Set(m)
	case reflect.Interface:
		switch {
		case v.NumMethod() != 0:
		case value != nil:
			v.Set(reflect.ValueOf(value))
		default:
			v.Set(reflect.ValueOf(s))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				fillWith(f, s, n, depth+1, value)
			}
		}
	}
}

// Messages that cannot be framed close the connection without a reply
// (close code 1000); a message over the read limit closes it with 1009;
// anything that frames is answered and the connection stays
// (specs/rpc.md §1.1, §1.6). Other connections are not disturbed, and
// nothing in state changes.
func TestBadFraming(t *testing.T) {
	w := newWorld(t)
	ctrl := loginController(t, w.D, w.Model)
	rev := w.St.Revision()
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	agent := params.LoginRequest{AuthTag: w.D.Credentials().ControllerAgent.Tag,
		Credentials: w.D.Credentials().ControllerAgent.Password, Nonce: w.D.Credentials().ControllerAgent.Nonce}
	tests := []struct {
		name  string
		typ   int
		msg   string
		close int    // 0: answered, the connection stays
		reply string // for answered messages: the exact reply
	}{
		{"invalid JSON", websocket.TextMessage, `{"request-id":1,"type":`, websocket.CloseNormalClosure, ""},
		{"empty message", websocket.TextMessage, ``, websocket.CloseNormalClosure, ""},
		{"array", websocket.TextMessage, `[{"request-id":1}]`, websocket.CloseNormalClosure, ""},
		{"null", websocket.TextMessage, `null`, websocket.CloseNormalClosure, ""},
		{"string", websocket.TextMessage, `"Admin"`, websocket.CloseNormalClosure, ""},
		{"negative request id", websocket.TextMessage, `{"request-id":-1,"type":"Admin","version":3,"request":"RedirectInfo"}`, websocket.CloseNormalClosure, ""},
		{"version as a string", websocket.TextMessage, `{"request-id":1,"type":"Admin","version":"3","request":"RedirectInfo"}`, websocket.CloseNormalClosure, ""},
		{"nesting over the decoder's limit", websocket.TextMessage, `{"request-id":1,"type":"Admin","version":3,"request":"Login","params":` + deep + `}`, websocket.CloseNormalClosure, ""},
		{"invalid UTF-8 outside strings", websocket.TextMessage, "{\"request-id\":1,\xff}", websocket.CloseNormalClosure, ""},
		// Before login the read limit is --prelogin-read-limit (64 KiB), after
		// it --read-limit (4 MiB).
		{"oversized before login", websocket.TextMessage, `{"request-id":1,"type":"Admin","version":3,"request":"Login","params":{"auth-tag":"` + strings.Repeat("x", 64<<10) + `"}}`, websocket.CloseMessageTooBig, ""},
		{"under the limit after login", websocket.TextMessage, `{"request-id":1,"type":"Pinger","version":1,"request":"Ping","params":{"x":"` + strings.Repeat("x", 64<<10) + `"}}`, 0,
			`{"request-id":1,"response":{}}`},
		{"oversized after login", websocket.TextMessage, `{"request-id":1,"type":"Pinger","version":1,"request":"Ping","params":{"x":"` + strings.Repeat("x", 4<<20) + `"}}`, websocket.CloseMessageTooBig, ""},
		{"invalid UTF-8 in the header", websocket.TextMessage, "{\"request-id\":1,\"type\":\"Admin\xff\",\"version\":3,\"request\":\"Login\"}", 0,
			`{"request-id":1,"error":"unknown version 3 for facade type \"Admin\ufffd\"","error-code":"not implemented","response":{}}`},
		{"binary message", websocket.BinaryMessage, `{"request-id":1,"type":"Admin","version":3,"request":"RedirectInfo"}`, 0,
			`{"request-id":1,"error":"not redirected","response":{}}`},
		{"trailing garbage", websocket.TextMessage, `{"request-id":1,"type":"Admin","version":3,"request":"RedirectInfo"} {]]`, 0,
			`{"request-id":1,"error":"not redirected","response":{}}`},
		{"deep params under the limit", websocket.TextMessage, `{"request-id":1,"type":"Admin","version":3,"request":"Login","params":` +
			strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + `}`, 0,
			// encoding/json's own text for these params (the oracle), no code.
			string(mustJSON(map[string]any{"request-id": 1, "response": struct{}{},
				"error": jsonOracle(reflect.TypeFor[params.LoginRequest](), []byte(strings.Repeat("[", 9000)+strings.Repeat("]", 9000))).Error()}))},
		{"a reply, not a request", websocket.TextMessage, `{"request-id":1,"response":{}}`, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newRawConn(t, w.D, w.Model)
			loggedIn := strings.HasSuffix(tt.name, "after login")
			if loggedIn {
				c.login(agent)
			}
			_ = c.ws.SetWriteDeadline(time.Now().Add(20 * time.Second))
			if err := c.ws.WriteMessage(tt.typ, []byte(tt.msg)); err != nil {
				t.Fatal(err)
			}
			_ = c.ws.SetReadDeadline(time.Now().Add(20 * time.Second))
			if tt.close != 0 {
				_, data, err := c.ws.ReadMessage()
				var ce *websocket.CloseError
				if !errors.As(err, &ce) || ce.Code != tt.close {
					t.Fatalf("read = %q, %v; want close %d and no reply", data, err, tt.close)
				}
				return
			}
			if tt.reply != "" {
				_, data, err := c.ws.ReadMessage()
				if err != nil {
					t.Fatal(err)
				}
				if got := strings.TrimSpace(string(data)); !jsonEqual(got, tt.reply) {
					t.Errorf("reply = %s; want %s", got, tt.reply)
				}
			}
			if err := c.alive(loggedIn); err != nil {
				t.Fatalf("connection after the message: %v", err)
			}
		})
	}
	if err := ctrl.Ping(ctxT(t)); err != nil {
		t.Errorf("another connection: %v", err)
	}
	if got := w.St.Revision(); got != rev {
		t.Errorf("revision %d -> %d", rev, got)
	}
	w.noPanics(t)
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// Unknown, stopped, mistyped and other connections' watcher ids all get
// "unknown watcher id" (code not found); the connection stays.
func TestUnknownWatcherIDs(t *testing.T) {
	w := newWorld(t)
	creds := w.D.Credentials()
	agent := params.LoginRequest{AuthTag: creds.ControllerAgent.Tag, Credentials: creds.ControllerAgent.Password, Nonce: creds.ControllerAgent.Nonce}
	c := newRawConn(t, w.D, w.Model)
	c.login(agent)
	other := newRawConn(t, w.D, w.Model)
	other.login(agent)
	if r := c.mustCall("Provisioner", 11, "", "WatchForModelConfigChanges", nil); r.err != nil || !strings.Contains(string(r.response), `"1"`) {
		t.Fatalf("notify watcher: %s", r.raw)
	}
	if r := c.mustCall("Provisioner", 11, "", "WatchModelMachines", nil); r.err != nil || !strings.Contains(string(r.response), `"2"`) {
		t.Fatalf("strings watcher: %s", r.raw)
	}
	if r := c.mustCall("NotifyWatcher", 1, "1", "Stop", nil); r.err != nil {
		t.Fatalf("stop: %v", r.err)
	}
	for _, tt := range []struct {
		c      *rawConn
		facade string
		id     string
	}{
		{c, "NotifyWatcher", "1"},  // stopped
		{c, "NotifyWatcher", "2"},  // a strings watcher
		{c, "StringsWatcher", "3"}, // never issued
		{c, "StringsWatcher", "x"},
		{c, "StringsWatcher", "-1"},
		{c, "StringsWatcher", "02"},
		{c, "NotifyWatcher", strings.Repeat("9", 100)},
		{other, "StringsWatcher", "2"}, // another connection's
	} {
		for _, m := range []string{"Next", "Stop"} {
			r := tt.c.mustCall(tt.facade, 1, tt.id, m, nil)
			if r.err == nil || r.err.Message != "unknown watcher id" || r.err.Code != params.CodeNotFound {
				t.Errorf("%s(%q).%s = %s; want unknown watcher id (not found)", tt.facade, tt.id, m, outcome(r))
			}
			if err := tt.c.alive(true); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.noPanics(t)
}
