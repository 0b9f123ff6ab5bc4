// Package presence knows which agents are connected to the controller
// now: a machine agent is alive while a connection logged in as it is
// open at one of the controller's API servers (daemons), down otherwise;
// a model's provisioner agent (the controller agent logged in at the
// model's endpoint, which runs its environ provisioner or its CAAS unit
// provisioner) likewise. It is Juju's notion (core/presence: an agent is
// alive if it has a current connection to one of the API servers),
// without Juju's pubsub between servers: a daemon that shares its store
// publishes its own agents as one record per model under its etcd lease
// (internal/daemon), and every daemon feeds the records of the others
// to its Recorder (SetRemote), so a killed daemon's agents go down when
// its lease expires.
//
// A Recorder holds no goroutine and does no I/O: the sessions call
// Connect and Disconnect, the daemon's presence goroutines call Take and
// SetRemote, status and the metrics read it. It is safe for concurrent
// use. A stopping daemon retires it first (Retire): from then on it records
// no connection's end, as the daemon's departure says they all ended.
package presence

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Agent is who a connection is, as presence counts it.
type Agent struct {
	// Model is the UUID of the connection's model (the controller model
	// for a controller-only connection).
	Model string
	// Machine is the id, in Model, of the machine whose agent logged in;
	// empty for the controller agent visiting another model (Juju
	// records it as a controller agent, which does not make that
	// model's machine alive).
	Machine string
	// Provisioner is true for the controller agent logged in at the
	// model's endpoint: the connection Juju's environ provisioner and
	// CAAS unit provisioner of the model work through.
	Provisioner bool
}

// Status is an agent's presence.
type Status struct {
	// Alive is true while the agent is connected to an API server of the
	// controller.
	Alive bool
	// Since, when the agent is down, is when it was seen to go (its last
	// connection closed here, or the record of the daemon it was connected
	// to changed or expired); zero when not known (it was not seen
	// connected since this daemon started).
	Since time.Time
}

// Entry is one daemon's agents of one model: what a daemon publishes and
// what SetRemote takes. An Entry with no machines and no provisioner says
// the daemon has none left in the model.
type Entry struct {
	Model       string
	Machines    []string // ids, sorted
	Provisioner bool
}

// key is one agent: a machine agent (machine set) or a model's
// provisioner (machine empty; machine ids are never empty).
type key struct{ model, machine string }

// Recorder is the presence of every agent of the controller, as one daemon
// knows it: its own connections, and the other daemons' published ones.
type Recorder struct {
	now     func() time.Time
	publish bool
	changed chan struct{} // capacity 1: the local agents of a model changed (publish only)
	retired atomic.Bool   // Retire was called: Connect and Disconnect do nothing

	// remoteMu orders SetRemote calls: remote is written with it and mu
	// held, so SetRemote reads it under remoteMu alone and works out what
	// changed before it takes mu.
	remoteMu sync.Mutex

	mu     sync.Mutex
	local  map[key]int32     // this daemon's connections per agent
	remote map[key]int32     // the other daemons listing each agent
	down   map[key]time.Time // when each agent was seen to go, while it is down
	dirty  map[string]bool   // models whose local agents changed since Take (publish only)
	// alive counts the agents alive, machine agents and provisioners.
	aliveMachines, aliveProvisioners int
	listeners                        map[*listener]struct{}
	// notifyTo is listeners as a slice, replaced (never changed) when
	// they change: notify reads it without a lock or an allocation.
	notifyTo atomic.Pointer[[]*listener]
}

type listener struct{ f func(model string) }

// New returns an empty Recorder. now is its clock (nil: time.Now). With
// publish, it keeps which models' local agents changed for Take (a daemon
// on a shared store publishes them).
func New(now func() time.Time, publish bool) *Recorder {
	if now == nil {
		now = time.Now
	}
	return &Recorder{now: now, publish: publish, changed: make(chan struct{}, 1),
		local: map[key]int32{}, remote: map[key]int32{}, down: map[key]time.Time{}, dirty: map[string]bool{},
		listeners: map[*listener]struct{}{}}
}

