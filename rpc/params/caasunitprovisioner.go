package params

import (
	"encoding/json"
	"time"
)

// Wire types of CAASUnitProvisioner v2 (specs/caasunitprovisioner.md),
// JSON keys as the schema. Types other facades may share (SetStatus,
// EntityStatusArgs, IntResults, Value, Address) are here too until a
// second user moves them to common.go.

// CharmURL names a charm.
type CharmURL struct {
	URL string `json:"url"`
}

// Charm is a charm as CharmInfo returns it.
type Charm struct {
	Revision   int                    `json:"revision"`
	URL        string                 `json:"url"`
	Config     map[string]CharmOption `json:"config"`
	Meta       *CharmMeta             `json:"meta,omitempty"`
	Actions    *CharmActions          `json:"actions,omitempty"`
	Metrics    *CharmMetrics          `json:"metrics,omitempty"`
	Manifest   *CharmManifest         `json:"manifest,omitempty"`
	LXDProfile *CharmLXDProfile       `json:"lxd-profile,omitempty"`
}

// CharmOption is one config option.
type CharmOption struct {
	Type        string `json:"type"`
	Description string `json:"description,omitempty"`
	Default     any    `json:"default,omitempty"`
}

// CharmMeta is a charm's metadata.
type CharmMeta struct {
	Name           string                       `json:"name"`
	Summary        string                       `json:"summary"`
	Description    string                       `json:"description"`
	Subordinate    bool                         `json:"subordinate"`
	Provides       map[string]CharmRelation     `json:"provides,omitempty"`
	Requires       map[string]CharmRelation     `json:"requires,omitempty"`
	Peers          map[string]CharmRelation     `json:"peers,omitempty"`
	ExtraBindings  map[string]string            `json:"extra-bindings,omitempty"`
	Categories     []string                     `json:"categories,omitempty"`
	Tags           []string                     `json:"tags,omitempty"`
	Series         []string                     `json:"series,omitempty"`
	Storage        map[string]CharmStorage      `json:"storage,omitempty"`
	Deployment     *CharmDeployment             `json:"deployment,omitempty"`
	Devices        map[string]CharmDevice       `json:"devices,omitempty"`
	PayloadClasses map[string]CharmPayloadClass `json:"payload-classes,omitempty"`
	Resources      map[string]CharmResourceMeta `json:"resources,omitempty"`
	Terms          []string                     `json:"terms,omitempty"`
	MinJujuVersion string                       `json:"min-juju-version,omitempty"` // as Juju's tag; always filled ("0.0.0" when unset), so always sent
	Containers     map[string]CharmContainer    `json:"containers,omitempty"`
	AssumesExpr    *ExpressionTree              `json:"assumes-expr,omitempty"`
}

// CharmRelation is one relation endpoint.
type CharmRelation struct {
	Name      string `json:"name"`
	Role      string `json:"role"`
	Interface string `json:"interface"`
	Optional  bool   `json:"optional"`
	Limit     int    `json:"limit"`
	Scope     string `json:"scope"`
}

// CharmStorage is one storage entry of a charm.
type CharmStorage struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Type        string   `json:"type"`
	Shared      bool     `json:"shared"`
	ReadOnly    bool     `json:"read-only"`
	CountMin    int      `json:"count-min"`
	CountMax    int      `json:"count-max"`
	MinimumSize uint64   `json:"minimum-size"`
	Location    string   `json:"location,omitempty"`
	Properties  []string `json:"properties,omitempty"`
}

// CharmDeployment is a Kubernetes charm's deployment.
type CharmDeployment struct {
	DeploymentType string `json:"type"`
	DeploymentMode string `json:"mode"`
	ServiceType    string `json:"service"`
	MinVersion     string `json:"min-version"`
}

// CharmDevice is a device a charm asks for (keys capitalised).
type CharmDevice struct {
	Name        string `json:"Name"`
	Description string `json:"Description"`
	Type        string `json:"Type"`
	CountMin    int64  `json:"CountMin"`
	CountMax    int64  `json:"CountMax"`
}

// CharmPayloadClass is a payload class.
type CharmPayloadClass struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// CharmResourceMeta is a resource a charm declares.
type CharmResourceMeta struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Path        string `json:"path"`
	Description string `json:"description"`
}

// CharmContainer is a sidecar container.
type CharmContainer struct {
	Resource string       `json:"resource,omitempty"`
	Mounts   []CharmMount `json:"mounts,omitempty"`
}

// CharmMount mounts storage into a container.
type CharmMount struct {
	Storage  string `json:"storage,omitempty"`
	Location string `json:"location,omitempty"`
}

// ExpressionTree is a charm's assumes block. Juju's type has its own JSON
// form, the block's expression list as metadata.yaml writes it
// (["k8s-api", "juju >= 3.1", {"any-of": [...]}]), not the {"Expression":
// ...} object the schema shows; Juju's client decodes only the list and
// fails the whole CharmInfo on anything else.
type ExpressionTree struct {
	Expressions []any
}

