package params

import "time"

// Wire types of the Provisioner facade, versions 0 and 1 (the 2015 seed).
// 2015 params structs had no json tags, so the keys are the Go field names
// and nothing is omitted (a nil error is "Error": null). The exceptions
// (specs/provisioner.md §0.1): the network types carry explicit CamelCase
// tags (MachineNetworkConfigResult.Config is "Info"), the storage types
// lower-case tags, and ContainerConfig flattens its embedded
// *UpdateBehavior.

// V1Error is the 2015 per-item error.
type V1Error struct {
	Message string `json:"Message"`
	Code    string `json:"Code"`
}

// V1Entity names one entity.
type V1Entity struct {
	Tag string `json:"Tag"`
}

// V1Entities is the argument of most bulk calls.
type V1Entities struct {
	Entities []V1Entity `json:"Entities"`
}

// V1ErrorResult is one item of V1ErrorResults.
type V1ErrorResult struct {
	Error *V1Error `json:"Error"`
}

// V1ErrorResults reports one error per item.
type V1ErrorResults struct {
	Results []V1ErrorResult `json:"Results"`
}

// V1StringResult holds a string or an error.
type V1StringResult struct {
	Error  *V1Error `json:"Error"`
	Result string   `json:"Result"`
}

// V1StringResults is a bulk of V1StringResult.
type V1StringResults struct {
	Results []V1StringResult `json:"Results"`
}

// V1StringsResult holds strings or an error.
type V1StringsResult struct {
	Error  *V1Error `json:"Error"`
	Result []string `json:"Result"`
}

// V1LifeResult is one entity's life.
type V1LifeResult struct {
	Life  string   `json:"Life"`
	Error *V1Error `json:"Error"`
}

// V1LifeResults is a bulk of V1LifeResult.
type V1LifeResults struct {
	Results []V1LifeResult `json:"Results"`
}

// V1EntityStatusArgs sets one entity's status.
type V1EntityStatusArgs struct {
	Tag    string         `json:"Tag"`
	Status string         `json:"Status"`
	Info   string         `json:"Info"`
	Data   map[string]any `json:"Data"`
}

// V1SetStatus is the argument of SetStatus and UpdateStatus.
type V1SetStatus struct {
	Entities []V1EntityStatusArgs `json:"Entities"`
}

// V1StatusResult is one entity's status.
type V1StatusResult struct {
	Error  *V1Error       `json:"Error"`
	Id     string         `json:"Id"`
	Life   string         `json:"Life"`
	Status string         `json:"Status"`
	Info   string         `json:"Info"`
	Data   map[string]any `json:"Data"`
	Since  *time.Time     `json:"Since"`
}

// V1StatusResults is a bulk of V1StatusResult.
type V1StatusResults struct {
	Results []V1StatusResult `json:"Results"`
}

// V1EntityPassword is one password change.
type V1EntityPassword struct {
	Tag      string `json:"Tag"`
	Password string `json:"Password"`
}

// V1EntityPasswords is the argument of SetPasswords.
type V1EntityPasswords struct {
	Changes []V1EntityPassword `json:"Changes"`
}

// V1NotifyWatchResult is the result of a notify Watch* call.
type V1NotifyWatchResult struct {
	NotifyWatcherId string   `json:"NotifyWatcherId"`
	Error           *V1Error `json:"Error"`
}

// V1StringsWatchResult is the result of a strings Watch* call.
type V1StringsWatchResult struct {
	StringsWatcherId string   `json:"StringsWatcherId"`
	Changes          []string `json:"Changes"`
	Error            *V1Error `json:"Error"`
}

// V1StringsWatchResults is a bulk of V1StringsWatchResult.
type V1StringsWatchResults struct {
	Results []V1StringsWatchResult `json:"Results"`
}

// V1WatchContainer names a machine and a container type.
type V1WatchContainer struct {
	MachineTag    string `json:"MachineTag"`
	ContainerType string `json:"ContainerType"`
}

// V1WatchContainers is the argument of WatchContainers.
type V1WatchContainers struct {
	Params []V1WatchContainer `json:"Params"`
}

