package state

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/juju/errors"
	"github.com/juju/names/v5"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

// Machine jobs, as Juju names them on the wire.
const (
	JobHostUnits   = "JobHostUnits"
	JobManageModel = "JobManageModel"
)

// Container types a machine can host: lxc only for the agents of the 2015
// Provisioner facades, which may report and manage it.
var ContainerTypes = []string{"lxd", "kvm", "lxc"}

// PlacementContainerTypes are the container types an operator may place a
// new machine in, as Juju's add-machine allows (core/instance: lxd, kvm).
var PlacementContainerTypes = []string{"lxd", "kvm"}

// ValidateContainerType checks a container type.
func ValidateContainerType(t string) error {
	if !slices.Contains(ContainerTypes, t) {
		return errors.NotValidf("container type %q", t)
	}
	return nil
}

// HardwareCharacteristics describe a provisioned instance.
type HardwareCharacteristics struct {
	Arch             *string   `json:"arch,omitempty"`
	Mem              *uint64   `json:"mem,omitempty"`
	RootDisk         *uint64   `json:"root-disk,omitempty"`
	RootDiskSource   *string   `json:"root-disk-source,omitempty"`
	CpuCores         *uint64   `json:"cpu-cores,omitempty"`
	CpuPower         *uint64   `json:"cpu-power,omitempty"`
	Tags             *[]string `json:"tags,omitempty"`
	AvailabilityZone *string   `json:"availability-zone,omitempty"`
	VirtType         *string   `json:"virt-type,omitempty"`
}

// LinkLayerDevice is a network device a machine reported
// (SetObservedNetworkConfig).
type LinkLayerDevice struct {
	Name       string   `json:"name"`
	MACAddress string   `json:"mac-address,omitempty"`
	ProviderID string   `json:"provider-id,omitempty"` // the provider's id of the device, if it has one
	Type       string   `json:"type,omitempty"`
	ParentName string   `json:"parent-name,omitempty"`
	Addresses  []string `json:"addresses,omitempty"` // CIDR-form addresses
}

// Machine is a machine (or container) of a model. Records are decoded
// from JSON: fields are added with omitempty so older records keep
// decoding.
type Machine struct {
	Model string   `json:"model"` // the model UUID
	ID    string   `json:"id"`
	Life  Life     `json:"life"`
	Jobs  []string `json:"jobs"`
	// Nonce is the nonce recorded when the machine was provisioned; its
	// agent must present it to log in. Empty until provisioned.
	Nonce string `json:"nonce,omitempty"`
	// InstanceID is the provider's id of the machine; empty until
	// provisioned.
	InstanceID string `json:"instance-id,omitempty"`

	Series            string                   `json:"series,omitempty"`
	Base              Base                     `json:"base,omitzero"`
	Constraints       Constraints              `json:"constraints,omitzero"`
	Placement         string                   `json:"placement,omitempty"`
	RequestedNetworks []string                 `json:"requested-networks,omitempty"`
	Hardware          *HardwareCharacteristics `json:"hardware,omitempty"`
	DisplayName       string                   `json:"display-name,omitempty"`
	CharmProfiles     []string                 `json:"charm-profiles,omitempty"`
	KeepInstance      bool                     `json:"keep-instance,omitempty"`

	// Status is the machine agent's status; InstanceStatus and
	// ModificationStatus those of its instance (v11).
	Status             Status `json:"status,omitzero"`
	InstanceStatus     Status `json:"instance-status,omitzero"`
	ModificationStatus Status `json:"modification-status,omitzero"`

	SupportedContainers      []string `json:"supported-containers,omitempty"`
	SupportedContainersKnown bool     `json:"supported-containers-known,omitempty"`

	// AgentVersion is the binary version the agent runs
	// ("3.3.0-ubuntu-amd64"); empty until it reports one.
	AgentVersion     string            `json:"agent-version,omitempty"`
	AgentStartTime   time.Time         `json:"agent-start-time,omitzero"`
	MarkedForRemoval bool              `json:"marked-for-removal,omitempty"`
	LinkLayerDevices []LinkLayerDevice `json:"link-layer-devices,omitempty"`
}

