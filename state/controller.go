package state

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/juju/errors"
)

// IDs of the controller-wide records (Kind KindController, Model "").
const (
	ControllerID   = "controller"   // the controller record and its config
	APIHostPortsID = "apihostports" // the API addresses agents connect to
)

// Controller is the controller record made by Initialize.
type Controller struct {
	UUID      string
	ModelUUID string // the controller model's UUID
	Config    map[string]any
}

type controllerDoc struct {
	UUID      string         `json:"uuid"`
	ModelUUID string         `json:"model-uuid"`
	Config    map[string]any `json:"config,omitempty"`
}

func (d *controllerDoc) controller() Controller {
	cfg := d.Config
	if cfg == nil {
		cfg = map[string]any{}
	}
	return Controller{UUID: d.UUID, ModelUUID: d.ModelUUID, Config: cfg}
}

// HostPort is one address of an API server.
type HostPort struct {
	Value string `json:"value"`
	Type  string `json:"type,omitempty"`  // "ipv4", "ipv6", "hostname"
	Scope string `json:"scope,omitempty"` // "public", "local-cloud", ...
	Port  int    `json:"port"`
}

type apiHostPortsDoc struct {
	Servers [][]HostPort `json:"servers"`
}

// Controller returns the controller record; NotFound before Initialize.
func (st *State) Controller(ctx context.Context) (Controller, error) {
	var d controllerDoc
	err := st.view(ctx, func(r reader) error {
		var err error
		d, err = getController(r)
		return err
	})
	if err != nil {
		return Controller{}, err
	}
	return d.controller(), nil
}

// ControllerIdentity is the controller's UUID and its controller model's.
type ControllerIdentity struct {
	UUID      string `json:"uuid"`
	ModelUUID string `json:"model-uuid"` // the controller model's UUID
}

// ControllerIdentity reads the controller's UUID and its controller
// model's, decoding nothing of its config: every login reads them, and
// every connection to /api its model's (decoding the whole record, its
// config, was half of an agent's login).
func (st *State) ControllerIdentity(ctx context.Context) (ControllerIdentity, error) {
	var id ControllerIdentity
	err := st.view(ctx, func(r reader) error {
		ok, err := get(r, KindController, "", ControllerID, &id)
		if err == nil && !ok {
			err = errors.NotFoundf("controller")
		}
		return err
	})
	return id, err
}

// decodeControllerIdentity reads the controller record's identity into d,
// which is zero (decodeHead).
func decodeControllerIdentity(b []byte, d *ControllerIdentity) bool {
	return decodeHead(b, []headField{{name: "uuid", str: &d.UUID}, {name: "model-uuid", str: &d.ModelUUID}})
}

// UpdateControllerConfig sets and removes keys of the controller config. A
// call that changes nothing writes nothing.
func (st *State) UpdateControllerConfig(ctx context.Context, set map[string]any, unset []string) error {
	set, err := normalizeConfig(set)
	if err != nil {
		return err
	}
	if err := checkControllerConfig(set); err != nil {
		return err
	}
	c, err := st.Controller(ctx)
	if err != nil {
		return err
	}
	if _, changed := applyConfig(c.Config, set, unset); !changed {
		return nil
	}
	return st.update(ctx, func(tx *txn) error {
		d, err := getController(tx)
		if err != nil {
			return err
		}
		next, changed := applyConfig(d.Config, set, unset)
		if !changed {
			return errNoChange
		}
		if err := checkConfigTotal(next); err != nil {
			return err
		}
		d.Config = next
		return tx.put(KindController, "", ControllerID, &d, FieldConfig)
	})
}

// SetAPIHostPorts replaces the API server addresses. Setting the addresses
// already stored writes nothing.
func (st *State) SetAPIHostPorts(ctx context.Context, servers [][]HostPort) error {
	for _, hps := range servers {
		for _, hp := range hps {
			if hp.Value == "" || hp.Port <= 0 || hp.Port > 65535 {
				return errors.NotValidf("API address %q port %d", hp.Value, hp.Port)
			}
		}
	}
	servers = slices.Clone(servers)
	for i := range servers {
		servers[i] = slices.Clone(servers[i])
	}
	return st.update(ctx, func(tx *txn) error {
		if _, err := getController(tx); err != nil {
			return err
		}
		var old apiHostPortsDoc
		if _, err := get(tx, KindController, "", APIHostPortsID, &old); err != nil {
			return err
		}
		if hostPortsEqual(old.Servers, servers) {
			return errNoChange
		}
		return tx.put(KindController, "", APIHostPortsID, &apiHostPortsDoc{Servers: servers}, FieldAPIHostPorts)
	})
}

func hostPortsEqual(a, b [][]HostPort) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return len(a) == len(b) && string(ja) == string(jb)
}

func getController(r reader) (controllerDoc, error) {
	var d controllerDoc
	ok, err := get(r, KindController, "", ControllerID, &d)
	if err != nil {
		return controllerDoc{}, err
	}
	if !ok {
		return controllerDoc{}, errors.NotFoundf("controller")
	}
	return d, nil
}

// ControllerMachines returns the controller machines: the machines of the
// controller model with JobManageModel, in id order.
func (st *State) ControllerMachines(ctx context.Context) ([]Machine, error) {
	var out []Machine
	err := st.view(ctx, func(r reader) error {
		ctrl, err := getController(r)
		if err != nil {
			return err
		}
		ms, err := machines(r, ctrl.ModelUUID)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if IsController(m) {
				out = append(out, m)
			}
		}
		return nil
	})
	return out, err
}
