package presence_test

import (
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/presence"
)

// clock is a settable clock for the Recorder.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

const m1, m2 = "model-1", "model-2"

func TestConnectDisconnect(t *testing.T) {
	c := &clock{t: t0}
	r := presence.New(c.now, false)
	if got := r.Machine(m1, "0"); got != (presence.Status{}) {
		t.Fatalf("an agent never seen: %+v, want down with no time", got)
	}
	agent := presence.Agent{Model: m1, Machine: "0"}
	r.Connect(agent)
	r.Connect(agent) // a second connection of the agent
	if got := r.Machine(m1, "0"); !got.Alive {
		t.Fatalf("connected agent: %+v", got)
	}
	c.set(t0.Add(time.Minute))
	r.Disconnect(agent)
	if got := r.Machine(m1, "0"); !got.Alive {
		t.Fatalf("agent with one connection left: %+v", got)
	}
	c.set(t0.Add(2 * time.Minute))
	r.Disconnect(agent)
	if got := r.Machine(m1, "0"); got.Alive || !got.Since.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("agent gone: %+v, want down since its last connection closed", got)
	}
	if got := r.Machine(m2, "0"); got.Alive {
		t.Error("machine 0 of another model is alive")
	}
	r.Connect(presence.Agent{Model: m1, Machine: "0"})
	if got := r.Machine(m1, "0"); got != (presence.Status{Alive: true}) {
		t.Errorf("agent back: %+v", got)
	}
	r.Forget(m1, "1")
	if m, p := r.Counts(); m != 1 || p != 0 {
		t.Errorf("counts %d machines, %d provisioners; want 1, 0", m, p)
	}
}

// TestControllerAgent: the controller agent on a model's endpoint is the
// model's provisioner; on its own (controller) model it is machine 0's
// agent too; visiting another model it makes no machine of it alive (as
// Juju's presence records it as a controller agent there).
func TestControllerAgent(t *testing.T) {
	r := presence.New(nil, false)
	visit := presence.Agent{Model: m2, Provisioner: true}
	home := presence.Agent{Model: m1, Machine: "0", Provisioner: true}
	r.Connect(visit)
	r.Connect(home)
	if !r.Provisioner(m2).Alive || !r.Provisioner(m1).Alive || !r.Machine(m1, "0").Alive {
		t.Fatal("controller agent connections not recorded")
	}
	if r.Machine(m2, "0").Alive {
		t.Error("the controller agent visiting model 2 made its machine 0 alive")
	}
	if m, p := r.Counts(); m != 1 || p != 2 {
		t.Errorf("counts %d machines, %d provisioners; want 1, 2", m, p)
	}
	r.Disconnect(visit)
	if r.Provisioner(m2).Alive || r.Provisioner(m2).Since.IsZero() {
		t.Errorf("model 2's provisioner after its connection closed: %+v", r.Provisioner(m2))
	}
	r.Disconnect(home)
	if m, p := r.Counts(); m != 0 || p != 0 {
		t.Errorf("counts %d machines, %d provisioners; want 0, 0", m, p)
	}
}

// TestRemote: other daemons' entries make agents alive; an agent no
// daemon lists any more goes down at the time SetRemote saw it go, unless
// it is connected here.
func TestRemote(t *testing.T) {
	c := &clock{t: t0}
	r := presence.New(c.now, false)
	var changed []string
	cancel := r.OnChange(func(m string) { changed = append(changed, m) })
	defer cancel()
	r.SetRemote([]presence.Entry{
		{Model: m1, Machines: []string{"1", "2"}, Provisioner: true},
		{Model: m1, Machines: []string{"2"}}, // a second daemon
	})
	for _, id := range []string{"1", "2"} {
		if !r.Machine(m1, id).Alive {
			t.Fatalf("machine %s listed by a daemon is not alive", id)
		}
	}
	local := presence.Agent{Model: m1, Machine: "1"}
	r.Connect(local)
	c.set(t0.Add(time.Minute))
	r.SetRemote([]presence.Entry{{Model: m1, Machines: []string{"2"}}}) // the first daemon's lease expired
	if !r.Machine(m1, "1").Alive {
		t.Error("machine 1 connected here went down with the remote record")
	}
	if !r.Machine(m1, "2").Alive {
		t.Error("machine 2 still listed by a daemon went down")
	}
	if got := r.Provisioner(m1); got.Alive || !got.Since.Equal(t0.Add(time.Minute)) {
		t.Errorf("provisioner after its daemon went: %+v", got)
	}
	r.SetRemote(nil)
	if got := r.Machine(m1, "2"); got.Alive {
		t.Errorf("machine 2 listed by nobody: %+v", got)
	}
	r.Disconnect(local)
	if !reflect.DeepEqual(changed, []string{m1, m1, m1, m1}) {
		t.Errorf("OnChange calls %q; want one per change that turned an agent alive or down", changed)
	}
}

