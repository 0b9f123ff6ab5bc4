package state

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/juju/errors"
	"github.com/juju/names/v5"

	"provisiond/watcher"
)

// Machine jobs, as Juju names them on the wire.
const (
	JobHostUnits   = "JobHostUnits"
	JobManageModel = "JobManageModel"
)

// Machine is a machine of a model.
type Machine struct {
	Model string // the model UUID
	ID    string
	Life  Life
	Jobs  []string
	// Nonce is the nonce recorded when the machine was provisioned; its
	// agent must present it to log in. Empty until provisioned.
	Nonce string
	// InstanceID is the provider's id of the machine; empty until
	// provisioned.
	InstanceID string
}

// machineDoc is a machine's record. Fields are added with omitempty as the
// provisioner grows, so old records keep decoding.
type machineDoc struct {
	docMeta
	Model        string   `json:"model"`
	ID           string   `json:"id"`
	Life         Life     `json:"life"`
	Jobs         []string `json:"jobs"`
	Nonce        string   `json:"nonce,omitempty"`
	InstanceID   string   `json:"instance-id,omitempty"`
	PasswordHash string   `json:"password-hash,omitempty"`
}

func (d *machineDoc) machine() Machine {
	return Machine{
		Model:      d.Model,
		ID:         d.ID,
		Life:       d.Life,
		Jobs:       d.Jobs,
		Nonce:      d.Nonce,
		InstanceID: d.InstanceID,
	}
}

// IsController reports whether m runs the controller (has JobManageModel).
func IsController(m Machine) bool { return slices.Contains(m.Jobs, JobManageModel) }

// MachineParams describes a machine for AddMachine.
type MachineParams struct {
	// Jobs defaults to [JobHostUnits].
	Jobs []string
	// Password, if set, is the agent's password (see SetMachinePassword).
	Password string
	// Nonce and InstanceID, if set, mark the machine provisioned.
	Nonce      string
	InstanceID string
}

func validateJobs(jobs []string) error {
	if len(jobs) == 0 {
		return errors.NotValidf("empty jobs")
	}
	for _, j := range jobs {
		if j != JobHostUnits && j != JobManageModel {
			return errors.NotValidf("machine job %q", j)
		}
	}
	return nil
}

func validateAgentPassword(password string) error {
	if len(password) < MinAgentPasswordLength {
		return errors.NewNotValid(nil, fmt.Sprintf(
			"password is only %d bytes long, and is not a valid Agent password", len(password)))
	}
	return nil
}

// AddMachine adds an alive top-level machine to an alive model, with the
// next free id of that model ("0", "1", ...).
func (st *State) AddMachine(model string, p MachineParams) (Machine, error) {
	jobs := slices.Clone(p.Jobs)
	if len(jobs) == 0 {
		jobs = []string{JobHostUnits}
	}
	if err := validateJobs(jobs); err != nil {
		return Machine{}, err
	}
	var hash string
	if p.Password != "" {
		if err := validateAgentPassword(p.Password); err != nil {
			return Machine{}, err
		}
		hash = agentPasswordHash(p.Password)
	}
	var d machineDoc
	err := st.update(func(tx *txn) error {
		m, err := getModel(tx, model)
		if err != nil {
			return err
		}
		if m.Life != Alive {
			return errors.NotValidf("adding a machine to %s model %q", m.Life, m.Name)
		}
		seq, err := tx.nextSequence(model, string(KindMachine))
		if err != nil {
			return err
		}
		d = machineDoc{
			Model:        model,
			ID:           strconv.Itoa(seq),
			Life:         Alive,
			Jobs:         jobs,
			Nonce:        p.Nonce,
			InstanceID:   p.InstanceID,
			PasswordHash: hash,
		}
		return tx.addMachine(&d)
	})
	if err != nil {
		return Machine{}, err
	}
	return d.machine(), nil
}

