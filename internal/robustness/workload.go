package robustness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/provisiond/provisiond/internal/robustness/checker"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// The workload, over the wire through rpc/client, each client one call at
// a time on a connection of its own, moving to another daemon when its
// connection breaks or a call gets no answer:
//
//   - status writers (the controller agent, Provisioner SetStatus): each
//     owns machines of its own and writes their agent status message
//     (register machine/N#status);
//   - a config writer (the admin, ModelAdmin SetModelConfig): keys of the
//     default model's config (register config/KEY, entity model/UUID);
//   - two lifecycle clients: the admin adds a machine (ModelAdmin
//     AddMachines), or an LXD container on a host machine of its own
//     (placement lxd:HOST), then the controller agent provisions it
//     (SetInstanceInfo), makes it dead (EnsureDead) and removes it
//     (Remove): registers machine/N#life and machine/N#instance;
//   - a scale writer (the admin, ModelAdmin ScaleApplication): the scale
//     of a CAAS application in a CAAS model of its own (register
//     application/web#scale, in model k8s);
//   - readers reading any register through any daemon;
//   - a watcher of each kind (checker.WatchKinds) on each daemon
//     (watch.go).
//
// Each register has one writer at a time, and every written value is
// unique, so the checker can tell every write apart.
const (
	statusWriters     = 2
	machinesPerWriter = 3
	configKeys        = 3
	readers           = 2
	caasModel         = "k8s" // the CAAS model of the scale writer
	caasApp           = "web"
)

// register names and entities.
func statusReg(id string) string   { return "machine/" + id + "#status" }
func lifeReg(id string) string     { return "machine/" + id + "#life" }
func instanceReg(id string) string { return "machine/" + id + "#instance" }
func configReg(key string) string  { return "config/" + key }
func scaleReg(app string) string   { return "application/" + app + "#scale" }

// machineTag is the tag of machine (or container) id.
func machineTag(id string) string { return "machine-" + strings.ReplaceAll(id, "/", "-") }
func machineEntity(id string) string {
	return "machine/" + id
}

// readValue is what a read found.
type readValue struct {
	v      string
	skip   bool // nothing to record (the register is gone with its machine)
	absent bool // not found: v (a removal) or not written yet (checker.Op.Absent)
}

// reg is a register readers may read.
type reg struct {
	name, entity string
	model        string // "" for the default model (checker.Op.Model)
	read         func(ctx context.Context, c *client.Conn) (readValue, error)
	agent        bool // read as the controller agent, else the admin
	caas         bool // read as the controller agent on the CAAS model
}

// as is the session of sessions (the admin's, the controller agent's,
// the controller agent's on the CAAS model) that reads r.
func (r reg) as(admin, agent, caas *session) *session {
	switch {
	case r.caas:
		return caas
	case r.agent:
		return agent
	}
	return admin
}

type workload struct {
	h        *harness
	machines []string    // the status writers' machines
	host     string      // the machine the container lifecycle client adds containers to
	caasUUID string      // the CAAS model's
	names    entityNames // the units the pods became, the models' UUIDs

	mu   sync.Mutex
	regs []reg // what readers may read
}

func (w *workload) addReg(r reg) {
	w.mu.Lock()
	w.regs = append(w.regs, r)
	w.mu.Unlock()
}

func (w *workload) pick(rng *rand.Rand) reg {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.regs[rng.IntN(len(w.regs))]
}

