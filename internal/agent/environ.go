package agent

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// environProvisioner is the controller agent's provisioner of one IAAS
// model's top-level machines, as Juju's environ provisioner: it watches
// the model's machines, starts an instance for each new one and records
// it, and stops and removes the instances of dead machines.
type environProvisioner struct {
	a     *Agent
	model string
	log   *slog.Logger

	adm *client.Conn // the admin's connection, for the model's subnets; per run
	// missing are the provisioned machines whose instance this cloud
	// does not know (provisioned by someone else, or before this
	// process): logged once each.
	missing map[string]bool

	// The watch of the model's machines, kept across runs: from is the
	// revision up to which the events received cover every change, and
	// unprocessed the ids received that a run lost its connection
	// before acting on. The next run resumes after from and acts on
	// those first.
	from        uint64
	unprocessed []string
}

func (p *environProvisioner) run(ctx context.Context, connected func()) error {
	ca := p.a.cfg.Credentials.ControllerAgent
	c, err := p.a.d.login(ctx, p.model, ca.Tag, ca.Password, ca.Nonce)
	if err != nil {
		return err
	}
	defer c.Close()
	defer func() {
		if p.adm != nil {
			_ = p.adm.Close()
			p.adm = nil
		}
	}()
	connected()
	if p.missing == nil {
		p.missing = map[string]bool{}
	}
	const method = "WatchModelMachines"
	from := p.from
	wr, rev, resumed, err := watchFrom[params.StringsWatchResult](ctx, c, p.log, provisionerFacade, provisionerVersion, method, nil, from)
	if err == nil && wr.Error != nil {
		err = wr.Error
	}
	if err != nil {
		return fmt.Errorf("watching machines: %w", err)
	}
	w := client.NewStringsWatcher(c, wr.StringsWatcherId)
	ids := wr.Changes
	if resumed {
		p.log.Info("watch of machines resumed", "from", from, "to", rev, "changed", len(ids))
	} else {
		from = 0
		// The full list: a machine missing from it was removed while
		// the provisioner was away.
		p.a.stopMachineAgentsGone(p.model, "", ids)
	}
	p.a.observe(Event{Kind: EventWatched, Model: p.model, Watch: method, IDs: ids, Revision: rev, From: from, Initial: true})
	for {
		p.received(ids, rev)
		if err := p.process(ctx, c, p.unprocessed); err != nil {
			return err
		}
		p.unprocessed = nil
		if ids, rev, err = w.NextRevision(ctx); err != nil {
			return err
		}
		p.a.observe(Event{Kind: EventWatched, Model: p.model, Watch: method, IDs: ids, Revision: rev})
	}
}

// received notes an event of the machines' watch: its ids are to be
// acted on, and the watch resumes after rev (0: the daemon reports no
// revisions; the next run watches afresh).
func (p *environProvisioner) received(ids []string, rev uint64) {
	p.unprocessed = mergeIDs(p.unprocessed, ids)
	p.from = rev
}

// process handles a batch of changed machines, as Juju's provisioner
// task: unknown ones are gone; dying ones that were never provisioned
// are made dead at once; dead ones have their instance stopped and are
// removed; alive ones without an instance are started.
func (p *environProvisioner) process(ctx context.Context, c *client.Conn, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
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
		return fmt.Errorf("machine results do not match the request")
	}
	var pending []string
	for i, id := range ids {
		log := p.log.With("machine", id)
		if e := lifes.Results[i].Error; e != nil {
			if isCode(e, params.CodeNotFound) {
				p.a.stopMachineAgent(p.model, id)
				_ = p.a.cloud.StopInstance(p.model, InstanceID(id))
				delete(p.missing, id)
				continue
			}
			log.Warn("cannot read machine", "err", e)
			continue
		}
		instanceID, provisioned := insts.Results[i].Result, insts.Results[i].Error == nil
		if e := insts.Results[i].Error; e != nil && !isCode(e, params.CodeNotProvisioned) {
			log.Warn("cannot read instance id", "err", e)
			continue
		}
		running := provisioned && p.a.cloud.HasInstance(p.model, instanceID)
		switch lifes.Results[i].Life {
		case "alive":
			switch {
			case !provisioned:
				pending = append(pending, id)
			case !running && !p.missing[id]:
				p.missing[id] = true
				log.Info("machine's instance is not in this cloud; leaving it alone", "instance", instanceID)
			}
		case "dying":
			if ma := p.a.machineAgent(p.model, id); running && ma != nil {
				ma.markDying() // its agent makes it dead once it hosts nothing
				continue
			}
			// Never started (or its instance is unknown here): nothing
			// runs on it that could finish the job.
			log.Info("machine is dying and has no agent; making it dead")
			if err := one(ctx, c, "EnsureDead", entities(tags[i])); err != nil {
				if connLost(err) {
					return err
				}
				log.Warn("cannot make machine dead", "err", err)
				continue
			}
			if err := p.remove(ctx, c, id, instanceID); err != nil {
				return err
			}
		case "dead":
			if err := p.remove(ctx, c, id, instanceID); err != nil {
				return err
			}
		}
	}
	return p.provision(ctx, c, pending)
}