// MarshalJSON writes the expression list.
func (t ExpressionTree) MarshalJSON() ([]byte, error) {
	if t.Expressions == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(t.Expressions)
}

// UnmarshalJSON reads the expression list.
func (t *ExpressionTree) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &t.Expressions) }

// CharmActions are a charm's actions.
type CharmActions struct {
	ActionSpecs map[string]CharmActionSpec `json:"specs,omitempty"`
}

// CharmActionSpec is one action.
type CharmActionSpec struct {
	Description string         `json:"description"`
	Params      map[string]any `json:"params"`
}

// CharmMetrics are a charm's metrics.
type CharmMetrics struct {
	Metrics map[string]CharmMetric `json:"metrics"`
	Plan    CharmPlan              `json:"plan"`
}

// CharmMetric is one metric.
type CharmMetric struct {
	Type        string `json:"type"`
	Description string `json:"description"`
}

// CharmPlan says whether a plan is required.
type CharmPlan struct {
	Required bool `json:"required"`
}

// CharmManifest is a charm's manifest.
type CharmManifest struct {
	Bases []CharmBase `json:"bases,omitempty"`
}

// CharmBase is one base of a manifest.
type CharmBase struct {
	Name          string   `json:"name,omitempty"`
	Channel       string   `json:"channel,omitempty"`
	Architectures []string `json:"architectures,omitempty"`
}

// IntResult holds one int or an error.
type IntResult struct {
	Error  *Error `json:"error,omitempty"`
	Result int    `json:"result"`
}

// IntResults is a bulk of IntResult.
type IntResults struct {
	Results []IntResult `json:"results"`
}

// ConfigResult holds a config map or an error.
type ConfigResult struct {
	Config map[string]any `json:"config"`
	Error  *Error         `json:"error,omitempty"`
}

// ApplicationGetConfigResults is ApplicationsConfig's result; the key
// really is capitalised.
type ApplicationGetConfigResults struct {
	Results []ConfigResult `json:"Results"`
}

// KubernetesProvisioningInfoResults is ProvisioningInfo's result.
type KubernetesProvisioningInfoResults struct {
	Results []KubernetesProvisioningInfoResult `json:"results"`
}

// KubernetesProvisioningInfoResult is one application's info.
type KubernetesProvisioningInfoResult struct {
	Error  *Error                      `json:"error,omitempty"`
	Result *KubernetesProvisioningInfo `json:"result"`
}

// KubernetesProvisioningInfo is what the unit provisioner needs to run an
// application's pods.
type KubernetesProvisioningInfo struct {
	DeploymentInfo       *KubernetesDeploymentInfo    `json:"deployment-info,omitempty"`
	PodSpec              string                       `json:"pod-spec"`
	RawK8sSpec           string                       `json:"raw-k8s-spec,omitempty"`
	Constraints          Value                        `json:"constraints"`
	Tags                 map[string]string            `json:"tags,omitempty"`
	Filesystems          []KubernetesFilesystemParams `json:"filesystems,omitempty"`
	Volumes              []KubernetesVolumeParams     `json:"volumes,omitempty"`
	Devices              []KubernetesDeviceParams     `json:"devices,omitempty"`
	CharmModifiedVersion int                          `json:"charm-modified-version,omitempty"`
	ImageRepo            DockerImageInfo              `json:"image-repo,omitempty"`
}

// KubernetesDeploymentInfo is the charm's deployment type and service.
type KubernetesDeploymentInfo struct {
	DeploymentType string `json:"deployment-type"`
	ServiceType    string `json:"service-type"`
}

// KubernetesFilesystemParams describe one filesystem of a pod.
type KubernetesFilesystemParams struct {
	StorageName string                                `json:"storagename"`
	Size        uint64                                `json:"size"`
	Provider    string                                `json:"provider"`
	Attributes  map[string]any                        `json:"attributes,omitempty"`
	Tags        map[string]string                     `json:"tags,omitempty"`
	Attachment  *KubernetesFilesystemAttachmentParams `json:"attachment,omitempty"`
}

// KubernetesFilesystemAttachmentParams say where a filesystem is mounted.
type KubernetesFilesystemAttachmentParams struct {
	Provider   string `json:"provider"`
	MountPoint string `json:"mount-point,omitempty"`
	ReadOnly   bool   `json:"read-only,omitempty"`
}

// KubernetesVolumeParams describe a volume (never sent).
type KubernetesVolumeParams struct {
	StorageName string                            `json:"storagename"`
	Size        uint64                            `json:"size"`
	Provider    string                            `json:"provider"`
	Attributes  map[string]any                    `json:"attributes,omitempty"`
	Tags        map[string]string                 `json:"tags,omitempty"`
	Attachment  *KubernetesVolumeAttachmentParams `json:"attachment,omitempty"`
}