// Tag returns the machine's tag.
func (m Machine) Tag() names.MachineTag { return names.NewMachineTag(m.ID) }

// ParentID returns the id of the machine hosting container id ("" for a
// top-level machine).
func ParentID(id string) string {
	_, j := containerSlashes(id)
	if j < 0 {
		return ""
	}
	return id[:j]
}

// containerSlashes returns the indexes of the last "/" of id (i) and of the
// one before it (j), -1 where there is none: a container id is
// id[:j] + "/" + type + "/" + number with type id[j+1:i]. It allocates
// nothing: lifecycle watchers ask it of every change they are given.
func containerSlashes(id string) (i, j int) {
	i = strings.LastIndexByte(id, '/')
	if i < 0 {
		return -1, -1
	}
	return i, strings.LastIndexByte(id[:i], '/')
}

// ContainerTypeOf returns the container type of id ("" for a top-level
// machine).
func ContainerTypeOf(id string) string {
	i, j := containerSlashes(id)
	if j < 0 {
		return ""
	}
	return id[j+1 : i]
}

// IsContainer reports whether m is a container.
func (m Machine) IsContainer() bool { return ParentID(m.ID) != "" }

// ContainerType returns m's container type ("" for a top-level machine).
func (m Machine) ContainerType() string { return ContainerTypeOf(m.ID) }

// Provisioned reports whether m has an instance id.
func (m Machine) Provisioned() bool { return m.InstanceID != "" }

// machineDoc is a machine's record.
type machineDoc struct {
	Machine
	PasswordHash string `json:"password-hash,omitempty"`
}

func (d *machineDoc) machine() Machine { return d.Machine }

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

	// ParentID and ContainerType, when set, make a container of that
	// type on the (alive) machine ParentID, with id
	// "<parent>/<type>/<n>".
	ParentID      string
	ContainerType string

	// Series (2015) is stored as its base when Base is empty and Juju's
	// table names it (environ.SeriesBase), and kept as given otherwise;
	// with a Base it is ignored: the base is the machine's one OS.
	Series            string
	Base              Base
	Constraints       Constraints
	Placement         string
	RequestedNetworks []string
	// Volumes are made and attached to the machine (storage
	// constraints).
	Volumes []VolumeParams
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

// AddMachine adds an alive machine to an alive model: a top-level machine
// with the next free id of that model ("0", "1", ...), or, with ParentID
// and ContainerType, a container of an alive machine ("1/lxd/0").
func (st *State) AddMachine(ctx context.Context, model string, p MachineParams) (Machine, error) {
	np, err := newMachineParams(p)
	if err != nil {
		return Machine{}, err
	}
	var d machineDoc
	err = st.update(ctx, func(tx *txn) error {
		var err error
		d, err = tx.newMachine(model, np)
		return err
	})
	if err != nil {
		return Machine{}, err
	}
	return d.machine(), nil
}

// machineParams are MachineParams checked, with what a transaction must
// not compute itself done before it: the jobs defaulted, the base from
// the series, the password hashed.
type machineParams struct {
	MachineParams
	hash string
}

func newMachineParams(p MachineParams) (machineParams, error) {
	p.Jobs = slices.Clone(p.Jobs)
	if len(p.Jobs) == 0 {
		p.Jobs = []string{JobHostUnits}
	}
	if err := validateJobs(p.Jobs); err != nil {
		return machineParams{}, err
	}
	if (p.ParentID == "") != (p.ContainerType == "") {
		return machineParams{}, errors.NotValidf("container without both parent and container type")
	}
	if p.ContainerType != "" {
		if err := ValidateContainerType(p.ContainerType); err != nil {
			return machineParams{}, err
		}
	}
	if (p.Nonce == "") != (p.InstanceID == "") {
		return machineParams{}, errors.NotValidf("nonce without instance id")
	}
	for _, v := range p.Volumes {
		if v.Size == 0 {
			return machineParams{}, errors.NotValidf("volume of size 0")
		}
	}
	p.Base, p.Series = seriesAsBase(p.Base, p.Series)
	np := machineParams{MachineParams: p}
	if p.Password != "" {
		if err := validateAgentPassword(p.Password); err != nil {
			return machineParams{}, err
		}
		np.hash = agentPasswordHash(p.Password)
	}
	return np, nil
}