// V1MachineContainers sets one machine's supported container types.
type V1MachineContainers struct {
	MachineTag     string   `json:"MachineTag"`
	ContainerTypes []string `json:"ContainerTypes"`
}

// V1MachineContainersParams is the argument of SetSupportedContainers.
type V1MachineContainersParams struct {
	Params []V1MachineContainers `json:"Params"`
}

// V1ContainerManagerConfigParams names a container type.
type V1ContainerManagerConfigParams struct {
	Type string `json:"Type"`
}

// V1ContainerManagerConfig is the container manager's configuration.
type V1ContainerManagerConfig struct {
	ManagerConfig map[string]string `json:"ManagerConfig"`
}

// V1ProxySettings are 2015 proxy.Settings.
type V1ProxySettings struct {
	Http    string `json:"Http"`
	Https   string `json:"Https"`
	Ftp     string `json:"Ftp"`
	NoProxy string `json:"NoProxy"`
}

// V1ContainerConfig is the result of ContainerConfig; the embedded
// *UpdateBehavior of 2015 is flattened.
type V1ContainerConfig struct {
	ProviderType            string          `json:"ProviderType"`
	AuthorizedKeys          string          `json:"AuthorizedKeys"`
	SSLHostnameVerification bool            `json:"SSLHostnameVerification"`
	Proxy                   V1ProxySettings `json:"Proxy"`
	AptProxy                V1ProxySettings `json:"AptProxy"`
	AptMirror               string          `json:"AptMirror"`
	PreferIPv6              bool            `json:"PreferIPv6"`
	AllowLXCLoopMounts      bool            `json:"AllowLXCLoopMounts"`
	EnableOSRefreshUpdate   bool            `json:"EnableOSRefreshUpdate"`
	EnableOSUpgrade         bool            `json:"EnableOSUpgrade"`
}

// V1EnvironConfigResult carries the environ config.
type V1EnvironConfigResult struct {
	Config map[string]any `json:"Config"`
}

// V1HostPort is a 2015 network.HostPort: the embedded Address flattened.
type V1HostPort struct {
	Value       string `json:"Value"`
	Type        string `json:"Type"`
	NetworkName string `json:"NetworkName"`
	Scope       string `json:"Scope"`
	Port        int    `json:"Port"`
}

// V1APIHostPortsResult lists the API servers' addresses.
type V1APIHostPortsResult struct {
	Servers [][]V1HostPort `json:"Servers"`
}

// V1BytesResult carries bytes (base64 on the wire).
type V1BytesResult struct {
	Result []byte `json:"Result"`
}

// V1Value is a 2015 constraints.Value (which had json tags).
type V1Value struct {
	Arch         *string   `json:"arch,omitempty"`
	Container    *string   `json:"container,omitempty"`
	CpuCores     *uint64   `json:"cpu-cores,omitempty"`
	CpuPower     *uint64   `json:"cpu-power,omitempty"`
	Mem          *uint64   `json:"mem,omitempty"`
	RootDisk     *uint64   `json:"root-disk,omitempty"`
	Tags         *[]string `json:"tags,omitempty"`
	InstanceType *string   `json:"instance-type,omitempty"`
	Spaces       *[]string `json:"spaces,omitempty"`
	Networks     *[]string `json:"networks,omitempty"`
}

// V1ConstraintsResult is one machine's constraints.
type V1ConstraintsResult struct {
	Error       *V1Error `json:"Error"`
	Constraints V1Value  `json:"Constraints"`
}

// V1ConstraintsResults is a bulk of V1ConstraintsResult.
type V1ConstraintsResults struct {
	Results []V1ConstraintsResult `json:"Results"`
}

// V1DistributionGroupResult lists instance ids.
type V1DistributionGroupResult struct {
	Error  *V1Error `json:"Error"`
	Result []string `json:"Result"`
}

// V1DistributionGroupResults is a bulk of V1DistributionGroupResult.
type V1DistributionGroupResults struct {
	Results []V1DistributionGroupResult `json:"Results"`
}

// V1RequestedNetworkResult lists a machine's requested networks.
type V1RequestedNetworkResult struct {
	Error    *V1Error `json:"Error"`
	Networks []string `json:"Networks"`
}