// KubernetesVolumeAttachmentParams describe a volume attachment.
type KubernetesVolumeAttachmentParams struct {
	Provider string `json:"provider"`
	ReadOnly bool   `json:"read-only,omitempty"`
}

// KubernetesDeviceParams ask for devices. Juju's struct has bson tags
// only, so encoding/json sends every field under its Go name, Attributes
// too when it is nil (null).
type KubernetesDeviceParams struct {
	Type       string            `json:"Type"`
	Count      int64             `json:"Count"`
	Attributes map[string]string `json:"Attributes"`
}

// DockerImageInfo is an image and the credentials of its registry.
type DockerImageInfo struct {
	RegistryPath  string `json:"image-name"`
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Email         string `json:"email,omitempty"`
	Repository    string `json:"repository,omitempty"`
	ServerAddress string `json:"serveraddress,omitempty"`
	Auth          string `json:"auth,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
	RegistryToken string `json:"registrytoken,omitempty"`
}

// EntityStatus is a status with its time.
type EntityStatus struct {
	Status string         `json:"status"`
	Info   string         `json:"info"`
	Data   map[string]any `json:"data,omitempty"`
	Since  *time.Time     `json:"since"`
}

// UpdateApplicationUnitArgs is UpdateApplicationsUnits' argument.
type UpdateApplicationUnitArgs struct {
	Args []UpdateApplicationUnits `json:"args"`
}

// UpdateApplicationUnits reports the pods of one application.
type UpdateApplicationUnits struct {
	ApplicationTag string                  `json:"application-tag"`
	Scale          *int                    `json:"scale,omitempty"`
	Generation     *int64                  `json:"generation,omitempty"`
	Status         EntityStatus            `json:"status,omitempty"`
	Units          []ApplicationUnitParams `json:"units"`
}

// ApplicationUnitParams is one pod.
type ApplicationUnitParams struct {
	ProviderId     string                     `json:"provider-id"`
	UnitTag        string                     `json:"unit-tag"`
	Address        string                     `json:"address"`
	Ports          []string                   `json:"ports"`
	Stateful       bool                       `json:"stateful,omitempty"`
	Status         string                     `json:"status"`
	Info           string                     `json:"info"`
	Data           map[string]any             `json:"data,omitempty"`
	FilesystemInfo []KubernetesFilesystemInfo `json:"filesystem-info,omitempty"`
}

// KubernetesFilesystemInfo is a pod's filesystem.
type KubernetesFilesystemInfo struct {
	StorageName  string               `json:"storagename"`
	Pool         string               `json:"pool"`
	Size         uint64               `json:"size"`
	MountPoint   string               `json:"mount-point,omitempty"`
	ReadOnly     bool                 `json:"read-only,omitempty"`
	FilesystemId string               `json:"filesystem-id"`
	Status       string               `json:"status"`
	Info         string               `json:"info"`
	Data         map[string]any       `json:"data,omitempty"`
	Volume       KubernetesVolumeInfo `json:"volume"`
}

// KubernetesVolumeInfo is the volume behind a pod's filesystem.
type KubernetesVolumeInfo struct {
	VolumeId   string         `json:"volume-id"`
	Pool       string         `json:"pool,omitempty"`
	Size       uint64         `json:"size"`
	Persistent bool           `json:"persistent"`
	Status     string         `json:"status"`
	Info       string         `json:"info"`
	Data       map[string]any `json:"data,omitempty"`
}

// UpdateApplicationUnitResults is UpdateApplicationsUnits' result.
type UpdateApplicationUnitResults struct {
	Results []UpdateApplicationUnitResult `json:"results"`
}

// UpdateApplicationUnitResult is one application's result.
type UpdateApplicationUnitResult struct {
	Info  *UpdateApplicationUnitsInfo `json:"info,omitempty"`
	Error *Error                      `json:"error,omitempty"`
}

// UpdateApplicationUnitsInfo names the units of the reported pods.
type UpdateApplicationUnitsInfo struct {
	Units []ApplicationUnitInfo `json:"units"`
}

// ApplicationUnitInfo names the unit of a pod.
type ApplicationUnitInfo struct {
	ProviderId string `json:"provider-id"`
	UnitTag    string `json:"unit-tag"`
}

// UpdateApplicationServiceArgs is UpdateApplicationsService's argument.
type UpdateApplicationServiceArgs struct {
	Args []UpdateApplicationServiceArg `json:"args"`
}

// UpdateApplicationServiceArg reports an application's service.
type UpdateApplicationServiceArg struct {
	ApplicationTag string    `json:"application-tag"`
	ProviderId     string    `json:"provider-id"`
	Addresses      []Address `json:"addresses"`
	Scale          *int      `json:"scale,omitempty"`
	Generation     *int64    `json:"generation,omitempty"`
}
