package state

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
)

// What the record caches (record_cache.go) and the record patch
// (recordpatch.go) save, and what they cost: docs/architecture.md, "A
// typed view of the committed state", has the figures. Each benchmark
// works on the stored bytes of one record, read once from a real bbolt
// store, so it measures the decoding the caches save and not the store.
// They measure; they assert no speed.

// storedRecord is a record's key and its stored bytes.
type storedRecord struct {
	key string
	raw []byte
}

// recordFixture returns the stored records of a provisioned machine (as
// provisionbench's fixture makes them, with hardware and an agent
// status), of a unit on it and its application, and of the default model.
func recordFixture(b *testing.B) (machine, unit, application, model storedRecord) {
	b.Helper()
	st, err := openBolt(b.TempDir() + "/state.db")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	res, err := st.Initialize(b.Context(), InitArgs{AdminPassword: "pw", AgentPassword: "agent-password-long-enough", AgentNonce: "n"})
	if err != nil {
		b.Fatal(err)
	}
	uuid := res.DefaultModelUUID
	m, err := st.AddMachine(b.Context(), uuid, MachineParams{Jobs: []string{JobHostUnits}})
	if err != nil {
		b.Fatal(err)
	}
	arch, mem, cores, zone := "amd64", uint64(4096), uint64(2), "zone-a"
	_, appErr := st.AddApplication(b.Context(), uuid, ApplicationParams{Name: "mysql", CharmURL: "ch:amd64/jammy/mysql-42", CharmRevision: 42})
	steps := []error{
		st.SetMachinePassword(b.Context(), uuid, m.ID, "bench-password-00000000"),
		st.SetInstanceInfo(b.Context(), uuid, m.ID, InstanceInfo{InstanceID: "bench-i-" + m.ID, Nonce: "bench:" + m.ID,
			Hardware: &HardwareCharacteristics{Arch: &arch, Mem: &mem, CpuCores: &cores, AvailabilityZone: &zone}}),
		st.SetMachineStatus(b.Context(), uuid, m.ID, AgentStatus, Status{Status: "started"}),
		appErr,
	}
	for _, err := range steps {
		if err != nil {
			b.Fatal(err)
		}
	}
	u, err := st.AddUnit(b.Context(), uuid, "mysql", m.ID, "")
	if err != nil {
		b.Fatal(err)
	}
	read := func(key string) storedRecord {
		var raw []byte
		if err := st.view(b.Context(), func(r reader) error {
			_, err := r.GetFunc(key, func(v []byte) { raw = append([]byte(nil), v...) })
			return err
		}); err != nil || raw == nil {
			b.Fatalf("reading %s: %v", key, err)
		}
		return storedRecord{key, raw}
	}
	return read(entityKey(KindMachine, uuid, m.ID)), read(entityKey(KindUnit, uuid, u.Name)),
		read(entityKey(KindApplication, uuid, "mysql")), read(entityKey(KindModel, "", uuid))
}

// BenchmarkRecordRead is one read of a record's value: from the cache (a
// hit: the comparison of the stored bytes and the deep copy) and decoded
// from the stored bytes with encoding/json, as a read without the cache
// would.
func BenchmarkRecordRead(b *testing.B) {
	machine, unit, application, model := recordFixture(b)
	modelKey, modelRaw := model.key, model.raw
	b.Run("machine/cache", func(b *testing.B) {
		benchCacheHit(b, newMachineCache(), machine)
	})
	b.Run("machine/decode", func(b *testing.B) {
		benchDecode(b, machine.raw, func(raw []byte) error { _, err := decodeDoc((*machineDoc).machine)(raw); return err })
	})
	b.Run("unit/cache", func(b *testing.B) {
		benchCacheHit(b, newRecordCache(decodeDoc(func(d *unitDoc) Unit { return d.Unit }), (*Unit).clone), unit)
	})
	b.Run("unit/decode", func(b *testing.B) {
		benchDecode(b, unit.raw, func(raw []byte) error { var d unitDoc; return json.Unmarshal(raw, &d) })
	})
	b.Run("application/cache", func(b *testing.B) {
		benchCacheHit(b, newRecordCache(decodeDoc(func(d *applicationDoc) Application { return d.Application }), (*Application).clone), application)
	})
	b.Run("application/decode", func(b *testing.B) {
		benchDecode(b, application.raw, func(raw []byte) error { var d applicationDoc; return json.Unmarshal(raw, &d) })
	})
	b.Run("model/cache", func(b *testing.B) {
		benchCacheHit(b, newRecordCache(decodeDoc(func(d *modelDoc) modelDoc { return *d }), (*modelDoc).clone), model)
	})
	b.Run("model/decode", func(b *testing.B) {
		benchDecode(b, modelRaw, func(raw []byte) error { var d modelDoc; return json.Unmarshal(raw, &d) })
	})
	b.Run("modelhead/cache", func(b *testing.B) {
		c := newRecordCache(decodeDoc(func(d *modelDoc) modelDoc { return *d }), (*modelDoc).clone)
		for range 2 { // kept from the second read on
			if _, _, err := c.getShared(modelKey, modelRaw); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, shared, err := c.getShared(modelKey, modelRaw); err != nil || !shared {
				b.Fatal(shared, err)
			}
		}
	})
	b.Run("modelhead/decode", func(b *testing.B) {
		benchDecode(b, modelRaw, func(raw []byte) error { var h modelHead; return json.Unmarshal(raw, &h) })
	})
}

