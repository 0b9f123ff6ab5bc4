package params

// Wire types of the Provisioner facade, version 11, with the JSON keys of
// the Juju 3.3 schema. Value encodings (specs/provisioner.md §0.1):
// versions are strings, []byte is base64, times are RFC 3339, and the
// structs Juju embeds (HostPort.Address, ProvisioningInfo's network
// topology, ContainerConfig's UpdateBehavior) are flattened: the schema
// lists each as a property named after its definition, but encoding/json
// puts its keys at the top level of the enclosing object.

// Value is a constraints value.
type Value struct {
	Arch             *string   `json:"arch,omitempty"`
	Container        *string   `json:"container,omitempty"`
	CpuCores         *uint64   `json:"cores,omitempty"`
	CpuPower         *uint64   `json:"cpu-power,omitempty"`
	Mem              *uint64   `json:"mem,omitempty"`
	RootDisk         *uint64   `json:"root-disk,omitempty"`
	RootDiskSource   *string   `json:"root-disk-source,omitempty"`
	Tags             *[]string `json:"tags,omitempty"`
	InstanceRole     *string   `json:"instance-role,omitempty"`
	InstanceType     *string   `json:"instance-type,omitempty"`
	Spaces           *[]string `json:"spaces,omitempty"`
	VirtType         *string   `json:"virt-type,omitempty"`
	Zones            *[]string `json:"zones,omitempty"`
	AllocatePublicIP *bool     `json:"allocate-public-ip,omitempty"`
	ImageID          *string   `json:"image-id,omitempty"`
}

// ConstraintsResult is one machine's constraints.
type ConstraintsResult struct {
	Error       *Error `json:"error,omitempty"`
	Constraints Value  `json:"constraints"`
}

// ConstraintsResults is a bulk of ConstraintsResult.
type ConstraintsResults struct {
	Results []ConstraintsResult `json:"results"`
}

// Settings are proxy settings: Juju's proxy.Settings, whose fields are
// untagged, so every key is its Go field name and always sent.
type Settings struct {
	Http        string `json:"Http"`
	Https       string `json:"Https"`
	Ftp         string `json:"Ftp"`
	NoProxy     string `json:"NoProxy"`
	AutoNoProxy string `json:"AutoNoProxy"`
}

// UpdateBehavior says whether new machines update and upgrade their OS.
type UpdateBehavior struct {
	EnableOSRefreshUpdate bool `json:"enable-os-refresh-update"`
	EnableOSUpgrade       bool `json:"enable-os-upgrade"`
}

// ContainerConfig is the result of ContainerConfig. UpdateBehavior is
// embedded, as in Juju, so its keys sit at the top level: sent nested,
// Juju's client leaves its own embedded pointer nil and the machine
// agent's lxd/kvm broker dereferences it.
type ContainerConfig struct {
	ProviderType               string         `json:"provider-type"`
	AuthorizedKeys             string         `json:"authorized-keys"`
	SSLHostnameVerification    bool           `json:"ssl-hostname-verification"`
	LegacyProxy                Settings       `json:"legacy-proxy"`
	JujuProxy                  Settings       `json:"juju-proxy"`
	AptProxy                   Settings       `json:"apt-proxy"`
	AptMirror                  string         `json:"apt-mirror,omitempty"`
	SnapProxy                  Settings       `json:"snap-proxy"`
	SnapStoreAssertions        string         `json:"snap-store-assertions"`
	SnapStoreProxyID           string         `json:"snap-store-proxy-id"`
	SnapStoreProxyURL          string         `json:"snap-store-proxy-url"`
	CloudInitUserData          map[string]any `json:"cloudinit-userdata,omitempty"`
	ContainerInheritProperties string         `json:"container-inherit-properties,omitempty"`
	*UpdateBehavior
}

// ContainerManagerConfigParams names a container type.
type ContainerManagerConfigParams struct {
	Type string `json:"type"`
}

// ContainerManagerConfig is the container manager's configuration.
type ContainerManagerConfig struct {
	ManagerConfig map[string]string `json:"config"`
}

// ControllerAPIInfoResult is one model's controller API info.
type ControllerAPIInfoResult struct {
	Addresses []string `json:"addresses"`
	CACert    string   `json:"cacert"`
	Error     *Error   `json:"error,omitempty"`
}

