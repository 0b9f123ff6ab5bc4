package main

import (
	"strconv"
	"strings"

	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/size"
)

// The json and yaml shapes of status, show-machine, show-application,
// show-unit, machines and units: Juju's "juju status --format yaml" (maps
// keyed by id, "juju-status", "machine-status", "workload-status", ...),
// so that operators' scripts port, with provisiond's extra fields (life,
// supported containers, volumes, trust, storage constraints, spaces,
// subnets) under their own keys. Sizes are MiB.

// statusDoc is one status record, as Juju shows it.
type statusDoc struct {
	Current string         `json:"current,omitempty"`
	Message string         `json:"message,omitempty"`
	Since   string         `json:"since,omitempty"`
	Version string         `json:"version,omitempty"`
	Data    map[string]any `json:"data,omitempty"`

	// Life is a machine's life when it is not alive, in its juju-status
	// as Juju's status shows it.
	Life string `json:"life,omitempty"`
}

func statusOf(s params.StatusInfo) statusDoc {
	return statusDoc{Current: s.Status, Message: s.Message, Since: s.Since, Data: s.Data}
}

type baseDoc struct {
	Name    string `json:"name"`
	Channel string `json:"channel"`
}

func baseOf(b string) *baseDoc {
	if b == "" {
		return nil
	}
	name, channel, _ := strings.Cut(b, "@")
	return &baseDoc{Name: name, Channel: channel}
}

// machineVolumeDoc is a volume of a machine.
type machineVolumeDoc struct {
	Pool       string `json:"pool"`
	Size       uint64 `json:"size"` // MiB
	Life       string `json:"life"`
	ProviderID string `json:"provider-id,omitempty"`
	Device     string `json:"device,omitempty"`
}

type machineDoc struct {
	JujuStatus         statusDoc             `json:"juju-status"`
	DNSName            string                `json:"dns-name,omitempty"`
	IPAddresses        []string              `json:"ip-addresses,omitempty"`
	InstanceID         string                `json:"instance-id,omitempty"`
	DisplayName        string                `json:"display-name,omitempty"`
	MachineStatus      statusDoc             `json:"machine-status"`
	ModificationStatus *statusDoc            `json:"modification-status,omitempty"`
	Base               *baseDoc              `json:"base,omitempty"`
	Series             string                `json:"series,omitempty"`
	Containers         map[string]machineDoc `json:"containers,omitempty"`
	Constraints        string                `json:"constraints,omitempty"`
	Hardware           string                `json:"hardware,omitempty"`

	// provisiond's.
	Life      string   `json:"life"`
	Placement string   `json:"placement,omitempty"`
	Jobs      []string `json:"jobs,omitempty"`
	// SupportedContainers is null until the machine agent reports them.
	SupportedContainers *[]string                   `json:"supported-containers"`
	Volumes             map[string]machineVolumeDoc `json:"volumes,omitempty"`
	Units               []string                    `json:"units,omitempty"`

	// MarkedForRemoval: the machine is dead and its instance gone; the
	// machine undertaker removes it (provisiond's).
	MarkedForRemoval bool `json:"marked-for-removal,omitempty"`
	// AgentPresence is whether its agent is connected: alive or down.
	AgentPresence *statusDoc `json:"agent-presence,omitempty"`
}

func machineDocOf(m params.MachineStatus) machineDoc {
	d := machineDoc{
		JujuStatus:    statusOf(m.AgentStatus),
		IPAddresses:   m.Addresses,
		InstanceID:    m.InstanceID,
		DisplayName:   m.DisplayName,
		MachineStatus: statusOf(m.InstanceStatus),
		Base:          baseOf(m.Base),
		Series:        m.Series,
		Constraints:   m.Constraints,
		Hardware:      m.Hardware,
		Life:          m.Life,
		Placement:     m.Placement,
		Jobs:          m.Jobs,

		SupportedContainers: m.SupportedContainers,
		Units:               m.Units,
		AgentPresence:       presenceDocOf(m.AgentPresence),
	}
	d.JujuStatus.Version = m.AgentVersion
	if m.Life != "alive" {
		d.JujuStatus.Life = m.Life
	}
	d.MarkedForRemoval = m.MarkedForRemoval
	if len(m.Addresses) > 0 {
		d.DNSName = m.Addresses[0]
	}
	if m.ModificationStatus.Status != "" {
		ms := statusOf(m.ModificationStatus)
		d.ModificationStatus = &ms
	}
	if len(m.Volumes) > 0 {
		d.Volumes = map[string]machineVolumeDoc{}
		for _, v := range m.Volumes {
			d.Volumes[v.ID] = machineVolumeDoc{Pool: v.Pool, Size: v.Size, Life: v.Life, ProviderID: v.ProviderID, Device: v.DeviceName}
		}
	}
	if len(m.Containers) > 0 {
		d.Containers = map[string]machineDoc{}
		for _, c := range m.Containers {
			d.Containers[c.ID] = machineDocOf(c)
		}
	}
	return d
}

