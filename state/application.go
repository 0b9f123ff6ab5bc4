package state

import (
	"context"
	"fmt"
	"regexp"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/watcher"
)

// LXDProfile is a charm's LXD profile.
type LXDProfile struct {
	Config      map[string]string            `json:"config,omitempty"`
	Description string                       `json:"description,omitempty"`
	Devices     map[string]map[string]string `json:"devices,omitempty"`
}

// Application is a deployed application. Only what the Provisioner needs
// is here so far; the CAAS work extends the record (new fields with
// omitempty keep old records decoding).
type Application struct {
	Model         string `json:"model"`
	Name          string `json:"name"`
	Life          Life   `json:"life"`
	CharmURL      string `json:"charm-url,omitempty"`
	CharmRevision int    `json:"charm-revision,omitempty"`
	Subordinate   bool   `json:"subordinate,omitempty"`
	// EndpointBindings maps endpoint names ("" for the default) to
	// space names.
	EndpointBindings map[string]string `json:"endpoint-bindings,omitempty"`
	LXDProfile       *LXDProfile       `json:"lxd-profile,omitempty"`

	// CAAS (Kubernetes) applications (caas.go).
	CAASApplication
}

type applicationDoc struct {
	Application
}

// ApplicationParams describes an application for AddApplication.
type ApplicationParams struct {
	Name             string
	CharmURL         string
	CharmRevision    int
	Subordinate      bool
	EndpointBindings map[string]string
	LXDProfile       *LXDProfile
}

var validApplicationName = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]*[a-z][a-z0-9]*)*$`)

// applicationNameRule says validApplicationName in words, for errors.
const applicationNameRule = "lowercase letters, digits and hyphens, starting with a letter, each part after a hyphen holding a letter"

// AddApplication adds an alive application to an alive model.
func (st *State) AddApplication(ctx context.Context, model string, p ApplicationParams) (Application, error) {
	if !validApplicationName.MatchString(p.Name) {
		return Application{}, errors.NewNotValid(nil, fmt.Sprintf("application name %q not valid: %s", p.Name, applicationNameRule))
	}
	a := Application{Model: model, Name: p.Name, Life: Alive, CharmURL: p.CharmURL,
		CharmRevision: p.CharmRevision, Subordinate: p.Subordinate,
		EndpointBindings: p.EndpointBindings, LXDProfile: p.LXDProfile}
	err := st.update(ctx, func(tx *txn) error {
		m, err := getModelHead(tx, model)
		if err != nil {
			return err
		}
		if m.Life != Alive {
			return errors.NotValidf("adding an application to %s model %q", m.Life, m.Name)
		}
		if ok, err := exists(tx, KindApplication, model, p.Name); err != nil {
			return err
		} else if ok {
			return errors.AlreadyExistsf("application %q", p.Name)
		}
		for _, space := range p.EndpointBindings {
			if _, err := getSpace(tx, model, space); err != nil {
				return err
			}
		}
		return tx.put(KindApplication, model, p.Name, &applicationDoc{Application: a}, watcher.FieldCreated)
	})
	return a, err
}

// Application returns an application.
func (st *State) Application(ctx context.Context, model, name string) (Application, error) {
	var d applicationDoc
	err := st.view(ctx, func(r reader) error {
		var err error
		d, err = getApplication(r, model, name)
		return err
	})
	return d.Application, err
}

func getApplication(r reader, model, name string) (applicationDoc, error) {
	var d applicationDoc
	ok, err := get(r, KindApplication, model, name, &d)
	if err != nil {
		return d, err
	}
	if !ok {
		return d, errors.NotFoundf("application %q", name)
	}
	return d, nil
}