func (tx *txn) addMachine(d *machineDoc) error {
	if _, ok := tx.Get(string(KindMachine), entityKey(KindMachine, d.Model, d.ID)); ok {
		return errors.AlreadyExistsf("machine %s", d.ID)
	}
	return tx.put(KindMachine, d.Model, d.ID, d, watcher.FieldCreated)
}

// Machine returns machine id of the model.
func (st *State) Machine(model, id string) (Machine, error) {
	var d machineDoc
	err := st.view(func(r reader) error {
		var err error
		d, err = getMachine(r, model, id)
		return err
	})
	if err != nil {
		return Machine{}, err
	}
	return d.machine(), nil
}

// Machines returns the machines of a model, in id order ("0", "0/lxd/0",
// "1", "2", "10").
func (st *State) Machines(model string) ([]Machine, error) {
	var docs []machineDoc
	err := st.view(func(r reader) error {
		if _, err := getModel(r, model); err != nil {
			return err
		}
		var err error
		docs, err = list[machineDoc](r, KindMachine, model)
		return err
	})
	if err != nil {
		return nil, err
	}
	ms := make([]Machine, len(docs))
	for i := range docs {
		ms[i] = docs[i].machine()
	}
	slices.SortFunc(ms, func(a, b Machine) int { return compareMachineIDs(a.ID, b.ID) })
	return ms, nil
}

// AuthenticateMachine checks a machine agent's login. An unknown machine
// or a wrong password gives ErrBadCredentials; the right password with a
// nonce other than the provisioned one gives a *NotProvisionedError.
func (st *State) AuthenticateMachine(model, id, password, nonce string) (Machine, error) {
	got := agentPasswordHash(password)
	var d machineDoc
	err := st.view(func(r reader) error {
		var err error
		d, err = getMachine(r, model, id)
		return err
	})
	if errors.Is(err, errors.NotFound) || errors.Is(err, errors.NotValid) {
		return Machine{}, ErrBadCredentials
	}
	if err != nil {
		return Machine{}, err
	}
	if d.PasswordHash == "" || !hashEqual(got, d.PasswordHash) {
		return Machine{}, ErrBadCredentials
	}
	if nonce == "" || nonce != d.Nonce {
		return Machine{}, &NotProvisionedError{Machine: id}
	}
	return d.machine(), nil
}

// SetMachinePassword sets the agent password of a machine.
func (st *State) SetMachinePassword(model, id, password string) error {
	if err := validateAgentPassword(password); err != nil {
		return err
	}
	hash := agentPasswordHash(password)
	return st.update(func(tx *txn) error {
		d, err := getMachine(tx, model, id)
		if err != nil {
			return err
		}
		if d.PasswordHash == hash {
			return errNoChange
		}
		d.PasswordHash = hash
		return tx.put(KindMachine, model, id, &d, FieldPassword)
	})
}

func getMachine(r reader, model, id string) (machineDoc, error) {
	if !names.IsValidMachine(id) {
		return machineDoc{}, errors.NotValidf("machine id %q", id)
	}
	var d machineDoc
	ok, err := get(r, KindMachine, model, id, &d)
	if err != nil {
		return machineDoc{}, err
	}
	if !ok {
		return machineDoc{}, errors.NotFoundf("machine %s", id)
	}
	return d, nil
}

// compareMachineIDs orders machine ids part by part, numbers numerically:
// "2" < "10", "0" < "0/lxd/0" < "1".
func compareMachineIDs(a, b string) int {
	pa, pb := strings.Split(a, "/"), strings.Split(b, "/")
	for i := range min(len(pa), len(pb)) {
		na, errA := strconv.Atoi(pa[i])
		nb, errB := strconv.Atoi(pb[i])
		var c int
		if errA == nil && errB == nil {
			c = na - nb
		} else {
			c = strings.Compare(pa[i], pb[i])
		}
		if c != 0 {
			return c
		}
	}
	return len(pa) - len(pb)
}