type unitDoc struct {
	WorkloadStatus statusDoc `json:"workload-status"`
	JujuStatus     statusDoc `json:"juju-status"`
	Machine        string    `json:"machine,omitempty"`
	OpenPorts      []string  `json:"open-ports,omitempty"`
	Address        string    `json:"address,omitempty"`
	ProviderID     string    `json:"provider-id,omitempty"`

	// provisiond's.
	Life            string     `json:"life"`
	ContainerStatus *statusDoc `json:"container-status,omitempty"`
	Storage         []string   `json:"storage,omitempty"`
}

func unitDocOf(u params.UnitStatus) unitDoc {
	d := unitDoc{
		WorkloadStatus: statusOf(u.WorkloadStatus),
		JujuStatus:     statusOf(u.AgentStatus),
		Machine:        u.Machine,
		OpenPorts:      u.Ports,
		Address:        u.Address,
		ProviderID:     u.ProviderID,
		Life:           u.Life,
		Storage:        u.Storage,
	}
	if u.ContainerStatus.Status != "" {
		cs := statusOf(u.ContainerStatus)
		d.ContainerStatus = &cs
	}
	return d
}

// storageConstraintDoc is a storage constraint of an application.
type storageConstraintDoc struct {
	Pool  string `json:"pool,omitempty"`
	Count uint64 `json:"count"`
	Size  uint64 `json:"size"` // MiB
}

// storageConstraintOf reads the "POOL,COUNT,SIZE" (or "COUNT,SIZE") form
// of params.ApplicationStatus.Storage.
func storageConstraintOf(s string) storageConstraintDoc {
	var d storageConstraintDoc
	parts := strings.Split(s, ",")
	if len(parts) == 3 {
		d.Pool, parts = parts[0], parts[1:]
	}
	if len(parts) == 2 {
		d.Count, _ = strconv.ParseUint(parts[0], 10, 64)
		d.Size, _ = size.ParseMiB(parts[1])
	}
	return d
}

type deviceConstraintDoc struct {
	Count int64  `json:"count"`
	Type  string `json:"type"`
}

func deviceConstraintOf(s string) deviceConstraintDoc {
	count, typ, _ := strings.Cut(s, ",")
	n, _ := strconv.ParseInt(count, 10, 64)
	return deviceConstraintDoc{Count: n, Type: typ}
}

type applicationDoc struct {
	Charm             string             `json:"charm"`
	CharmOrigin       string             `json:"charm-origin"`
	CharmName         string             `json:"charm-name"`
	CharmRev          int                `json:"charm-rev"`
	Exposed           bool               `json:"exposed"`
	Life              string             `json:"life"`
	Scale             *int               `json:"scale,omitempty"`
	ProviderID        string             `json:"provider-id,omitempty"`
	Address           string             `json:"address,omitempty"`
	ApplicationStatus statusDoc          `json:"application-status"`
	Units             map[string]unitDoc `json:"units,omitempty"`
	Constraints       string             `json:"constraints,omitempty"`

	// provisiond's.
	Trust              bool                            `json:"trust"`
	Subordinate        bool                            `json:"subordinate,omitempty"`
	Addresses          []string                        `json:"addresses,omitempty"`
	StorageConstraints map[string]storageConstraintDoc `json:"storage-constraints,omitempty"`
	DeviceConstraints  map[string]deviceConstraintDoc  `json:"device-constraints,omitempty"`
}

// applicationDocOf converts an application; caas gives it a scale.
func applicationDocOf(a params.ApplicationStatus, caas bool) applicationDoc {
	d := applicationDoc{
		Charm:             a.Charm,
		CharmOrigin:       "local",
		CharmName:         charmName(a.Charm),
		CharmRev:          a.CharmRevision,
		Life:              a.Life,
		ProviderID:        a.ProviderID,
		ApplicationStatus: statusOf(a.OperatorStatus),
		Constraints:       a.Constraints,
		Trust:             a.Trust,
		Subordinate:       a.Subordinate,
		Addresses:         a.Addresses,
	}
	if origin, _, ok := strings.Cut(a.Charm, ":"); ok {
		d.CharmOrigin = origin
	}
	if caas {
		scale := a.Scale
		d.Scale = &scale
	}
	if len(a.Addresses) > 0 {
		d.Address = a.Addresses[0]
	}
	if len(a.Units) > 0 {
		d.Units = map[string]unitDoc{}
		for _, u := range a.Units {
			d.Units[u.Name] = unitDocOf(u)
		}
	}
	if len(a.Storage) > 0 {
		d.StorageConstraints = map[string]storageConstraintDoc{}
		for k, v := range a.Storage {
			d.StorageConstraints[k] = storageConstraintOf(v)
		}
	}
	if len(a.Devices) > 0 {
		d.DeviceConstraints = map[string]deviceConstraintDoc{}
		for k, v := range a.Devices {
			d.DeviceConstraints[k] = deviceConstraintOf(v)
		}
	}
	return d
}