func benchCacheHit[T any](b *testing.B, c *recordCache[T], r storedRecord) {
	key, raw := r.key, r.raw
	for range 2 { // kept from the second read on
		if _, err := c.get(key, raw); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(raw)), "stored-B")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.get(key, raw); err != nil {
			b.Fatal(err)
		}
	}
}

func benchDecode(b *testing.B, raw []byte, decode func([]byte) error) {
	b.ReportMetric(float64(len(raw)), "stored-B")
	b.ReportAllocs()
	for b.Loop() {
		if err := decode(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMachineStatusWrite is the record work of one machine status
// write (SetMachineStatuses): the patch of the stored bytes
// (setMachineStatus) against decoding the record, setting the status and
// encoding it again (setMachineStatusWhole, which a typed view would do
// without the decoding).
func BenchmarkMachineStatusWrite(b *testing.B) {
	machine, _, _, _ := recordFixture(b)
	raw := machine.raw
	s := Status{Status: "started", Data: map[string]any{}}
	b.Run("patch", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			set, err := machineStatusMembers(AgentStatus, s, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, ok := patchRecord(raw, set); !ok {
				b.Fatal("not patched")
			}
		}
	})
	b.Run("decode-encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var d machineDoc
			if err := json.Unmarshal(raw, &d); err != nil {
				b.Fatal(err)
			}
			d.setStatus(AgentStatus, s, nil)
			if _, err := json.Marshal(&d); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode", func(b *testing.B) {
		var d machineDoc
		if err := json.Unmarshal(raw, &d); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			d.setStatus(AgentStatus, s, nil)
			if _, err := json.Marshal(&d); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRecordHeld is what a decoded record holds on the heap (held-B):
// the live heap of 1,000 decoded copies (with the slice holding them),
// divided by 1,000, against its stored bytes; what a typed in-memory view
// of the committed state would hold per record before its index. Its
// ns/op is one decode.
func BenchmarkRecordHeld(b *testing.B) {
	machine, unit, application, model := recordFixture(b)
	for _, tc := range []struct {
		name string
		raw  []byte
		held func(n int) (any, error)
	}{
		{"machine", machine.raw, func(n int) (any, error) { return decodeN[machineDoc](machine.raw, n) }},
		{"unit", unit.raw, func(n int) (any, error) { return decodeN[unitDoc](unit.raw, n) }},
		{"application", application.raw, func(n int) (any, error) { return decodeN[applicationDoc](application.raw, n) }},
		{"model", model.raw, func(n int) (any, error) { return decodeN[modelDoc](model.raw, n) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			const n = 1000
			before := liveHeap()
			v, err := tc.held(n)
			if err != nil {
				b.Fatal(err)
			}
			perRecord := float64(liveHeap()-before) / n
			runtime.KeepAlive(v)
			for b.Loop() { // the time of one decode, for scale
				if _, err := tc.held(1); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(tc.raw)), "stored-B")
			b.ReportMetric(perRecord, "held-B")
		})
	}
}

func decodeN[D any](raw []byte, n int) ([]D, error) {
	out := make([]D, n)
	for i := range out {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
	}
	return out, nil
}

// liveHeap is the heap's live bytes after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