// keys are the agents a connection of a counts for.
func (a Agent) keys() (machine, provisioner key, hasMachine bool) {
	return key{a.Model, a.Machine}, key{a.Model, ""}, a.Machine != ""
}

// Connect records a connection of agent a. The caller calls Disconnect
// with the same Agent once, when the connection ends (a Session keeps a
// flag: a connection costs the Recorder no allocation of its own).
func (r *Recorder) Connect(a Agent) {
	if r.retired.Load() {
		return
	}
	r.mu.Lock()
	flipped := r.addLocked(a, 1)
	r.mu.Unlock()
	if flipped {
		r.notify(a.Model)
	}
}

// Disconnect ends a connection of agent a that Connect recorded. A nil
// Recorder does nothing.
func (r *Recorder) Disconnect(a Agent) {
	if r == nil || r.retired.Load() {
		return
	}
	r.mu.Lock()
	flipped := r.addLocked(a, -1)
	r.mu.Unlock()
	if flipped {
		r.notify(a.Model)
	}
}

// Retire stops recording this daemon's connections: Connect and Disconnect
// do nothing from now on, and what the Recorder says of its local agents
// stays as it was. A daemon retires its Recorder as its stop begins: the
// stop ends all its connections at once, and its departure (its lease
// revoked, its records gone, or the process's end) tells every reader
// that they all ended; recording each end would queue thousands of them
// on the Recorder's lock (and mark their models to publish) for nothing.
// The other daemons' records are still taken (SetRemote). A nil Recorder
// does nothing.
func (r *Recorder) Retire() {
	if r != nil {
		r.retired.Store(true)
	}
}

// addLocked adds delta to a's local connections and reports whether an
// agent went alive or down.
func (r *Recorder) addLocked(a Agent, delta int32) bool {
	mk, pk, hasMachine := a.keys()
	flipped := false
	if hasMachine {
		flipped = r.addKeyLocked(mk, delta)
	}
	if a.Provisioner {
		flipped = r.addKeyLocked(pk, delta) || flipped
	}
	if r.publish && (hasMachine || a.Provisioner) {
		r.dirty[a.Model] = true
		select {
		case r.changed <- struct{}{}:
		default:
		}
	}
	return flipped
}

func (r *Recorder) addKeyLocked(k key, delta int32) bool {
	was := r.aliveLocked(k)
	if n := r.local[k] + delta; n > 0 {
		r.local[k] = n
	} else {
		delete(r.local, k)
	}
	return r.flipLocked(k, was, r.aliveLocked(k), r.now())
}

func (r *Recorder) aliveLocked(k key) bool { return r.local[k] > 0 || r.remote[k] > 0 }

// flipLocked records k going alive or down at t; it reports whether it
// did either.
func (r *Recorder) flipLocked(k key, was, is bool, t time.Time) bool {
	if was == is {
		return false
	}
	n := &r.aliveMachines
	if k.machine == "" {
		n = &r.aliveProvisioners
	}
	if is {
		*n++
		delete(r.down, k)
	} else {
		*n--
		r.down[k] = t
	}
	return true
}

// Machine is the presence of the agent of machine id of model.
func (r *Recorder) Machine(model, id string) Status { return r.status(key{model, id}) }

// Provisioner is the presence of model's provisioner agent.
func (r *Recorder) Provisioner(model string) Status { return r.status(key{model, ""}) }

func (r *Recorder) status(k key) Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.aliveLocked(k) {
		return Status{Alive: true}
	}
	return Status{Since: r.down[k]}
}

// Counts returns how many machine agents are alive, and how many models
// have their provisioner agent alive.
func (r *Recorder) Counts() (machines, provisioners int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.aliveMachines, r.aliveProvisioners
}

// Changed is signalled when the local agents of a model change (only
// with publish): Take then returns them.
func (r *Recorder) Changed() <-chan struct{} { return r.changed }

