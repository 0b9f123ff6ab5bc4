package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// machineAgent is the agent of one provisioned machine or container, as
// Juju's machine agent on that instance: it logs in with the password and
// nonce its provisioner set, reports itself started and the containers it
// can host, runs the container provisioner of its own containers, and
// makes its machine dead once it is dying and hosts nothing.
//
// Juju's machine agent learns that its machine is dying from the Machiner
// facade's watcher, which provisiond does not serve; here the provisioner
// that watches the machine (the environ provisioner, or the host's
// container provisioner) tells it (markDying).
type machineAgent struct {
	a                    *Agent
	model, id, tag       string
	password, nonce      string
	inst                 Instance
	log                  *slog.Logger
	base                 *slog.Logger  // the model's logger, for its containers' agents
	poke                 chan struct{} // buffered: markDying was called
	w                    *worker
	mu                   sync.Mutex
	dying, reportedStart bool

	// The watch of its containers, kept across runs (only its run's
	// goroutine uses them): from is the revision up to which the events
	// received cover every change (the lowest of its watchers'), and
	// unprocessed the ids received that a run lost its connection before
	// acting on. The next run resumes after from and acts on those
	// first.
	from        uint64
	unprocessed []string
}

// supportedContainers is what a simulated host can run: LXD and KVM on a
// top-level machine, nested LXD in a container.
func supportedContainers(id string) []string {
	if isContainer(id) {
		return []string{"lxd"}
	}
	return []string{"lxd", "kvm"}
}

// startMachineAgent starts (or, after a restart of the agent's run,
// finds) the agent of machine id.
func (a *Agent) startMachineAgent(log *slog.Logger, model, id, password, nonce string, inst Instance) {
	k := key(model, id)
	a.mu.Lock()
	if _, ok := a.machines[k]; ok {
		a.mu.Unlock()
		return
	}
	m := &machineAgent{
		a: a, model: model, id: id, tag: machineTag(id), password: password, nonce: nonce, inst: inst, base: log,
		log:  log.With("machine-agent", machineTag(id)),
		poke: make(chan struct{}, 1),
	}
	a.machines[k] = m
	ctx := a.ctx
	a.mu.Unlock()
	m.w = a.goWorker(ctx, func(ctx context.Context) { a.supervise(ctx, m.log, m.run) })
	if m.w == nil {
		a.mu.Lock()
		delete(a.machines, k)
		a.mu.Unlock()
	}
}

func (a *Agent) machineAgent(model, id string) *machineAgent {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.machines[key(model, id)]
}

// stopMachineAgent stops machine id's agent, if it runs, and waits for it.
func (a *Agent) stopMachineAgent(model, id string) {
	a.mu.Lock()
	m := a.machines[key(model, id)]
	delete(a.machines, key(model, id))
	a.mu.Unlock()
	if m != nil && m.w != nil {
		m.w.stop()
	}
}

// stopMachineAgents stops every machine agent of model (it is gone).
func (a *Agent) stopMachineAgents(model string) {
	a.mu.Lock()
	var ms []*machineAgent
	for k, m := range a.machines {
		if m.model == model {
			ms = append(ms, m)
			delete(a.machines, k)
		}
	}
	a.mu.Unlock()
	for _, m := range ms {
		if m.w != nil {
			m.w.stop()
		}
	}
}

// stopMachineAgentsGone stops the agents of model's machines whose
// parent is parent ("" for top-level machines) and that are not in live:
// a provisioner's initial watcher event lists every machine it watches,
// so one missing from it was removed while the provisioner was away.
func (a *Agent) stopMachineAgentsGone(model, parent string, live []string) {
	keep := map[string]bool{}
	for _, id := range live {
		keep[id] = true
	}
	a.mu.Lock()
	var gone []string
	for _, m := range a.machines {
		if m.model == model && parentOf(m.id) == parent && !keep[m.id] {
			gone = append(gone, m.id)
		}
	}
	a.mu.Unlock()
	for _, id := range gone {
		a.stopMachineAgent(model, id)
		_ = a.cloud.StopInstance(model, InstanceID(id))
	}
}

// parentOf is the id of the machine hosting container id ("" for a
// top-level machine).
func parentOf(id string) string {
	i := strings.LastIndex(id, "/")
	if i < 0 {
		return ""
	}
	j := strings.LastIndex(id[:i], "/")
	if j < 0 {
		return ""
	}
	return id[:j]
}

