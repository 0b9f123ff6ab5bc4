package state

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/juju/names/v5"
)

// TestRecordClonesShareNothing fills every field of each cached record
// type, at every depth, and checks that its clone gives an equal value
// that shares no memory with it: so a field added without a line in its
// clone fails here.
func TestRecordClonesShareNothing(t *testing.T) {
	t.Parallel()
	t.Run("Machine", func(t *testing.T) { checkCloneSharesNothing(t, (*Machine).clone) })
	t.Run("Unit", func(t *testing.T) { checkCloneSharesNothing(t, (*Unit).clone) })
	t.Run("Application", func(t *testing.T) { checkCloneSharesNothing(t, (*Application).clone) })
	t.Run("Model", func(t *testing.T) { checkCloneSharesNothing(t, (*modelDoc).clone) })
}

func checkCloneSharesNothing[T any](t *testing.T, clone func(*T) T) {
	t.Parallel()
	var v T
	fillAll(reflect.ValueOf(&v).Elem(), 0)
	c := clone(&v)
	if !reflect.DeepEqual(v, c) {
		t.Fatalf("clone differs:\n%+v\n%+v", v, c)
	}
	orig := map[uintptr]string{}
	addrs(reflect.ValueOf(v), "v", orig)
	copies := map[uintptr]string{}
	addrs(reflect.ValueOf(c), "c", copies)
	if len(orig) == 0 {
		t.Fatal("found no memory to compare")
	}
	for a, path := range copies {
		if p, ok := orig[a]; ok {
			t.Errorf("%s shares memory with %s", path, p)
		}
	}
}

// fillAll sets every settable part of v to a non-zero value; maps of any
// get the shapes JSON decoding makes (nested maps and slices).
func fillAll(v reflect.Value, depth int) {
	if depth > 6 {
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(1)
	case reflect.Uint64:
		v.SetUint(1)
	case reflect.Float64:
		v.SetFloat(1)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillAll(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fillAll(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			panic("fillAll: unexpected map type " + v.Type().String())
		}
		if v.Type() != reflect.TypeFor[map[string]any]() {
			m := reflect.MakeMap(v.Type())
			for _, k := range []string{"k1", "k2"} {
				e := reflect.New(v.Type().Elem()).Elem()
				fillAll(e, depth+1)
				m.SetMapIndex(reflect.ValueOf(k), e)
			}
			v.Set(m)
			return
		}
		v.Set(reflect.ValueOf(map[string]any{
			"str": "s", "num": 1.5, "bool": true, "null": nil,
			"map":  map[string]any{"list": []any{"a", map[string]any{"k": "v"}}},
			"list": []any{[]any{"x"}, map[string]any{"k": 2.0}},
		}))
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("X", 3600))))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillAll(v.Field(i), depth+1)
			}
		}
	default:
		panic("fillAll: unexpected kind " + v.Kind().String())
	}
}

// addrs records the address of every pointer target, slice array and map
// reachable from v (time.Time's location is shared by design).
func addrs(v reflect.Value, path string, out map[uintptr]string) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		out[v.Pointer()] = path
		addrs(v.Elem(), "*"+path, out)
	case reflect.Slice:
		if v.IsNil() {
			return
		}
		if v.Cap() > 0 {
			out[uintptr(unsafe.Pointer(v.Pointer()))] = path
		}
		for i := range v.Len() {
			addrs(v.Index(i), path+"[]", out)
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		out[v.Pointer()] = path
		for _, k := range v.MapKeys() {
			addrs(v.MapIndex(k), path+"."+k.String(), out)
		}
	case reflect.Interface:
		if !v.IsNil() {
			addrs(v.Elem(), path, out)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				addrs(v.Field(i), path+"."+v.Type().Field(i).Name, out)
			}
		}
	}
}

func TestValidMachineID(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"0", "1", "10", "123456789012345678901234567890", "01", "00", "", "-1", "1a", "a",
		"0/lxd/0", "0/lxd/01", "0/LXD/0", "1/kvm/2/lxd/3", "0/lxd", "0//0", " 1", "1 ", "١"} {
		if got, want := validMachineID(id), names.IsValidMachine(id); got != want {
			t.Errorf("validMachineID(%q) = %v, names.IsValidMachine %v", id, got, want)
		}
	}
}

// A machine is kept from its second read on; a changed record replaces it.
func TestMachineCacheKeepsFromSecondRead(t *testing.T) {
	t.Parallel()
	c := newMachineCache()
	count := func() (markers, entries int) {
		for i := range c.slots {
			if e := c.slots[i].Load(); e != nil && e.raw == nil {
				markers++
			} else if e != nil {
				entries++
			}
		}
		return markers, entries
	}
	doc := func(life Life) []byte {
		b, err := json.Marshal(&machineDoc{Machine: Machine{Model: "m", ID: "7", Life: life, Jobs: []string{JobHostUnits}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	read := func(raw []byte, want Life) {
		t.Helper()
		m, err := c.get("m/7", raw)
		if err != nil || m.Life != want || m.Jobs[0] != JobHostUnits {
			t.Fatalf("decode = %+v, %v", m, err)
		}
		m.Jobs[0] = "scribbled"
	}
	alive := doc(Alive)
	read(alive, Alive)
	if markers, entries := count(); markers != 1 || entries != 0 {
		t.Fatalf("after one read: %d markers, %d entries; want a marker only", markers, entries)
	}
	read(alive, Alive)
	read(alive, Alive)
	if markers, entries := count(); markers != 0 || entries != 1 {
		t.Fatalf("after three reads: %d markers, %d entries; want one entry", markers, entries)
	}
	read(doc(Dying), Dying)
	if markers, entries := count(); markers != 0 || entries != 1 {
		t.Fatalf("after a changed record: %d markers, %d entries; want one entry", markers, entries)
	}
	read(alive, Alive) // the old bytes again: decoded, not the cached Dying
}