// ControllerAPIInfoResults is a bulk of ControllerAPIInfoResult.
type ControllerAPIInfoResults struct {
	Results []ControllerAPIInfoResult `json:"results"`
}

// DistributionGroupResult lists instance ids.
type DistributionGroupResult struct {
	Error  *Error   `json:"error,omitempty"`
	Result []string `json:"result"`
}

// DistributionGroupResults is a bulk of DistributionGroupResult.
type DistributionGroupResults struct {
	Results []DistributionGroupResult `json:"results"`
}

// FindToolsParams filters FindTools. Number is a version string.
type FindToolsParams struct {
	Number       string `json:"number"`
	MajorVersion int    `json:"major"`
	Arch         string `json:"arch"`
	OSType       string `json:"os-type"`
	AgentStream  string `json:"agentstream"`
}

// Tools is one agent binary. Version is a binary version string.
type Tools struct {
	Version string `json:"version"`
	URL     string `json:"url"`
	SHA256  string `json:"sha256,omitempty"`
	Size    int64  `json:"size"`
}

// FindToolsResult lists matching agent binaries.
type FindToolsResult struct {
	List  []Tools `json:"list"`
	Error *Error  `json:"error,omitempty"`
}

// ToolsResult lists one entity's agent binaries.
type ToolsResult struct {
	Error *Error  `json:"error,omitempty"`
	Tools []Tools `json:"tools"`
}

// ToolsResults is a bulk of ToolsResult.
type ToolsResults struct {
	Results []ToolsResult `json:"results"`
}

// Address is a network address (network.ProviderAddress on the wire).
type Address struct {
	Value       string `json:"value"`
	Type        string `json:"type"`
	Scope       string `json:"scope"`
	SpaceName   string `json:"space-name,omitempty"`
	SpaceID     string `json:"space-id,omitempty"`
	CIDR        string `json:"cidr,omitempty"`
	ConfigType  string `json:"config-type,omitempty"`
	IsSecondary bool   `json:"is-secondary,omitempty"`
}

// NetworkRoute is a route of a NetworkConfig.
type NetworkRoute struct {
	DestinationCIDR string `json:"destination-cidr"`
	GatewayIP       string `json:"gateway-ip"`
	Metric          int    `json:"metric"`
}

// NetworkConfig describes one network interface.
type NetworkConfig struct {
	DeviceIndex         int            `json:"device-index"`
	MACAddress          string         `json:"mac-address"`
	CIDR                string         `json:"cidr"`
	MTU                 int            `json:"mtu"`
	ProviderId          string         `json:"provider-id"`
	ProviderNetworkId   string         `json:"provider-network-id"`
	ProviderSubnetId    string         `json:"provider-subnet-id"`
	ProviderSpaceId     string         `json:"provider-space-id"`
	ProviderAddressId   string         `json:"provider-address-id"`
	ProviderVLANId      string         `json:"provider-vlan-id"`
	VLANTag             int            `json:"vlan-tag"`
	InterfaceName       string         `json:"interface-name"`
	ParentInterfaceName string         `json:"parent-interface-name"`
	InterfaceType       string         `json:"interface-type"`
	Disabled            bool           `json:"disabled"`
	NoAutoStart         bool           `json:"no-auto-start,omitempty"`
	ConfigType          string         `json:"config-type,omitempty"`
	Address             string         `json:"address,omitempty"`
	Addresses           []Address      `json:"addresses,omitempty"`
	ShadowAddresses     []Address      `json:"shadow-addresses,omitempty"`
	DNSServers          []string       `json:"dns-servers,omitempty"`
	DNSSearchDomains    []string       `json:"dns-search-domains,omitempty"`
	GatewayAddress      string         `json:"gateway-address,omitempty"`
	Routes              []NetworkRoute `json:"routes,omitempty"`
	IsDefaultGateway    bool           `json:"is-default-gateway,omitempty"`
	VirtualPortType     string         `json:"virtual-port-type,omitempty"`
	NetworkOrigin       string         `json:"origin,omitempty"`
}

// MachineNetworkConfigResult is one container's network config.
type MachineNetworkConfigResult struct {
	Error  *Error          `json:"error,omitempty"`
	Config []NetworkConfig `json:"info"`
}

