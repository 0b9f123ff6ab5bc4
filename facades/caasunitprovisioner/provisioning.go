package caasunitprovisioner

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/storage"
)

// Controller and model config keys ProvisioningInfo reads.
const (
	cfgImageRepo       = "caas-image-repo"
	cfgOperatorImage   = "caas-operator-image-path" // deprecated
	cfgAgentVersion    = "agent-version"
	cfgWorkloadStorage = "workload-storage"

	defaultImageRepo  = "docker.io/jujusolutions"
	operatorImageName = "jujud-operator"
)

// ProvisioningInfo returns what the unit provisioner needs to run the
// pods of applications (specs/caasunitprovisioner.md §5).
func (a *API) ProvisioningInfo(ctx context.Context, args params.Entities) (params.KubernetesProvisioningInfoResults, error) {
	m, err := a.st.Model(ctx, a.model)
	if err != nil {
		return params.KubernetesProvisioningInfoResults{}, err
	}
	if m.Type != state.ModelTypeCAAS {
		return params.KubernetesProvisioningInfoResults{}, errors.NotSupportedf("provisioning info on %s model", m.Type)
	}
	return params.KubernetesProvisioningInfoResults{Results: facade.Bulk(ctx, args.Entities,
		func(e params.Entity) (params.KubernetesProvisioningInfoResult, error) {
			info, err := a.provisioningInfo(ctx, m, e.Tag)
			return params.KubernetesProvisioningInfoResult{Result: info}, err
		})}, nil
}

func (a *API) provisioningInfo(ctx context.Context, m state.Model, tag string) (*params.KubernetesProvisioningInfo, error) {
	t, err := applicationTag(tag)
	if err != nil {
		return nil, err
	}
	spec, err := a.st.K8sSpec(ctx, a.model, t.Id())
	if err != nil {
		return nil, err
	}
	if spec.Spec != "" && spec.RawSpec != "" {
		return nil, facade.ClientError(errors.New("both k8s spec and raw k8s spec were set"))
	}
	app, err := a.st.Application(ctx, a.model, t.Id())
	if err != nil {
		return nil, err
	}
	ctrl, err := a.st.Controller(ctx)
	if err != nil {
		return nil, err
	}
	version, _ := m.Config[cfgAgentVersion].(string)
	if version == "" {
		return nil, errors.NewNotValid(nil, fmt.Sprintf("agent version is missing in model config %q", m.Name))
	}
	repoCfg, _ := ctrl.Config[cfgImageRepo].(string)
	details, err := imageRepoDetails(repoCfg)
	if err != nil {
		return nil, err
	}
	image := operatorImagePath(ctrl.Config, details.Repository, version)

	ch, err := a.st.Charm(ctx, a.model, app.CharmURL)
	if err != nil {
		return nil, err
	}
	mgr, err := a.st.StorageManager(ctx, a.model)
	if err != nil {
		return nil, err
	}
	charmStorage := map[string]storage.CharmStorage{}
	if ch.Meta != nil {
		for name, s := range ch.Meta.Storage {
			charmStorage[name] = storage.CharmStorage{Name: name, Kind: storage.Kind(s.Type), ReadOnly: s.ReadOnly,
				Location: s.Location, CountMin: s.CountMin, CountMax: s.CountMax, MinimumSize: s.MinimumSize}
		}
	}
	class, _ := m.Config[cfgWorkloadStorage].(string)
	tags := resourceTags(m, ctrl.UUID)
	fss, err := mgr.ApplicationFilesystems(storage.FilesystemArgs{
		Application: app.Name, Constraints: app.StorageConstraints, Charm: charmStorage,
		StorageClass: class, ResourceTags: tags,
	})
	if err != nil {
		return nil, err
	}
	cons, err := a.st.ResolveConstraints(ctx, a.model, app.Constraints)
	if err != nil {
		return nil, err
	}
	info := &params.KubernetesProvisioningInfo{
		PodSpec:              spec.Spec,
		RawK8sSpec:           spec.RawSpec,
		Constraints:          constraintsValue(cons),
		Tags:                 tags,
		CharmModifiedVersion: app.CharmModifiedVersion,
		ImageRepo: params.DockerImageInfo{
			RegistryPath: image, Username: details.Username, Password: details.Password,
			Email: details.Email, Repository: details.Repository, Auth: details.Auth,
			IdentityToken: details.IdentityToken, RegistryToken: details.RegistryToken,
		},
	}
	for _, fs := range fss {
		p := params.KubernetesFilesystemParams{StorageName: fs.StorageName, Size: fs.Size,
			Provider: string(fs.Provider), Attributes: fs.Attributes, Tags: fs.Tags}
		if at := fs.Attachment; at != nil {
			p.Attachment = &params.KubernetesFilesystemAttachmentParams{Provider: string(at.Provider),
				MountPoint: at.MountPoint, ReadOnly: at.ReadOnly}
		}
		info.Filesystems = append(info.Filesystems, p)
	}
	for _, name := range sortedKeys(app.DeviceConstraints) {
		d := app.DeviceConstraints[name]
		info.Devices = append(info.Devices, params.KubernetesDeviceParams{Type: d.Type, Count: d.Count,
			Attributes: maps.Clone(d.Attributes)})
	}
	if ch.Meta != nil && ch.Meta.Deployment != nil {
		info.DeploymentInfo = &params.KubernetesDeploymentInfo{
			DeploymentType: ch.Meta.Deployment.Type, ServiceType: ch.Meta.Deployment.Service}
	}
	return info, nil
}

