package params

// Wire types of ModelAdmin v1's machine-side methods: machines, spaces,
// subnets, agent binaries and status. The client sends what the operator
// typed (bases, constraints, placements, storage constraints, address
// ranges) as strings; the server parses and validates them.

// AddMachinesArgs is the argument of AddMachines.
type AddMachinesArgs struct {
	Model string `json:"model,omitempty"`
	// Placement is "" (a new machine), "TYPE:ID" (a container of type
	// lxd or kvm on machine ID) or "zone=ZONE".
	Placement string `json:"placement,omitempty"`
	// Base is "OS@CHANNEL", e.g. "ubuntu@22.04"; "" leaves it to the
	// model's default.
	Base string `json:"base,omitempty"`
	// Constraints are in Juju's syntax: "cores=2 mem=4G".
	Constraints string `json:"constraints,omitempty"`
	// Count is how many machines to add; 0 means 1.
	Count int `json:"count,omitempty"`
	// Disks are storage constraints "POOL,SIZE,COUNT" of volumes made
	// for each machine.
	Disks []string `json:"disks,omitempty"`
}

// AddMachinesResult lists the ids of the new machines.
type AddMachinesResult struct {
	Machines []string `json:"machines"`
}

// RemoveMachinesArgs is the argument of RemoveMachines.
type RemoveMachinesArgs struct {
	Model    string   `json:"model,omitempty"`
	Machines []string `json:"machines"`
	// Force also makes the machines' containers and units dying, instead
	// of refusing machines that host any.
	Force bool `json:"force,omitempty"`
	// NoWait (with Force) removes the machines, their containers and
	// units at once instead of waiting for agents and the provisioner.
	NoWait bool `json:"no-wait,omitempty"`
}

// RemoveMachinesResult lists the machines that became dying (with force,
// their containers too), in id order; with no-wait, Removed lists those
// removed (deepest containers first) and Dying is empty.
type RemoveMachinesResult struct {
	Dying   []string `json:"dying"`
	Removed []string `json:"removed"`
}

// AddSpaceArgs is the argument of AddSpace.
type AddSpaceArgs struct {
	Model      string `json:"model,omitempty"`
	Name       string `json:"name"`
	ProviderID string `json:"provider-id,omitempty"`
}

// SpaceInfo describes a space.
type SpaceInfo struct {
	Name       string   `json:"name"`
	ProviderID string   `json:"provider-id,omitempty"`
	Subnets    []string `json:"subnets"`
}

// SpacesResult lists a model's spaces, by name.
type SpacesResult struct {
	Spaces []SpaceInfo `json:"spaces"`
}

// AddSubnetArgs is the argument of AddSubnet.
type AddSubnetArgs struct {
	Model      string   `json:"model,omitempty"`
	CIDR       string   `json:"cidr"`
	Space      string   `json:"space"`
	Zones      []string `json:"zones"`
	ProviderID string   `json:"provider-id"`
	VLANTag    int      `json:"vlan-tag,omitempty"`
	// AllocatableRange is "LOW-HIGH", inside the CIDR: the addresses the
	// built-in provider hands to containers. "" means none.
	AllocatableRange string `json:"allocatable-range,omitempty"`
}

// AddressInfo is an address of a subnet that is in use.
type AddressInfo struct {
	Value   string `json:"value"`
	Subnet  string `json:"subnet"`
	Machine string `json:"machine,omitempty"`
	// State is "allocated" or "unavailable".
	State         string `json:"state"`
	InterfaceName string `json:"interface-name,omitempty"`
	MACAddress    string `json:"mac-address,omitempty"`
}

// SubnetInfo describes a subnet and the addresses in use in it.
type SubnetInfo struct {
	CIDR              string        `json:"cidr"`
	Space             string        `json:"space,omitempty"`
	Zones             []string      `json:"zones"`
	ProviderID        string        `json:"provider-id,omitempty"`
	VLANTag           int           `json:"vlan-tag,omitempty"`
	AllocatableIPLow  string        `json:"allocatable-ip-low,omitempty"`
	AllocatableIPHigh string        `json:"allocatable-ip-high,omitempty"`
	Gateway           string        `json:"gateway,omitempty"`
	Life              string        `json:"life"`
	Addresses         []AddressInfo `json:"addresses"`
}

// SubnetsResult lists a model's subnets, by CIDR.
type SubnetsResult struct {
	Subnets []SubnetInfo `json:"subnets"`
}

// AddAgentBinariesArgs is the argument of AddAgentBinaries: one catalog
// entry, "VERSION-OS-ARCH".
type AddAgentBinariesArgs struct {
	Version string `json:"version"` // a version number: "3.3.0"
	OS      string `json:"os"`      // "ubuntu" (2015 agents: a series such as "trusty")
	Arch    string `json:"arch"`
	URL     string `json:"url"`
	SHA256  string `json:"sha256"`
	Size    int64  `json:"size"`
}

