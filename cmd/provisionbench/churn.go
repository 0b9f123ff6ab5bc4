package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/provisiond/provisiond/internal/agent"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

var churnWorkload = &workload{
	sizeName: "machines",
	sizes:    "10,100",
	describe: func(o *options) map[string]any {
		return map[string]any{
			"rate": o.rate, "duration": o.duration.String(),
			"agent":      "internal/agent on its simulated cloud, in this process (the controller agent's provisioners, one connection per machine agent)",
			"operations": "in turn: add-machine, add-machine lxd:<a started machine>, scale +1, remove-machine --force <the oldest>, scale -1",
			"models":     "a new IAAS model (one subnet, so containers get addresses) and a new CAAS model (one application, no storage) per run, removed at its end",
		}
	},
	prepare: func(ctx context.Context, e *env, _ int) error {
		if e.t.mode == modeExternal {
			e.o.progress.done()
			fmt.Fprintln(e.o.stderr, "provisionbench: churn runs its own agent: the daemon must run none (no --agent sim)")
		}
		return nil
	},
	run: runChurn,
	notes: func(*options) []string {
		return []string{
			"size: the machines the IAAS model holds when the churn starts, and the CAAS application's scale",
			"fill: from adding that many machines at once (and deploying the application at that scale) until every machine's agent reported itself started and the pods were reported",
			"machine start: from the driver's AddMachines answer until the new machine's agent reported itself started (watch, ProvisioningInfo, password, instance, SetInstanceInfo, status, the agent's login and reports); container start likewise, through its host's container provisioner and an address from the subnet",
			"remove: from RemoveMachines --force answered until the provisioner removed the machine (its containers' agents and its own made them dead first)",
			"scale: from ScaleApplication answered until the unit provisioner reported that many pods",
			"teardown: remove-model of both models until both are gone (the agents tear down what is left)",
			"ops/s: operations the driver completed per second (it issues one per 1/rate, waiting for each answer); unfinished: operations whose effect the agent had not reported 60 s after the churn",
		}
	},
}

// churnRecorder matches what the agent reports to what the driver asked.
type churnRecorder struct {
	mu       sync.Mutex
	changed  chan struct{}        // closed and replaced on each event
	starts   map[string]time.Time // "<model>/<machine id>" -> add answered
	removes  map[string]time.Time
	scaleAt  time.Time // last scale op answered
	scaleTo  int       // and its target (-1: none pending)
	units    int       // pods last reported
	started  map[string]bool
	removed  map[string]bool
	machine  latencies
	cntr     latencies
	remove   latencies
	scale    latencies
	nStarted atomic.Int64
}

func newChurnRecorder() *churnRecorder {
	return &churnRecorder{
		changed: make(chan struct{}), starts: map[string]time.Time{}, removes: map[string]time.Time{},
		started: map[string]bool{}, removed: map[string]bool{}, scaleTo: -1,
	}
}

func (r *churnRecorder) observe(ev agent.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := ev.Model + "/" + ev.ID
	switch ev.Kind {
	case agent.EventMachineStarted:
		r.started[k] = true
		r.nStarted.Add(1)
		if t, ok := r.starts[k]; ok {
			if isContainerID(ev.ID) {
				r.cntr.add(time.Since(t))
			} else {
				r.machine.add(time.Since(t))
			}
			delete(r.starts, k)
		}
	case agent.EventMachineRemoved:
		r.removed[k] = true
		if t, ok := r.removes[k]; ok {
			r.remove.add(time.Since(t))
			delete(r.removes, k)
		}
	case agent.EventUnitsReported:
		r.units = ev.Units
		if r.scaleTo >= 0 && ev.Units == r.scaleTo {
			r.scale.add(time.Since(r.scaleAt))
			r.scaleTo = -1
		}
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

func isContainerID(id string) bool { return strings.Contains(id, "/") }

// expectStart records that machine id's add was answered at t (unless
// its agent already reported it started: the answer can come second).
func (r *churnRecorder) expectStart(model, id string, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k := model + "/" + id; !r.started[k] {
		r.starts[k] = t
	}
}

// expectRemove records that machine id's removal was answered at t. Its
// start, and its containers', is no longer expected: a machine removed
// before its agent started it is never reported started (the test's
// "unfinished = 1" on a loaded box).
func (r *churnRecorder) expectRemove(model, id string, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := model + "/" + id
	if !r.removed[k] {
		r.removes[k] = t
	}
	for s := range r.starts {
		if s == k || strings.HasPrefix(s, k+"/") {
			delete(r.starts, s)
		}
	}
}

func (r *churnRecorder) expectScale(n int, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.units == n {
		r.scale.add(0)
		r.scaleTo = -1
		return
	}
	r.scaleAt, r.scaleTo = t, n
}

func (r *churnRecorder) isStarted(model, id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started[model+"/"+id]
}

// pending is how many expected effects the agent has not reported yet.
func (r *churnRecorder) pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.starts) + len(r.removes)
	if r.scaleTo >= 0 {
		n++
	}
	return n
}

