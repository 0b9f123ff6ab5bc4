package provisioner

import (
	"context"
	"time"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/watcher"
)

// ErrorRetryWaitDelay is how long WatchMachineErrorRetry waits after each
// delivered event before the next one.
const ErrorRetryWaitDelay = time.Minute

// StartTimesQuiesce is the batching window of WatchModelMachineStartTimes.
const StartTimesQuiesce = 500 * time.Millisecond

// WatchModelMachines watches the lifecycle of the model's top-level
// machines (controller agent only).
func (p *Provisioner) WatchModelMachines(ctx context.Context) (params.StringsWatchResult, error) {
	if !p.isManager() {
		return params.StringsWatchResult{}, facade.ErrPerm
	}
	w, initial, err := p.st.WatchModelMachines(ctx, p.model)
	if err != nil {
		what := "model machines"
		if p.v1 {
			what = "environment machines"
		}
		return params.StringsWatchResult{}, errors.Annotatef(err, "cannot obtain initial %s", what)
	}
	return p.ctx.StringsResult(w, initial)
}

// WatchModelMachineStartTimes watches the top-level machines' life and
// agent start times, batched (controller agent only).
func (p *Provisioner) WatchModelMachineStartTimes(ctx context.Context) (params.StringsWatchResult, error) {
	if !p.isManager() {
		return params.StringsWatchResult{}, facade.ErrPerm
	}
	w, initial, err := p.st.WatchModelMachineStartTimes(ctx, p.model, p.ctx.Deps.WatcherClock(), StartTimesQuiesce)
	if err != nil {
		return params.StringsWatchResult{}, errors.Annotate(err, "cannot obtain initial model machines")
	}
	return p.ctx.StringsResult(w, initial)
}

// WatchContainers watches, for each machine, its direct containers of one
// type (any type when the type is empty).
func (p *Provisioner) WatchContainers(ctx context.Context, args params.WatchContainers) (params.StringsWatchResults, error) {
	return params.StringsWatchResults{Results: facade.Bulk(ctx, args.Params, func(a params.WatchContainer) (params.StringsWatchResult, error) {
		// The watch reports a missing machine as reading it would ("machine
		// N not found"), without decoding its record: each of an agent's
		// watch calls of a reconnection came here.
		id, err := p.machineID(a.MachineTag, machineTags)
		if err != nil {
			return params.StringsWatchResult{}, err
		}
		w, initial, err := p.st.WatchContainers(ctx, p.model, id, a.ContainerType)
		if err != nil {
			return params.StringsWatchResult{}, err
		}
		return p.ctx.StringsResult(w, initial)
	})}, nil
}

// WatchAllContainers is WatchContainers.
func (p *Provisioner) WatchAllContainers(ctx context.Context, args params.WatchContainers) (params.StringsWatchResults, error) {
	return p.WatchContainers(ctx, args)
}

// WatchForModelConfigChanges fires when the model's config changes.
func (p *Provisioner) WatchForModelConfigChanges(ctx context.Context) (params.NotifyWatchResult, error) {
	w, err := p.st.WatchModelConfig(ctx, p.model)
	if err != nil {
		return params.NotifyWatchResult{}, err
	}
	return p.ctx.NotifyResult(w)
}

// WatchAPIHostPorts fires when the API addresses change.
func (p *Provisioner) WatchAPIHostPorts(ctx context.Context) (params.NotifyWatchResult, error) {
	w, err := p.st.WatchAPIHostPorts(ctx)
	if err != nil {
		return params.NotifyWatchResult{}, err
	}
	return p.ctx.NotifyResult(w)
}

// WatchMachineErrorRetry fires ErrorRetryWaitDelay after the previous
// event was delivered (the Watch call consumes the first one): a timer,
// not a state watch (controller agent only).
func (p *Provisioner) WatchMachineErrorRetry(ctx context.Context) (params.NotifyWatchResult, error) {
	if !p.isManager() {
		return params.NotifyWatchResult{}, facade.ErrPerm
	}
	w := watcher.NewTimerNotify(p.ctx.Deps.WatcherClock(), ErrorRetryWaitDelay)
	return p.ctx.NotifyResult(w)
}
