package state

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/storage"
	"github.com/provisiond/provisiond/watcher"
)

// Fields of CAAS application changes.
const (
	FieldScale        = "scale"
	FieldCharm        = "charm"
	FieldConstraints  = "constraints"
	FieldHasResources = "has-resources"
	FieldPodSpec      = "podspec"
	// fieldHashPrefix carries an application config's new hash in the
	// change itself ("hash:<hex>"), so the trust hash watcher needs no read.
	fieldHashPrefix = "hash:"
)

// CharmOption is one option of a charm's config.yaml.
type CharmOption struct {
	Type        string `json:"type"`
	Description string `json:"description,omitempty"`
	Default     any    `json:"default,omitempty"`
}

// CharmActionSpec is one action of a charm's actions.yaml.
type CharmActionSpec struct {
	Description string         `json:"description"`
	Params      map[string]any `json:"params,omitempty"`
}

// CharmBase is one base of a charm's manifest.
type CharmBase struct {
	Name          string   `json:"name"`
	Channel       string   `json:"channel"`
	Architectures []string `json:"architectures,omitempty"`
}

// Charm is a charm deployed in a model, keyed by URL.
type Charm struct {
	URL        string                     `json:"url"`
	Revision   int                        `json:"revision"`
	Meta       *charm.Meta                `json:"meta"`
	Config     map[string]CharmOption     `json:"config,omitempty"`
	Actions    map[string]CharmActionSpec `json:"actions,omitempty"`
	Bases      []CharmBase                `json:"bases,omitempty"`
	LXDProfile *LXDProfile                `json:"lxd-profile,omitempty"`
}

type charmDoc struct {
	Model string `json:"model"`
	Charm
}

// DeviceConstraints ask for Count devices of Type for each unit.
type DeviceConstraints struct {
	Type       string            `json:"type"`
	Count      int64             `json:"count"`
	Attributes map[string]string `json:"attributes,omitempty"`
}

// CAASApplication is what a Kubernetes application adds to Application.
type CAASApplication struct {
	// Scale is the desired number of units.
	Scale                int                            `json:"scale,omitempty"`
	CharmModifiedVersion int                            `json:"charm-modified-version,omitempty"`
	Constraints          Constraints                    `json:"constraints,omitzero"`
	StorageConstraints   map[string]storage.Constraints `json:"storage-constraints,omitempty"`
	DeviceConstraints    map[string]DeviceConstraints   `json:"device-constraints,omitempty"`
	// HasResources is true while the cluster may hold resources of the
	// application (cleared by ClearApplicationResources once it dies).
	HasResources bool `json:"has-resources,omitempty"`
}

// appConfigDoc is an application's config settings (Juju's
// "<app>#application" settings document).
type appConfigDoc struct {
	Settings map[string]any `json:"settings,omitempty"`
}

// PodSpec is an application's Kubernetes spec record.
type PodSpec struct {
	Spec           string `json:"spec,omitempty"`
	RawSpec        string `json:"raw-spec,omitempty"`
	UpgradeCounter int    `json:"upgrade-counter,omitempty"`
}

type podSpecDoc struct {
	PodSpec
}

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

type modelConstraintsDoc struct {
	Constraints Constraints `json:"constraints"`
}

// CAASApplicationParams describe a Kubernetes application for
// AddCAASApplication.
type CAASApplicationParams struct {
	Name  string
	Charm Charm
	// CharmModifiedVersion starts the application's counter of charm
	// changes.
	CharmModifiedVersion int
	// Scale is the desired number of units (no units are made: the
	// unit provisioner reports them as pods appear).
	Scale int
	// Config is the application config ("trust" among others).
	Config map[string]any
	// Trust sets config "trust" to true.
	Trust       bool
	Constraints Constraints
	// Storage are the storage constraints by charm storage name. Storage
	// the charm requires (count-min > 0) and that is not given gets its
	// minimum count; a missing size is the charm's minimum size or 1 GiB;
	// a missing pool stays empty (the model's workload-storage applies).
	Storage map[string]storage.Constraints
	Devices map[string]DeviceConstraints
	PodSpec string
	RawSpec string
}

// OperatorStatusKey is the global key of an application's operator status.
func OperatorStatusKey(app string) string { return "a#" + app + "#operator" }

