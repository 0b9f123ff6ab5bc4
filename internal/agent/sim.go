package agent

import (
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/provisiond/provisiond/rpc/params"
)

// Cloud is where the agent's provisioners start what the model asks for:
// instances for machines, containers on them, and pods for the
// applications of Kubernetes models. It is the boundary between the agent
// and the world; SimCloud is the only implementation.
//
// Implementations are safe for concurrent use.
type Cloud interface {
	// StartInstance starts the instance of a top-level machine or of a
	// container and returns what the provisioner records of it.
	StartInstance(p InstanceParams) (Instance, error)
	// StopInstance stops an instance; an unknown one is no error.
	StopInstance(model, instanceID string) error
	// HasInstance reports whether the instance is running in this cloud.
	HasInstance(model, instanceID string) bool
	// EnsureService makes the cluster run an application's pods as
	// asked and returns its service and pods, sorted by provider id.
	EnsureService(p ServiceParams) (Service, []Pod, error)
	// DeleteService removes an application's pods and service; its
	// persistent volumes stay, as a cluster keeps a stateful set's volume
	// claims. An unknown application is no error.
	DeleteService(model, app string) error
}

// InstanceParams is what a provisioner asks an instance for.
type InstanceParams struct {
	Model       string // model UUID
	MachineID   string // "3" or "3/lxd/0"
	Constraints params.Value
	Placement   string // "zone=Z" or ""
	Base        params.Base
	Volumes     []params.VolumeParams
	// Subnets are the model's subnets: a top-level instance gets an
	// interface on those of its zone (or with no zone).
	Subnets []params.SubnetInfo
	// NetworkConfig is a container's network, prepared by the controller
	// (PrepareContainerInterfaceInfo); the container comes up with it.
	NetworkConfig []params.NetworkConfig
}

// Instance is a started instance as the provisioner records it
// (SetInstanceInfo).
type Instance struct {
	ID                string
	Hardware          params.HardwareCharacteristics
	NetworkConfig     []params.NetworkConfig
	Volumes           []params.Volume
	VolumeAttachments map[string]params.VolumeAttachmentInfo
}

// ServiceParams is what the unit provisioner asks of the cluster for one
// application.
type ServiceParams struct {
	Model, App string
	Scale      int
	// Stateful pods have stable names (<app>-<ordinal>) and keep their
	// volume claims across rescheduling; stateless ones get random names.
	Stateful    bool
	Filesystems []params.KubernetesFilesystemParams
	PodSpec     string
}

// Service is an application's service in the cluster.
type Service struct {
	ProviderID string
	Addresses  []params.Address
	// Generation counts the changes applied to the application's
	// workload (its scale and spec).
	Generation int64
}

// Pod is one running pod of an application.
type Pod struct {
	ProviderID  string
	Address     string
	Filesystems []params.KubernetesFilesystemInfo
}

// SimCloud is a simulated cloud and Kubernetes cluster: everything starts
// at once. Instances get ids from their machine ids ("i-0", "i-0-lxd-0"),
// hardware from their constraints (defaults: amd64, 1 core, 1 GiB memory,
// 8 GiB root disk), a zone from the placement, the constraints or the
// model's subnets, and an interface on each subnet of their zone with an
// address the cloud hands out from the top of the subnet (the range below
// is the operator's allocatable range, which the controller gives to
// containers); containers come up with the network the controller
// prepared. Pods get addresses in 10.1.0.0/16, services in
// 10.152.183.0/24, and volume claims named after the storage, the
// application and the pod's ordinal.
//
// Its state lives in memory only: instances and pods started by one
// process are unknown to the next.
type SimCloud struct {
	mu        sync.Mutex
	instances map[string]*simInstance // "<model>/<instance id>"
	hostAddrs map[string]bool         // "<model>/<address>" handed to hosts
	zoneUse   map[string]int          // "<model>/<zone>" -> instances started there
	services  map[string]*simService  // "<model>/<app>"
	nextPod   int                     // next pod address in 10.1.0.0/16
	nextSvc   int                     // next service address in 10.152.183.0/24
	nextVol   int
}

type simInstance struct {
	inst  Instance
	addrs []string // host addresses to give back
	zone  string
}