// newMachine adds a machine (AddMachine) in the transaction: its id is the
// next of the model's (or the parent's) sequence, read and written here,
// so machines added through any daemons never share an id.
func (tx *txn) newMachine(model string, p machineParams) (machineDoc, error) {
	m, err := getModelHead(tx, model)
	if err != nil {
		return machineDoc{}, err
	}
	if m.Life != Alive {
		return machineDoc{}, errors.NotValidf("adding a machine to %s model %q", m.Life, m.Name)
	}
	var id string
	if p.ParentID != "" {
		parent, err := getMachineHead(tx, model, p.ParentID)
		if err != nil {
			return machineDoc{}, err
		}
		if parent.Life != Alive {
			return machineDoc{}, errors.NotValidf("adding a container to %s machine %s", parent.Life, parent.ID)
		}
		// Supported container types are reported by the machine
		// agent; until it has, any type is accepted (the report
		// marks pending containers of other types with an error).
		if parent.SupportedContainersKnown && !slices.Contains(parent.SupportedContainers, p.ContainerType) {
			return machineDoc{}, errors.NewNotSupported(nil, fmt.Sprintf("machine %s cannot host %s containers", parent.ID, p.ContainerType))
		}
		seq, err := tx.nextSequence(model, "container/"+p.ParentID+"/"+p.ContainerType)
		if err != nil {
			return machineDoc{}, err
		}
		id = fmt.Sprintf("%s/%s/%d", p.ParentID, p.ContainerType, seq)
	} else {
		seq, err := tx.nextSequence(model, string(KindMachine))
		if err != nil {
			return machineDoc{}, err
		}
		id = strconv.Itoa(seq)
	}
	d := machineDoc{
		Machine: Machine{
			Model:             model,
			ID:                id,
			Life:              Alive,
			Jobs:              slices.Clone(p.Jobs),
			Nonce:             p.Nonce,
			InstanceID:        p.InstanceID,
			Series:            p.Series,
			Base:              p.Base,
			Constraints:       p.Constraints,
			Placement:         p.Placement,
			RequestedNetworks: slices.Clone(p.RequestedNetworks),
			Status:            Status{Status: "pending", Since: tx.now},
			InstanceStatus:    Status{Status: "pending", Since: tx.now},
		},
		PasswordHash: p.hash,
	}
	if err := tx.addMachine(&d); err != nil {
		return machineDoc{}, err
	}
	for _, v := range p.Volumes {
		if _, err := tx.addVolume(model, id, v); err != nil {
			return machineDoc{}, err
		}
	}
	return d, nil
}

func (tx *txn) addMachine(d *machineDoc) error {
	if ok, err := exists(tx, KindMachine, d.Model, d.ID); err != nil {
		return err
	} else if ok {
		return errors.AlreadyExistsf("machine %s", d.ID)
	}
	return tx.put(KindMachine, d.Model, d.ID, d, watcher.FieldCreated)
}

// Machine returns machine id of the model. It is the hot read of the
// Provisioner (every Life, InstanceId, ... call of every agent), so it
// reads the record in place and decodes it through the machine cache: a
// record read before, unchanged since, is copied instead of decoded.
func (st *State) Machine(ctx context.Context, model, id string) (Machine, error) {
	if !validMachineID(id) {
		return Machine{}, errors.NotValidf("machine id %q", id)
	}
	mr := machineReads.Get().(*machineRead)
	mr.st, mr.key = st, entityKey(KindMachine, model, id)
	err := st.store.View(ctx, mr.view)
	mp, shared, found, decErr := mr.m, mr.shared, mr.found, mr.decErr
	*mr = machineRead{view: mr.view, decode: mr.decode}
	machineReads.Put(mr)
	switch {
	case err != nil:
		return Machine{}, err
	case !found:
		return Machine{}, errors.NotFoundf("machine %s", id)
	case decErr != nil:
		return Machine{}, errors.Annotatef(decErr, "decoding %s %q", KindMachine, id)
	case shared:
		return mp.clone(), nil
	}
	return *mp, nil
}