// imageRepo is caas-image-repo: JSON details or a plain repository.
type imageRepo struct {
	Repository    string `json:"repository"`
	ServerAddress string `json:"serveraddress"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	Email         string `json:"email"`
	Auth          string `json:"auth"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

func imageRepoDetails(s string) (imageRepo, error) {
	var d imageRepo
	if s == "" {
		return d, nil
	}
	if !json.Valid([]byte(s)) {
		return imageRepo{Repository: s}, nil
	}
	if err := json.Unmarshal([]byte(s), &d); err != nil {
		return d, errors.Annotate(err, "parsing "+cfgImageRepo)
	}
	if d.Repository == "" {
		return d, errors.NewNotValid(nil, "parsing "+cfgImageRepo+": empty repository name not valid")
	}
	return d, nil
}

// operatorImagePath is Juju's GetJujuOCIImagePath: the deprecated
// caas-operator-image-path re-tagged with the version, else
// <repository>/jujud-operator:<version>.
func operatorImagePath(ctrlCfg map[string]any, repo, version string) string {
	if p, _ := ctrlCfg[cfgOperatorImage].(string); p != "" {
		if i := strings.LastIndex(p, ":"); i > strings.LastIndex(p, "/") {
			p = p[:i]
		}
		return p + ":" + version
	}
	if repo == "" {
		repo = defaultImageRepo
	}
	return repo + "/" + operatorImageName + ":" + version
}

// resourceTags are the model's resource-tags ("k=v k=v" or a map) plus
// juju-model-uuid and juju-controller-uuid, which win.
func resourceTags(m state.Model, controllerUUID string) map[string]string {
	tags := state.ResourceTags(m.Config)
	tags["juju-model-uuid"] = m.UUID
	tags["juju-controller-uuid"] = controllerUUID
	return tags
}

func constraintsValue(c state.Constraints) params.Value {
	return params.Value{Arch: c.Arch, Container: c.Container, CpuCores: c.Cores, CpuPower: c.CpuPower,
		Mem: c.Mem, RootDisk: c.RootDisk, RootDiskSource: c.RootDiskSource, Tags: c.Tags,
		InstanceRole: c.InstanceRole, InstanceType: c.InstanceType, Spaces: c.Spaces, VirtType: c.VirtType,
		Zones: c.Zones, AllocatePublicIP: c.AllocatePublicIP, ImageID: c.ImageID}
}