// remove stops a dead machine's instance and removes the machine (which
// releases its addresses).
func (p *environProvisioner) remove(ctx context.Context, c *client.Conn, id, instanceID string) error {
	p.a.stopMachineAgent(p.model, id)
	if instanceID != "" {
		if err := p.a.cloud.StopInstance(p.model, instanceID); err != nil {
			p.log.Warn("cannot stop instance", "machine", id, "instance", instanceID, "err", err)
		}
	}
	delete(p.missing, id)
	if err := one(ctx, c, "Remove", entities(machineTag(id))); err != nil {
		if connLost(err) {
			return err
		}
		if !isCode(err, params.CodeNotFound) {
			p.log.Warn("cannot remove machine", "machine", id, "err", err)
		}
		return nil
	}
	p.log.Info("machine removed", "machine", id)
	p.a.observe(Event{Kind: EventMachineRemoved, Model: p.model, ID: id})
	return nil
}

// provision starts an instance for each pending machine: provisioning
// info, a password, the instance, then SetInstanceInfo (with the nonce
// the machine's agent logs in with, its hardware, network config and
// volumes) and the instance status; then the machine's agent.
func (p *environProvisioner) provision(ctx context.Context, c *client.Conn, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	tags := make([]string, len(ids))
	for i, id := range ids {
		tags[i] = machineTag(id)
	}
	infos, err := prov[params.ProvisioningInfoResults](ctx, c, "ProvisioningInfo", entities(tags...))
	if err != nil {
		return err
	}
	if len(infos.Results) != len(ids) {
		return fmt.Errorf("provisioning info results do not match the request")
	}
	subnets, err := p.subnets(ctx)
	if err != nil {
		return err
	}
	for i, id := range ids {
		if err := p.start(ctx, c, id, infos.Results[i], subnets); err != nil {
			if connLost(err) || ctx.Err() != nil {
				return err
			}
			p.log.Warn("cannot start machine", "machine", id, "err", err)
		}
	}
	return nil
}

func (p *environProvisioner) start(ctx context.Context, c *client.Conn, id string, r params.ProvisioningInfoResult, subnets []params.SubnetInfo) error {
	tag := machineTag(id)
	if r.Error != nil || r.Result == nil {
		msg := "no provisioning info"
		if r.Error != nil {
			msg = r.Error.Message
		}
		return setStatus(ctx, c, "SetInstanceStatus", tag, "provisioning error", msg, map[string]any{"transient": false})
	}
	info := r.Result
	if err := setStatus(ctx, c, "SetInstanceStatus", tag, "provisioning", "starting", nil); err != nil {
		return err
	}
	password := randomPassword()
	if err := one(ctx, c, "SetPasswords", params.EntityPasswords{Changes: []params.EntityPassword{{Tag: tag, Password: password}}}); err != nil {
		return fmt.Errorf("setting password: %w", err)
	}
	inst, err := p.a.cloud.StartInstance(InstanceParams{
		Model: p.model, MachineID: id, Constraints: info.Constraints, Placement: info.Placement,
		Base: info.Base, Volumes: info.Volumes, Subnets: subnets,
	})
	if err != nil {
		return setStatus(ctx, c, "SetInstanceStatus", tag, "provisioning error", err.Error(), map[string]any{"transient": true})
	}
	nonce := newNonce(p.a.cfg.Credentials.ControllerAgent.Tag)
	err = one(ctx, c, "SetInstanceInfo", params.InstancesInfo{Machines: []params.InstanceInfo{{
		Tag: tag, InstanceId: inst.ID, DisplayName: inst.ID, Nonce: nonce,
		Characteristics: &inst.Hardware, NetworkConfig: inst.NetworkConfig,
		Volumes: inst.Volumes, VolumeAttachments: inst.VolumeAttachments,
	}}})
	if err != nil {
		_ = p.a.cloud.StopInstance(p.model, inst.ID)
		return fmt.Errorf("recording instance %s: %w", inst.ID, err)
	}
	if err := setStatus(ctx, c, "SetInstanceStatus", tag, "running", "", nil); err != nil {
		return err
	}
	p.log.Info("machine started", "machine", id, "instance", inst.ID)
	p.a.startMachineAgent(p.log, p.model, id, password, nonce, inst)
	return nil
}

// subnets reads the model's subnets, the network the simulated cloud
// lays its hosts' interfaces on, through the admin's ModelAdmin.Subnets.
func (p *environProvisioner) subnets(ctx context.Context) ([]params.SubnetInfo, error) {
	if p.adm == nil {
		creds := p.a.cfg.Credentials
		user := creds.AdminUser
		if user == "" {
			user = "admin"
		}
		c, err := p.a.d.loginUser(ctx, p.model, user, creds.AdminPassword)
		if err != nil {
			return nil, err
		}
		p.adm = c
	}
	res, err := admin[params.SubnetsResult](ctx, p.adm, "Subnets", params.ModelArgs{})
	if err != nil {
		if connLost(err) {
			_ = p.adm.Close()
			p.adm = nil
		}
		return nil, fmt.Errorf("reading subnets: %w", err)
	}
	return res.Subnets, nil
}
