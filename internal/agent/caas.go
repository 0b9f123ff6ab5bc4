package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// unitProvisioner is the controller agent's CAAS unit provisioner of one
// Kubernetes model, as Juju's (worker/caasunitprovisioner): it follows the
// model's applications and runs one application worker for each that is
// not dead; a dead application has its service and pods deleted and, once
// they are gone, its cluster resources cleared (ClearApplicationsResources,
// which removes it); a removed one has its service deleted.
type unitProvisioner struct {
	a     *Agent
	model string
	log   *slog.Logger

	apps map[string]*appWorker // the run's workers; only its goroutine uses it

	// The watch of the applications, kept across runs (only the run's
	// goroutine uses them): from is the revision up to which the events
	// received cover every change; pending the applications to act on
	// at the next run's start: those received and not acted on, and
	// those whose workers the last run had (they ran on its connection
	// and start again on the next).
	from    uint64
	pending []string
	cursors map[string]*appCursor // the application workers' watches
}

func (p *unitProvisioner) run(ctx context.Context, connected func()) error {
	ca := p.a.cfg.Credentials.ControllerAgent
	c, err := p.a.d.login(ctx, p.model, ca.Tag, ca.Password, ca.Nonce)
	if err != nil {
		return err
	}
	defer c.Close()
	connected()
	const method = "WatchApplications"
	from := p.from
	wr, rev, resumed, err := watchFrom[params.StringsWatchResult](ctx, c, p.log, caasFacade, caasVersion, method, nil, from)
	if err == nil && wr.Error != nil {
		err = wr.Error
	}
	if err != nil {
		return fmt.Errorf("watching applications: %w", err)
	}
	if resumed {
		p.log.Info("watch of applications resumed", "from", from, "to", rev, "changed", len(wr.Changes))
	} else {
		from = 0
	}
	p.a.observe(Event{Kind: EventWatched, Model: p.model, Watch: method, IDs: wr.Changes, Revision: rev, From: from, Initial: true})
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	events := make(chan watchEvent)
	fatal := make(chan error, 1)
	nextLoop(wctx, &wg, 0, client.NewStringsWatcher(c, wr.StringsWatcherId), events)
	p.apps = map[string]*appWorker{}
	defer func() {
		// The next run starts these workers again (resumed, its
		// initial event lists only what changed meanwhile).
		p.pending = mergeIDs(p.pending, slices.Sorted(maps.Keys(p.apps)))
	}()
	// The application workers are this run's: they share its connection
	// and stop with it (wg is waited for after cancel).
	start := func(app string) {
		if p.cursors == nil {
			p.cursors = map[string]*appCursor{}
		}
		cur := p.cursors[app]
		if cur == nil {
			cur = &appCursor{}
			p.cursors[app] = cur
		}
		aw := &appWorker{p: p, c: c, app: app, log: p.log.With("application", app), cursor: cur}
		actx, acancel := context.WithCancel(wctx)
		aw.cancel, aw.done = acancel, make(chan struct{})
		p.apps[app] = aw
		wg.Go(func() {
			defer close(aw.done)
			if err := aw.run(actx); err != nil && actx.Err() == nil {
				select {
				case fatal <- err:
				default:
				}
			}
		})
	}
	process := func(names []string) error {
		if len(names) == 0 {
			return nil
		}
		tags := make([]string, len(names))
		for i, n := range names {
			tags[i] = "application-" + n
		}
		lifes, err := caas[params.LifeResults](ctx, c, "Life", entities(tags...))
		if err != nil {
			return err
		}
		if len(lifes.Results) != len(names) {
			return errors.New("life results do not match the request")
		}
		for i, app := range names {
			r := lifes.Results[i]
			if r.Error != nil && !isCode(r.Error, params.CodeNotFound) {
				p.log.Warn("cannot read application", "application", app, "err", r.Error)
				continue
			}
			if r.Error == nil && r.Life != "dead" {
				// Alive, or dying: Juju's worker acts only on a dead
				// or removed application.
				if _, ok := p.apps[app]; !ok {
					start(app)
				}
				continue
			}
			// Dead or removed: its service and pods go.
			if aw := p.apps[app]; aw != nil {
				aw.cancel()
				<-aw.done
				delete(p.apps, app)
			}
			delete(p.cursors, app)
			if err := p.a.cloud.DeleteService(p.model, app); err != nil {
				p.log.Warn("cannot delete service", "application", app, "err", err)
			}
			if r.Error != nil {
				continue // removed
			}
			p.log.Info("application is "+r.Life+"; its pods are deleted", "application", app)
			if err := itemError(caas[params.ErrorResults](ctx, c, "ClearApplicationsResources", entities(tags[i]))); err != nil {
				if connLost(err) {
					return err
				}
				p.log.Warn("cannot clear cluster resources", "application", app, "err", err)
				continue
			}
			p.a.observe(Event{Kind: EventApplicationRemoved, Model: p.model, ID: app})
		}
		return nil
	}
	// received notes an event: its ids are to be acted on, and the
	// watch resumes after rev (0: the daemon reports none; the next run
	// watches afresh); act acts on what is pending.
	received := func(ids []string, rev uint64) {
		p.pending = mergeIDs(p.pending, ids)
		p.from = rev
	}
	act := func() error {
		if err := process(p.pending); err != nil {
			return err
		}
		p.pending = nil
		return nil
	}
	received(wr.Changes, rev)
	if err := act(); err != nil {
		return err
	}
	for {
		select {
		case ev := <-events:
			if ev.err != nil {
				return ev.err
			}
			p.a.observe(Event{Kind: EventWatched, Model: p.model, Watch: method, IDs: ev.ids, Revision: ev.rev})
			received(ev.ids, ev.rev)
			if err := act(); err != nil {
				return err
			}
		case err := <-fatal:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// appCursor is where an application's three watches (scale, pod spec,
// trust hash) stand, kept by the unit provisioner across its runs: the
// revision up to which each one's events received cover every change,
// and whether one was received and not yet acted on. Its run's watcher
// goroutines and its worker use it.
type appCursor struct {
	mu    sync.Mutex
	revs  [3]uint64
	dirty bool
}

// from is the revision watch i resumes after (0: afresh).
func (c *appCursor) from(i int) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.revs[i]
}

// received notes that watch i covers rev (0: it reports no revisions;
// the next run watches it afresh), and, for an event, that the pods are
// to be reconciled.
func (c *appCursor) received(i int, rev uint64, event bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.revs[i] = rev
	c.dirty = c.dirty || event
}

// takeDirty reports whether an event is not yet acted on, and clears it.
func (c *appCursor) takeDirty() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dirty
	c.dirty = false
	return d
}

// setDirty notes that the last event was not acted on after all.
func (c *appCursor) setDirty() {
	c.mu.Lock()
	c.dirty = true
	c.mu.Unlock()
}

// appWorker runs one application's pods: it watches the desired scale,
// the pod spec and the trust setting, and after each change makes the
// cluster run the spec at that scale and reports the pods (with their
// storage) and the service back.
type appWorker struct {
	p      *unitProvisioner
	c      *client.Conn
	app    string
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}

	cursor   *appCursor // its watches', kept across the provisioner's runs
	service  string     // the provider id of the service last reported
	waiting  bool       // logged that there is no pod spec yet
	operator bool       // logged that it is an operator charm
}