// machineRead is one State.Machine read, pooled with its two callbacks
// bound once: a callback handed to the store through its interface
// escapes, and with it the variables it fills (the Machine among them),
// which cost the read five allocations and 840 bytes more than the decode
// cache's copy itself. It holds a pointer to the cache's Machine, not a
// copy, so filling it costs no write barriers over a whole Machine: the
// copy is taken after the read, on Machine's stack.
type machineRead struct {
	st     *State
	key    string
	m      *Machine // the cache's (shared) or freshly decoded
	shared bool
	found  bool
	decErr error
	view   func(store.Reader) error
	decode func(raw []byte)
}

var machineReads = sync.Pool{New: func() any {
	mr := &machineRead{}
	mr.view = func(r store.Reader) error {
		var err error
		mr.found, err = r.GetFunc(mr.key, mr.decode)
		return err
	}
	mr.decode = func(raw []byte) { mr.m, mr.shared, mr.decErr = mr.st.machines.getShared(mr.key, raw) }
	return mr
}}

// Machines returns the machines of a model, in id order ("0", "0/lxd/0",
// "1", "2", "10").
func (st *State) Machines(ctx context.Context, model string) ([]Machine, error) {
	var ms []Machine
	err := st.view(ctx, func(r reader) error {
		if _, err := getModelHead(r, model); err != nil {
			return err
		}
		var err error
		ms, err = machines(r, model)
		return err
	})
	return ms, err
}