// V1RequestedNetworksResults is a bulk of V1RequestedNetworkResult.
type V1RequestedNetworksResults struct {
	Results []V1RequestedNetworkResult `json:"Results"`
}

// V1VolumeAttachmentParams (storage.go: lower-case tags).
type V1VolumeAttachmentParams struct {
	VolumeTag  string `json:"volumetag"`
	MachineTag string `json:"machinetag"`
	VolumeId   string `json:"volumeid,omitempty"`
	InstanceId string `json:"instanceid,omitempty"`
	Provider   string `json:"provider"`
	ReadOnly   bool   `json:"read-only,omitempty"`
}

// V1VolumeParams (storage.go: lower-case tags).
type V1VolumeParams struct {
	VolumeTag  string                    `json:"volumetag"`
	Size       uint64                    `json:"size"`
	Provider   string                    `json:"provider"`
	Attributes map[string]any            `json:"attributes,omitempty"`
	Tags       map[string]string         `json:"tags,omitempty"`
	Attachment *V1VolumeAttachmentParams `json:"attachment,omitempty"`
}

// V1ProvisioningInfo is the 2015 (version 1) provisioning info.
type V1ProvisioningInfo struct {
	Constraints    V1Value             `json:"Constraints"`
	Series         string              `json:"Series"`
	Placement      string              `json:"Placement"`
	Networks       []string            `json:"Networks"`
	Jobs           []string            `json:"Jobs"`
	Volumes        []V1VolumeParams    `json:"Volumes"`
	Tags           map[string]string   `json:"Tags"`
	SubnetsToZones map[string][]string `json:"SubnetsToZones"`
}

// V1ProvisioningInfoResult is one machine's provisioning info.
type V1ProvisioningInfoResult struct {
	Error  *V1Error            `json:"Error"`
	Result *V1ProvisioningInfo `json:"Result"`
}

// V1ProvisioningInfoResults is a bulk of V1ProvisioningInfoResult.
type V1ProvisioningInfoResults struct {
	Results []V1ProvisioningInfoResult `json:"Results"`
}

// V1HardwareCharacteristics is 2015 instance.HardwareCharacteristics
// (json tags with omitempty).
type V1HardwareCharacteristics struct {
	Arch             *string   `json:"arch,omitempty"`
	Mem              *uint64   `json:"mem,omitempty"`
	RootDisk         *uint64   `json:"root-disk,omitempty"`
	CpuCores         *uint64   `json:"cpu-cores,omitempty"`
	CpuPower         *uint64   `json:"cpu-power,omitempty"`
	Tags             *[]string `json:"tags,omitempty"`
	AvailabilityZone *string   `json:"availability-zone,omitempty"`
}

// V1MachineSetProvisioned is one item of SetProvisioned.
type V1MachineSetProvisioned struct {
	Tag             string                     `json:"Tag"`
	InstanceId      string                     `json:"InstanceId"`
	Nonce           string                     `json:"Nonce"`
	Characteristics *V1HardwareCharacteristics `json:"Characteristics"`
}

// V1SetProvisioned is the argument of SetProvisioned.
type V1SetProvisioned struct {
	Machines []V1MachineSetProvisioned `json:"Machines"`
}

// V1Network is a 2015 network (network.go: CamelCase tags).
type V1Network struct {
	Tag        string `json:"Tag"`
	ProviderId string `json:"ProviderId"`
	CIDR       string `json:"CIDR"`
	VLANTag    int    `json:"VLANTag"`
}

// V1NetworkInterface is a 2015 network interface.
type V1NetworkInterface struct {
	MACAddress    string `json:"MACAddress"`
	NetworkTag    string `json:"NetworkTag"`
	InterfaceName string `json:"InterfaceName"`
	IsVirtual     bool   `json:"IsVirtual"`
	Disabled      bool   `json:"Disabled"`
}

// V1VolumeInfo (storage.go).
type V1VolumeInfo struct {
	VolumeId   string `json:"volumeid"`
	HardwareId string `json:"hardwareid,omitempty"`
	Size       uint64 `json:"size"`
	Persistent bool   `json:"persistent"`
}