// charmName is NAME of a charm URL "local:NAME-REV".
func charmName(url string) string {
	_, name, ok := strings.Cut(url, ":")
	if !ok {
		name = url
	}
	if i := strings.LastIndex(name, "-"); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			return name[:i]
		}
	}
	return name
}

type unitAttachmentDoc struct {
	Life       string `json:"life,omitempty"`
	MountPoint string `json:"mount-point,omitempty"`
	ReadOnly   bool   `json:"read-only,omitempty"`
	Device     string `json:"device,omitempty"`
}

type attachmentsDoc struct {
	Machines map[string]unitAttachmentDoc `json:"machines,omitempty"`
	Units    map[string]unitAttachmentDoc `json:"units,omitempty"`
}

type storageInstanceDoc struct {
	Kind        string          `json:"kind"`
	Life        string          `json:"life"`
	Owner       string          `json:"owner,omitempty"`
	Attachments *attachmentsDoc `json:"attachments,omitempty"`
}

type filesystemDoc struct {
	ProviderID  string          `json:"provider-id,omitempty"`
	Volume      string          `json:"volume,omitempty"`
	Storage     string          `json:"storage,omitempty"`
	Attachments *attachmentsDoc `json:"attachments,omitempty"`
	Pool        string          `json:"pool"`
	Size        uint64          `json:"size"` // MiB
	Life        string          `json:"life"`
	Status      statusDoc       `json:"status,omitzero"`
}

type volumeDoc struct {
	ProviderID  string          `json:"provider-id,omitempty"`
	Storage     string          `json:"storage,omitempty"`
	Attachments *attachmentsDoc `json:"attachments,omitempty"`
	Pool        string          `json:"pool"`
	Size        uint64          `json:"size"` // MiB
	Persistent  bool            `json:"persistent"`
	Life        string          `json:"life"`
	Status      statusDoc       `json:"status,omitzero"`
}

type storageSectionDoc struct {
	Storage     map[string]storageInstanceDoc `json:"storage"`
	Filesystems map[string]filesystemDoc      `json:"filesystems"`
	Volumes     map[string]volumeDoc          `json:"volumes"`
}

func storageDocOf(s params.StorageStatus) storageSectionDoc {
	d := storageSectionDoc{Storage: map[string]storageInstanceDoc{}, Filesystems: map[string]filesystemDoc{},
		Volumes: map[string]volumeDoc{}}
	for _, si := range s.Instances {
		sd := storageInstanceDoc{Kind: si.Kind, Life: si.Life, Owner: si.Owner}
		if si.Unit != "" {
			sd.Attachments = &attachmentsDoc{Units: map[string]unitAttachmentDoc{si.Unit: {Life: si.Life}}}
		}
		d.Storage[si.ID] = sd
	}
	for _, f := range s.Filesystems {
		fd := filesystemDoc{ProviderID: f.ProviderID, Volume: f.VolumeID, Storage: f.StorageID, Pool: f.Pool,
			Size: f.Size, Life: f.Life, Status: statusOf(f.Status)}
		if f.Attachment != nil {
			fd.Attachments = &attachmentsDoc{Units: map[string]unitAttachmentDoc{
				f.Attachment.Unit: {MountPoint: f.Attachment.MountPoint, ReadOnly: f.Attachment.ReadOnly}}}
		}
		d.Filesystems[f.ID] = fd
	}
	for _, v := range s.Volumes {
		vd := volumeDoc{ProviderID: v.ProviderID, Storage: v.StorageID, Pool: v.Pool, Size: v.Size,
			Persistent: v.Persistent, Life: v.Life, Status: statusOf(v.Status)}
		for _, at := range v.Attached {
			if vd.Attachments == nil {
				vd.Attachments = &attachmentsDoc{}
			}
			a := unitAttachmentDoc{Device: at.DeviceName, ReadOnly: at.ReadOnly}
			switch {
			case at.Machine != "":
				if vd.Attachments.Machines == nil {
					vd.Attachments.Machines = map[string]unitAttachmentDoc{}
				}
				vd.Attachments.Machines[at.Machine] = a
			case at.Unit != "":
				if vd.Attachments.Units == nil {
					vd.Attachments.Units = map[string]unitAttachmentDoc{}
				}
				vd.Attachments.Units[at.Unit] = a
			}
		}
		d.Volumes[v.ID] = vd
	}
	return d
}

