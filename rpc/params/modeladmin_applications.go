package params

// Wire types of ModelAdmin v1's application-side methods: deploy, units,
// application settings, pod specs, storage pools, and what Status reports
// of applications, units and storage. As for machines, the client sends
// what the operator typed (charm metadata, constraints, storage and device
// constraints, YAML specs) as text; the server parses and validates it.

// DeployArgs is the argument of Deploy.
type DeployArgs struct {
	Model       string `json:"model,omitempty"`
	Application string `json:"application"`
	// CharmMetadata is the text of the charm's metadata.yaml.
	CharmMetadata string `json:"charm-metadata"`
	// Scale is the number of units of a CAAS application (nil: 1). An
	// IAAS model refuses it: its units come from AddUnits.
	Scale *int `json:"scale,omitempty"`
	// Config is the application's initial config: string, number or
	// bool values.
	Config map[string]any `json:"config,omitempty"`
	// Constraints are in Juju's syntax: "mem=4G".
	Constraints string `json:"constraints,omitempty"`
	// Storage are "NAME=POOL,SIZE,COUNT" (any of the three, in any
	// order), NAME a storage of the charm.
	Storage []string `json:"storage,omitempty"`
	// Devices are "NAME=[COUNT,]TYPE[,KEY=VALUE;...]" (CAAS only), NAME a
	// device of the charm.
	Devices []string `json:"devices,omitempty"`
	// Trust sets the config option "trust" to true.
	Trust bool `json:"trust,omitempty"`
}

// ApplicationArgs names an application.
type ApplicationArgs struct {
	Model       string `json:"model,omitempty"`
	Application string `json:"application"`
}

// AddUnitsArgs is the argument of AddUnits (IAAS models).
type AddUnitsArgs struct {
	Model       string `json:"model,omitempty"`
	Application string `json:"application"`
	// To are machine ids the units go to, in order; units beyond them
	// get a new machine each.
	To []string `json:"to,omitempty"`
	// Count is how many units to add; 0 means max(1, len(To)).
	Count int `json:"count,omitempty"`
}

// AddUnitsResult lists the new units and the machines made for them.
type AddUnitsResult struct {
	Units    []string `json:"units"`
	Machines []string `json:"machines"`
}

// RemoveUnitsArgs is the argument of RemoveUnits.
type RemoveUnitsArgs struct {
	Model string   `json:"model,omitempty"`
	Units []string `json:"units"`
}

// RemoveUnitsResult lists the units removed (the subordinates of those
// named with them) and the machines left without a principal unit, which
// became dying.
type RemoveUnitsResult struct {
	Removed       []string `json:"removed"`
	DyingMachines []string `json:"dying-machines"`
}

// RemoveApplicationArgs is the argument of RemoveApplication.
type RemoveApplicationArgs struct {
	Model       string `json:"model,omitempty"`
	Application string `json:"application"`
	// DestroyStorage destroys the storage of the application's units
	// instead of detaching it (Juju's remove-application
	// --destroy-storage).
	DestroyStorage bool `json:"destroy-storage,omitempty"`
}

// RemoveApplicationResult is the application as the removal left it (life
// dead; no units), with what the removal took.
type RemoveApplicationResult struct {
	ApplicationStatus
	// Removed is true when the application is gone (an IAAS one); a
	// Kubernetes application stays dead until its unit provisioner has
	// deleted its cluster resources.
	Removed bool `json:"removed"`
	// RemovedUnits are the units removed, subordinates included.
	RemovedUnits []string `json:"removed-units"`
	// DyingMachines are the machines left without a principal unit, which
	// became dying.
	DyingMachines []string `json:"dying-machines"`
	// Storage is the storage destroyed with the units (its key is not
	// "storage": the application's storage constraints have that one).
	Storage []RemovedStorage `json:"removed-storage"`
}

// RemoveStorageArgs is the argument of RemoveStorage.
type RemoveStorageArgs struct {
	Model string `json:"model,omitempty"`
	// Storage are storage ids ("data/0").
	Storage []string `json:"storage"`
	// Force removes storage attached to a unit, detaching it first.
	Force bool `json:"force,omitempty"`
	// NoDestroy releases the storage (left in the cloud, no longer
	// managed) instead of destroying it.
	NoDestroy bool `json:"no-destroy,omitempty"`
}