// AgentBinaryInfo is one entry of the agent binaries catalog.
type AgentBinaryInfo struct {
	Version string `json:"version"`       // "3.3.0-ubuntu-amd64"
	URL     string `json:"url,omitempty"` // the source, when the controller fetches it
	SHA256  string `json:"sha256"`
	Size    int64  `json:"size"`
	// Stored: the controller holds the binaries (uploaded, or fetched
	// from URL and checked).
	Stored bool `json:"stored,omitempty"`
}

// AgentBinariesResult is the catalog, sorted by version.
type AgentBinariesResult struct {
	AgentBinaries []AgentBinaryInfo `json:"agent-binaries"`
}

// StatusInfo is one status record.
type StatusInfo struct {
	Status  string         `json:"status"`
	Message string         `json:"message,omitempty"`
	Data    map[string]any `json:"data,omitempty"`
	// Since is RFC 3339 ("" when never set).
	Since string `json:"since,omitempty"`
}

// VolumeStatus is a volume attached to a machine.
type VolumeStatus struct {
	ID   string `json:"id"`
	Pool string `json:"pool"`
	Size uint64 `json:"size"` // MiB
	Life string `json:"life"`
	// ProviderID is the provider's volume id, once provisioned.
	ProviderID string `json:"provider-id,omitempty"`
	DeviceName string `json:"device-name,omitempty"`
}

// MachineStatus is a machine and, nested, its containers.
type MachineStatus struct {
	ID          string     `json:"id"`
	Life        string     `json:"life"`
	Base        string     `json:"base,omitempty"` // "ubuntu@22.04"
	Series      string     `json:"series,omitempty"`
	Constraints string     `json:"constraints,omitempty"`
	Placement   string     `json:"placement,omitempty"`
	InstanceID  string     `json:"instance-id,omitempty"`
	DisplayName string     `json:"display-name,omitempty"`
	Hardware    string     `json:"hardware,omitempty"`
	AgentStatus StatusInfo `json:"agent-status"`
	// InstanceStatus is that of the machine's instance (the provider's
	// view), ModificationStatus that of changes to it (v11).
	InstanceStatus     StatusInfo `json:"instance-status"`
	ModificationStatus StatusInfo `json:"modification-status,omitzero"`
	AgentVersion       string     `json:"agent-version,omitempty"`
	Jobs               []string   `json:"jobs"`
	// SupportedContainers is null until the machine agent reports them.
	SupportedContainers *[]string       `json:"supported-containers"`
	Addresses           []string        `json:"addresses,omitempty"`
	Volumes             []VolumeStatus  `json:"volumes,omitempty"`
	Units               []string        `json:"units,omitempty"`
	Containers          []MachineStatus `json:"containers,omitempty"`

	// MarkedForRemoval is set on a dead machine whose instance is gone
	// (its provisioner marked it for removal): the machine undertaker
	// removes it.
	MarkedForRemoval bool `json:"marked-for-removal,omitempty"`
	// AgentPresence is whether the machine's agent is connected to the
	// controller now (nil when the daemon does not track presence).
	AgentPresence *AgentPresence `json:"agent-presence,omitempty"`
}

// AgentPresence is whether an agent is connected to one of the
// controller's API servers: Status "alive" or "down". Since, when down,
// is when the controller saw it go (RFC 3339; "" when not known: it was
// not connected since the daemon started).
type AgentPresence struct {
	Status string `json:"status"`
	Since  string `json:"since,omitempty"`
}

// ModelStatus is what ModelAdmin.Status reports of a model.
type ModelStatus struct {
	Model string `json:"model"`
	UUID  string `json:"uuid"`
	Type  string `json:"type"`
	Life  string `json:"life"`
	// Machines are the top-level machines, in id order, each with its
	// containers.
	Machines []MachineStatus `json:"machines"`
	Spaces   []SpaceInfo     `json:"spaces"`
	Subnets  []SubnetInfo    `json:"subnets"`
	// Applications are the model's applications by name, each with its
	// units (types in modeladmin_applications.go).
	Applications []ApplicationStatus `json:"applications"`
	// Storage is the model's storage instances, filesystems and volumes
	// (machine volumes too, with their attachments).
	Storage StorageStatus `json:"storage"`
	// ProvisionerAgent is whether the model's provisioner agent (the
	// controller agent logged in at the model's endpoint, which runs its
	// environ or CAAS unit provisioner) is connected (nil when the
	// daemon does not track presence).
	ProvisionerAgent *AgentPresence `json:"provisioner-agent,omitempty"`
}