// AddCAASApplication deploys a Kubernetes application in an alive CAAS
// model: its charm (stored once per URL; with no URL, a local charm whose
// URL the transaction picks: see deployCharm), the application with its scale,
// constraints, storage and device constraints, its config and, when
// given, its pod spec.
func (st *State) AddCAASApplication(model string, p CAASApplicationParams) (Application, error) {
	if !validApplicationName.MatchString(p.Name) {
		return Application{}, errors.NotValidf("application name %q", p.Name)
	}
	if p.Charm.Meta == nil {
		return Application{}, errors.NotValidf("application %q without charm metadata", p.Name)
	}
	if p.Scale < 0 {
		return Application{}, errors.NotValidf("application scale %d", p.Scale)
	}
	cfg, err := normalizeConfig(p.Config)
	if err != nil {
		return Application{}, err
	}
	if p.Trust {
		cfg["trust"] = true
	}
	if v, ok := cfg["trust"]; ok {
		if _, isBool := v.(bool); !isBool {
			return Application{}, errors.NotValidf("trust %v (want a bool)", v)
		}
	}
	cons, err := caasStorageConstraints(p.Charm.Meta, p.Storage)
	if err != nil {
		return Application{}, err
	}
	for name, d := range p.Devices {
		if _, ok := p.Charm.Meta.Devices[name]; !ok {
			return Application{}, errors.NotValidf("device %q (charm %q has no such device)", name, p.Charm.Meta.Name)
		}
		if d.Count <= 0 || d.Type == "" {
			return Application{}, errors.NotValidf("device %q constraints (type %q, count %d)", name, d.Type, d.Count)
		}
	}
	a := Application{Model: model, Name: p.Name, Life: Alive, CharmURL: p.Charm.URL,
		CharmRevision: p.Charm.Revision, Subordinate: p.Charm.Meta.Subordinate,
		CAASApplication: CAASApplication{
			Scale: p.Scale, CharmModifiedVersion: p.CharmModifiedVersion, Constraints: p.Constraints,
			StorageConstraints: cons, DeviceConstraints: maps.Clone(p.Devices), HasResources: true,
		}}
	err = st.update(func(tx *txn) error {
		m, err := getModel(tx, model)
		if err != nil {
			return err
		}
		if m.Type != ModelTypeCAAS {
			return errors.NotSupportedf("caas operation on non-caas model")
		}
		if m.Life != Alive {
			return errors.NotValidf("adding an application to %s model %q", m.Life, m.Name)
		}
		if ok, err := exists(tx, KindApplication, model, p.Name); err != nil {
			return err
		} else if ok {
			return errors.AlreadyExistsf("application %q", p.Name)
		}
		mgr := storage.NewManager(txPoolStore{r: tx, model: model}, storage.KubernetesRegistry())
		class, _ := m.Config["workload-storage"].(string)
		for _, name := range slices.Sorted(maps.Keys(cons)) {
			if err := validateCAASPool(mgr, cons[name].Pool, class); err != nil {
				return errors.Annotatef(err, "storage %q", name)
			}
		}
		ch, err := tx.deployCharm(m, p.Charm)
		if err != nil {
			return err
		}
		a.CharmURL, a.CharmRevision = ch.URL, ch.Revision
		if err := tx.put(KindApplicationConfig, model, p.Name, &appConfigDoc{Settings: cfg},
			FieldConfig, fieldHashPrefix+configHash(p.Name, cfg)); err != nil {
			return err
		}
		if p.PodSpec != "" || p.RawSpec != "" {
			if err := tx.put(KindPodSpec, model, p.Name, &podSpecDoc{PodSpec: PodSpec{Spec: p.PodSpec, RawSpec: p.RawSpec}},
				watcher.FieldCreated); err != nil {
				return err
			}
		}
		return tx.put(KindApplication, model, p.Name, &applicationDoc{Application: a}, watcher.FieldCreated)
	})
	return a, err
}

// caasStorageConstraints fills in the defaults of storage constraints and
// checks them against the charm's storage. Kubernetes gives every instance
// a filesystem, so block storage is refused; a count left out is the
// charm's minimum.
func caasStorageConstraints(meta *charm.Meta, given map[string]storage.Constraints) (map[string]storage.Constraints, error) {
	return charmStorageConstraints(meta, given, 0, func(name string, cs charm.Storage) error {
		if cs.Type != charm.StorageFilesystem {
			return errors.NotSupportedf("%s storage %q on kubernetes", cs.Type, name)
		}
		return nil
	})
}