func machines(r reader, model string) ([]Machine, error) {
	docs, err := list[machineDoc](r, KindMachine, model)
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

// Containers returns the direct containers of machine id, in id order.
func (st *State) Containers(ctx context.Context, model, id string) ([]Machine, error) {
	var out []Machine
	err := st.view(ctx, func(r reader) error {
		var err error
		out, err = containers(r, model, id)
		return err
	})
	return out, err
}

func containers(r reader, model, id string) ([]Machine, error) {
	docs, err := listPrefix[machineDoc](r, KindMachine, model, id+"/")
	if err != nil {
		return nil, err
	}
	var out []Machine
	for _, d := range docs {
		if ParentID(d.ID) == id {
			out = append(out, d.Machine)
		}
	}
	slices.SortFunc(out, func(a, b Machine) int { return compareMachineIDs(a.ID, b.ID) })
	return out, nil
}

// AuthenticateMachine checks a machine agent's login. An unknown machine
// or a wrong password gives ErrBadCredentials; the right password with a
// nonce other than the provisioned one gives a *NotProvisionedError.
func (st *State) AuthenticateMachine(ctx context.Context, model, id, password, nonce string) (MachineLogin, error) {
	got := agentPasswordHash(password)
	var d machineLogin
	err := st.viewCurrent(ctx, func(r reader) error {
		var err error
		d, err = getMachineAs[machineLogin](r, model, id)
		return err
	})
	if errors.Is(err, errors.NotFound) || errors.Is(err, errors.NotValid) {
		return MachineLogin{}, ErrBadCredentials
	}
	if err != nil {
		return MachineLogin{}, err
	}
	if d.PasswordHash == "" || !hashEqual(got, d.PasswordHash) {
		return MachineLogin{}, ErrBadCredentials
	}
	if nonce == "" || nonce != d.Nonce {
		return MachineLogin{}, &NotProvisionedError{Machine: id}
	}
	return MachineLogin{Model: d.Model, ID: d.ID, Jobs: d.Jobs}, nil
}

// MachineLogin is the machine a machine agent's login authenticated as.
type MachineLogin struct {
	Model string // the model UUID
	ID    string
	Jobs  []string
}

// IsController reports whether the machine runs the controller (has
// JobManageModel).
func (m MachineLogin) IsController() bool { return slices.Contains(m.Jobs, JobManageModel) }

// SetMachinePassword sets the agent password of a machine.
func (st *State) SetMachinePassword(ctx context.Context, model, id, password string) error {
	if err := validateAgentPassword(password); err != nil {
		return err
	}
	return st.updateMachine(ctx, model, id, setPasswordHash(agentPasswordHash(password)))
}

// MachinePassword is one item of SetMachinePasswords.
type MachinePassword struct {
	ID       string
	Password string
}

// SetMachinePasswords sets each item's password as SetMachinePassword
// does, the valid items in one transaction (bulk); each item keeps its
// error. The passwords are hashed before the transaction.
func (st *State) SetMachinePasswords(ctx context.Context, model string, items []MachinePassword) []error {
	hashes, refused := make([]string, len(items)), make([]error, len(items))
	for i, it := range items {
		if refused[i] = validateAgentPassword(it.Password); refused[i] == nil {
			hashes[i] = agentPasswordHash(it.Password)
		}
	}
	return st.bulk(ctx, len(items), func(tx *txn, i int) error {
		if refused[i] != nil {
			return refused[i]
		}
		return tx.updateMachine(model, items[i].ID, setPasswordHash(hashes[i]))
	})
}

func setPasswordHash(hash string) machineOp {
	return func(tx *txn, d *machineDoc) ([]string, error) {
		if d.PasswordHash == hash {
			return nil, errNoChange
		}
		d.PasswordHash = hash
		return []string{FieldPassword}, nil
	}
}

// MachinePasswordValid reports whether password is machine id's agent
// password.
func (st *State) MachinePasswordValid(ctx context.Context, model, id, password string) (bool, error) {
	m, err := st.machineDoc(ctx, model, id)
	if err != nil {
		return false, err
	}
	return m.PasswordHash != "" && hashEqual(agentPasswordHash(password), m.PasswordHash), nil
}

func (st *State) machineDoc(ctx context.Context, model, id string) (machineDoc, error) {
	var d machineDoc
	err := st.view(ctx, func(r reader) error {
		var err error
		d, err = getMachine(r, model, id)
		return err
	})
	return d, err
}

// updateMachine reads machine id in a write transaction, lets fn change it
// and stores it with the fields fn returns. fn returning errNoChange
// writes nothing.
func (st *State) updateMachine(ctx context.Context, model, id string, fn machineOp) error {
	return st.update(ctx, func(tx *txn) error { return tx.updateMachine(model, id, fn) })
}

// machineOp changes a machine's record in a transaction and returns the
// fields of the change (errNoChange: nothing to write).
type machineOp func(tx *txn, d *machineDoc) ([]string, error)

// updateMachine is State.updateMachine in a transaction.
func (tx *txn) updateMachine(model, id string, fn machineOp) error {
	d, err := getMachine(tx, model, id)
	if err != nil {
		return err
	}
	fields, err := fn(tx, &d)
	if err != nil {
		return err
	}
	return tx.put(KindMachine, model, id, &d, fields...)
}

// updateMachines applies op(i) to machine ids[i] for each i, the items in
// one transaction (bulk).
func (st *State) updateMachines(ctx context.Context, model string, ids []string, op func(i int) machineOp) []error {
	return st.bulk(ctx, len(ids), func(tx *txn, i int) error { return tx.updateMachine(model, ids[i], op(i)) })
}

// validMachineID is names.IsValidMachine, without its regular expression
// for the usual top-level id.
func validMachineID(id string) bool {
	return IsTopLevelMachineID(id) || names.IsValidMachine(id)
}

// IsTopLevelMachineID reports whether id is a top-level machine id as
// juju/names writes them: decimal digits without a leading zero ("0"
// itself is one). It is the cheap check for the common case; anything else
// is for names.IsValidMachine to judge.
func IsTopLevelMachineID(id string) bool {
	if id == "" || (id[0] == '0' && len(id) > 1) {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < '0' || id[i] > '9' {
			return false
		}
	}
	return true
}

// MachineHost is what adding a container checks of its host machine
// (the head of its record): decoding it scans the rest of the record
// (hardware, addresses, statuses) but builds nothing of it.
type MachineHost struct {
	ID                       string   `json:"id"`
	Life                     Life     `json:"life"`
	SupportedContainers      []string `json:"supported-containers,omitempty"`
	SupportedContainersKnown bool     `json:"supported-containers-known,omitempty"`
}

// decodeMachineHost decodes a machine record's head into d, which is
// zero, reading only its four members (decodeHead). Adding a container
// reads its host's head twice (the facade's check, then the
// transaction's), and encoding/json's decoding of a whole record for it
// cost some five objects each time.
func decodeMachineHost(b []byte, d *MachineHost) bool {
	return decodeHead(b, []headField{
		{name: "id", str: &d.ID},
		{name: "life", str: (*string)(&d.Life)},
		{name: "supported-containers", list: &d.SupportedContainers},
		{name: "supported-containers-known", flag: &d.SupportedContainersKnown},
	})
}

// machineLogin is what a machine agent's login reads of its machine's
// record (AuthenticateMachine).
type machineLogin struct {
	Model        string   `json:"model"`
	ID           string   `json:"id"`
	Jobs         []string `json:"jobs"`
	Nonce        string   `json:"nonce,omitempty"`
	PasswordHash string   `json:"password-hash,omitempty"`
}

// decodeMachineLogin decodes what a login reads of a machine record into
// d, which is zero (decodeHead): every agent of a restart's storm logs in,
// and decoding its whole record was a third of the login's CPU.
func decodeMachineLogin(b []byte, d *machineLogin) bool {
	return decodeHead(b, []headField{
		{name: "model", str: &d.Model},
		{name: "id", str: &d.ID},
		{name: "jobs", list: &d.Jobs},
		{name: "nonce", str: &d.Nonce},
		{name: "password-hash", str: &d.PasswordHash},
	})
}

// machineExists reports getMachine's errors for machine id of model
// (errors.NotValid for a bad id, errors.NotFound if there is no such
// machine) without decoding its record: a watch call checks that the
// machine it names exists, and an agent's ten watch calls did it ten times
// per reconnection, each decoding the whole record.
func machineExists(r reader, model, id string) error {
	if !validMachineID(id) {
		return errors.NotValidf("machine id %q", id)
	}
	ok, err := exists(r, KindMachine, model, id)
	switch {
	case err != nil:
		return err
	case !ok:
		return errors.NotFoundf("machine %s", id)
	}
	return nil
}

// machineLives reads the id and life of every machine of model whose id
// starts with prefix ("" for all of them), in id order: what a lifecycle
// watcher's snapshot needs, from the head of each record (MachineHost's
// decoding), not the whole record.
func machineLives(r reader, model, prefix string) ([]idLife, error) {
	var out []idLife
	err := scan(r, kindPrefix(KindMachine, model)+prefix, func(key string, b []byte) error {
		var h MachineHost
		if err := decodeRecord(key, b, &h); err != nil {
			return errors.Annotatef(err, "decoding %s %q", KindMachine, key)
		}
		out = append(out, idLife{h.ID, h.Life})
		return nil
	})
	slices.SortFunc(out, func(a, b idLife) int { return compareMachineIDs(a.id, b.id) })
	return out, err
}

// MachineHost reads what adding a container checks of machine id of
// model, decoding nothing else of its record (AddMachine checks the same
// again in its transaction). It reports errors.NotValid for a bad id and
// errors.NotFound if there is no such machine.
func (st *State) MachineHost(ctx context.Context, model, id string) (MachineHost, error) {
	var h MachineHost
	err := st.view(ctx, func(r reader) error {
		var err error
		h, err = getMachineHead(r, model, id)
		return err
	})
	return h, err
}

// getMachineHead reads machine id's record as far as MachineHost goes;
// getMachine reads it whole. Both report errors.NotValid for a bad id and
// errors.NotFound if there is no such machine.
func getMachineHead(r reader, model, id string) (MachineHost, error) {
	return getMachineAs[MachineHost](r, model, id)
}

func getMachine(r reader, model, id string) (machineDoc, error) {
	return getMachineAs[machineDoc](r, model, id)
}

// getMachineAs decodes machine id's record into a T (machineDoc or
// MachineHost).
func getMachineAs[T any](r reader, model, id string) (T, error) {
	var d T
	if !validMachineID(id) {
		return d, errors.NotValidf("machine id %q", id)
	}
	ok, err := get(r, KindMachine, model, id, &d)
	switch {
	case err != nil:
		var zero T
		return zero, err
	case !ok:
		return d, errors.NotFoundf("machine %s", id)
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

// SortMachineIDs sorts machine ids as Machines orders them.
func SortMachineIDs(ids []string) { slices.SortFunc(ids, compareMachineIDs) }