// RemoveStorageResult lists what RemoveStorage took out of the model: the
// storage instances with their filesystems and volumes.
type RemoveStorageResult struct {
	Removed []RemovedStorage `json:"removed"`
}

// DetachStorageArgs is the argument of DetachStorage.
type DetachStorageArgs struct {
	Model string `json:"model,omitempty"`
	// Storage are storage ids ("data/0").
	Storage []string `json:"storage"`
}

// DetachStorageResult lists the storage instances detached (those already
// detached are left out).
type DetachStorageResult struct {
	Detached []string `json:"detached"`
}

// ScaleArgs is the argument of ScaleApplication.
type ScaleArgs struct {
	Model       string `json:"model,omitempty"`
	Application string `json:"application"`
	Scale       int    `json:"scale"`
}

// SetApplicationConfigArgs sets and unsets keys of an application's config
// in one commit.
type SetApplicationConfigArgs struct {
	Model       string         `json:"model,omitempty"`
	Application string         `json:"application"`
	Config      map[string]any `json:"config,omitempty"`
	Unset       []string       `json:"unset,omitempty"`
}

// ApplicationConfigInfo is an application's config.
type ApplicationConfigInfo struct {
	Application string         `json:"application"`
	Config      map[string]any `json:"config"`
}

// SetTrustArgs is the argument of SetApplicationTrust.
type SetTrustArgs struct {
	Model       string `json:"model,omitempty"`
	Application string `json:"application"`
	Trust       bool   `json:"trust"`
}

// SetApplicationConstraintsArgs is the argument of
// SetApplicationConstraints: Juju's syntax, "" clears them.
type SetApplicationConstraintsArgs struct {
	Model       string `json:"model,omitempty"`
	Application string `json:"application"`
	Constraints string `json:"constraints"`
}

// SetPodSpecArgs is the argument of SetPodSpec: YAML text.
type SetPodSpecArgs struct {
	Model       string `json:"model,omitempty"`
	Application string `json:"application"`
	Spec        string `json:"spec"`
	// Raw makes Spec the raw Kubernetes spec instead of the pod spec.
	Raw bool `json:"raw,omitempty"`
}

// PodSpecResult is the spec record after SetPodSpec.
type PodSpecResult struct {
	Application string `json:"application"`
	// UpgradeCounter counts the spec changes.
	UpgradeCounter int  `json:"upgrade-counter"`
	Raw            bool `json:"raw,omitempty"`
}

// CreateStoragePoolArgs is the argument of CreateStoragePool.
type CreateStoragePoolArgs struct {
	Model    string         `json:"model,omitempty"`
	Name     string         `json:"name"`
	Provider string         `json:"provider"`
	Attrs    map[string]any `json:"attrs,omitempty"`
}

// RemoveStoragePoolArgs is the argument of RemoveStoragePool.
type RemoveStoragePoolArgs struct {
	Model string `json:"model,omitempty"`
	Name  string `json:"name"`
}

// StoragePoolInfo is a storage pool.
type StoragePoolInfo struct {
	Name     string         `json:"name"`
	Provider string         `json:"provider"`
	Attrs    map[string]any `json:"attrs,omitempty"`
}

// StoragePoolsResult lists a model's pools, by name.
type StoragePoolsResult struct {
	Pools []StoragePoolInfo `json:"pools"`
}

// UnitStatus is a unit of an application.
type UnitStatus struct {
	Name string `json:"name"`
	Life string `json:"life"`
	// Machine is the machine of an IAAS unit.
	Machine string `json:"machine,omitempty"`
	// ProviderID, Address and Ports are the pod of a CAAS unit.
	ProviderID      string     `json:"provider-id,omitempty"`
	Address         string     `json:"address,omitempty"`
	Ports           []string   `json:"ports,omitempty"`
	AgentStatus     StatusInfo `json:"agent-status,omitzero"`
	WorkloadStatus  StatusInfo `json:"workload-status,omitzero"`
	ContainerStatus StatusInfo `json:"container-status,omitzero"`
	// Storage are the ids of the storage instances attached to the unit.
	Storage []string `json:"storage,omitempty"`
}