func (w *appWorker) tag() string { return "application-" + w.app }

func (w *appWorker) run(ctx context.Context) error {
	c, tag := w.c, w.tag()
	if _, err := caas[params.Charm](ctx, c, "ApplicationCharmInfo", params.Entity{Tag: tag}); err != nil {
		return w.fail(err, "reading charm")
	}
	// The three watches, each resumed after the revision its events
	// covered in the last run (appCursor), as one watcher per call.
	cur := w.cursor
	var (
		ids     []string // the notify watchers' and the strings watcher's
		revs    [3]uint64
		resumed = true
	)
	for i, method := range []string{"WatchApplicationsScale", "WatchPodSpec"} {
		res, rev, ok, err := watchFrom[params.NotifyWatchResults](ctx, c, w.log, caasFacade, caasVersion, method, entities(tag), cur.from(i))
		if err != nil {
			return err
		}
		if len(res.Results) != 1 {
			return w.fail(errors.New("no watcher"), "watching")
		}
		if r := res.Results[0]; r.Error != nil {
			return w.fail(r.Error, "watching")
		}
		ids, revs[i], resumed = append(ids, res.Results[0].NotifyWatcherId), rev, resumed && ok
	}
	trust, rev, ok, err := watchFrom[params.StringsWatchResults](ctx, c, w.log, caasFacade, caasVersion, "WatchApplicationsTrustHash", entities(tag), cur.from(2))
	if err != nil {
		return err
	}
	if len(trust.Results) != 1 || trust.Results[0].Error != nil {
		return w.fail(errors.New("no watcher"), "watching trust")
	}
	ids, revs[2], resumed = append(ids, trust.Results[0].StringsWatcherId), rev, resumed && ok
	for i, rev := range revs {
		cur.received(i, rev, false)
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	changed := make(chan struct{}, 1)
	failed := make(chan error, 1)
	// signal notes watcher i's event (covering rev), or its end.
	signal := func(i int, rev uint64, err error) bool {
		if err != nil {
			select {
			case failed <- err:
			default:
			}
			return false
		}
		cur.received(i, rev, true)
		select {
		case changed <- struct{}{}:
		default:
		}
		return true
	}
	for i, id := range ids[:2] {
		nw := client.NewNotifyWatcher(c, id)
		wg.Go(func() {
			for {
				rev, err := nw.NextRevision(wctx)
				if !signal(i, rev, err) {
					return
				}
			}
		})
	}
	sw := client.NewStringsWatcher(c, ids[2])
	wg.Go(func() {
		for {
			_, rev, err := sw.NextRevision(wctx)
			if !signal(2, rev, err) {
				return
			}
		}
	})
	// Fresh watchers' initial events were the Watch calls: the pods are
	// reconciled at once. Resumed, a watcher whose thing changed since
	// has an event pending; an event the last run received and did not
	// act on is acted on now.
	if !resumed || cur.takeDirty() {
		changed <- struct{}{}
	}
	for {
		select {
		case <-changed:
			cur.takeDirty()
			if err := w.reconcile(ctx); err != nil {
				if connLost(err) || ctx.Err() != nil {
					cur.setDirty()
					return err
				}
				w.log.Warn("cannot run pods", "err", err)
			}
		case err := <-failed:
			if ctx.Err() != nil {
				return nil
			}
			return w.fail(err, "watching")
		case <-ctx.Done():
			return nil
		}
	}
}

// fail is the error that ends the worker: a lost connection ends the
// unit provisioner's run; anything else only this worker.
func (w *appWorker) fail(err error, what string) error {
	if connLost(err) {
		return err
	}
	if isCode(err, params.CodeNotFound, params.CodeStopped) {
		return nil // the application went: the provisioner sees it too
	}
	w.log.Warn(what, "err", err)
	return nil
}

func (w *appWorker) reconcile(ctx context.Context) error {
	c, tag, ents := w.c, w.tag(), entities(w.tag())
	scales, err := caas[params.IntResults](ctx, c, "ApplicationsScale", ents)
	if err != nil {
		return err
	}
	if len(scales.Results) != 1 || scales.Results[0].Error != nil {
		return fmt.Errorf("reading scale: %v", resultErr(len(scales.Results), firstError(scales.Results)))
	}
	modes, err := caas[params.StringResults](ctx, c, "DeploymentMode", ents)
	if err != nil {
		return err
	}
	if len(modes.Results) == 1 && modes.Results[0].Result == "operator" {
		if !w.operator {
			w.operator = true
			w.log.Info("operator charm: its operator runs its workload; no pods")
		}
		return nil
	}
	infos, err := caas[params.KubernetesProvisioningInfoResults](ctx, c, "ProvisioningInfo", ents)
	if err != nil {
		return err
	}
	if len(infos.Results) != 1 {
		return errors.New("no provisioning info result")
	}
	if e := infos.Results[0].Error; e != nil {
		if isCode(e, params.CodeNotFound) {
			if !w.waiting {
				w.waiting = true
				w.log.Info("no pod spec yet; waiting for one")
			}
			return nil
		}
		return e
	}
	w.waiting = false
	info := infos.Results[0].Result
	if _, err := caas[params.BoolResults](ctx, c, "ApplicationsTrust", ents); err != nil {
		return err
	}
	if _, err := caas[params.ApplicationGetConfigResults](ctx, c, "ApplicationsConfig", ents); err != nil {
		return err
	}
	stateful := len(info.Filesystems) > 0 ||
		(info.DeploymentInfo != nil && info.DeploymentInfo.DeploymentType == "stateful")
	spec := info.PodSpec
	if spec == "" {
		spec = info.RawK8sSpec
	}
	svc, pods, err := w.p.a.cloud.EnsureService(ServiceParams{
		Model: w.p.model, App: w.app, Scale: scales.Results[0].Result, Stateful: stateful,
		Filesystems: info.Filesystems, PodSpec: spec,
	})
	if err != nil {
		return err
	}
	if svc.ProviderID != w.service {
		err := itemError(caas[params.ErrorResults](ctx, c, "UpdateApplicationsService", params.UpdateApplicationServiceArgs{
			Args: []params.UpdateApplicationServiceArg{{ApplicationTag: tag, ProviderId: svc.ProviderID, Addresses: svc.Addresses}},
		}))
		if err != nil {
			return fmt.Errorf("reporting service: %w", err)
		}
		w.service = svc.ProviderID
	}
	units := make([]params.ApplicationUnitParams, len(pods))
	for i, pod := range pods {
		units[i] = params.ApplicationUnitParams{
			ProviderId: pod.ProviderID, Address: pod.Address, Ports: []string{}, Stateful: stateful,
			Status: "running", FilesystemInfo: pod.Filesystems,
		}
	}
	n, gen := len(pods), svc.Generation
	res, err := caas[params.UpdateApplicationUnitResults](ctx, c, "UpdateApplicationsUnits", params.UpdateApplicationUnitArgs{
		Args: []params.UpdateApplicationUnits{{ApplicationTag: tag, Scale: &n, Generation: &gen, Units: units}},
	})
	if err != nil {
		return err
	}
	if len(res.Results) != 1 {
		return errors.New("no update result")
	}
	if e := res.Results[0].Error; e != nil {
		if isCode(e, params.CodeForbidden) {
			w.log.Debug("scale report refused; the operator's scale applies next", "err", e)
			return nil
		}
		return fmt.Errorf("reporting units: %w", e)
	}
	var names []string
	if info := res.Results[0].Info; info != nil {
		for _, u := range info.Units {
			names = append(names, strings.TrimPrefix(u.UnitTag, "unit-"))
		}
	}
	w.log.Debug("pods reported", "scale", n, "units", names)
	w.p.a.observe(Event{Kind: EventUnitsReported, Model: w.p.model, ID: w.app, Units: n})
	return nil
}

func firstError(rs []params.IntResult) *params.Error {
	for _, r := range rs {
		if r.Error != nil {
			return r.Error
		}
	}
	return nil
}

func resultErr(n int, e *params.Error) error {
	if e != nil {
		return e
	}
	return fmt.Errorf("%d results for 1 item", n)
}
