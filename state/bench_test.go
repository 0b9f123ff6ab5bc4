package state_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
)

// benchMachines adds n machines to the default model the way
// provisionbench's fixture makes them (password, then instance id and
// nonce) and returns their ids.
func benchMachines(b *testing.B, st *state.State, n int) []string {
	b.Helper()
	model := statetest.DefaultModelUUID
	ids := make([]string, n)
	for i := range ids {
		m, err := st.AddMachine(b.Context(), model, state.MachineParams{Jobs: []string{state.JobHostUnits}})
		if err != nil {
			b.Fatal(err)
		}
		if err := st.SetMachinePassword(b.Context(), model, m.ID, fmt.Sprintf("bench-password-%08d", i)); err != nil {
			b.Fatal(err)
		}
		if err := st.SetInstanceInfo(b.Context(), model, m.ID, state.InstanceInfo{InstanceID: "bench-i-" + m.ID, Nonce: "bench:" + m.ID}); err != nil {
			b.Fatal(err)
		}
		ids[i] = m.ID
	}
	return ids
}

// BenchmarkMachine is State.Machine of a provisioned machine, one of 64:
// what the Provisioner's Life and InstanceId read on every call.
func BenchmarkMachine(b *testing.B) {
	st := statetest.New(b)
	id := benchMachines(b, st, 64)[7]
	b.ReportAllocs()
	for b.Loop() {
		m, err := st.Machine(b.Context(), statetest.DefaultModelUUID, id)
		if err != nil || m.InstanceID == "" {
			b.Fatal(m, err)
		}
	}
}

// BenchmarkMachineParallel is State.Machine from concurrent readers, each
// reading one of 64 machines in turn (provisionbench rpc -n 64).
func BenchmarkMachineParallel(b *testing.B) {
	st := statetest.New(b)
	ids := benchMachines(b, st, 64)
	b.ReportAllocs()
	b.ResetTimer() // RunParallel does not, unlike b.Loop: without it a run of N=1 times the fixture
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			m, err := st.Machine(b.Context(), statetest.DefaultModelUUID, ids[i%len(ids)])
			if err != nil || m.InstanceID == "" {
				b.Error(m, err)
				return
			}
			i++
		}
	})
}

// BenchmarkMachines is State.Machines of a model of 64 provisioned
// machines: a list read, which decodes every record (the record caches
// serve single reads only).
func BenchmarkMachines(b *testing.B) {
	st := statetest.New(b)
	benchMachines(b, st, 64)
	b.ReportAllocs()
	for b.Loop() {
		ms, err := st.Machines(b.Context(), statetest.DefaultModelUUID)
		if err != nil || len(ms) != 64 {
			b.Fatal(len(ms), err)
		}
	}
}

// BenchmarkModel is State.Model of the default model: what every
// Provisioner call that reads the model config (ModelConfig,
// ContainerConfig, ProvisioningInfo, Tools) reads, its config cloned from
// the record cache.
func BenchmarkModel(b *testing.B) {
	st := statetest.New(b)
	b.ReportAllocs()
	for b.Loop() {
		m, err := st.Model(b.Context(), statetest.DefaultModelUUID)
		if err != nil || m.Name != "default" {
			b.Fatal(m, err)
		}
	}
}

// BenchmarkModelHead is State.ModelHead of the default model: State.Model
// without the copy of its config (ModelAdmin.AddMachines).
func BenchmarkModelHead(b *testing.B) {
	st := statetest.New(b)
	b.ReportAllocs()
	for b.Loop() {
		m, err := st.ModelHead(b.Context(), statetest.DefaultModelUUID)
		if err != nil || m.Name != "default" {
			b.Fatal(m, err)
		}
	}
}

// BenchmarkSetMachineStatus is State.SetMachineStatuses of one machine's
// agent status, the Provisioner's SetStatus (provisionbench write --op
// status at one writer): a lone write, committed on the caller's goroutine
// (on bbolt with its fsync).
func BenchmarkSetMachineStatus(b *testing.B) {
	st := statetest.New(b)
	id := benchMachines(b, st, 1)[0]
	args := []state.MachineStatusArg{{ID: id, Kind: state.AgentStatus, Status: state.Status{Status: "started"}}}
	b.ReportAllocs()
	for b.Loop() {
		if errs := st.SetMachineStatuses(b.Context(), statetest.DefaultModelUUID, args); errs[0] != nil {
			b.Fatal(errs[0])
		}
	}
}

