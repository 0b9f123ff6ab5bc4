package robustness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

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
//   - a lifecycle client: the admin adds a machine (ModelAdmin
//     AddMachines), then the controller agent provisions it
//     (SetInstanceInfo), makes it dead (EnsureDead) and removes it
//     (Remove): registers machine/N#life and machine/N#instance;
//   - readers reading any register through any daemon;
//   - a WatchModel watcher on each daemon (watch.go).
//
// Each register has one writer at a time, and every written value is
// unique, so the checker can tell every write apart.
const (
	statusWriters     = 2
	machinesPerWriter = 3
	configKeys        = 3
	readers           = 2
)

// register names and entities.
func statusReg(id string) string   { return "machine/" + id + "#status" }
func lifeReg(id string) string     { return "machine/" + id + "#life" }
func instanceReg(id string) string { return "machine/" + id + "#instance" }
func configReg(key string) string  { return "config/" + key }
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
	read         func(ctx context.Context, c *client.Conn) (readValue, error)
	agent        bool // read as the controller agent, else the admin
}

type workload struct {
	h        *harness
	machines []string // the status writers' machines

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

// setup adds the status writers' machines, before any fault.
func (h *harness) setup(ctx context.Context) (*workload, error) {
	c, err := h.dial(ctx, h.daemons[0], false)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	res, err := client.NewModelAdmin(c).AddMachines(ctx, params.AddMachinesArgs{Model: "default", Count: statusWriters * machinesPerWriter})
	if err != nil {
		return nil, err
	}
	w := &workload{h: h, machines: res.Machines}
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

func readStatus(id string) func(ctx context.Context, c *client.Conn) (readValue, error) {
	return func(ctx context.Context, c *client.Conn) (readValue, error) {
		st, err := client.NewProvisioner(c).Machine("machine-" + id).Status(ctx)
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
		life, err := client.NewProvisioner(c).Machine("machine-" + id).Life(ctx)
		if client.IsCode(err, params.CodeNotFound) {
			return readValue{v: "removed", absent: true}, nil
		}
		return readValue{v: life}, err
	}
}

func readInstance(id string) func(ctx context.Context, c *client.Conn) (readValue, error) {
	return func(ctx context.Context, c *client.Conn) (readValue, error) {
		inst, err := client.NewProvisioner(c).Machine("machine-" + id).InstanceId(ctx)
		switch {
		case client.IsCode(err, params.CodeNotProvisioned):
			return readValue{}, nil
		case client.IsCode(err, params.CodeNotFound):
			return readValue{skip: true}, nil // the register is gone with its machine
		}
		return readValue{v: inst}, err
	}
}

// start runs every client until ctx ends; wg waits for them.
func (w *workload) start(ctx context.Context, wg *sync.WaitGroup) {
	id := 0
	newSession := func(agent bool) *session {
		id++
		return &session{h: w.h, id: id, agent: agent, rng: newRand(w.h.cfg.Seed, uint64(100+id))}
	}
	for i := range statusWriters {
		s := newSession(true)
		mine := w.machines[i*machinesPerWriter : (i+1)*machinesPerWriter]
		wg.Go(func() { w.statusWriter(ctx, s, mine) })
	}
	cs := newSession(false)
	wg.Go(func() { w.configWriter(ctx, cs) })
	admin, agent := newSession(false), newSession(true)
	wg.Go(func() { w.lifecycle(ctx, admin, agent) })
	for range readers {
		admin, agent := newSession(false), newSession(true)
		wg.Go(func() { w.reader(ctx, admin, agent) })
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

// lifecycle takes machines through their life, one at a time.
func (w *workload) lifecycle(ctx context.Context, admin, agent *session) {
	defer admin.close()
	defer agent.close()
	for ctx.Err() == nil {
		start := w.h.now()
		var added []string
		err := admin.do(ctx, func(ctx context.Context, c *client.Conn) error {
			res, err := client.NewModelAdmin(c).AddMachines(ctx, params.AddMachinesArgs{Model: "default", Count: 1})
			added = res.Machines
			return err
		})
		if err != nil || len(added) != 1 {
			admin.skip(ctx, err) // an addition in doubt names no machine: nothing to record
			continue
		}
		id := added[0]
		// The addition, as writes of the new machine's registers.
		for _, r := range []struct{ reg, v string }{{lifeReg(id), "alive"}, {instanceReg(id), ""}} {
			c := w.h.rec.begin(admin.id, r.reg, machineEntity(id), true, r.v)
			c.op.Call = start
			c.end(admin.daemon, nil, "")
		}
		w.addReg(reg{name: lifeReg(id), entity: machineEntity(id), agent: true, read: readLife(id)})
		w.addReg(reg{name: instanceReg(id), entity: machineEntity(id), agent: true, read: readInstance(id)})
		m := "machine-" + id
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

func (w *workload) reader(ctx context.Context, admin, agent *session) {
	defer admin.close()
	defer agent.close()
	for ctx.Err() == nil {
		r := w.pick(admin.rng)
		s := admin
		if r.agent {
			s = agent
		}
		var v readValue
		call := w.h.rec.begin(s.id, r.name, r.entity, false, "")
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

// settle, once the faults are healed and the writers stopped, writes one
// status through each daemon, then reads every register through it: the
// daemon had applied every earlier write by the time it acknowledged its
// own, so these reads catch any acknowledged write lost. Then it waits
// until every watcher has delivered the last of those writes (which
// shows each stream got past every earlier write). Calls are tried again
// (each try recorded) until they succeed or the settle budget has passed
// (settleBudget): the daemons and etcd may still be recovering from the
// last fault.
func (w *workload) settle(ctx context.Context, watchers []*watcherRun) error {
	w.mu.Lock()
	nregs := len(w.regs)
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, settleBudget(nregs, len(w.h.daemons)))
	defer cancel()
	var after int64 // the last final write's call
	for i, d := range w.h.daemons {
		s := &session{h: w.h, id: 1000 + i, fixed: d}
		sa := &session{h: w.h, id: 2000 + i, agent: true, fixed: d}
		m := w.machines[0]
		v := fmt.Sprintf("settle-%d", i)
		err := retry(ctx, func() error {
			call := w.h.rec.begin(sa.id, statusReg(m), machineEntity(m), true, v)
			after = call.op.Call
			err := sa.do(ctx, func(ctx context.Context, c *client.Conn) error {
				return client.NewProvisioner(c).Machine("machine-"+m).SetStatus(ctx, "started", v, nil)
			})
			var nc errNoCall
			if !errors.As(err, &nc) {
				call.end(sa.daemon, err, "")
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("final write through %s: %w", d.name, err)
		}
		w.mu.Lock()
		regs := append([]reg(nil), w.regs...)
		w.mu.Unlock()
		if err := w.finalReads(ctx, i, d, regs); err != nil {
			return err
		}
		s.close()
		sa.close()
	}
	var errs []error
	for _, wr := range watchers {
		if err := wr.waitDelivered(ctx, machineEntity(w.machines[0]), after); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// retry calls fn until it succeeds or ctx ends (then its last error).
// finalReaders is how many sessions read the registers through one daemon
// at the end of a run, each its own connection (as many as a long run's
// tens of thousands of registers need to be read in seconds, not minutes).
const finalReaders = 8

// settleBudget is how long the settle phase may take: settleWait, plus
// what reading every register through every daemon costs a loaded box
// (10 ms a read, spread over finalReaders), so a long run's many
// registers do not run the final reads out of time.
func settleBudget(regs, daemons int) time.Duration {
	return settleWait + time.Duration(regs*daemons/finalReaders)*10*time.Millisecond
}

// finalReads reads every register in regs through daemon d (the i-th),
// finalReaders sessions at a time, each read tried again until it
// succeeds or ctx ends; it returns the first read that never succeeded.
func (w *workload) finalReads(ctx context.Context, i int, d *daemon, regs []reg) error {
	next := make(chan reg)
	errs := make(chan error, finalReaders)
	var wg sync.WaitGroup
	for k := range finalReaders {
		s := &session{h: w.h, id: 10000 + 100*i + 2*k, fixed: d}
		sa := &session{h: w.h, id: 10000 + 100*i + 2*k + 1, agent: true, fixed: d}
		wg.Go(func() {
			defer s.close()
			defer sa.close()
			for r := range next {
				ss := s
				if r.agent {
					ss = sa
				}
				err := retry(ctx, func() error {
					var v readValue
					call := w.h.rec.begin(ss.id, r.name, r.entity, false, "")
					err := ss.do(ctx, func(ctx context.Context, c *client.Conn) error {
						var err error
						v, err = r.read(ctx, c)
						return err
					})
					if err == nil && !v.skip {
						call.op.Absent = v.absent
						call.end(ss.daemon, nil, v.v)
					}
					return err
				})
				if err != nil {
					errs <- fmt.Errorf("final read of %s through %s: %w", r.name, d.name, err)
					return
				}
			}
		})
	}
	func() {
		defer close(next)
		for _, r := range regs {
			select {
			case next <- r:
			case err := <-errs:
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

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
		c, err := s.h.dial(ctx, d, s.agent)
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
