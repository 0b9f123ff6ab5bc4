package agent_test

import (
	"strings"
	"testing"

	"github.com/provisiond/provisiond/internal/agent"
	"github.com/provisiond/provisiond/rpc/params"
)

// The simulated cloud: hardware from constraints, a zone from the
// subnets, one interface per subnet of the zone with an address outside
// the allocatable range and the gateway, handed out once.
func TestSimCloudInstances(t *testing.T) {
	c := agent.NewSimCloud()
	cores, mem := uint64(4), uint64(8192)
	subnets := []params.SubnetInfo{
		{CIDR: "10.0.1.0/24", Zones: []string{"b"}, ProviderID: "sn-b"},
		{CIDR: "10.0.0.0/24", Zones: []string{"a"}, ProviderID: "sn-a", Gateway: "10.0.0.254",
			AllocatableIPLow: "10.0.0.200", AllocatableIPHigh: "10.0.0.253"},
		{CIDR: "192.168.0.0/30", ProviderID: "sn-any"},
	}
	i0, err := c.StartInstance(agent.InstanceParams{Model: "m", MachineID: "0", Subnets: subnets,
		Constraints: params.Value{CpuCores: &cores, Mem: &mem}, Placement: "zone=a"})
	if err != nil {
		t.Fatal(err)
	}
	hw := i0.Hardware
	if i0.ID != "i-0" || *hw.CpuCores != 4 || *hw.Mem != 8192 || *hw.Arch != "amd64" || *hw.AvailabilityZone != "a" {
		t.Fatalf("instance %+v hardware %+v", i0, hw)
	}
	if len(i0.NetworkConfig) != 2 {
		t.Fatalf("interfaces %+v", i0.NetworkConfig)
	}
	eth0, eth1 := i0.NetworkConfig[0], i0.NetworkConfig[1]
	if eth0.InterfaceName != "eth0" || eth0.CIDR != "10.0.0.0/24" || eth0.Addresses[0].Value != "10.0.0.199" ||
		!strings.HasPrefix(eth0.MACAddress, "00:16:3e:") || eth0.ProviderSubnetId != "sn-a" {
		t.Errorf("eth0 %+v", eth0)
	}
	if eth1.CIDR != "192.168.0.0/30" || eth1.Addresses[0].Value != "192.168.0.2" {
		t.Errorf("eth1 %+v", eth1)
	}
	// A second host in zone a gets the next address down; the least used
	// zone is b.
	i1, _ := c.StartInstance(agent.InstanceParams{Model: "m", MachineID: "1", Subnets: subnets, Placement: "zone=a"})
	if a := i1.NetworkConfig[0].Addresses[0].Value; a != "10.0.0.198" {
		t.Errorf("second host address %s", a)
	}
	// The /30's only host address besides its gateway (.1, the first
	// address when none is given) went to the first host: DHCP.
	if nic := i1.NetworkConfig[1]; nic.ConfigType != "dhcp" || len(nic.Addresses) != 0 {
		t.Errorf("a full subnet's interface: %+v", nic)
	}
	i2, _ := c.StartInstance(agent.InstanceParams{Model: "m", MachineID: "2", Subnets: subnets})
	if *i2.Hardware.AvailabilityZone != "b" {
		t.Errorf("zone of an unplaced machine: %s", *i2.Hardware.AvailabilityZone)
	}
	// Starting again is idempotent; stopping frees the addresses.
	if again, _ := c.StartInstance(agent.InstanceParams{Model: "m", MachineID: "0", Subnets: subnets}); again.NetworkConfig[0].Addresses[0].Value != "10.0.0.199" {
		t.Errorf("restart gave %+v", again.NetworkConfig)
	}
	if err := c.StopInstance("m", "i-0"); err != nil || c.HasInstance("m", "i-0") {
		t.Fatalf("stop: %v", err)
	}
	i3, _ := c.StartInstance(agent.InstanceParams{Model: "m", MachineID: "3", Subnets: subnets, Placement: "zone=a"})
	if a := i3.NetworkConfig[0].Addresses[0].Value; a != "10.0.0.199" {
		t.Errorf("address after the first host stopped: %s", a)
	}
	// A container comes up with the network it was given.
	cnet := []params.NetworkConfig{{InterfaceName: "eth0", CIDR: "10.0.0.0/24", Address: "10.0.0.201"}}
	ct, _ := c.StartInstance(agent.InstanceParams{Model: "m", MachineID: "3/lxd/0", NetworkConfig: cnet})
	if ct.ID != "i-3-lxd-0" || len(ct.NetworkConfig) != 1 || ct.NetworkConfig[0].Address != "10.0.0.201" || ct.Hardware.AvailabilityZone != nil {
		t.Errorf("container %+v", ct)
	}
}

// Pods: stateful ones are named by ordinal, scaled down from the top, and
// get their volume claims back; stateless ones get generated names.
func TestSimCloudPods(t *testing.T) {
	c := agent.NewSimCloud()
	fs := []params.KubernetesFilesystemParams{{StorageName: "data", Size: 1024, Provider: "kubernetes",
		Attachment: &params.KubernetesFilesystemAttachmentParams{MountPoint: "/data"}}}
	svc, pods, err := c.EnsureService(agent.ServiceParams{Model: "m", App: "db", Scale: 3, Stateful: true, Filesystems: fs})
	if err != nil || len(pods) != 3 || pods[2].ProviderID != "db-2" || svc.Generation != 1 || len(svc.Addresses) != 1 {
		t.Fatalf("EnsureService = %+v, %+v, %v", svc, pods, err)
	}
	if f := pods[1].Filesystems[0]; f.FilesystemId != "data-db-1" || f.Volume.VolumeId != "pv-data-db-1" || f.MountPoint != "/data" || f.Status != "attached" {
		t.Errorf("filesystem %+v", f)
	}
	svc2, pods, _ := c.EnsureService(agent.ServiceParams{Model: "m", App: "db", Scale: 1, Stateful: true, Filesystems: fs})
	if len(pods) != 1 || pods[0].ProviderID != "db-0" || svc2.Generation != 2 || svc2.ProviderID != svc.ProviderID {
		t.Errorf("scaled down: %+v %+v", svc2, pods)
	}
	_, pods, _ = c.EnsureService(agent.ServiceParams{Model: "m", App: "web", Scale: 2})
	if len(pods) != 2 || !strings.HasPrefix(pods[0].ProviderID, "web-") || len(pods[0].ProviderID) != len("web-abcde") || len(pods[0].Filesystems) != 0 {
		t.Errorf("stateless pods %+v", pods)
	}
	if c.Pods() != 3 {
		t.Errorf("pods %d", c.Pods())
	}
	if err := c.DeleteService("m", "web"); err != nil || c.Pods() != 1 {
		t.Errorf("delete: %v, %d pods", err, c.Pods())
	}
	if _, _, err := c.EnsureService(agent.ServiceParams{Model: "m", App: "x", Scale: -1}); err == nil {
		t.Error("negative scale accepted")
	}
}
