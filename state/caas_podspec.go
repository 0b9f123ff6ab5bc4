package state

import (
	"context"
	"fmt"

	"github.com/juju/errors"
)

// PodSpec is an application's Kubernetes spec record.
type PodSpec struct {
	Spec           string `json:"spec,omitempty"`
	RawSpec        string `json:"raw-spec,omitempty"`
	UpgradeCounter int    `json:"upgrade-counter,omitempty"`
}

type podSpecDoc struct {
	PodSpec
}

// SetPodSpec sets an application's pod spec (YAML); SetRawK8sSpec its raw
// Kubernetes spec. Each bumps the spec's upgrade counter.
func (st *State) SetPodSpec(ctx context.Context, model, app, spec string) error {
	return st.setK8sSpec(ctx, model, app, func(p *PodSpec) { p.Spec = spec })
}

// SetRawK8sSpec sets an application's raw Kubernetes spec.
func (st *State) SetRawK8sSpec(ctx context.Context, model, app, spec string) error {
	return st.setK8sSpec(ctx, model, app, func(p *PodSpec) { p.RawSpec = spec })
}

func (st *State) setK8sSpec(ctx context.Context, model, app string, set func(*PodSpec)) error {
	return st.update(ctx, func(tx *txn) error {
		a, err := getApplication(tx, model, app)
		if err != nil {
			return err
		}
		if a.Life != Alive {
			return errors.NotValidf("setting the spec of %s application %q", a.Life, app)
		}
		var d podSpecDoc
		if _, err := get(tx, KindPodSpec, model, app, &d); err != nil {
			return err
		}
		set(&d.PodSpec)
		d.UpgradeCounter++
		return tx.put(KindPodSpec, model, app, &d, FieldPodSpec)
	})
}

// K8sSpec returns an application's spec record: NotFound
// `k8s spec for application <name> not found` when none was set.
func (st *State) K8sSpec(ctx context.Context, model, app string) (PodSpec, error) {
	var d podSpecDoc
	err := st.view(ctx, func(r reader) error {
		ok, err := get(r, KindPodSpec, model, app, &d)
		if err == nil && !ok {
			err = errors.NewNotFound(nil, fmt.Sprintf("k8s spec for application %s not found", app))
		}
		return err
	})
	return d.PodSpec, err
}