// Take returns this daemon's agents of every model whose local agents
// changed since the last Take, and forgets that they changed. A model
// left without any has an empty Entry.
func (r *Recorder) Take() []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.dirty) == 0 {
		return nil
	}
	byModel := make(map[string]*Entry, len(r.dirty))
	for m := range r.dirty {
		byModel[m] = &Entry{Model: m}
	}
	clear(r.dirty)
	for k := range r.local {
		e := byModel[k.model]
		switch {
		case e == nil:
		case k.machine == "":
			e.Provisioner = true
		default:
			e.Machines = append(e.Machines, k.machine)
		}
	}
	out := make([]Entry, 0, len(byModel))
	for _, e := range byModel {
		slices.Sort(e.Machines)
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return cmp.Compare(a.Model, b.Model) })
	return out
}

// MarkChanged makes the next Take return model's local agents again (a
// publish of them failed).
func (r *Recorder) MarkChanged(model string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.publish {
		return
	}
	r.dirty[model] = true
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// SetRemote replaces what the other daemons publish: every Entry of
// every other live daemon. An agent listed by none of them and not
// connected here goes down.
//
// The entries are the whole fleet less this daemon's agents (some 86,000
// at 100,000 agents over 7 daemons), and they come whenever another
// daemon's record changes: what changed is worked out before mu is taken,
// so that under it SetRemote touches only the agents another daemon
// started or stopped listing, and the connections' Connect and Disconnect
// (thousands at once when a daemon stops) do not queue behind a walk of
// the fleet.
func (r *Recorder) SetRemote(entries []Entry) {
	next := map[key]int32{}
	for _, e := range entries {
		for _, id := range e.Machines {
			if id != "" {
				next[key{e.Model, id}]++
			}
		}
		if e.Provisioner {
			next[key{e.Model, ""}]++
		}
	}
	r.remoteMu.Lock()
	defer r.remoteMu.Unlock()
	var changed []key // listed by some other daemon before and by none now, or the reverse
	for k := range r.remote {
		if next[k] == 0 {
			changed = append(changed, k)
		}
	}
	for k := range next {
		if r.remote[k] == 0 {
			changed = append(changed, k)
		}
	}
	r.mu.Lock()
	t := r.now()
	var models []string
	for _, k := range changed {
		was := r.local[k] > 0 || r.remote[k] > 0
		is := r.local[k] > 0 || next[k] > 0
		if r.flipLocked(k, was, is, t) && !slices.Contains(models, k.model) {
			models = append(models, k.model)
		}
	}
	r.remote = next
	r.mu.Unlock()
	for _, m := range models {
		r.notify(m)
	}
}

// Forget drops what the Recorder remembers of machine id of model (the
// machine was removed). An agent connected now stays.
func (r *Recorder) Forget(model, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.down, key{model, id})
}

// ForgetModel drops what the Recorder remembers of model's agents that
// are down (the model was removed).
func (r *Recorder) ForgetModel(model string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.down {
		if k.model == model {
			delete(r.down, k)
		}
	}
}

// OnChange calls f with the model's UUID whenever an agent of the model
// goes alive or down, until cancel is called. f must not block and must
// not call the Recorder.
func (r *Recorder) OnChange(f func(model string)) (cancel func()) {
	l := &listener{f: f}
	r.mu.Lock()
	r.listeners[l] = struct{}{}
	r.publishListenersLocked()
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.listeners, l)
		r.publishListenersLocked()
		r.mu.Unlock()
	}
}

func (r *Recorder) publishListenersLocked() {
	ls := make([]*listener, 0, len(r.listeners))
	for l := range r.listeners {
		ls = append(ls, l)
	}
	r.notifyTo.Store(&ls)
}

func (r *Recorder) notify(model string) {
	if ls := r.notifyTo.Load(); ls != nil {
		for _, l := range *ls {
			l.f(model)
		}
	}
}