type simService struct {
	svc  Service
	pods []Pod // by ordinal for stateful, creation order for stateless
	last ServiceParams
}

// NewSimCloud returns an empty simulated cloud.
func NewSimCloud() *SimCloud {
	return &SimCloud{
		instances: map[string]*simInstance{},
		hostAddrs: map[string]bool{},
		zoneUse:   map[string]int{},
		services:  map[string]*simService{},
	}
}

// InstanceID is the id SimCloud gives machine id's instance.
func InstanceID(machineID string) string { return "i-" + strings.ReplaceAll(machineID, "/", "-") }

func key(model, id string) string { return model + "/" + id }

// StartInstance implements Cloud.
func (s *SimCloud) StartInstance(p InstanceParams) (Instance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := InstanceID(p.MachineID)
	if old, ok := s.instances[key(p.Model, id)]; ok {
		return cloneInstance(old.inst), nil // idempotent: a retried start
	}
	c := p.Constraints
	hw := params.HardwareCharacteristics{
		Arch:     ptr(deref(c.Arch, "amd64")),
		CpuCores: ptr(deref(c.CpuCores, 1)),
		Mem:      ptr(deref(c.Mem, 1024)),
		RootDisk: ptr(deref(c.RootDisk, 8192)),
		CpuPower: c.CpuPower,
		Tags:     c.Tags,
		VirtType: c.VirtType,
	}
	if c.RootDiskSource != nil {
		hw.RootDiskSource = c.RootDiskSource
	}
	si := &simInstance{}
	inst := Instance{ID: id}
	if isContainer(p.MachineID) {
		inst.NetworkConfig = p.NetworkConfig
	} else {
		si.zone = s.pickZone(p)
		if si.zone != "" {
			hw.AvailabilityZone = ptr(si.zone)
			s.zoneUse[key(p.Model, si.zone)]++
		}
		inst.NetworkConfig, si.addrs = s.hostInterfaces(p.Model, id, si.zone, p.Subnets)
		inst.Volumes, inst.VolumeAttachments = s.volumes(p.Volumes)
	}
	inst.Hardware = hw
	si.inst = inst
	s.instances[key(p.Model, id)] = si
	return cloneInstance(inst), nil
}

// pickZone is the placement's zone, else the constraints' first, else
// the least used zone of the model's subnets ("" when they name none).
func (s *SimCloud) pickZone(p InstanceParams) string {
	if z, ok := strings.CutPrefix(p.Placement, "zone="); ok {
		return z
	}
	if p.Constraints.Zones != nil && len(*p.Constraints.Zones) > 0 {
		return (*p.Constraints.Zones)[0]
	}
	var zones []string
	for _, sn := range p.Subnets {
		for _, z := range sn.Zones {
			if !slices.Contains(zones, z) {
				zones = append(zones, z)
			}
		}
	}
	slices.Sort(zones)
	best := ""
	for _, z := range zones {
		if best == "" || s.zoneUse[key(p.Model, z)] < s.zoneUse[key(p.Model, best)] {
			best = z
		}
	}
	return best
}

// hostInterfaces gives a host one interface per subnet of its zone (or
// with no zone; every subnet when the host has none), eth0, eth1, ... in
// CIDR order, as the controller's built-in provider lays them out.
func (s *SimCloud) hostInterfaces(model, instanceID, zone string, subnets []params.SubnetInfo) ([]params.NetworkConfig, []string) {
	subnets = slices.Clone(subnets)
	slices.SortFunc(subnets, func(a, b params.SubnetInfo) int { return strings.Compare(a.CIDR, b.CIDR) })
	var nics []params.NetworkConfig
	var addrs []string
	for _, sn := range subnets {
		if zone != "" && len(sn.Zones) > 0 && !slices.Contains(sn.Zones, zone) {
			continue
		}
		i := len(nics)
		nic := params.NetworkConfig{
			DeviceIndex:      i,
			MACAddress:       simMAC(model, instanceID, i),
			CIDR:             sn.CIDR,
			ProviderId:       fmt.Sprintf("nic-%s-%d", instanceID, i),
			ProviderSubnetId: sn.ProviderID,
			VLANTag:          sn.VLANTag,
			InterfaceName:    "eth" + strconv.Itoa(i),
			InterfaceType:    "ethernet",
			ConfigType:       "dhcp",
			GatewayAddress:   sn.Gateway,
			NetworkOrigin:    "provider",
		}
		if a := s.hostAddress(model, sn); a != "" {
			nic.ConfigType = "static"
			nic.Addresses = []params.Address{{Value: a, Type: "ipv4", Scope: "local-cloud", CIDR: sn.CIDR, ConfigType: "static"}}
			if strings.Contains(a, ":") {
				nic.Addresses[0].Type = "ipv6"
			}
			addrs = append(addrs, a)
		}
		nics = append(nics, nic)
	}
	return nics, addrs
}