// setup adds the status writers' machines and the CAAS model and its
// applications, before any fault. A call answered "try again" (etcd slow
// to answer on a loaded box, an election) is made again, until
// startTimeout; a retried addition that finds what it adds already there
// takes it (the try before landed).
func (h *harness) setup(ctx context.Context) (*workload, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	c, err := h.dial(ctx, h.daemons[0], false)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ma := client.NewModelAdmin(c)
	var res params.AddMachinesResult
	if err := setupCall(ctx, "adding machines", func(ctx context.Context, _ bool) (err error) {
		res, err = ma.AddMachines(ctx, params.AddMachinesArgs{Model: "default", Count: statusWriters*machinesPerWriter + 1})
		return err
	}); err != nil {
		return nil, err
	}
	n := len(res.Machines) - 1
	w := &workload{h: h, machines: res.Machines[:n], host: res.Machines[n]}
	if err := setupCall(ctx, "adding the CAAS model", func(ctx context.Context, again bool) error {
		k8s, err := ma.AddModel(ctx, params.AddModelArgs{Name: caasModel, Type: "caas"})
		if again && client.IsCode(err, params.CodeAlreadyExists) {
			ms, lerr := ma.ListModels(ctx)
			if lerr != nil {
				return lerr
			}
			for _, m := range ms.Models {
				if m.Name == caasModel {
					k8s, err = m, nil
				}
			}
		}
		w.caasUUID = k8s.UUID
		return err
	}); err != nil {
		return nil, err
	}
	one, zero := 1, 0
	for _, app := range []struct {
		name, meta string
		scale      *int
	}{
		{caasApp, "name: web\nsummary: web\ndescription: A web server.\n", &one},
		{podsApp, "name: pods\nsummary: pods\ndescription: Pods the unit writer reports.\n", &zero},
	} {
		if err := setupCall(ctx, "deploying "+app.name, func(ctx context.Context, again bool) error {
			_, err := ma.Deploy(ctx, params.DeployArgs{Model: caasModel, Application: app.name, Scale: app.scale, CharmMetadata: app.meta})
			if again && client.IsCode(err, params.CodeAlreadyExists) {
				return nil
			}
			return err
		}); err != nil {
			return nil, err
		}
	}
	w.addReg(reg{name: scaleReg(caasApp), entity: "application/" + caasApp, model: caasModel, read: readScale(caasApp)})
	w.addReg(reg{name: podSpecReg(caasApp), entity: podSpecEntity(caasApp), model: caasModel, caas: true, read: readPodSpec(caasApp)})
	for _, id := range res.Machines {
		w.addReg(reg{name: statusReg(id), entity: machineEntity(id), agent: true, read: readStatus(id)})
	}
	uuid := h.creds.DefaultModelUUID
	for i := range configKeys {
		key := fmt.Sprintf("robust-k%d", i)
		w.addReg(reg{name: configReg(key), entity: "model/" + uuid, read: readConfig(key)})
	}
	return w, nil
}