// MachineNetworkConfigResults is a bulk of MachineNetworkConfigResult.
type MachineNetworkConfigResults struct {
	Results []MachineNetworkConfigResult `json:"results"`
}

// SetMachineNetworkConfig reports a machine's network config.
type SetMachineNetworkConfig struct {
	Tag    string          `json:"tag"`
	Config []NetworkConfig `json:"config"`
}

// CharmLXDProfile is an LXD profile of a charm.
type CharmLXDProfile struct {
	Config      map[string]string            `json:"config"`
	Description string                       `json:"description"`
	Devices     map[string]map[string]string `json:"devices"`
}

// ContainerLXDProfile is a named profile.
type ContainerLXDProfile struct {
	Profile CharmLXDProfile `json:"profile"`
	Name    string          `json:"name"`
}

// ContainerProfileResult lists a container's profiles.
type ContainerProfileResult struct {
	Error       *Error                `json:"error,omitempty"`
	LXDProfiles []ContainerLXDProfile `json:"lxd-profiles,omitempty"`
}

// ContainerProfileResults is a bulk of ContainerProfileResult.
type ContainerProfileResults struct {
	Results []ContainerProfileResult `json:"results"`
}

// DeviceBridgeInfo is a bridge the host needs.
type DeviceBridgeInfo struct {
	HostDeviceName string `json:"host-device-name"`
	BridgeName     string `json:"bridge-name"`
	MACAddress     string `json:"mac-address"`
}

// HostNetworkChange lists the bridges a host needs for a container.
type HostNetworkChange struct {
	Error            *Error             `json:"error,omitempty"`
	NewBridges       []DeviceBridgeInfo `json:"new-bridges"`
	ReconfigureDelay int                `json:"reconfigure-delay"`
}

// HostNetworkChangeResults is a bulk of HostNetworkChange.
type HostNetworkChangeResults struct {
	Results []HostNetworkChange `json:"results"`
}

// Base is an OS base.
type Base struct {
	Name    string `json:"name"`
	Channel string `json:"channel"`
}

// VolumeAttachmentParams asks for an attachment.
type VolumeAttachmentParams struct {
	VolumeTag  string `json:"volume-tag"`
	MachineTag string `json:"machine-tag"`
	VolumeId   string `json:"volume-id,omitempty"`
	InstanceId string `json:"instance-id,omitempty"`
	Provider   string `json:"provider"`
	ReadOnly   bool   `json:"read-only,omitempty"`
}

// VolumeParams asks for a volume.
type VolumeParams struct {
	VolumeTag  string                  `json:"volume-tag"`
	Size       uint64                  `json:"size"`
	Provider   string                  `json:"provider"`
	Attributes map[string]any          `json:"attributes,omitempty"`
	Tags       map[string]string       `json:"tags,omitempty"`
	Attachment *VolumeAttachmentParams `json:"attachment,omitempty"`
}

// CloudImageMetadata describes an image.
type CloudImageMetadata struct {
	ImageId         string  `json:"image-id"`
	Stream          string  `json:"stream,omitempty"`
	Region          string  `json:"region"`
	Version         string  `json:"version"`
	Arch            string  `json:"arch"`
	VirtType        string  `json:"virt-type,omitempty"`
	RootStorageType string  `json:"root-storage-type,omitempty"`
	RootStorageSize *uint64 `json:"root-storage-size,omitempty"`
	Source          string  `json:"source"`
	Priority        int     `json:"priority"`
}

// ProvisioningInfo is what the provisioner needs to start an instance.
// ProvisioningNetworkTopology is embedded in Juju; its keys are flat here.
type ProvisioningInfo struct {
	Constraints       Value                    `json:"constraints"`
	Base              Base                     `json:"base"`
	Placement         string                   `json:"placement"`
	Jobs              []string                 `json:"jobs"`
	RootDisk          *VolumeParams            `json:"root-disk,omitempty"`
	Volumes           []VolumeParams           `json:"volumes,omitempty"`
	VolumeAttachments []VolumeAttachmentParams `json:"volume-attachments,omitempty"`
	Tags              map[string]string        `json:"tags,omitempty"`
	ImageMetadata     []CloudImageMetadata     `json:"image-metadata,omitempty"`
	EndpointBindings  map[string]string        `json:"endpoint-bindings,omitempty"`
	ControllerConfig  map[string]any           `json:"controller-config,omitempty"`
	CloudInitUserData map[string]any           `json:"cloudinit-userdata,omitempty"`
	CharmLXDProfiles  []string                 `json:"charm-lxd-profiles,omitempty"`
	SpaceSubnets      map[string][]string      `json:"space-subnets"`
	SubnetAZs         map[string][]string      `json:"subnet-zones"`
}