// hostAddress hands out the highest free address of the subnet that is
// neither its gateway nor in its allocatable range ("" when none is left).
func (s *SimCloud) hostAddress(model string, sn params.SubnetInfo) string {
	pfx, err := netip.ParsePrefix(sn.CIDR)
	if err != nil {
		return ""
	}
	pfx = pfx.Masked()
	lo, _ := netip.ParseAddr(sn.AllocatableIPLow)
	hi, _ := netip.ParseAddr(sn.AllocatableIPHigh)
	gw, _ := netip.ParseAddr(sn.Gateway)
	a := lastAddr(pfx)
	if pfx.Addr().Is4() {
		a = a.Prev() // not the broadcast address
	}
	for n := 0; n < 1<<16 && a.IsValid() && pfx.Contains(a) && a != pfx.Addr(); n, a = n+1, a.Prev() {
		inRange := lo.IsValid() && hi.IsValid() && !a.Less(lo) && !hi.Less(a)
		if inRange || a == gw || (!gw.IsValid() && a == pfx.Addr().Next()) {
			continue
		}
		if k := key(model, a.String()); !s.hostAddrs[k] {
			s.hostAddrs[k] = true
			return a.String()
		}
	}
	return ""
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// simMAC is a stable locally administered MAC in LXD's 00:16:3e range.
func simMAC(model, instanceID string, index int) string {
	h := sha256.Sum256([]byte(model + "/" + instanceID + "/" + strconv.Itoa(index)))
	return fmt.Sprintf("00:16:3e:%02x:%02x:%02x", h[0], h[1], h[2])
}

// volumes makes the volumes the environ provisions with the instance.
func (s *SimCloud) volumes(vs []params.VolumeParams) ([]params.Volume, map[string]params.VolumeAttachmentInfo) {
	if len(vs) == 0 {
		return nil, nil
	}
	out := make([]params.Volume, 0, len(vs))
	att := make(map[string]params.VolumeAttachmentInfo, len(vs))
	for i, v := range vs {
		s.nextVol++
		out = append(out, params.Volume{VolumeTag: v.VolumeTag, Info: params.VolumeInfo{
			VolumeId: fmt.Sprintf("vol-%d", s.nextVol), Size: v.Size, Persistent: true,
		}})
		if v.Attachment != nil {
			att[v.VolumeTag] = params.VolumeAttachmentInfo{
				DeviceName: "xvd" + string(rune('f'+i%20)), ReadOnly: v.Attachment.ReadOnly,
			}
		}
	}
	return out, att
}

func cloneInstance(i Instance) Instance {
	i.NetworkConfig = slices.Clone(i.NetworkConfig)
	i.Volumes = slices.Clone(i.Volumes)
	if i.VolumeAttachments != nil {
		m := make(map[string]params.VolumeAttachmentInfo, len(i.VolumeAttachments))
		for k, v := range i.VolumeAttachments {
			m[k] = v
		}
		i.VolumeAttachments = m
	}
	return i
}

// StopInstance implements Cloud.
func (s *SimCloud) StopInstance(model, instanceID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key(model, instanceID)
	si, ok := s.instances[k]
	if !ok {
		return nil
	}
	for _, a := range si.addrs {
		delete(s.hostAddrs, key(model, a))
	}
	if si.zone != "" {
		s.zoneUse[key(model, si.zone)]--
	}
	delete(s.instances, k)
	return nil
}

// HasInstance implements Cloud.
func (s *SimCloud) HasInstance(model, instanceID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.instances[key(model, instanceID)]
	return ok
}

// Instances returns the number of running instances (for tests and
// figures).
func (s *SimCloud) Instances() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.instances)
}

