package state

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"maps"
	"slices"
	"sync/atomic"
)

// recordCacheSlots is the number of records whose decoded values a
// recordCache keeps. An entry of a provisioned machine is about 1 KB
// (record, decoded Machine, key), so a cache holds about 1 MB at most,
// however many records there are.
const recordCacheSlots = 1024

// recordCache saves the JSON decoding of a record decoded before: an entry
// holds the stored bytes of a record and the value decoded from them, and
// is used only when the bytes just read from the store are equal to them.
// So it needs no invalidation: a write that changes the record changes its
// stored bytes, the next read misses and replaces the entry, and a read
// never returns anything but what its own transaction holds (equal bytes
// decode to an equal value, so a write of the same bytes needs no new
// entry either). That holds in a write transaction too: it reads its own
// writes' bytes, and an entry made from a write that is then rolled back
// only misses. It also holds across States: an entry is a pure function
// of its bytes, so the unit and application caches are the package's
// (unitRecords, applicationRecords) and the machines' one per State.
//
// A record is kept only from its second read on: the first read leaves a
// marker (its key alone), so records read once (an agent's login and
// watcher set-up) cost a few bytes, not an entry. Each key may sit in one
// of two slots (two hashes); what is stored takes the slot holding the
// same key, else a free one, else one holding a marker, else evicts the
// first. With two choices a few hundred records read in turn settle into
// slots of their own instead of evicting each other on every read.
//
// It is safe for concurrent use without locks: a slot is an atomic pointer
// to an entry that is never modified once stored; readers get a deep copy
// (clone) of the entry's value, so they may modify what they get. Racing
// readers may store the same key twice; a stale entry is never used (its
// bytes differ) and is replaced like any other.
type recordCache[T any] struct {
	seed   maphash.Seed
	decode func(raw []byte) (T, error)
	clone  func(*T) T // a deep copy: TestRecordClonesShareNothing
	slots  [recordCacheSlots]atomic.Pointer[recordCacheEntry[T]]
}

type recordCacheEntry[T any] struct {
	key string // the record's key (entityKey)
	raw []byte // the stored record v was decoded from (a copy); nil in a marker
	v   T      // never modified
}

func newRecordCache[T any](decode func([]byte) (T, error), clone func(*T) T) *recordCache[T] {
	return &recordCache[T]{seed: maphash.MakeSeed(), decode: decode, clone: clone}
}

// decodeDoc returns a decoder of records stored as D: what out takes of
// the decoded D.
func decodeDoc[D, T any](out func(*D) T) func([]byte) (T, error) {
	return func(raw []byte) (T, error) {
		var d D
		err := json.Unmarshal(raw, &d)
		return out(&d), err
	}
}

// newMachineCache is the cache of State.Machine: machine records, their
// password hash left out.
func newMachineCache() *recordCache[Machine] {
	return newRecordCache(decodeDoc((*machineDoc).machine), (*Machine).clone)
}

// unitRecords and applicationRecords are the caches of get's unit and
// application records (decodeRecord) and of appUnits; modelRecords that of
// get's model records, whole (modelDoc) or their head (modelHead), which
// nearly every write reads (AddMachines: the model with its config, then
// its head, each a decode of the whole record with its config map).
var (
	unitRecords        = newRecordCache(decodeDoc(func(d *unitDoc) Unit { return d.Unit }), (*Unit).clone)
	applicationRecords = newRecordCache(decodeDoc(func(d *applicationDoc) Application { return d.Application }), (*Application).clone)
	modelRecords       = newRecordCache(decodeDoc(func(d *modelDoc) modelDoc { return *d }), (*modelDoc).clone)
)

// get returns the value of record raw, stored under key: a copy the
// caller may modify. raw may point into the database's memory: it is only
// read, and copied when kept.
func (c *recordCache[T]) get(key string, raw []byte) (T, error) {
	v, shared, err := c.getShared(key, raw)
	if err != nil {
		var zero T
		return zero, err
	}
	if shared {
		return c.clone(v), nil
	}
	return *v, nil
}

// getShared is get without the copy: v is the cache's own value when
// shared (never to be modified: clone it), else freshly decoded. It lets
// State.Machine take the copy outside the store's read callback, on its
// own stack.
func (c *recordCache[T]) getShared(key string, raw []byte) (v *T, shared bool, err error) {
	h := maphash.String(c.seed, key)
	s1, s2 := &c.slots[h%recordCacheSlots], &c.slots[(h>>32)%recordCacheSlots]
	e1, e2 := s1.Load(), s2.Load()
	for _, e := range [2]*recordCacheEntry[T]{e1, e2} {
		if e != nil && e.raw != nil && e.key == key && bytes.Equal(e.raw, raw) {
			return &e.v, true, nil
		}
	}
	d, err := c.decode(raw)
	if err != nil {
		return nil, false, err
	}
	seen := (e1 != nil && e1.key == key) || (e2 != nil && e2.key == key)
	e := &recordCacheEntry[T]{key: key} // a marker on the first read
	if seen {
		e.raw, e.v = bytes.Clone(raw), d
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
		return &d, false, nil // not kept: the caller may have it as it is
	}
	return &e.v, true, nil
}

// clone returns a deep copy of m: nothing the copy refers to (slices, maps,
// pointers) is shared with m. TestRecordClonesShareNothing checks that
// every field is covered.
func (m *Machine) clone() Machine {
	c := *m
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

// clone returns a deep copy of u (TestRecordClonesShareNothing).
func (u *Unit) clone() Unit {
	c := *u
	if u.Container != nil {
		cc := *u.Container
		cc.Ports = slices.Clone(u.Container.Ports)
		c.Container = &cc
	}
	c.AgentStatus = u.AgentStatus.clone()
	c.WorkloadStatus = u.WorkloadStatus.clone()
	c.ContainerStatus = u.ContainerStatus.clone()
	return c
}

// clone returns a deep copy of a (TestRecordClonesShareNothing).
func (a *Application) clone() Application {
	c := *a
	c.EndpointBindings = maps.Clone(a.EndpointBindings)
	if a.LXDProfile != nil {
		p := LXDProfile{Config: maps.Clone(a.LXDProfile.Config), Description: a.LXDProfile.Description}
		if a.LXDProfile.Devices != nil {
			p.Devices = make(map[string]map[string]string, len(a.LXDProfile.Devices))
			for k, d := range a.LXDProfile.Devices {
				p.Devices[k] = maps.Clone(d)
			}
		}
		c.LXDProfile = &p
	}
	c.Constraints = a.Constraints.clone()
	c.StorageConstraints = maps.Clone(a.StorageConstraints)
	if a.DeviceConstraints != nil {
		c.DeviceConstraints = make(map[string]DeviceConstraints, len(a.DeviceConstraints))
		for k, d := range a.DeviceConstraints {
			d.Attributes = maps.Clone(d.Attributes)
			c.DeviceConstraints[k] = d
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

func (d *modelDoc) clone() modelDoc {
	c := *d
	c.Config = cloneJSONMap(d.Config)
	c.DestroyStorage = clonePtr(d.DestroyStorage)
	return c
}

// cloneJSONMap deep-copies a map decoded from JSON: its values are nil,
// bool, float64, string, []any or map[string]any. Only the lists and
// maps in it are copied again (a model's config is some 70 scalars).
func cloneJSONMap(m map[string]any) map[string]any {
	c := maps.Clone(m)
	for k, v := range c {
		switch v.(type) {
		case map[string]any, []any:
			c[k] = cloneJSONValue(v)
		}
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
