package params

// Wire types of the ModelAdmin v1 methods behind provisionctl's
// operator verbs: show-controller and version (ControllerInfo),
// remove-space, remove-subnet, remove-agent-binaries, and the values that
// watch prints (ModelEntities). Sizes: "size" is MiB everywhere (Juju's
// unit for storage); a count of bytes is named "size-bytes".

// ControllerInfo describes the controller: its UUIDs, where it listens,
// which build runs it and its store.
type ControllerInfo struct {
	ControllerUUID      string   `json:"controller-uuid"`
	ControllerModelUUID string   `json:"controller-model-uuid"`
	APIAddresses        []string `json:"api-addresses"`
	// APIVersion is the Juju API level served ("3.3.0"); Version,
	// Revision and GoVersion the provisiond build.
	APIVersion string    `json:"api-version"`
	Version    string    `json:"version"`
	Revision   string    `json:"revision"`
	GoVersion  string    `json:"go-version"`
	Models     int       `json:"models"`
	Store      StoreInfo `json:"store"`
}

// StoreInfo describes the controller's database, in figures both engines
// have (a figure an engine lacks, or has not learnt yet, is zero).
type StoreInfo struct {
	Engine string `json:"engine"` // "bbolt" or "etcd"
	// SchemaVersion is the engine's own layout version (bbolt's file;
	// 0 on etcd, which keeps none).
	SchemaVersion uint64 `json:"schema-version"`
	// Revision is the latest revision the daemon answering has applied.
	Revision uint64 `json:"revision"`
	// SizeBytes is the space the data takes (bbolt: the file; etcd: the
	// largest member's database), InUseBytes the part of it that holds
	// data, QuotaBytes the size past which writes are refused (etcd's
	// space quota; none on bbolt).
	SizeBytes  int64 `json:"size-bytes"`
	InUseBytes int64 `json:"in-use-bytes,omitempty"`
	QuotaBytes int64 `json:"quota-bytes,omitempty"`
	// CompactRevision is the revision up to which history is gone, as
	// far as the daemon answering knows (bbolt: change sets pruned;
	// etcd: compacted).
	CompactRevision uint64 `json:"compact-revision,omitempty"`
	// Members are etcd's members as the daemon answering last heard from
	// them (none on bbolt).
	Members []StoreMember `json:"members,omitempty"`
}

// StoreMember is one server of the store's engine (an etcd member).
type StoreMember struct {
	Endpoint string `json:"endpoint"`
	// Up: the member answered the daemon's last probe; Error says why
	// not.
	Up         bool     `json:"up"`
	Error      string   `json:"error,omitempty"`
	SizeBytes  int64    `json:"size-bytes,omitempty"`
	InUseBytes int64    `json:"in-use-bytes,omitempty"`
	QuotaBytes int64    `json:"quota-bytes,omitempty"`
	Alarms     []string `json:"alarms,omitempty"`
}

// RemoveSpaceArgs is the argument of RemoveSpace.
type RemoveSpaceArgs struct {
	Model string `json:"model,omitempty"`
	Name  string `json:"name"`
}

// RemoveSubnetArgs is the argument of RemoveSubnet.
type RemoveSubnetArgs struct {
	Model string `json:"model,omitempty"`
	CIDR  string `json:"cidr"`
}

// RemoveAgentBinariesArgs is the argument of RemoveAgentBinaries: one
// catalog entry, "VERSION-OS-ARCH" ("3.3.0-ubuntu-amd64").
type RemoveAgentBinariesArgs struct {
	Version string `json:"version"`
}

// ModelEntitiesArgs asks for the current fields of entities of a model,
// named as WatchModel reports them ("machine/0", "model/<uuid>").
type ModelEntitiesArgs struct {
	Model    string   `json:"model,omitempty"`
	Entities []string `json:"entities"`
}

// EntityValue is the current record of one entity.
type EntityValue struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	// Removed is true when the entity no longer exists; Value is then
	// null. Otherwise Value holds its fields (secrets left out).
	Removed bool           `json:"removed"`
	Value   map[string]any `json:"value"`
}

// ModelEntitiesResult answers ModelEntities, in the order asked.
type ModelEntitiesResult struct {
	Entities []EntityValue `json:"entities"`
}