// EnsureService implements Cloud.
func (s *SimCloud) EnsureService(p ServiceParams) (Service, []Pod, error) {
	if p.Scale < 0 {
		return Service{}, nil, fmt.Errorf("scale %d not valid", p.Scale)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key(p.Model, p.App)
	ss := s.services[k]
	if ss == nil {
		ss = &simService{svc: Service{
			ProviderID: fmt.Sprintf("svc-%s-%s", p.App, randomSuffix()),
			Addresses: []params.Address{{Value: fmt.Sprintf("10.152.%d.%d", 183+s.nextSvc/254, 1+s.nextSvc%254),
				Type: "ipv4", Scope: "local-cloud"}},
		}}
		s.nextSvc++
		s.services[k] = ss
	}
	if ss.svc.Generation == 0 || p.Scale != len(ss.pods) || p.PodSpec != ss.last.PodSpec {
		ss.svc.Generation++
	}
	ss.last = p
	for len(ss.pods) > p.Scale {
		ss.pods = ss.pods[:len(ss.pods)-1] // the highest ordinal (or the newest) goes first
	}
	for len(ss.pods) < p.Scale {
		ordinal := len(ss.pods)
		name := fmt.Sprintf("%s-%d", p.App, ordinal)
		if !p.Stateful {
			name = fmt.Sprintf("%s-%s", p.App, randomSuffix())
		}
		ss.pods = append(ss.pods, Pod{
			ProviderID: name,
			Address:    fmt.Sprintf("10.1.%d.%d", s.nextPod/254, 1+s.nextPod%254),
		})
		s.nextPod++
	}
	// Each pod mounts one filesystem per storage instance it asks for;
	// a volume claim is named after the storage and the pod, so a pod
	// scheduled again on a stateful set gets its claim back.
	for i := range ss.pods {
		pod := &ss.pods[i]
		pod.Filesystems = pod.Filesystems[:0]
		for j, fs := range p.Filesystems {
			claim := fmt.Sprintf("%s-%s", fs.StorageName, pod.ProviderID)
			if n := countBefore(p.Filesystems, j); n > 0 {
				claim = fmt.Sprintf("%s-%d-%s", fs.StorageName, n, pod.ProviderID)
			}
			info := params.KubernetesFilesystemInfo{
				StorageName: fs.StorageName, Size: fs.Size, FilesystemId: claim,
				Status: "attached",
			}
			if fs.Attachment != nil {
				info.MountPoint, info.ReadOnly = fs.Attachment.MountPoint, fs.Attachment.ReadOnly
			}
			if fs.Provider == "kubernetes" || fs.Provider == "" {
				info.Volume = params.KubernetesVolumeInfo{VolumeId: "pv-" + claim, Size: fs.Size, Persistent: true, Status: "attached"}
			}
			pod.Filesystems = append(pod.Filesystems, info)
		}
	}
	pods := slices.Clone(ss.pods)
	slices.SortFunc(pods, func(a, b Pod) int { return strings.Compare(a.ProviderID, b.ProviderID) })
	svc := ss.svc
	svc.Addresses = slices.Clone(svc.Addresses)
	return svc, pods, nil
}

// countBefore counts the filesystems before j of the same storage.
func countBefore(fs []params.KubernetesFilesystemParams, j int) int {
	n := 0
	for _, f := range fs[:j] {
		if f.StorageName == fs[j].StorageName {
			n++
		}
	}
	return n
}

// DeleteService implements Cloud.
func (s *SimCloud) DeleteService(model, app string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.services, key(model, app))
	return nil
}

// Pods returns the number of running pods of every application (for tests
// and figures).
func (s *SimCloud) Pods() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, ss := range s.services {
		n += len(ss.pods)
	}
	return n
}

// randomSuffix is five characters of a Kubernetes generated name.
func randomSuffix() string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func isContainer(id string) bool { return strings.Contains(id, "/") }
