package daemon_test

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/store/boltstore/rawbolt"
)

// BenchmarkWritePath measures one lone writer's durable write at each
// layer, interleaved in the same loop so a noisy machine affects them alike:
//
//	raw    bbolt Update of one 512-byte value on the caller's goroutine
//	       (state/boltstore.RawFile: the options state uses)
//	state  state.SetMachineStatus (entity decode/encode, state/store/boltstore's
//	       committer, revision, change publication)
//	rpc    Provisioner.SetInstanceStatus from a machine agent over the TLS
//	       websocket: the whole daemon, as provisionbench write -n 1 drives it
//	echo   a Ping-shaped call to the echo baseline on the same transport
//
// It reports each layer's median in µs and the ratios provisionbench's
// write workload is judged by: raw/rpc (the target is 0.90) and
// (raw+echo)/rpc (the same against a floor that includes the round trip).
func BenchmarkWritePath(b *testing.B) {
	d := start(b, nil)
	st := d.State()
	model := d.Credentials().DefaultModelUUID
	agent, tag := loginNewMachine(b, d, model)
	direct, err := st.AddMachine(b.Context(), model, state.MachineParams{})
	if err != nil {
		b.Fatal(err)
	}
	raw, err := rawbolt.OpenRaw(filepath.Join(b.TempDir(), "raw.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	addr, ca := startEcho(b)
	echoConn, err := client.Dial(context.Background(), client.Config{Addr: addr, CACert: ca})
	if err != nil {
		b.Fatal(err)
	}
	defer echoConn.Close()

	val := make([]byte, 512)
	writePath(b, func(i int) error {
		val[0] = byte(i)
		return raw.Put([]byte("k"), val)
	}, st, model, direct.ID, agent, tag, echoConn)
}

// writePath is the loop of BenchmarkWritePath and BenchmarkWritePathEtcd:
// each iteration times raw (the baseline's commit), a state write to
// machine id, the agent's SetInstanceStatus and an echo round trip, and
// the medians and ratios are reported.
func writePath(b *testing.B, raw func(i int) error, st *state.State, model, id string, agent *client.Conn, tag string, echoConn *client.Conn) {
	ctx := context.Background()
	var lRaw, lState, lRPC, lEcho []time.Duration
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		info := "bench " + strconv.Itoa(i)

		t0 := time.Now()
		if err := raw(i); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := st.SetMachineStatus(b.Context(), model, id, state.InstanceStatus, state.Status{Status: "running", Message: info}); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		var res params.ErrorResults
		args := params.SetStatus{Entities: []params.EntityStatusArgs{{Tag: tag, Status: "running", Info: info}}}
		if err := agent.Call(ctx, "Provisioner", 11, "", "SetInstanceStatus", args, &res); err != nil {
			b.Fatal(err)
		}
		if len(res.Results) != 1 || res.Results[0].Error != nil {
			b.Fatalf("SetInstanceStatus: %+v", res.Results)
		}
		t3 := time.Now()
		if err := echoConn.Call(ctx, "Pinger", 1, "", "Ping", nil, nil); err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		lRaw = append(lRaw, t1.Sub(t0))
		lState = append(lState, t2.Sub(t1))
		lRPC = append(lRPC, t3.Sub(t2))
		lEcho = append(lEcho, t4.Sub(t3))
	}
	mRaw, mState, mRPC, mEcho := median(lRaw), median(lState), median(lRPC), median(lEcho)
	b.ReportMetric(mRaw, "µs-raw")
	b.ReportMetric(mState, "µs-state")
	b.ReportMetric(mRPC, "µs-rpc")
	b.ReportMetric(mEcho, "µs-echo")
	b.ReportMetric(mRaw/mRPC, "raw/rpc")
	b.ReportMetric((mRaw+mEcho)/mRPC, "raw+echo/rpc")
}

// median returns the median of ds in µs.
func median(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2]) / float64(time.Microsecond)
}

// loginNewMachine adds a provisioned machine to model and logs its agent
// in, returning the connection and the machine's tag.
func loginNewMachine(b testing.TB, d *daemon.Daemon, model string) (*client.Conn, string) {
	const password, nonce = "bench-machine-agent-password", "bench-nonce"
	st := d.State()
	m, err := st.AddMachine(b.Context(), model, state.MachineParams{Password: password})
	if err != nil {
		b.Fatal(err)
	}
	if err := st.SetInstanceInfo(b.Context(), model, m.ID, state.InstanceInfo{InstanceID: "i-bench", Nonce: nonce}); err != nil {
		b.Fatal(err)
	}
	c := dial(b, d, model)
	tag := "machine-" + m.ID
	if _, err := c.LoginAgent(ctxT(b), tag, password, nonce); err != nil {
		b.Fatal(err)
	}
	return c, tag
}

// BenchmarkSetInstanceStatus is the rpc part of BenchmarkWritePath alone
// (for profiles and execution traces of the daemon's write path).
func BenchmarkSetInstanceStatus(b *testing.B) {
	d := start(b, nil)
	agent, tag := loginNewMachine(b, d, d.Credentials().DefaultModelUUID)
	setInstanceStatusLoop(b, agent, tag)
}

// setInstanceStatusLoop calls SetInstanceStatus on tag's machine once per
// iteration.
func setInstanceStatusLoop(b *testing.B, agent *client.Conn, tag string) {
	ctx := context.Background()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		var res params.ErrorResults
		args := params.SetStatus{Entities: []params.EntityStatusArgs{{Tag: tag, Status: "running", Info: "bench " + strconv.Itoa(i)}}}
		if err := agent.Call(ctx, "Provisioner", 11, "", "SetInstanceStatus", args, &res); err != nil {
			b.Fatal(err)
		}
		if len(res.Results) != 1 || res.Results[0].Error != nil {
			b.Fatalf("SetInstanceStatus: %+v", res.Results)
		}
	}
}