// V1Volume (storage.go).
type V1Volume struct {
	VolumeTag string       `json:"volumetag"`
	Info      V1VolumeInfo `json:"info"`
}

// V1VolumeAttachmentInfo (storage.go).
type V1VolumeAttachmentInfo struct {
	DeviceName string `json:"devicename,omitempty"`
	BusAddress string `json:"busaddress,omitempty"`
	ReadOnly   bool   `json:"read-only,omitempty"`
}

// V1InstanceInfo records one machine's provisioning.
type V1InstanceInfo struct {
	Tag               string                            `json:"Tag"`
	InstanceId        string                            `json:"InstanceId"`
	Nonce             string                            `json:"Nonce"`
	Characteristics   *V1HardwareCharacteristics        `json:"Characteristics"`
	Networks          []V1Network                       `json:"Networks"`
	Interfaces        []V1NetworkInterface              `json:"Interfaces"`
	Volumes           []V1Volume                        `json:"Volumes"`
	VolumeAttachments map[string]V1VolumeAttachmentInfo `json:"VolumeAttachments"`
}

// V1InstancesInfo is the argument of SetInstanceInfo.
type V1InstancesInfo struct {
	Machines []V1InstanceInfo `json:"Machines"`
}

// V1Tools is a 2015 tools.Tools (json tags; Version a string).
type V1Tools struct {
	Version string `json:"version"`
	URL     string `json:"url"`
	SHA256  string `json:"sha256,omitempty"`
	Size    int64  `json:"size"`
}

// V1ToolsResult is one entity's agent binaries.
type V1ToolsResult struct {
	Tools                          *V1Tools `json:"Tools"`
	DisableSSLHostnameVerification bool     `json:"DisableSSLHostnameVerification"`
	Error                          *V1Error `json:"Error"`
}

// V1ToolsResults is a bulk of V1ToolsResult.
type V1ToolsResults struct {
	Results []V1ToolsResult `json:"Results"`
}

// V1FindToolsParams filters FindTools.
type V1FindToolsParams struct {
	Number       string `json:"Number"`
	MajorVersion int    `json:"MajorVersion"`
	MinorVersion int    `json:"MinorVersion"`
	Arch         string `json:"Arch"`
	Series       string `json:"Series"`
}

// V1FindToolsResult lists matching agent binaries.
type V1FindToolsResult struct {
	List  []V1Tools `json:"List"`
	Error *V1Error  `json:"Error"`
}

// V1NetworkConfig is a 2015 container NIC config (CamelCase tags).
type V1NetworkConfig struct {
	DeviceIndex      int               `json:"DeviceIndex"`
	MACAddress       string            `json:"MACAddress"`
	CIDR             string            `json:"CIDR"`
	NetworkName      string            `json:"NetworkName"`
	ProviderId       string            `json:"ProviderId"`
	ProviderSubnetId string            `json:"ProviderSubnetId"`
	VLANTag          int               `json:"VLANTag"`
	InterfaceName    string            `json:"InterfaceName"`
	Disabled         bool              `json:"Disabled"`
	NoAutoStart      bool              `json:"NoAutoStart"`
	ConfigType       string            `json:"ConfigType"`
	Address          string            `json:"Address"`
	DNSServers       []string          `json:"DNSServers"`
	GatewayAddress   string            `json:"GatewayAddress"`
	ExtraConfig      map[string]string `json:"ExtraConfig"`
}

// V1MachineNetworkConfigResult is one container's network config; the
// Config field goes on the wire as "Info".
type V1MachineNetworkConfigResult struct {
	Error  *V1Error          `json:"Error"`
	Config []V1NetworkConfig `json:"Info"`
}

// V1MachineNetworkConfigResults is a bulk of V1MachineNetworkConfigResult.
type V1MachineNetworkConfigResults struct {
	Results []V1MachineNetworkConfigResult `json:"Results"`
}

// ToV1Error converts a per-item error to its 2015 shape.
func ToV1Error(e *Error) *V1Error {
	if e == nil {
		return nil
	}
	return &V1Error{Message: e.Message, Code: e.Code}
}