// wait waits until cond holds (checked after each event) or timeout.
func (r *churnRecorder) wait(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		r.mu.Lock()
		ch := r.changed
		r.mu.Unlock()
		if cond() {
			return true
		}
		select {
		case <-ch:
		case <-t.C:
			return cond()
		case <-ctx.Done():
			return false
		}
	}
}

var churnRuns atomic.Int64

const churnCharm = `name: web
summary: a stateless web server
series: [kubernetes]
`

func runChurn(ctx context.Context, e *env, size int) (*values, error) {
	run := churnRuns.Add(1)
	adm, err := e.t.dialAdmin(ctx, "")
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	call := func(method string, args, res any) error {
		return adm.Call(ctx, "ModelAdmin", 1, "", method, args, res)
	}
	iaas := fmt.Sprintf("churn-%d-%d", size, run)
	caasName := fmt.Sprintf("churn-k8s-%d-%d", size, run)
	var im, cm params.ModelSummary
	if err := call("AddModel", params.AddModelArgs{Name: iaas}, &im); err != nil {
		return nil, err
	}
	if err := call("AddModel", params.AddModelArgs{Name: caasName, Type: "caas"}, &cm); err != nil {
		return nil, err
	}
	if err := call("AddSpace", params.AddSpaceArgs{Model: iaas, Name: "net"}, nil); err != nil {
		return nil, err
	}
	if err := call("AddSubnet", params.AddSubnetArgs{Model: iaas, CIDR: "10.64.0.0/16", Space: "net", Zones: []string{"zone-a"},
		ProviderID: "churn-net", AllocatableRange: "10.64.1.0-10.64.254.254"}, nil); err != nil {
		return nil, err
	}

	rec := newChurnRecorder()
	a, err := agent.New(agent.Config{
		Credentials: e.t.creds, Addrs: []string{e.t.addr}, Logger: slog.New(slog.DiscardHandler),
		BufferSize: e.o.bufferSize, Observe: rec.observe,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: time.Second,
	})
	if err != nil {
		return nil, err
	}
	actx, stopAgent := context.WithCancel(ctx)
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		_ = a.Run(actx)
	}()
	defer func() {
		stopAgent()
		<-agentDone
	}()

	// Fill: size machines at once, and the application at that scale.
	e.o.progress.set(fmt.Sprintf("churn %d: filling", size))
	t0 := time.Now()
	var added params.AddMachinesResult
	if err := call("AddMachines", params.AddMachinesArgs{Model: iaas, Count: size}, &added); err != nil {
		return nil, err
	}
	scale := size
	if err := call("Deploy", params.DeployArgs{Model: caasName, Application: "web", CharmMetadata: churnCharm, Scale: &scale}, nil); err != nil {
		return nil, err
	}
	if err := call("SetPodSpec", params.SetPodSpecArgs{Model: caasName, Application: "web", Spec: "containers:\n  - name: web\n    image: nginx\n"}, nil); err != nil {
		return nil, err
	}
	live := slices.Clone(added.Machines)
	if !rec.wait(ctx, 5*time.Minute, func() bool {
		for _, id := range live {
			if !rec.isStarted(im.UUID, id) {
				return false
			}
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.units == size
	}) {
		return nil, fmt.Errorf("the agent did not start %d machines and %d pods within 5 minutes (started %d)", size, size, rec.nStarted.Load())
	}
	fill := time.Since(t0)

	// Churn.
	var ops, errs atomic.Int64
	interval := time.Duration(float64(time.Second) / e.o.rate)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	e.o.progress.setWith(fmt.Sprintf("churn %d", size), func() string {
		return fmt.Sprintf("ops %d, errors %d, pending %d", ops.Load(), errs.Load(), rec.pending())
	})
	start := time.Now()
	for i := 0; time.Since(start) < e.o.duration; i++ {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		var err error
		switch i % 5 {
		case 0:
			var r params.AddMachinesResult
			if err = call("AddMachines", params.AddMachinesArgs{Model: iaas}, &r); err == nil {
				rec.expectStart(im.UUID, r.Machines[0], time.Now())
				live = append(live, r.Machines...)
			}
		case 1:
			host := ""
			for _, id := range live {
				if rec.isStarted(im.UUID, id) {
					host = id
				}
			}
			if host == "" {
				continue
			}
			var r params.AddMachinesResult
			if err = call("AddMachines", params.AddMachinesArgs{Model: iaas, Placement: "lxd:" + host}, &r); err == nil {
				rec.expectStart(im.UUID, r.Machines[0], time.Now())
			}
		case 2, 4:
			n := scale + 1
			if i%5 == 4 {
				n = max(1, scale-1)
			}
			if err = call("ScaleApplication", params.ScaleArgs{Model: caasName, Application: "web", Scale: n}, nil); err == nil {
				scale = n
				rec.expectScale(n, time.Now())
			}
		case 3:
			if len(live) == 0 {
				continue
			}
			id := live[0]
			if err = call("RemoveMachines", params.RemoveMachinesArgs{Model: iaas, Machines: []string{id}, Force: true}, nil); err == nil {
				rec.expectRemove(im.UUID, id, time.Now())
				live = live[1:]
			}
		}
		if err != nil {
			errs.Add(1)
			continue
		}
		ops.Add(1)
	}
	elapsed := time.Since(start)
	e.o.progress.set(fmt.Sprintf("churn %d: waiting for the agent", size))
	rec.wait(ctx, time.Minute, func() bool { return rec.pending() == 0 })
	unfinished := rec.pending()

	// Teardown: both models, until both are gone.
	e.o.progress.set(fmt.Sprintf("churn %d: removing the models", size))
	t1 := time.Now()
	var wr params.StringsWatchResult
	if err := call("WatchModels", nil, &wr); err != nil {
		return nil, err
	}
	w := client.NewStringsWatcher(adm, wr.StringsWatcherId)
	defer func() { _ = w.Stop(context.Background()) }()
	for _, name := range []string{iaas, caasName} {
		if err := call("RemoveModel", params.RemoveModelArgs{Model: name}, nil); err != nil {
			return nil, err
		}
	}
	tctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for {
		var ms params.ListModelsResult
		if err := call("ListModels", nil, &ms); err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(ms.Models, func(m params.ModelSummary) bool { return m.Name == iaas || m.Name == caasName }) {
			break
		}
		if _, err := w.Next(tctx); err != nil {
			return nil, fmt.Errorf("the models were not removed within 5 minutes: %w", err)
		}
	}
	teardown := time.Since(t1)

	v := newValues()
	v.set("ops/s", "ops/s", float64(ops.Load())/elapsed.Seconds())
	v.set("fill", "s", fill.Seconds())
	for _, l := range []struct {
		name string
		lat  *latencies
	}{{"machine start", &rec.machine}, {"container start", &rec.cntr}, {"remove", &rec.remove}, {"scale", &rec.scale}} {
		ds := l.lat.snapshot()
		v.set(l.name+" n", "", float64(len(ds)))
		v.set(l.name+" p50", "ms", ms(percentile(ds, 50)))
		v.set(l.name+" p99", "ms", ms(percentile(ds, 99)))
	}
	v.set("teardown", "s", teardown.Seconds())
	v.set("errors", "", float64(errs.Load()))
	v.set("unfinished", "", float64(unfinished))
	e.setConnEnds(v)
	return v, nil
}