func TestTake(t *testing.T) {
	r := presence.New(nil, true)
	if got := r.Take(); got != nil {
		t.Fatalf("Take with nothing changed: %+v", got)
	}
	a := presence.Agent{Model: m1, Machine: "10"}
	r.Connect(a)
	r.Connect(presence.Agent{Model: m1, Machine: "9"})
	r.Connect(presence.Agent{Model: m2, Provisioner: true})
	select {
	case <-r.Changed():
	default:
		t.Fatal("Changed not signalled")
	}
	want := []presence.Entry{{Model: m1, Machines: []string{"10", "9"}}, {Model: m2, Provisioner: true}}
	if got := r.Take(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Take = %+v, want %+v", got, want)
	}
	if got := r.Take(); got != nil {
		t.Fatalf("second Take = %+v, want nothing", got)
	}
	r.Disconnect(a)
	if got := r.Take(); !reflect.DeepEqual(got, []presence.Entry{{Model: m1, Machines: []string{"9"}}}) {
		t.Errorf("Take after a disconnect = %+v", got)
	}
	r.MarkChanged(m2)
	if got := r.Take(); !reflect.DeepEqual(got, []presence.Entry{{Model: m2, Provisioner: true}}) {
		t.Errorf("Take after MarkChanged = %+v", got)
	}
}

// TestRetire: a retired Recorder (a stopping daemon's) records no
// connection's end and marks nothing to publish; it still reads, and still
// takes the other daemons' records.
func TestRetire(t *testing.T) {
	r := presence.New(nil, true)
	a := presence.Agent{Model: m1, Machine: "0"}
	r.Connect(a)
	r.Take()
	<-r.Changed()
	r.Retire()
	r.Disconnect(a)
	r.Connect(presence.Agent{Model: m2, Machine: "1"})
	if got := r.Machine(m1, "0"); !got.Alive {
		t.Errorf("after Retire, a disconnect was recorded: %+v", got)
	}
	if got := r.Machine(m2, "1"); got.Alive {
		t.Errorf("after Retire, a connect was recorded: %+v", got)
	}
	select {
	case <-r.Changed():
		t.Error("Changed signalled after Retire")
	default:
	}
	if got := r.Take(); got != nil {
		t.Errorf("Take after Retire = %+v, want nothing", got)
	}
	r.SetRemote([]presence.Entry{{Model: m2, Machines: []string{"1"}}})
	if got := r.Machine(m2, "1"); !got.Alive {
		t.Errorf("another daemon's agent after Retire: %+v", got)
	}
	var nilRecorder *presence.Recorder
	nilRecorder.Retire()
}

// TestConcurrent is for the race detector.
func TestConcurrent(t *testing.T) {
	r := presence.New(nil, true)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 200 {
				a := presence.Agent{Model: m1, Machine: string(rune('0' + i))}
				r.Connect(a)
				r.Machine(m1, "0")
				r.Disconnect(a)
			}
		})
	}
	wg.Go(func() {
		for range 200 {
			r.SetRemote([]presence.Entry{{Model: m1, Machines: []string{"1"}}})
			r.Take()
		}
	})
	wg.Wait()
	r.SetRemote(nil)
	if m, p := r.Counts(); m != 0 || p != 0 {
		t.Errorf("counts %d, %d after every connection closed", m, p)
	}
}

// BenchmarkConnectDisconnect is what presence adds to a login and to the
// end of a connection: agents of a model of 10,000 machines, a listener
// registered (the dashboard's).
func BenchmarkConnectDisconnect(b *testing.B) {
	r := presence.New(nil, false)
	defer r.OnChange(func(string) {})()
	ids := make([]string, 10000)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		a := presence.Agent{Model: m1, Machine: ids[i%len(ids)]}
		r.Connect(a)
		r.Disconnect(a)
	}
}