// MachineAgents returns the number of machine agents running (for tests
// and figures).
func (a *Agent) MachineAgents() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.machines)
}

// markDying tells the agent that its machine is dying.
func (m *machineAgent) markDying() {
	m.mu.Lock()
	m.dying = true
	m.mu.Unlock()
	select {
	case m.poke <- struct{}{}:
	default:
	}
}

func (m *machineAgent) isDying() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dying
}

// watchEvent is one result of a strings watcher's Next.
type watchEvent struct {
	i   int // which of the caller's watchers
	ids []string
	rev uint64 // the revision the event covers (0: none reported)
	err error
}

// nextLoop calls w.NextRevision until ctx ends or it fails, sending each
// result, as watcher i's, to out; the caller owns the goroutine through
// wg.
func nextLoop(ctx context.Context, wg *sync.WaitGroup, i int, w *client.StringsWatcher, out chan<- watchEvent) {
	wg.Go(func() {
		for {
			ids, rev, err := w.NextRevision(ctx)
			select {
			case out <- watchEvent{i, ids, rev, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	})
}

func (m *machineAgent) run(ctx context.Context, connected func()) error {
	c, err := m.a.d.login(ctx, m.model, m.tag, m.password, m.nonce)
	if err != nil {
		return err
	}
	defer c.Close()
	connected()
	if !m.isDying() {
		if err := setStatus(ctx, c, "SetStatus", m.tag, "started", "", nil); err != nil {
			return fmt.Errorf("reporting started: %w", err)
		}
		if !m.reportedStart {
			m.reportedStart = true
			m.log.Info("machine agent started")
			m.a.observe(Event{Kind: EventMachineStarted, Model: m.model, ID: m.id})
		}
	}
	types := supportedContainers(m.id)
	if err := one(ctx, c, "SetSupportedContainers", params.MachineContainersParams{Params: []params.MachineContainers{{
		MachineTag: m.tag, ContainerTypes: types,
	}}}); err != nil {
		return fmt.Errorf("reporting supported containers: %w", err)
	}
	if !isContainer(m.id) && len(m.inst.NetworkConfig) > 0 {
		if err := c.Call(ctx, provisionerFacade, provisionerVersion, "", "SetObservedNetworkConfig",
			params.SetMachineNetworkConfig{Tag: m.tag, Config: m.inst.NetworkConfig}, nil); err != nil {
			return fmt.Errorf("reporting network config: %w", err)
		}
	}

	// The container provisioners, one per container type, as Juju's.
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	events := make(chan watchEvent)
	var initial []string
	params0 := make([]params.WatchContainer, len(types))
	for i, t := range types {
		params0[i] = params.WatchContainer{MachineTag: m.tag, ContainerType: t}
	}
	const method = "WatchContainers"
	from := m.from
	wrs, rev, resumed, err := watchFrom[params.StringsWatchResults](ctx, c, m.log, provisionerFacade, provisionerVersion,
		method, params.WatchContainers{Params: params0}, from)
	if err != nil {
		return fmt.Errorf("watching containers: %w", err)
	}
	if len(wrs.Results) != len(types) {
		return fmt.Errorf("watching containers: %d results for %d container types", len(wrs.Results), len(types))
	}
	// Each watcher's revision; the watch resumes after the lowest.
	revs := make([]uint64, len(types))
	for i, r := range wrs.Results {
		if r.Error != nil {
			return fmt.Errorf("watching containers: %w", r.Error)
		}
		initial = append(initial, r.Changes...)
		revs[i] = rev
		nextLoop(wctx, &wg, i, client.NewStringsWatcher(c, r.StringsWatcherId), events)
	}
	if resumed {
		m.log.Debug("watch of containers resumed", "from", from, "to", rev, "changed", len(initial))
	} else {
		from = 0
		m.a.stopMachineAgentsGone(m.model, m.id, initial)
	}
	m.a.observe(Event{Kind: EventWatched, Model: m.model, ID: m.id, Watch: method, IDs: initial, Revision: rev, From: from, Initial: true})
	m.received(initial, revs)
	cp := &containerProvisioner{m: m, c: c}
	if err := cp.process(ctx, m.unprocessed); err != nil {
		return err
	}
	m.unprocessed = nil
	for {
		if m.isDying() {
			done, err := m.tryDie(ctx, c)
			if err != nil {
				return err
			}
			if done {
				return errStopped
			}
		}
		select {
		case ev := <-events:
			if ev.err != nil {
				return ev.err
			}
			revs[ev.i] = ev.rev
			m.a.observe(Event{Kind: EventWatched, Model: m.model, ID: m.id, Watch: method, IDs: ev.ids, Revision: ev.rev})
			m.received(ev.ids, revs)
			if err := cp.process(ctx, m.unprocessed); err != nil {
				return err
			}
			m.unprocessed = nil
		case <-m.poke:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// received notes an event of the containers' watch: its ids are to be
// acted on, and the watch resumes after the lowest of its watchers'
// revisions (0 when one reports none: the next run watches afresh).
func (m *machineAgent) received(ids []string, revs []uint64) {
	m.unprocessed = mergeIDs(m.unprocessed, ids)
	m.from = slices.Min(revs)
}

// tryDie makes the agent's dying machine dead, as Juju's machiner does
// once the machine hosts no units and no containers; until then it waits
// for its containers to go.
func (m *machineAgent) tryDie(ctx context.Context, c *client.Conn) (bool, error) {
	err := one(ctx, c, "EnsureDead", entities(m.tag))
	switch {
	case ctx.Err() != nil:
		return false, ctx.Err() // stopped meanwhile (its provisioner saw it dead)
	case err == nil:
		m.log.Info("machine is dead; agent stops")
		return true, nil
	case connLost(err):
		return false, err
	case isCode(err, params.CodeHasContainers):
		return false, nil // its containers are on their way out
	default:
		m.log.Warn("cannot make machine dead", "err", err)
		return false, nil
	}
}

// containerProvisioner provisions the containers of its agent's machine,
// as Juju's container provisioner: prepare the container's network (an
// address from the model's subnets), start it, record it, start its
// agent; and tear dead containers down (release their addresses, remove
// them).
type containerProvisioner struct {
	m *machineAgent
	c *client.Conn
}

func (cp *containerProvisioner) process(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	m, c := cp.m, cp.c
	tags := make([]string, len(ids))
	for i, id := range ids {
		tags[i] = machineTag(id)
	}
	lifes, err := prov[params.LifeResults](ctx, c, "Life", entities(tags...))
	if err != nil {
		return err
	}
	insts, err := prov[params.StringResults](ctx, c, "InstanceId", entities(tags...))
	if err != nil {
		return err
	}
	if len(lifes.Results) != len(ids) || len(insts.Results) != len(ids) {
		return errors.New("container results do not match the request")
	}
	for i, id := range ids {
		log := m.log.With("container", id)
		if e := lifes.Results[i].Error; e != nil {
			if isCode(e, params.CodeNotFound) {
				m.a.stopMachineAgent(m.model, id)
				_ = m.a.cloud.StopInstance(m.model, InstanceID(id))
				continue
			}
			log.Warn("cannot read container", "err", e)
			continue
		}
		instanceID, provisioned := insts.Results[i].Result, insts.Results[i].Error == nil
		running := provisioned && m.a.cloud.HasInstance(m.model, instanceID)
		var err error
		switch lifes.Results[i].Life {
		case "alive":
			if !provisioned && !m.isDying() {
				err = cp.start(ctx, id)
			}
		case "dying":
			if ma := m.a.machineAgent(m.model, id); running && ma != nil {
				ma.markDying()
				continue
			}
			if err = one(ctx, c, "EnsureDead", entities(tags[i])); err == nil {
				err = cp.remove(ctx, id, instanceID)
			}
		case "dead":
			err = cp.remove(ctx, id, instanceID)
		}
		if err != nil {
			if connLost(err) || ctx.Err() != nil {
				return err
			}
			log.Warn("cannot provision container", "err", err)
		}
	}
	return nil
}

func (cp *containerProvisioner) start(ctx context.Context, id string) error {
	m, c := cp.m, cp.c
	tag := machineTag(id)
	if err := setStatus(ctx, c, "SetInstanceStatus", tag, "provisioning", "starting", nil); err != nil {
		return err
	}
	// The host bridges its interfaces for the container first.
	changes, err := prov[params.HostNetworkChangeResults](ctx, c, "HostChangesForContainers", entities(tag))
	if err != nil {
		return err
	}
	if len(changes.Results) == 1 && changes.Results[0].Error == nil && len(changes.Results[0].NewBridges) > 0 {
		cfg := bridged(m.inst.NetworkConfig, changes.Results[0].NewBridges)
		m.inst.NetworkConfig = cfg
		if err := c.Call(ctx, provisionerFacade, provisionerVersion, "", "SetObservedNetworkConfig",
			params.SetMachineNetworkConfig{Tag: m.tag, Config: cfg}, nil); err != nil {
			return fmt.Errorf("reporting bridges: %w", err)
		}
	}
	nets, err := prov[params.MachineNetworkConfigResults](ctx, c, "PrepareContainerInterfaceInfo", entities(tag))
	if err != nil {
		return err
	}
	if len(nets.Results) != 1 {
		return errors.New("no network config result")
	}
	if e := nets.Results[0].Error; e != nil {
		return setStatus(ctx, c, "SetInstanceStatus", tag, "provisioning error", e.Message, map[string]any{"transient": false})
	}
	infos, err := prov[params.ProvisioningInfoResults](ctx, c, "ProvisioningInfo", entities(tag))
	if err != nil {
		return err
	}
	if len(infos.Results) != 1 || infos.Results[0].Result == nil {
		msg := "no provisioning info"
		if len(infos.Results) == 1 && infos.Results[0].Error != nil {
			msg = infos.Results[0].Error.Message
		}
		return setStatus(ctx, c, "SetInstanceStatus", tag, "provisioning error", msg, map[string]any{"transient": false})
	}
	info := infos.Results[0].Result
	password := randomPassword()
	if err := one(ctx, c, "SetPasswords", params.EntityPasswords{Changes: []params.EntityPassword{{Tag: tag, Password: password}}}); err != nil {
		return fmt.Errorf("setting password: %w", err)
	}
	inst, err := m.a.cloud.StartInstance(InstanceParams{
		Model: m.model, MachineID: id, Constraints: info.Constraints, Placement: info.Placement,
		Base: info.Base, NetworkConfig: nets.Results[0].Config,
	})
	if err != nil {
		return setStatus(ctx, c, "SetInstanceStatus", tag, "provisioning error", err.Error(), map[string]any{"transient": true})
	}
	nonce := newNonce(m.tag)
	if err := one(ctx, c, "SetInstanceInfo", params.InstancesInfo{Machines: []params.InstanceInfo{{
		Tag: tag, InstanceId: inst.ID, DisplayName: inst.ID, Nonce: nonce,
		Characteristics: &inst.Hardware, NetworkConfig: inst.NetworkConfig,
	}}}); err != nil {
		_ = m.a.cloud.StopInstance(m.model, inst.ID)
		return fmt.Errorf("recording instance %s: %w", inst.ID, err)
	}
	if err := setStatus(ctx, c, "SetInstanceStatus", tag, "running", "", nil); err != nil {
		return err
	}
	m.log.Info("container started", "container", id, "instance", inst.ID)
	m.a.startMachineAgent(m.base, m.model, id, password, nonce, inst)
	return nil
}

// remove stops a dead container, releases its addresses and removes it.
func (cp *containerProvisioner) remove(ctx context.Context, id, instanceID string) error {
	m, c := cp.m, cp.c
	m.a.stopMachineAgent(m.model, id)
	if instanceID != "" {
		_ = m.a.cloud.StopInstance(m.model, instanceID)
	}
	tag := machineTag(id)
	if err := one(ctx, c, "ReleaseContainerAddresses", entities(tag)); err != nil && !isCode(err, params.CodeNotFound) {
		return fmt.Errorf("releasing addresses: %w", err)
	}
	if err := one(ctx, c, "Remove", entities(tag)); err != nil && !isCode(err, params.CodeNotFound) {
		return fmt.Errorf("removing: %w", err)
	}
	m.log.Info("container removed", "container", id)
	m.a.observe(Event{Kind: EventMachineRemoved, Model: m.model, ID: id})
	return nil
}

// bridged is a host's network config after bridging: each device the
// controller asked for becomes a port of its bridge, which takes over
// its addresses.
func bridged(cfg []params.NetworkConfig, bridges []params.DeviceBridgeInfo) []params.NetworkConfig {
	out := make([]params.NetworkConfig, 0, len(cfg)+len(bridges))
	for _, nic := range cfg {
		i := -1
		for j, b := range bridges {
			if b.HostDeviceName == nic.InterfaceName {
				i = j
			}
		}
		if i < 0 {
			out = append(out, nic)
			continue
		}
		br := nic
		br.InterfaceName, br.InterfaceType = bridges[i].BridgeName, "bridge"
		port := nic
		port.ParentInterfaceName, port.Addresses, port.ConfigType = br.InterfaceName, nil, "manual"
		out = append(out, br, port)
	}
	return out
}