// BenchmarkSetMachineStatusParallel is SetMachineStatuses from concurrent
// writers, each of its own machine (provisionbench write -n 64): the
// writes queued while one commits go together (group commit).
func BenchmarkSetMachineStatusParallel(b *testing.B) {
	st := statetest.New(b)
	ids := benchMachines(b, st, 64)
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(32) // 64 writers on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := ids[int(next.Add(1)-1)%len(ids)]
		args := []state.MachineStatusArg{{ID: id, Kind: state.AgentStatus, Status: state.Status{Status: "started"}}}
		for pb.Next() {
			if errs := st.SetMachineStatuses(b.Context(), statetest.DefaultModelUUID, args); errs[0] != nil {
				b.Error(errs[0])
				return
			}
		}
	})
}

// BenchmarkViewAt is the reads of status --at on a model of 10,000
// machines at a point 100,000 revisions back (each machine's instance
// status written ten times since), beside the same reads of the model now
// (OneView): ViewAt's fold of the 100,000 records and its past view.
// Building the fixture takes minutes; run it on its own:
//
//	go test -run XXX -bench BenchmarkViewAt -benchtime 5x -benchmem ./state/
func BenchmarkViewAt(b *testing.B) {
	const machines, writes, workers = 10_000, 100_000, 32
	st := statetest.New(b)
	ctx := b.Context()
	model := statetest.DefaultModelUUID
	parallel := func(n int, fn func(i int) error) {
		var next atomic.Int64
		errs := make(chan error, workers)
		for range workers {
			go func() {
				for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
					if err := fn(i); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range workers {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
	}
	ids := make([]string, machines)
	parallel(machines, func(i int) error {
		m, err := st.AddMachine(ctx, model, state.MachineParams{Jobs: []string{state.JobHostUnits}})
		ids[i] = m.ID
		return err
	})
	point := st.Revision()
	parallel(writes, func(i int) error {
		return st.SetMachineStatus(ctx, model, ids[i%machines], state.InstanceStatus, state.Status{Status: "running", Message: fmt.Sprint(i)})
	})
	b.Logf("%d machines; the point is revision %d, %d revisions back", machines, point, st.Revision()-point)
	read := func(st *state.State) error {
		ms, err := st.Machines(ctx, model)
		if err != nil {
			return err
		}
		if len(ms) != machines {
			return fmt.Errorf("%d machines", len(ms))
		}
		_, err = st.Units(ctx, model)
		return err
	}
	b.Run("at", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := st.ViewAt(ctx, point, time.Time{}, func(past *state.State, _ state.PastPoint) error { return read(past) }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("now", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := st.OneView(ctx, read); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkWatchContainers opens and stops a WatchContainers watcher of a
// provisioned machine with three containers, one of 64: what each of an
// agent's watch calls costs the daemon when it (re)connects, as in a
// restart's storm of agents.
func BenchmarkWatchContainers(b *testing.B) {
	st := statetest.New(b)
	model := statetest.DefaultModelUUID
	id := benchMachines(b, st, 64)[7]
	for range 3 {
		if _, err := st.AddMachine(b.Context(), model, state.MachineParams{ParentID: id, ContainerType: "lxd"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		w, initial, err := st.WatchContainers(b.Context(), model, id, "")
		if err != nil || len(initial) != 3 {
			b.Fatal(initial, err)
		}
		_ = w.Stop()
	}
}

// BenchmarkAuthenticateMachine is a provisioned machine agent's login
// check, one of 64 machines: what every agent of a restart's storm costs
// the store layer when it logs in again.
func BenchmarkAuthenticateMachine(b *testing.B) {
	st := statetest.New(b)
	ids := benchMachines(b, st, 64)
	id := ids[7]
	b.ReportAllocs()
	for b.Loop() {
		m, err := st.AuthenticateMachine(b.Context(), statetest.DefaultModelUUID, id, "bench-password-00000007", "bench:"+id)
		if err != nil || m.ID != id {
			b.Fatal(m, err)
		}
	}
}