// ApplicationStatus is an application and its units.
type ApplicationStatus struct {
	Name          string `json:"name"`
	Life          string `json:"life"`
	Charm         string `json:"charm"` // its URL: "local:gitlab-0"
	CharmRevision int    `json:"charm-revision"`
	Subordinate   bool   `json:"subordinate,omitempty"`
	// Scale is the desired number of units of a CAAS application.
	Scale       int    `json:"scale"`
	Trust       bool   `json:"trust"`
	Constraints string `json:"constraints,omitempty"`
	// Storage are the storage constraints by charm storage name, as
	// "POOL,COUNT,SIZE" ("fast,1,2048M"; "1,1024M" without a pool: the
	// model's default applies).
	Storage map[string]string `json:"storage,omitempty"`
	// Devices are the device constraints by charm device name, as
	// "COUNT,TYPE".
	Devices map[string]string `json:"devices,omitempty"`
	// ProviderID and Addresses are those of a CAAS application's service;
	// OperatorStatus what its operator reported.
	ProviderID     string     `json:"provider-id,omitempty"`
	Addresses      []string   `json:"addresses,omitempty"`
	OperatorStatus StatusInfo `json:"operator-status,omitzero"`
	// Units come in unit number order.
	Units []UnitStatus `json:"units"`
}

// StorageInstanceStatus is an instance of charm storage.
type StorageInstanceStatus struct {
	ID   string `json:"id"` // "data/0"
	Kind string `json:"kind"`
	Life string `json:"life"`
	// Owner is the unit owning the instance, Unit the one it is attached
	// to ("" when detached).
	Owner string `json:"owner,omitempty"`
	Unit  string `json:"unit,omitempty"`
}

// FilesystemAttachmentStatus attaches a filesystem to a unit.
type FilesystemAttachmentStatus struct {
	Unit       string `json:"unit"`
	MountPoint string `json:"mount-point,omitempty"`
	ReadOnly   bool   `json:"read-only,omitempty"`
}

// FilesystemStatus is a filesystem of a model.
type FilesystemStatus struct {
	ID        string `json:"id"`
	StorageID string `json:"storage,omitempty"`
	VolumeID  string `json:"volume,omitempty"`
	Pool      string `json:"pool"`
	Size      uint64 `json:"size"` // MiB
	Life      string `json:"life"`
	// ProviderID is the provider's filesystem id, once provisioned.
	ProviderID string                      `json:"provider-id,omitempty"`
	Status     StatusInfo                  `json:"status,omitzero"`
	Attachment *FilesystemAttachmentStatus `json:"attachment,omitempty"`
	// Orphaned marks a filesystem attached to nothing that belongs to no
	// storage instance: it stays until the model goes.
	Orphaned bool `json:"orphaned,omitempty"`
}

// VolumeAttachmentStatus attaches a volume to a machine or a unit.
type VolumeAttachmentStatus struct {
	Machine    string `json:"machine,omitempty"`
	Unit       string `json:"unit,omitempty"`
	DeviceName string `json:"device-name,omitempty"`
	ReadOnly   bool   `json:"read-only,omitempty"`
}

// ModelVolumeStatus is a volume of a model.
type ModelVolumeStatus struct {
	ID         string                   `json:"id"`
	StorageID  string                   `json:"storage,omitempty"`
	Pool       string                   `json:"pool"`
	Size       uint64                   `json:"size"` // MiB
	Life       string                   `json:"life"`
	ProviderID string                   `json:"provider-id,omitempty"`
	Persistent bool                     `json:"persistent,omitempty"`
	Status     StatusInfo               `json:"status,omitzero"`
	Attached   []VolumeAttachmentStatus `json:"attachments,omitempty"`
	// Orphaned marks a volume attached to nothing that belongs to no
	// storage instance and backs no filesystem (an iaas volume whose
	// machine went): it stays until the model goes.
	Orphaned bool `json:"orphaned,omitempty"`
}

// StorageStatus is a model's storage: instances, filesystems, volumes.
type StorageStatus struct {
	Instances   []StorageInstanceStatus `json:"instances"`
	Filesystems []FilesystemStatus      `json:"filesystems"`
	Volumes     []ModelVolumeStatus     `json:"volumes"`
}