// setupCall makes one of setup's calls (again: a try after one that
// failed), again while it is answered "try again" or in time, until ctx
// ends.
func setupCall(ctx context.Context, what string, fn func(ctx context.Context, again bool) error) error {
	for again := false; ; again = true {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := fn(cctx, again)
		cancel()
		if err == nil {
			return nil
		}
		timedOut := errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil // this try's own timeout
		if !timedOut && !client.IsCode(err, params.CodeTryAgain) && !client.IsCode(err, params.CodeDeadlineExceeded) {
			return fmt.Errorf("%s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func readStatus(id string) func(ctx context.Context, c *client.Conn) (readValue, error) {
	return func(ctx context.Context, c *client.Conn) (readValue, error) {
		st, err := client.NewProvisioner(c).Machine(machineTag(id)).Status(ctx)
		return readValue{v: st.Info}, err
	}
}

func readConfig(key string) func(ctx context.Context, c *client.Conn) (readValue, error) {
	return func(ctx context.Context, c *client.Conn) (readValue, error) {
		info, err := client.NewModelAdmin(c).ModelConfig(ctx, params.ModelArgs{Model: "default"})
		if err != nil {
			return readValue{}, err
		}
		v, _ := info.Config[key].(string)
		return readValue{v: v}, nil
	}
}

func readLife(id string) func(ctx context.Context, c *client.Conn) (readValue, error) {
	return func(ctx context.Context, c *client.Conn) (readValue, error) {
		life, err := client.NewProvisioner(c).Machine(machineTag(id)).Life(ctx)
		if gone(id, err) {
			return readValue{v: "removed", absent: true}, nil
		}
		return readValue{v: life}, err
	}
}

// gone says err is how the Provisioner answers for machine id when there
// is none: not found, or for a container permission denied (the
// controller agent's access to a container is through its record, as
// Juju's provisioner's auth function reads it).
func gone(id string, err error) bool {
	return client.IsCode(err, params.CodeNotFound) ||
		(strings.Contains(id, "/") && client.IsCode(err, params.CodeUnauthorized))
}

func readInstance(id string) func(ctx context.Context, c *client.Conn) (readValue, error) {
	return func(ctx context.Context, c *client.Conn) (readValue, error) {
		inst, err := client.NewProvisioner(c).Machine(machineTag(id)).InstanceId(ctx)
		switch {
		case client.IsCode(err, params.CodeNotProvisioned):
			return readValue{}, nil
		case gone(id, err):
			return readValue{skip: true}, nil // the register is gone with its machine
		}
		return readValue{v: inst}, err
	}
}

func readScale(app string) func(ctx context.Context, c *client.Conn) (readValue, error) {
	return func(ctx context.Context, c *client.Conn) (readValue, error) {
		st, err := client.NewModelAdmin(c).Application(ctx, params.ApplicationArgs{Model: caasModel, Application: app})
		return readValue{v: strconv.Itoa(st.Scale)}, err
	}
}

// start runs every client until ctx ends; wg waits for them.
func (w *workload) start(ctx context.Context, wg *sync.WaitGroup) {
	id := 0
	newSession := func(agent bool) *session {
		id++
		return &session{h: w.h, id: id, agent: agent, rng: newRand(w.h.cfg.Seed, uint64(100+id))}
	}
	caasSession := func() *session {
		s := newSession(true)
		s.model = w.caasUUID
		return s
	}
	for i := range statusWriters {
		s := newSession(true)
		mine := w.machines[i*machinesPerWriter : (i+1)*machinesPerWriter]
		wg.Go(func() { w.statusWriter(ctx, s, mine) })
	}
	cs := newSession(false)
	wg.Go(func() { w.configWriter(ctx, cs) })
	for _, placement := range []string{"", "lxd:" + w.host} {
		admin, agent := newSession(false), newSession(true)
		wg.Go(func() { w.lifecycle(ctx, admin, agent, placement) })
	}
	ss := newSession(false)
	wg.Go(func() { w.scaleWriter(ctx, ss) })
	us := caasSession()
	wg.Go(func() { w.unitWriter(ctx, us) })
	ps := newSession(false)
	wg.Go(func() { w.podSpecWriter(ctx, ps) })
	ms := newSession(false)
	wg.Go(func() { w.modelWriter(ctx, ms) })
	for range readers {
		admin, agent, caas := newSession(false), newSession(true), caasSession()
		wg.Go(func() { w.reader(ctx, admin, agent, caas) })
	}
}

func (w *workload) statusWriter(ctx context.Context, s *session, machines []string) {
	defer s.close()
	for seq := 0; ctx.Err() == nil; seq++ {
		m := machines[seq%len(machines)]
		v := fmt.Sprintf("s%d-%d", s.id, seq)
		call := w.h.rec.begin(s.id, statusReg(m), machineEntity(m), true, v)
		err := s.do(ctx, func(ctx context.Context, c *client.Conn) error {
			return client.NewProvisioner(c).Machine("machine-"+m).SetStatus(ctx, "started", v, nil)
		})
		if s.skip(ctx, err) {
			continue
		}
		call.end(s.daemon, err, "")
	}
}

func (w *workload) configWriter(ctx context.Context, s *session) {
	defer s.close()
	uuid := w.h.creds.DefaultModelUUID
	for seq := 0; ctx.Err() == nil; seq++ {
		key := fmt.Sprintf("robust-k%d", seq%configKeys)
		v := fmt.Sprintf("c%d-%d", s.id, seq)
		call := w.h.rec.begin(s.id, configReg(key), "model/"+uuid, true, v)
		err := s.do(ctx, func(ctx context.Context, c *client.Conn) error {
			_, err := client.NewModelAdmin(c).SetModelConfig(ctx, params.SetModelConfigArgs{Model: "default", Config: map[string]any{key: v}})
			return err
		})
		if s.skip(ctx, err) {
			continue
		}
		call.end(s.daemon, err, "")
	}
}

func (w *workload) scaleWriter(ctx context.Context, s *session) {
	defer s.close()
	for seq := 2; ctx.Err() == nil; seq++ {
		v := strconv.Itoa(seq)
		call := w.h.rec.begin(s.id, scaleReg(caasApp), "application/"+caasApp, true, v)
		call.op.Model = caasModel
		err := s.do(ctx, func(ctx context.Context, c *client.Conn) error {
			_, err := client.NewModelAdmin(c).ScaleApplication(ctx, params.ScaleArgs{Model: caasModel, Application: caasApp, Scale: seq})
			return err
		})
		if s.skip(ctx, err) {
			continue
		}
		call.end(s.daemon, err, "")
	}
}

// addMachine adds one machine, or container (placement lxd:HOST), and
// records the addition as writes of its registers, which readers may
// then read. It returns the new id, "" if the call failed (an addition in
// doubt names no machine: nothing to record).
func (w *workload) addMachine(ctx context.Context, admin *session, placement string) (string, error) {
	start := w.h.now()
	var added []string
	err := admin.do(ctx, func(ctx context.Context, c *client.Conn) error {
		res, err := client.NewModelAdmin(c).AddMachines(ctx, params.AddMachinesArgs{Model: "default", Count: 1, Placement: placement})
		added = res.Machines
		return err
	})
	if err != nil || len(added) != 1 {
		return "", err
	}
	id := added[0]
	for _, r := range []struct{ reg, v string }{{lifeReg(id), "alive"}, {instanceReg(id), ""}} {
		c := w.h.rec.begin(admin.id, r.reg, machineEntity(id), true, r.v)
		c.op.Call = start
		c.end(admin.daemon, nil, "")
	}
	if placement == "" {
		// A container's registers are not read: the controller agent
		// may not read a container (its host's agent does, in Juju).
		w.addReg(reg{name: lifeReg(id), entity: machineEntity(id), agent: true, read: readLife(id)})
		w.addReg(reg{name: instanceReg(id), entity: machineEntity(id), agent: true, read: readInstance(id)})
	}
	return id, nil
}

// lifecycle takes machines (placement "") or containers (placement
// lxd:HOST) through their life, one at a time: a machine is added by the
// admin, provisioned, made dead and removed by the controller agent; a
// container (which the controller agent may not touch: its host's agent
// would) is added and then removed at once by the admin (ModelAdmin
// RemoveMachines with force and no-wait: it becomes dying, then dead,
// then is removed, three commits, recorded as three writes of its life).
func (w *workload) lifecycle(ctx context.Context, admin, agent *session, placement string) {
	defer admin.close()
	defer agent.close()
	for ctx.Err() == nil {
		id, err := w.addMachine(ctx, admin, placement)
		if id == "" {
			admin.skip(ctx, err)
			continue
		}
		if placement != "" {
			for ctx.Err() == nil {
				if _, err := w.removeContainer(ctx, admin, id); !admin.skip(ctx, err) {
					break
				}
			}
			continue
		}
		m := machineTag(id)
		steps := []struct {
			reg, v string
			fn     func(ctx context.Context, c *client.Conn) error
		}{
			{instanceReg(id), "inst-" + id, func(ctx context.Context, c *client.Conn) error {
				return client.NewProvisioner(c).Machine(m).SetInstanceInfo(ctx, params.InstanceInfo{InstanceId: "inst-" + id, Nonce: "nonce-" + id})
			}},
			{lifeReg(id), "dead", func(ctx context.Context, c *client.Conn) error {
				return client.NewProvisioner(c).Machine(m).EnsureDead(ctx)
			}},
			{lifeReg(id), "removed", func(ctx context.Context, c *client.Conn) error {
				return client.NewProvisioner(c).Machine(m).Remove(ctx)
			}},
		}
		for _, st := range steps {
			if ctx.Err() != nil {
				return
			}
			for ctx.Err() == nil {
				call := w.h.rec.begin(agent.id, st.reg, machineEntity(id), true, st.v)
				err := agent.do(ctx, st.fn)
				if !agent.skip(ctx, err) {
					call.end(agent.daemon, err, "")
					break
				}
			}
		}
	}
}

// removeContainer removes container id through the admin (ModelAdmin
// RemoveMachines with force and no-wait: three commits, the container
// dying, dead, removed, recorded as three writes of its life), and
// returns the call's time; an error the session says to skip
// (errNoCall) was never sent and recorded nothing.
func (w *workload) removeContainer(ctx context.Context, admin *session, id string) (called int64, err error) {
	var calls []*call
	for _, v := range []string{"dying", "dead", "removed"} {
		calls = append(calls, w.h.rec.begin(admin.id, lifeReg(id), machineEntity(id), true, v))
	}
	err = admin.do(ctx, func(ctx context.Context, c *client.Conn) error {
		_, err := client.NewModelAdmin(c).RemoveMachines(ctx, params.RemoveMachinesArgs{Model: "default", Machines: []string{id}, Force: true, NoWait: true})
		return err
	})
	var nc errNoCall
	if errors.As(err, &nc) {
		return 0, err
	}
	for _, c := range calls {
		c.op.Call = calls[0].op.Call
		c.end(admin.daemon, err, "")
	}
	return calls[0].op.Call, err
}

func (w *workload) reader(ctx context.Context, admin, agent, caas *session) {
	defer admin.close()
	defer agent.close()
	defer caas.close()
	for ctx.Err() == nil {
		r := w.pick(admin.rng)
		s := r.as(admin, agent, caas)
		var v readValue
		call := w.h.rec.begin(s.id, r.name, r.entity, false, "")
		call.op.Model = r.model
		err := s.do(ctx, func(ctx context.Context, c *client.Conn) error {
			var err error
			v, err = r.read(ctx, c)
			return err
		})
		if s.skip(ctx, err) || v.skip {
			continue
		}
		call.op.Absent = v.absent
		call.end(s.daemon, err, v.v)
	}
}

// settle, once the faults are healed and the writers stopped:
//
//  1. once every watcher has subscribed again (waitStreaming), makes
//     one last write of each watcher kind through the first daemon (a
//     config key, the scale, the pod spec, a machine, a container, that
//     container removed), for the watchers to deliver;
//  2. writes one status through each daemon, then reads every register
//     through it: the daemon had applied every earlier write by the time
//     it acknowledged its own, so these reads catch any acknowledged
//     write lost;
//  3. reads every register still there through every daemon (reads
//     marked final), again until the daemons agree or AgreeWait has
//     passed (checker.Agreement: they must agree; a daemon only just
//     resumed may still send a write it held, which lands everywhere);
//  4. waits until every watcher has delivered its kind's last write
//     (which shows each stream got past every earlier write).
//
// Calls are tried again (each try recorded) until they succeed or the
// settle budget has passed (SettleWait and the reads' share of it,
// readBudget): the daemons and etcd may still be recovering from the
// last fault.
func (w *workload) settle(ctx context.Context, watchers []*watcherRun) error {
	ctx, cancel := context.WithTimeout(ctx, w.h.cfg.SettleWait+readBudget(len(w.registers()), len(w.h.daemons)))
	defer cancel()
	type mark struct {
		entity string
		after  int64 // the write's call
	}
	last := map[string]mark{}
	for _, wr := range watchers {
		if err := wr.waitStreaming(ctx); err != nil {
			return err
		}
	}
	admin := &session{h: w.h, id: 3000, fixed: w.h.daemons[0]}
	defer admin.close()
	uuid := w.h.creds.DefaultModelUUID
	writes := []struct {
		kind, reg, entity, model, v string
		fn                          func(ctx context.Context, c *client.Conn) error
	}{
		{checker.KindConfig, configReg("robust-k0"), "model/" + uuid, "", "settle", func(ctx context.Context, c *client.Conn) error {
			_, err := client.NewModelAdmin(c).SetModelConfig(ctx, params.SetModelConfigArgs{Model: "default", Config: map[string]any{"robust-k0": "settle"}})
			return err
		}},
		{checker.KindScale, scaleReg(caasApp), "application/" + caasApp, caasModel, "0", func(ctx context.Context, c *client.Conn) error {
			_, err := client.NewModelAdmin(c).ScaleApplication(ctx, params.ScaleArgs{Model: caasModel, Application: caasApp, Scale: 0})
			return err
		}},
		{checker.KindPodSpec, podSpecReg(caasApp), podSpecEntity(caasApp), caasModel, "settle", func(ctx context.Context, c *client.Conn) error {
			_, err := client.NewModelAdmin(c).SetPodSpec(ctx, params.SetPodSpecArgs{Model: caasModel, Application: caasApp, Spec: podSpec("settle")})
			return err
		}},
	}
	for _, fw := range writes {
		called, err := w.write(ctx, admin, fw.reg, fw.entity, fw.model, fw.v, fw.fn)
		last[fw.kind] = mark{fw.entity, called}
		if err != nil {
			return fmt.Errorf("final %s write: %w", fw.kind, err)
		}
	}
	for kind, placement := range map[string]string{checker.KindMachines: "", checker.KindContainers: "lxd:" + w.host} {
		err := retry(ctx, func() error {
			start := w.h.now()
			id, err := w.addMachine(ctx, admin, placement)
			if id != "" {
				last[kind] = mark{machineEntity(id), start}
			} else if err == nil {
				err = errors.New("no machine added")
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("final %s addition: %w", kind, err)
		}
	}
	// The last container removed again, for the removals watcher.
	ctr := strings.TrimPrefix(last[checker.KindContainers].entity, "machine/")
	if err := retry(ctx, func() error {
		called, err := w.removeContainer(ctx, admin, ctr)
		last[checker.KindRemovals] = mark{checker.NotifyEntity(checker.KindRemovals, ""), called}
		return err
	}); err != nil {
		return fmt.Errorf("final removal: %w", err)
	}
	// Kinds whose last write is another kind's.
	var modelAdded int64
	if err := retry(ctx, func() error {
		called, err := w.addModel(ctx, admin, "rm-settle")
		modelAdded = called
		if client.IsCode(err, params.CodeAlreadyExists) {
			return nil // a try before landed
		}
		return err
	}); err != nil {
		return fmt.Errorf("final model addition: %w", err)
	}
	if err := retry(ctx, func() error {
		if w.names.get("modelrec/rm-settle") != "" {
			return nil
		}
		// Added by a try whose answer was lost: its UUID from the list.
		return admin.do(ctx, func(ctx context.Context, c *client.Conn) error {
			ms, err := client.NewModelAdmin(c).ListModels(ctx)
			for _, m := range ms.Models {
				if m.Name == "rm-settle" {
					w.names.set("modelrec/rm-settle", "model/"+m.UUID)
				}
			}
			return err
		})
	}); err != nil {
		return fmt.Errorf("final model's UUID: %w", err)
	}
	last[checker.KindModels] = mark{w.names.get("modelrec/rm-settle"), modelAdded}
	last[checker.KindStartTimes] = last[checker.KindMachines]
	last[checker.KindCAASModel] = last[checker.KindScale]

	var after int64          // the last final status write's call
	gone := map[string]int{} // register -> daemons that found it gone
	for i, d := range w.h.daemons {
		s := &session{h: w.h, id: 1000 + i, fixed: d}
		sa := &session{h: w.h, id: 2000 + i, agent: true, fixed: d}
		m := w.machines[0]
		v := fmt.Sprintf("settle-%d", i)
		var err error
		after, err = w.write(ctx, sa, statusReg(m), machineEntity(m), "", v, func(ctx context.Context, c *client.Conn) error {
			return client.NewProvisioner(c).Machine(machineTag(m)).SetStatus(ctx, "started", v, nil)
		})
		if err != nil {
			return fmt.Errorf("final write through %s: %w", d.name, err)
		}
		_, g, err := w.readAll(ctx, 10000+100*i, d, w.registers(), false)
		if err != nil {
			return fmt.Errorf("final %w", err)
		}
		for _, name := range g {
			gone[name]++
		}
		s.close()
		sa.close()
	}
	last[checker.KindModel] = mark{machineEntity(w.machines[0]), after}
	last[checker.KindModelResumed] = last[checker.KindModel]

	if err := w.agree(ctx, gone); err != nil {
		return err
	}

	var errs []error
	for _, wr := range watchers {
		m, ok := last[wr.kind]
		if !ok {
			continue // no write of the workload is its kind's (checker.KindModels)
		}
		if err := wr.waitDelivered(ctx, m.entity, m.after); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// write makes a write of value v through s with fn until it succeeds or
// ctx ends, recording each try that was sent; called is the last try's
// call time.
func (w *workload) write(ctx context.Context, s *session, register, entity, model, v string,
	fn func(ctx context.Context, c *client.Conn) error) (called int64, err error) {
	err = retry(ctx, func() error {
		call := w.h.rec.begin(s.id, register, entity, true, v)
		call.op.Model = model
		called = call.op.Call
		err := s.do(ctx, fn)
		var nc errNoCall
		if !errors.As(err, &nc) {
			call.end(s.daemon, err, "")
		}
		return err
	})
	return called, err
}

// registers are what readers may read, now.
func (w *workload) registers() []reg {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]reg(nil), w.regs...)
}

// read reads r through s until it succeeds or ctx ends, and records it
// (final: as one of the settled run's last round); found is false if
// there was nothing to record (the register is gone with its machine).
func (w *workload) read(ctx context.Context, s *session, r reg, final bool) (op checker.Op, found bool, err error) {
	err = retry(ctx, func() error {
		var v readValue
		call := w.h.rec.begin(s.id, r.name, r.entity, false, "")
		call.op.Model, call.op.Final = r.model, final
		err := s.do(ctx, func(ctx context.Context, c *client.Conn) error {
			var err error
			v, err = r.read(ctx, c)
			return err
		})
		if err == nil && !v.skip {
			call.op.Absent = v.absent
			op, found = call.end(s.daemon, nil, v.v), true
		}
		return err
	})
	return op, found, err
}

// agree reads every register no daemon found gone through every daemon,
// in rounds, until a round finds the daemons agreeing (checker.Agreement)
// or AgreeWait has passed; the checker takes each daemon's last read.
func (w *workload) agree(ctx context.Context, gone map[string]int) error {
	var regs []reg
	for _, r := range w.registers() {
		if gone[r.name] == 0 {
			regs = append(regs, r)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, w.h.cfg.AgreeWait+readBudget(len(regs), len(w.h.daemons)))
	defer cancel()
	for round := 0; ; round++ {
		var ops []checker.Op
		for i, d := range w.h.daemons {
			dops, _, err := w.readAll(ctx, 20000+100*i, d, regs, true)
			if err != nil {
				return fmt.Errorf("agreement %w", err)
			}
			ops = append(ops, dops...)
		}
		as := checker.Agreement(ops)
		if len(as) == 0 {
			return nil
		}
		w.h.logf("robustness: agreement round %d: %d registers differ (%s)", round, len(as), as[0].Detail)
		select {
		case <-ctx.Done():
			return nil // the checker reports the disagreement
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// finalReaders is how many sessions read the registers through one daemon
// once the run has settled, each its own connection: a long run's tens of
// thousands of registers are read in seconds, not minutes.
const finalReaders = 8

// readBudget is what reading regs registers through each of daemons
// daemons may take on a loaded box (10 ms a read, finalReaders at a
// time), added to the settle phase's fixed waits so that a long run's
// many registers do not run its final reads out of time.
func readBudget(regs, daemons int) time.Duration {
	return time.Duration(regs*daemons/finalReaders) * 10 * time.Millisecond
}

// readAll reads every register in regs through daemon d, finalReaders
// sessions at a time (client ids base and up), each read tried again
// until it succeeds or ctx ends. It returns the reads that found
// something, in no particular order, and the registers found gone; err
// names the first read that never succeeded.
func (w *workload) readAll(ctx context.Context, base int, d *daemon, regs []reg, final bool) (ops []checker.Op, gone []string, err error) {
	var mu sync.Mutex
	next := make(chan reg)
	var wg sync.WaitGroup
	for k := range finalReaders {
		s := &session{h: w.h, id: base + 3*k, fixed: d}
		sa := &session{h: w.h, id: base + 3*k + 1, agent: true, fixed: d}
		sc := &session{h: w.h, id: base + 3*k + 2, agent: true, model: w.caasUUID, fixed: d}
		wg.Go(func() {
			defer s.close()
			defer sa.close()
			defer sc.close()
			for r := range next {
				ss := r.as(s, sa, sc)
				op, found, rerr := w.read(ctx, ss, r, final)
				mu.Lock()
				switch {
				case rerr != nil:
					if err == nil {
						err = fmt.Errorf("read of %s through %s: %w", r.name, d.name, rerr)
					}
				case !found || op.Absent:
					gone = append(gone, r.name)
					if found {
						ops = append(ops, op)
					}
				default:
					ops = append(ops, op)
				}
				mu.Unlock()
			}
		})
	}
	for _, r := range regs {
		if ctx.Err() != nil {
			break // each reader's read returns at once, with its error
		}
		next <- r
	}
	close(next)
	wg.Wait()
	return ops, gone, err
}

// retry calls fn until it succeeds or ctx ends (then its last error).
func retry(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// session is one client's connection, made again (to another daemon,
// unless fixed) when it breaks.
type session struct {
	h      *harness
	id     int
	agent  bool
	model  string // the model's UUID it logs in to ("": the default model)
	rng    *rand.Rand
	fixed  *daemon // always this daemon (the settle phase)
	conn   *client.Conn
	daemon string // the daemon conn is to
}

func (s *session) close() {
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
}

// do runs fn on the session's connection, dialling first if it has none.
// A dial failure is returned without fn being called (errNoCall); any
// answer but an error reply drops the connection.
func (s *session) do(ctx context.Context, fn func(ctx context.Context, c *client.Conn) error) error {
	if s.conn == nil {
		d := s.fixed
		if d == nil {
			d = s.h.daemons[s.rng.IntN(len(s.h.daemons))]
		}
		model := s.model
		if model == "" {
			model = s.h.creds.DefaultModelUUID
		}
		c, err := s.h.dialModel(ctx, d, s.agent, model)
		if err != nil {
			return errNoCall{err}
		}
		s.conn, s.daemon = c, d.name
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	err := fn(cctx, s.conn)
	var perr *params.Error
	if err != nil && !errors.As(err, &perr) {
		s.close() // no answer: the daemon is down, stopped or cut off
	}
	return err
}

// skip reports whether a call's outcome is not to be recorded: it was
// never sent (no connection could be made). It waits a little after a failure, as an agent would.
func (s *session) skip(ctx context.Context, err error) bool {
	if err == nil {
		return false
	}
	select {
	case <-ctx.Done():
	case <-time.After(50 * time.Millisecond):
	}
	var nc errNoCall
	return errors.As(err, &nc)
}

// errNoCall: the session could not connect; the operation was not sent.
type errNoCall struct{ err error }

func (e errNoCall) Error() string { return "no connection: " + e.err.Error() }