type modelDoc struct {
	Name        string    `json:"name"`
	Type        string    `json:"type"`
	UUID        string    `json:"uuid"`
	Life        string    `json:"life"`
	ModelStatus statusDoc `json:"model-status"`

	// provisiond's: whether the model's provisioner agent is connected.
	ProvisionerAgent *statusDoc `json:"provisioner-agent,omitempty"`
}

// presenceDocOf shows an agent's presence as a status: current alive or
// down, since when it went.
func presenceDocOf(p *params.AgentPresence) *statusDoc {
	if p == nil {
		return nil
	}
	return &statusDoc{Current: p.Status, Since: p.Since}
}

type spaceDoc struct {
	ProviderID string   `json:"provider-id,omitempty"`
	Subnets    []string `json:"subnets"`
}

type addressDoc struct {
	Machine    string `json:"machine,omitempty"`
	State      string `json:"state"`
	Interface  string `json:"interface,omitempty"`
	MACAddress string `json:"mac-address,omitempty"`
}

type subnetDoc struct {
	Space            string                `json:"space,omitempty"`
	Zones            []string              `json:"zones"`
	ProviderID       string                `json:"provider-id,omitempty"`
	VLANTag          int                   `json:"vlan-tag,omitempty"`
	AllocatableRange string                `json:"allocatable-range,omitempty"`
	Gateway          string                `json:"gateway,omitempty"`
	Life             string                `json:"life"`
	Addresses        map[string]addressDoc `json:"addresses"`
}

func subnetDocOf(s params.SubnetInfo) subnetDoc {
	d := subnetDoc{Space: s.Space, Zones: s.Zones, ProviderID: s.ProviderID, VLANTag: s.VLANTag, Gateway: s.Gateway,
		Life: s.Life, Addresses: map[string]addressDoc{}}
	if d.Zones == nil {
		d.Zones = []string{}
	}
	if s.AllocatableIPLow != "" {
		d.AllocatableRange = s.AllocatableIPLow + "-" + s.AllocatableIPHigh
	}
	for _, a := range s.Addresses {
		d.Addresses[a.Value] = addressDoc{Machine: a.Machine, State: a.State, Interface: a.InterfaceName, MACAddress: a.MACAddress}
	}
	return d
}

// jujuStatusDoc is the json and yaml of status.
type jujuStatusDoc struct {
	Model        modelDoc                  `json:"model"`
	Machines     map[string]machineDoc     `json:"machines"`
	Applications map[string]applicationDoc `json:"applications"`
	Storage      storageSectionDoc         `json:"storage"`

	// provisiond's: the model's networking.
	Spaces  map[string]spaceDoc  `json:"spaces"`
	Subnets map[string]subnetDoc `json:"subnets"`
}

func jujuStatusOf(s params.ModelStatus) jujuStatusDoc {
	d := jujuStatusDoc{
		Model: modelDoc{Name: s.Model, Type: s.Type, UUID: s.UUID, Life: s.Life,
			ModelStatus: statusDoc{Current: modelStatusOf(s.Life)}, ProvisionerAgent: presenceDocOf(s.ProvisionerAgent)},
		Machines:     map[string]machineDoc{},
		Applications: map[string]applicationDoc{},
		Storage:      storageDocOf(s.Storage),
		Spaces:       map[string]spaceDoc{},
		Subnets:      map[string]subnetDoc{},
	}
	for _, m := range s.Machines {
		d.Machines[m.ID] = machineDocOf(m)
	}
	for _, a := range s.Applications {
		d.Applications[a.Name] = applicationDocOf(a, s.Type == "caas")
	}
	for _, sp := range s.Spaces {
		d.Spaces[sp.Name] = spaceDoc{ProviderID: sp.ProviderID, Subnets: sp.Subnets}
	}
	for _, sn := range s.Subnets {
		d.Subnets[sn.CIDR] = subnetDocOf(sn)
	}
	return d
}

// modelStatusOf is Juju's model status for a life: "available", or
// "destroying" while the model is dying.
func modelStatusOf(life string) string {
	if life == "dying" {
		return "destroying"
	}
	return "available"
}

// allMachines lists a status's machines and their containers, depth
// first in id order, as the table shows them.
func allMachines(ms []params.MachineStatus) []params.MachineStatus {
	var out []params.MachineStatus
	for _, m := range ms {
		out = append(out, m)
		out = append(out, allMachines(m.Containers)...)
	}
	return out
}