// ProvisioningInfoResult is one machine's provisioning info.
type ProvisioningInfoResult struct {
	Error  *Error            `json:"error,omitempty"`
	Result *ProvisioningInfo `json:"result"`
}

// ProvisioningInfoResults is a bulk of ProvisioningInfoResult.
type ProvisioningInfoResults struct {
	Results []ProvisioningInfoResult `json:"results"`
}

// HardwareCharacteristics describe an instance.
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

// VolumeInfo describes a provisioned volume.
type VolumeInfo struct {
	VolumeId   string `json:"volume-id"`
	HardwareId string `json:"hardware-id,omitempty"`
	WWN        string `json:"wwn,omitempty"`
	Pool       string `json:"pool,omitempty"`
	Size       uint64 `json:"size"`
	Persistent bool   `json:"persistent"`
}

// Volume is a provisioned volume.
type Volume struct {
	VolumeTag string     `json:"volume-tag"`
	Info      VolumeInfo `json:"info"`
}

// VolumeAttachmentPlanInfo describes how to attach a volume.
type VolumeAttachmentPlanInfo struct {
	DeviceType       string            `json:"device-type,omitempty"`
	DeviceAttributes map[string]string `json:"device-attributes,omitempty"`
}

// VolumeAttachmentInfo describes a provisioned attachment.
type VolumeAttachmentInfo struct {
	DeviceName string                    `json:"device-name,omitempty"`
	DeviceLink string                    `json:"device-link,omitempty"`
	BusAddress string                    `json:"bus-address,omitempty"`
	ReadOnly   bool                      `json:"read-only,omitempty"`
	PlanInfo   *VolumeAttachmentPlanInfo `json:"plan-info,omitempty"`
}

// InstanceInfo records one machine's provisioning.
type InstanceInfo struct {
	Tag               string                          `json:"tag"`
	InstanceId        string                          `json:"instance-id"`
	DisplayName       string                          `json:"display-name"`
	Nonce             string                          `json:"nonce"`
	Characteristics   *HardwareCharacteristics        `json:"characteristics"`
	Volumes           []Volume                        `json:"volumes"`
	VolumeAttachments map[string]VolumeAttachmentInfo `json:"volume-attachments"`
	NetworkConfig     []NetworkConfig                 `json:"network-config"`
	CharmProfiles     []string                        `json:"charm-profiles"`
}

// InstancesInfo is the argument of SetInstanceInfo.
type InstancesInfo struct {
	Machines []InstanceInfo `json:"machines"`
}

// MachineContainerResult lists the container types a machine supports.
type MachineContainerResult struct {
	Error          *Error   `json:"error,omitempty"`
	ContainerTypes []string `json:"container-types"`
	Determined     bool     `json:"determined"`
}

// MachineContainerResults is a bulk of MachineContainerResult.
type MachineContainerResults struct {
	Results []MachineContainerResult `json:"results"`
}

// MachineContainers sets one machine's supported container types.
type MachineContainers struct {
	MachineTag     string   `json:"machine-tag"`
	ContainerTypes []string `json:"container-types"`
}

// MachineContainersParams is the argument of SetSupportedContainers.
type MachineContainersParams struct {
	Params []MachineContainers `json:"params"`
}

// SetProfileArg sets one machine's charm profiles.
type SetProfileArg struct {
	Entity   Entity   `json:"entity"`
	Profiles []string `json:"profiles"`
}

// SetProfileArgs is the argument of SetCharmProfiles.
type SetProfileArgs struct {
	Args []SetProfileArg `json:"args"`
}

// WatchContainer names a machine and a container type ("": any).
type WatchContainer struct {
	MachineTag    string `json:"machine-tag"`
	ContainerType string `json:"container-type"`
}

// WatchContainers is the argument of WatchContainers.
type WatchContainers struct {
	Params []WatchContainer `json:"params"`
}