// charmStorageConstraints fills in the defaults of storage constraints
// (count: the charm's minimum, at least minCount; size: the charm's
// minimum, else storage.DefaultStorageSize) and checks them against the
// charm's storage, in name order. check, if not nil, refuses storage the
// model cannot hold. Storage the charm does not require and the caller
// did not name is left out.
func charmStorageConstraints(meta *charm.Meta, given map[string]storage.Constraints, minCount int,
	check func(name string, cs charm.Storage) error) (map[string]storage.Constraints, error) {
	out := map[string]storage.Constraints{}
	for _, name := range slices.Sorted(maps.Keys(given)) {
		if _, ok := meta.Storage[name]; !ok {
			return nil, errors.NotValidf("storage %q (charm %q has no such storage)", name, meta.Name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(meta.Storage)) {
		cs := meta.Storage[name]
		cons, ok := given[name]
		if !ok && cs.CountMin == 0 {
			continue
		}
		if check != nil {
			if err := check(name, cs); err != nil {
				return nil, err
			}
		}
		if cons.Count == 0 {
			cons.Count = uint64(max(cs.CountMin, minCount))
		}
		if cons.Size == 0 {
			cons.Size = cs.MinimumSize
			if cons.Size == 0 {
				cons.Size = storage.DefaultStorageSize
			}
		}
		if cons.Count < uint64(cs.CountMin) || (cs.CountMax >= 0 && cons.Count > uint64(cs.CountMax)) {
			return nil, errors.NotValidf("storage %q count %d (charm allows %d to %d)", name, cons.Count, cs.CountMin, cs.CountMax)
		}
		if cons.Size < cs.MinimumSize {
			return nil, errors.NotValidf("storage %q size %dM (charm needs at least %dM)", name, cons.Size, cs.MinimumSize)
		}
		out[name] = cons
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// validateCAASPool checks that a named pool can hold charm storage in a
// Kubernetes model.
func validateCAASPool(mgr *storage.Manager, pool, class string) error {
	if pool == "" {
		return nil
	}
	if _, _, err := mgr.CharmStorageParams(pool, class); err != nil {
		return err
	}
	cfg, p, err := mgr.Resolve(pool)
	if err != nil {
		return err
	}
	return storage.ValidateForKubernetes(p, cfg.Attrs)
}

// configHash is the hash WatchApplicationsTrustHash reports: SHA-256 of
// the settings key and the settings as JSON (map keys sorted), lower-case
// hex. Juju hashes BSON; the value is only ever compared with itself.
func configHash(app string, settings map[string]any) string {
	h := sha256.New()
	h.Write([]byte(app + "#application"))
	b, _ := json.Marshal(settings)
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func hashField(c watcher.Change) (string, bool) {
	for _, f := range c.Fields {
		if h, ok := strings.CutPrefix(f, fieldHashPrefix); ok {
			return h, true
		}
	}
	return "", false
}

// Charm returns the charm of a model with the given URL.
func (st *State) Charm(model, url string) (Charm, error) {
	var d charmDoc
	err := st.view(func(r reader) error {
		ok, err := get(r, KindCharm, model, url, &d)
		if err == nil && !ok {
			err = errors.NotFoundf("charm %q", url)
		}
		return err
	})
	return d.Charm, err
}

// Applications returns the applications of a model, sorted by name.
func (st *State) Applications(model string) ([]Application, error) {
	var out []Application
	err := st.view(func(r reader) error {
		docs, err := list[applicationDoc](r, KindApplication, model)
		for _, d := range docs {
			out = append(out, d.Application)
		}
		return err
	})
	return out, err
}

// ApplicationConfig returns an application's config settings.
func (st *State) ApplicationConfig(model, app string) (map[string]any, error) {
	var d appConfigDoc
	err := st.view(func(r reader) error {
		if _, err := getApplication(r, model, app); err != nil {
			return err
		}
		_, err := get(r, KindApplicationConfig, model, app, &d)
		return err
	})
	if err != nil {
		return nil, err
	}
	if d.Settings == nil {
		d.Settings = map[string]any{}
	}
	return d.Settings, nil
}

// UpdateApplicationConfig sets and removes keys of an application's
// config. "trust" must be a bool. A call that changes nothing writes
// nothing.
func (st *State) UpdateApplicationConfig(model, app string, set map[string]any, unset []string) error {
	set, err := normalizeConfig(set)
	if err != nil {
		return err
	}
	if v, ok := set["trust"]; ok {
		if _, isBool := v.(bool); !isBool {
			return errors.NotValidf("trust %v (want a bool)", v)
		}
	}
	return st.update(func(tx *txn) error {
		if _, err := getApplication(tx, model, app); err != nil {
			return err
		}
		var d appConfigDoc
		if _, err := get(tx, KindApplicationConfig, model, app, &d); err != nil {
			return err
		}
		next, changed := applyConfig(d.Settings, set, unset)
		if !changed {
			return errNoChange
		}
		if err := checkConfigTotal(next); err != nil {
			return err
		}
		d.Settings = next
		return tx.put(KindApplicationConfig, model, app, &d, FieldConfig, fieldHashPrefix+configHash(app, next))
	})
}

// SetApplicationTrust sets an application's "trust" config option.
func (st *State) SetApplicationTrust(model, app string, trust bool) error {
	return st.UpdateApplicationConfig(model, app, map[string]any{"trust": trust}, nil)
}

// ApplicationConfigHash returns the hash of an application's config that
// WatchApplicationTrustHash reports ("" when it has none).
func (st *State) ApplicationConfigHash(model, app string) (string, error) {
	var (
		d  appConfigDoc
		ok bool
	)
	err := st.view(func(r reader) error {
		var err error
		ok, err = get(r, KindApplicationConfig, model, app, &d)
		return err
	})
	if err != nil || !ok {
		return "", err
	}
	return configHash(app, d.Settings), nil
}

// SetPodSpec sets an application's pod spec (YAML); SetRawK8sSpec its raw
// Kubernetes spec. Each bumps the spec's upgrade counter.
func (st *State) SetPodSpec(model, app, spec string) error {
	return st.setK8sSpec(model, app, func(p *PodSpec) { p.Spec = spec })
}

// SetRawK8sSpec sets an application's raw Kubernetes spec.
func (st *State) SetRawK8sSpec(model, app, spec string) error {
	return st.setK8sSpec(model, app, func(p *PodSpec) { p.RawSpec = spec })
}

func (st *State) setK8sSpec(model, app string, set func(*PodSpec)) error {
	return st.update(func(tx *txn) error {
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
func (st *State) K8sSpec(model, app string) (PodSpec, error) {
	var d podSpecDoc
	err := st.view(func(r reader) error {
		ok, err := get(r, KindPodSpec, model, app, &d)
		if err == nil && !ok {
			err = errors.NewNotFound(nil, fmt.Sprintf("k8s spec for application %s not found", app))
		}
		return err
	})
	return d.PodSpec, err
}

// SetApplicationScale is the operator's scale (Juju's scale-application):
// SetScale with force, which protects the desired scale until the cluster
// reports it.
func (st *State) SetApplicationScale(model, app string, scale int) error {
	return st.SetScale(model, app, scale, 0, true)
}

// SetScale sets an application's desired scale (specs/caasunitprovisioner.md
// §4.6). Without force it is the cluster's report: refused (Forbidden)
// while an operator's scale is not applied yet or when generation is older
// than the stored one; it raises the stored generation and clears the
// protection. With force it sets the protection.
func (st *State) SetScale(model, app string, scale int, generation int64, force bool) error {
	if scale < 0 {
		return errors.NotValidf("application scale %d", scale)
	}
	return st.update(func(tx *txn) error {
		a, err := getApplication(tx, model, app)
		if err != nil {
			return err
		}
		if err := tx.checkScale(a, scale, generation, force); err != nil {
			return err
		}
		return tx.setScale(a, scale, generation, force)
	})
}

func (tx *txn) checkScale(a applicationDoc, scale int, generation int64, force bool) error {
	if scale < 0 {
		return errors.NotValidf("application scale %d", scale)
	}
	var cs cloudServiceDoc
	ok, err := get(tx, KindCloudService, a.Model, a.Name, &cs)
	if err != nil {
		return err
	}
	if ok && !force {
		if cs.DesiredScaleProtected && scale != a.Scale {
			return errors.Forbiddenf("SetScale(%d) without force while desired scale %d is not applied yet", scale, a.Scale)
		}
		if generation < cs.Generation {
			return errors.Forbiddenf("application generation %d can not be reverted to %d", cs.Generation, generation)
		}
	}
	if a.Life != Alive {
		return errors.Errorf("cannot set scale for application %q to %d: application %q is not alive", a.Name, scale, a.Name)
	}
	return nil
}

func (tx *txn) setScale(a applicationDoc, scale int, generation int64, force bool) error {
	var cs cloudServiceDoc
	stored, err := get(tx, KindCloudService, a.Model, a.Name, &cs)
	if err != nil {
		return err
	}
	before := cs.CloudService
	if force {
		cs.DesiredScaleProtected = true
	} else {
		cs.Generation = max(cs.Generation, generation)
		cs.DesiredScaleProtected = false
	}
	if cs.Generation != before.Generation || cs.DesiredScaleProtected != before.DesiredScaleProtected || !stored {
		if err := tx.put(KindCloudService, a.Model, a.Name, &cs, "scale"); err != nil {
			return err
		}
	}
	if a.Scale == scale {
		return nil
	}
	a.Scale = scale
	return tx.put(KindApplication, a.Model, a.Name, &a, FieldScale)
}

// CloudService returns an application's cloud service (zero if none).
func (st *State) CloudService(model, app string) (CloudService, error) {
	var d cloudServiceDoc
	err := st.view(func(r reader) error {
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
func (st *State) UpdateCloudService(model, app, providerID string, addrs []Address) error {
	return st.update(func(tx *txn) error {
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
	})
}

// OperatorStatus returns an application's operator status (zero if none).
func (st *State) OperatorStatus(model, app string) (Status, error) {
	var d statusDoc
	err := st.view(func(r reader) error {
		_, err := get(r, KindStatus, model, OperatorStatusKey(app), &d)
		return err
	})
	return d.Status, err
}

// SetOperatorStatus sets an application's operator status (Since is the
// state's clock when zero). The model must be a CAAS model.
func (st *State) SetOperatorStatus(model, app string, s Status) error {
	return st.update(func(tx *txn) error {
		a, err := getApplication(tx, model, app)
		if err != nil {
			return err
		}
		return tx.setOperatorStatus(a, s)
	})
}

func (tx *txn) setOperatorStatus(a applicationDoc, s Status) error {
	m, err := getModel(tx, a.Model)
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

// DestroyApplication moves an alive application to dying.
func (st *State) DestroyApplication(model, app string) error {
	return st.update(func(tx *txn) error {
		a, err := getApplication(tx, model, app)
		if err != nil {
			return err
		}
		if a.Life != Alive {
			return errNoChange
		}
		a.Life = Dying
		return tx.put(KindApplication, model, app, &a, watcher.FieldLife)
	})
}

// ClearApplicationResources clears the has-resources flag of an
// application that is no longer alive (`application "x" is alive`
// otherwise).
func (st *State) ClearApplicationResources(model, app string) error {
	return st.update(func(tx *txn) error {
		a, err := getApplication(tx, model, app)
		if err != nil {
			return err
		}
		if a.Life == Alive {
			return errors.Errorf("application %q is alive", app)
		}
		if !a.HasResources {
			return errNoChange
		}
		a.HasResources = false
		return tx.put(KindApplication, model, app, &a, FieldHasResources)
	})
}

// SetApplicationConstraints replaces an application's constraints.
func (st *State) SetApplicationConstraints(model, app string, cons Constraints) error {
	return st.update(func(tx *txn) error {
		a, err := getApplication(tx, model, app)
		if err != nil {
			return err
		}
		a.Constraints = cons
		return tx.put(KindApplication, model, app, &a, FieldConstraints)
	})
}

// ModelConstraints returns a model's constraints (zero if none).
func (st *State) ModelConstraints(model string) (Constraints, error) {
	var d modelConstraintsDoc
	err := st.view(func(r reader) error {
		if _, err := getModel(r, model); err != nil {
			return err
		}
		_, err := get(r, KindModelConstraints, model, model, &d)
		return err
	})
	return d.Constraints, err
}

// SetModelConstraints replaces a model's constraints.
func (st *State) SetModelConstraints(model string, cons Constraints) error {
	return st.update(func(tx *txn) error {
		if _, err := getModel(tx, model); err != nil {
			return err
		}
		return tx.put(KindModelConstraints, model, model, &modelConstraintsDoc{Constraints: cons}, FieldConstraints)
	})
}

// ResolveConstraints merges the model's constraints under cons: each
// attribute cons leaves unset comes from the model.
func (st *State) ResolveConstraints(model string, cons Constraints) (Constraints, error) {
	mc, err := st.ModelConstraints(model)
	if err != nil {
		return Constraints{}, err
	}
	return mergeConstraints(mc, cons), nil
}

// mergeConstraints returns over with each nil pointer field taken from
// under (JSON round trip of two pointer-only structs).
func mergeConstraints(under, over Constraints) Constraints {
	var m map[string]json.RawMessage
	b, _ := json.Marshal(under)
	_ = json.Unmarshal(b, &m)
	var o map[string]json.RawMessage
	b, _ = json.Marshal(over)
	_ = json.Unmarshal(b, &o)
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	maps.Copy(m, o)
	var out Constraints
	b, _ = json.Marshal(m)
	_ = json.Unmarshal(b, &out)
	return out
}
