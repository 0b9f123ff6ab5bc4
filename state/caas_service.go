package state

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/juju/errors"
)

// Address is an address of a cloud service.
type Address struct {
	Value     string `json:"value"`
	Type      string `json:"type,omitempty"`
	Scope     string `json:"scope,omitempty"`
	CIDR      string `json:"cidr,omitempty"`
	SpaceName string `json:"space-name,omitempty"`
}

// CloudService is the Kubernetes service of an application.
type CloudService struct {
	ProviderID            string    `json:"provider-id,omitempty"`
	Addresses             []Address `json:"addresses,omitempty"`
	Generation            int64     `json:"generation,omitempty"`
	DesiredScaleProtected bool      `json:"desired-scale-protected,omitempty"`
}

type cloudServiceDoc struct {
	CloudService
}

type statusDoc struct {
	Status
}

// OperatorStatusKey is the global key of an application's operator status.
func OperatorStatusKey(app string) string { return "a#" + app + "#operator" }

// CloudService returns an application's cloud service (zero if none).
func (st *State) CloudService(ctx context.Context, model, app string) (CloudService, error) {
	var d cloudServiceDoc
	err := st.view(ctx, func(r reader) error {
		if _, err := getApplication(r, model, app); err != nil {
			return err
		}
		_, err := get(r, KindCloudService, model, app, &d)
		return err
	})
	return d.CloudService, err
}

// UpdateCloudService records an application's Kubernetes service: the
// provider id when not empty, the addresses when not empty. A named space
// must exist (NotFound `space with name "x" not found`).
func (st *State) UpdateCloudService(ctx context.Context, model, app, providerID string, addrs []Address) error {
	return st.update(ctx, func(tx *txn) error { return tx.updateCloudService(model, app, providerID, addrs) })
}

func (tx *txn) updateCloudService(model, app, providerID string, addrs []Address) error {
	if _, err := getApplication(tx, model, app); err != nil {
		return err
	}
	for _, a := range addrs {
		if a.SpaceName == "" {
			continue
		}
		if _, err := getSpace(tx, model, a.SpaceName); err != nil {
			return errors.NotFoundf("space with name %q", a.SpaceName)
		}
	}
	var d cloudServiceDoc
	ok, err := get(tx, KindCloudService, model, app, &d)
	if err != nil {
		return err
	}
	before, _ := json.Marshal(d.CloudService)
	if providerID != "" {
		d.ProviderID = providerID
	}
	if len(addrs) > 0 {
		d.Addresses = slices.Clone(addrs)
	}
	after, _ := json.Marshal(d.CloudService)
	if ok && string(before) == string(after) {
		return errNoChange
	}
	return tx.put(KindCloudService, model, app, &d, FieldAddresses)
}

// ServiceUpdate is one item of UpdateApplicationsServices: an
// application's cloud service and, if Scale is set, its scale.
type ServiceUpdate struct {
	Application string
	ProviderID  string
	Addresses   []Address
	Scale       *int
	Generation  int64
}

// UpdateApplicationsServices applies each item as UpdateCloudService and
// then SetScale (without force) would, all items in one transaction (see
// bulk). As in Juju, a failed service update does not stop the item's
// scale update, and the later error is the one reported: an item's part
// that fails is left out, the other commits.
func (st *State) UpdateApplicationsServices(ctx context.Context, model string, items []ServiceUpdate) []error {
	reported := make([]error, len(items))
	errs := st.bulk(ctx, len(items), func(tx *txn, i int) error {
		it := items[i]
		err := tx.Nest(func() error { return tx.updateCloudService(model, it.Application, it.ProviderID, it.Addresses) })
		if errors.Is(err, errNoChange) {
			err = nil
		}
		if it.Scale != nil {
			serr := tx.Nest(func() error { return tx.scaleApplication(model, it.Application, *it.Scale, it.Generation, false) })
			if serr != nil && !errors.Is(serr, errNoChange) {
				err = serr
			}
		}
		reported[i] = err // set anew if the function runs again
		return nil
	})
	for i, err := range errs {
		if err != nil { // the commit itself failed
			reported[i] = err
		}
	}
	return reported
}

// OperatorStatus returns an application's operator status (zero if none).
func (st *State) OperatorStatus(ctx context.Context, model, app string) (Status, error) {
	var d statusDoc
	err := st.view(ctx, func(r reader) error {
		_, err := get(r, KindStatus, model, OperatorStatusKey(app), &d)
		return err
	})
	return d.Status, err
}

// SetOperatorStatus sets an application's operator status (Since is the
// state's clock when zero). The model must be a CAAS model.
func (st *State) SetOperatorStatus(ctx context.Context, model, app string, s Status) error {
	return st.update(ctx, func(tx *txn) error {
		a, err := getApplication(tx, model, app)
		if err != nil {
			return err
		}
		return tx.setOperatorStatus(a, s)
	})
}

// OperatorStatusArg is one item of SetOperatorStatuses.
type OperatorStatusArg struct {
	Application string
	Status      Status
}

// SetOperatorStatuses is SetOperatorStatus of each item, the valid items
// in one transaction (bulk); each keeps its error.
func (st *State) SetOperatorStatuses(ctx context.Context, model string, items []OperatorStatusArg) []error {
	return st.bulk(ctx, len(items), func(tx *txn, i int) error {
		a, err := getApplication(tx, model, items[i].Application)
		if err != nil {
			return err
		}
		return tx.setOperatorStatus(a, items[i].Status)
	})
}

func (tx *txn) setOperatorStatus(a applicationDoc, s Status) error {
	if err := checkStatusSize("the operator of application "+a.Name, s.Message, s.Data); err != nil {
		return err
	}
	m, err := getModelHead(tx, a.Model)
	if err != nil {
		return err
	}
	if m.Type != ModelTypeCAAS {
		return errors.NotSupportedf("caas operation on non-caas model")
	}
	if s.Since.IsZero() {
		s.Since = tx.now
	}
	return tx.put(KindStatus, a.Model, OperatorStatusKey(a.Name), &statusDoc{Status: s}, FieldStatus)
}
