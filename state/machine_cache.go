package state

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"maps"
	"slices"
	"sync/atomic"
)

// machineCacheSlots is the number of machines whose decoded records
// machineCache keeps. An entry of a provisioned machine is about 1 KB
// (record, decoded Machine, key), so the cache holds about 1 MB at most,
// however many machines there are.
const machineCacheSlots = 1024

// machineCache saves State.Machine the JSON decoding of a record it decoded
// before: an entry holds the stored bytes of a machine's record and the
// Machine decoded from them, and is used only when the bytes just read from
// the store are equal to them. So it needs no invalidation: a write that
// changes the record changes its stored bytes, the next read misses and
// replaces the entry, and a read never returns anything but what its own
// transaction holds (equal bytes decode to an equal Machine, so a write of
// the same bytes needs no new entry either).
//
// A machine is kept only from its second read on: the first read leaves a
// marker (its key alone), so machines read once (an agent's login and
// watcher set-up) cost a few bytes, not an entry. Each key may sit in one
// of two slots (two hashes); what is stored takes the slot holding the
// same key, else a free one, else one holding a marker, else evicts the
// first. With two choices a few hundred machines read in turn settle into
// slots of their own instead of evicting each other on every read.
//
// It is safe for concurrent use without locks: a slot is an atomic pointer
// to an entry that is never modified once stored; readers get a deep copy
// (Machine.clone) of the entry's Machine, so they may modify what they get.
// Racing readers may store the same key twice; a stale entry is never used
// (its bytes differ) and is replaced like any other.
type machineCache struct {
	seed  maphash.Seed
	slots [machineCacheSlots]atomic.Pointer[machineCacheEntry]
}

type machineCacheEntry struct {
	key string  // the record's key (entityKey)
	raw []byte  // the stored record m was decoded from (a copy); nil in a marker
	m   Machine // never modified
}

func newMachineCache() *machineCache { return &machineCache{seed: maphash.MakeSeed()} }

// decode returns the Machine of record raw, stored under key: a copy the
// caller may modify. raw may point into the database's memory: it is only
// read, and copied when kept.
func (c *machineCache) decode(key string, raw []byte) (Machine, error) {
	m, shared, err := c.decodeShared(key, raw)
	if err != nil {
		return Machine{}, err
	}
	if shared {
		return m.clone(), nil
	}
	return *m, nil
}

// decodeShared is decode without the copy: m is the cache's own Machine
// when shared (never to be modified: clone it), else freshly decoded. It
// lets State.Machine take the copy outside the store's read callback, on
// its own stack.
func (c *machineCache) decodeShared(key string, raw []byte) (m *Machine, shared bool, err error) {
	h := maphash.String(c.seed, key)
	s1, s2 := &c.slots[h%machineCacheSlots], &c.slots[(h>>32)%machineCacheSlots]
	e1, e2 := s1.Load(), s2.Load()
	for _, e := range [2]*machineCacheEntry{e1, e2} {
		if e != nil && e.raw != nil && e.key == key && bytes.Equal(e.raw, raw) {
			return &e.m, true, nil
		}
	}
	var d machineDoc
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, false, err
	}
	seen := (e1 != nil && e1.key == key) || (e2 != nil && e2.key == key)
	e := &machineCacheEntry{key: key} // a marker on the first read
	if seen {
		e.raw, e.m = bytes.Clone(raw), d.Machine
	}
	switch {
	case e1 != nil && e1.key == key:
		s1.Store(e)
	case e2 != nil && e2.key == key:
		s2.Store(e)
	case e1 == nil:
		s1.Store(e)
	case e2 == nil:
		s2.Store(e)
	case e1.raw == nil:
		s1.Store(e)
	case e2.raw == nil:
		s2.Store(e)
	default:
		s1.Store(e)
	}
	if !seen {
		return &d.Machine, false, nil // not kept: the caller may have it as it is
	}
	return &e.m, true, nil
}

// clone returns a deep copy of m: nothing the copy refers to (slices, maps,
// pointers) is shared with m. TestMachineCloneSharesNothing checks that
// every field is covered.
func (m Machine) clone() Machine {
	c := m
	c.Jobs = slices.Clone(m.Jobs)
	c.Constraints = m.Constraints.clone()
	c.RequestedNetworks = slices.Clone(m.RequestedNetworks)
	if m.Hardware != nil {
		h := m.Hardware.clone()
		c.Hardware = &h
	}
	c.CharmProfiles = slices.Clone(m.CharmProfiles)
	c.Status = m.Status.clone()
	c.InstanceStatus = m.InstanceStatus.clone()
	c.ModificationStatus = m.ModificationStatus.clone()
	c.SupportedContainers = slices.Clone(m.SupportedContainers)
	if m.LinkLayerDevices != nil {
		c.LinkLayerDevices = make([]LinkLayerDevice, len(m.LinkLayerDevices))
		for i, d := range m.LinkLayerDevices {
			d.Addresses = slices.Clone(d.Addresses)
			c.LinkLayerDevices[i] = d
		}
	}
	return c
}

func (c Constraints) clone() Constraints {
	return Constraints{
		Arch:             clonePtr(c.Arch),
		Container:        clonePtr(c.Container),
		Cores:            clonePtr(c.Cores),
		CpuPower:         clonePtr(c.CpuPower),
		Mem:              clonePtr(c.Mem),
		RootDisk:         clonePtr(c.RootDisk),
		RootDiskSource:   clonePtr(c.RootDiskSource),
		Tags:             cloneSlicePtr(c.Tags),
		InstanceRole:     clonePtr(c.InstanceRole),
		InstanceType:     clonePtr(c.InstanceType),
		Spaces:           cloneSlicePtr(c.Spaces),
		VirtType:         clonePtr(c.VirtType),
		Zones:            cloneSlicePtr(c.Zones),
		AllocatePublicIP: clonePtr(c.AllocatePublicIP),
		ImageID:          clonePtr(c.ImageID),
		Networks:         cloneSlicePtr(c.Networks),
	}
}

func (h HardwareCharacteristics) clone() HardwareCharacteristics {
	return HardwareCharacteristics{
		Arch:             clonePtr(h.Arch),
		Mem:              clonePtr(h.Mem),
		RootDisk:         clonePtr(h.RootDisk),
		RootDiskSource:   clonePtr(h.RootDiskSource),
		CpuCores:         clonePtr(h.CpuCores),
		CpuPower:         clonePtr(h.CpuPower),
		Tags:             cloneSlicePtr(h.Tags),
		AvailabilityZone: clonePtr(h.AvailabilityZone),
		VirtType:         clonePtr(h.VirtType),
	}
}

func (s Status) clone() Status {
	if s.Data != nil {
		s.Data = cloneJSONMap(s.Data)
	}
	return s
}

func clonePtr[T string | uint64 | bool](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneSlicePtr(p *[]string) *[]string {
	if p == nil {
		return nil
	}
	s := slices.Clone(*p)
	return &s
}

// cloneJSONMap deep-copies a map decoded from JSON: its values are nil,
// bool, float64, string, []any or map[string]any.
func cloneJSONMap(m map[string]any) map[string]any {
	c := maps.Clone(m)
	for k, v := range c {
		c[k] = cloneJSONValue(v)
	}
	return c
}

func cloneJSONValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return v
		}
		return cloneJSONMap(v)
	case []any:
		if v == nil {
			return v
		}
		c := make([]any, len(v))
		for i, e := range v {
			c[i] = cloneJSONValue(e)
		}
		return c
	default:
		return v
	}
}
