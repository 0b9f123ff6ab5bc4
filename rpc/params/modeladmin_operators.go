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
	// History is the history of commits kept (provisionctl history).
	History *HistoryInfo `json:"history,omitempty"`
}

// HistoryInfo describes the history of commits a controller keeps.
type HistoryInfo struct {
	// Retention is the daemon's --history-retention ("7d", "7d,500000").
	Retention string `json:"retention"`
	// OldestRevision is the oldest revision whose history is kept, and
	// OldestTime (RFC 3339, UTC) its commit's time; none: nothing kept.
	OldestRevision uint64 `json:"oldest-revision,omitempty"`
	OldestTime     string `json:"oldest-time,omitempty"`
	// Records and SizeBytes are how many records are kept and their
	// size (on etcd: those archived, not the newest few minutes' yet).
	Records   int64 `json:"records,omitempty"`
	SizeBytes int64 `json:"size-bytes,omitempty"`
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

// HistoryArgs asks ModelAdmin.History for the changes of the history of
// commits that it selects (provisionctl history). Empty fields select
// everything.
type HistoryArgs struct {
	// Model is a model's name or UUID ("": every model, and the
	// controller's own records).
	Model string `json:"model,omitempty"`
	// Kind is an entity kind: machine, unit, application, model, ...
	Kind string `json:"kind,omitempty"`
	// Entity is a tag (machine-0, unit-mysql-0, application-mysql) or an
	// id within its model (0, mysql/0).
	Entity string `json:"entity,omitempty"`
	// Who is the tag the changes were made as (user-admin, machine-0).
	Who string `json:"who,omitempty"`
	// Since and Until bound the commits: a revision (inclusive) or an
	// RFC 3339 time.
	Since string `json:"since,omitempty"`
	Until string `json:"until,omitempty"`
	// After goes on after a revision: the Next of the previous page.
	After uint64 `json:"after,omitempty"`
	// Limit bounds the changes returned (0: the most one call returns,
	// 1000).
	Limit int `json:"limit,omitempty"`
}

// HistoryResult is one page of changes, in revision order. More: call
// again with After set to Next for the rest.
type HistoryResult struct {
	Changes []HistoryChange `json:"changes"`
	Next    uint64          `json:"next"`
	More    bool            `json:"more"`
	// OldestRevision is the oldest revision whose history is kept (0:
	// none): what is older is gone. OldestTime is its commit's time
	// (RFC 3339, UTC).
	OldestRevision uint64 `json:"oldest-revision,omitempty"`
	OldestTime     string `json:"oldest-time,omitempty"`
}

// HistoryChange is one change of one entity in one commit: when, by
// whom (the tag, its address, the daemon that served it, the call) and
// what (the entity, the field, its value before and after, as JSON;
// absent: it was, or is, not there).
type HistoryChange struct {
	Revision uint64 `json:"revision"`
	Time     string `json:"time"` // RFC 3339, UTC
	Who      string `json:"who,omitempty"`
	Address  string `json:"address,omitempty"`
	Daemon   string `json:"daemon,omitempty"`
	Call     string `json:"call,omitempty"` // Facade.Method
	Model    string `json:"model,omitempty"`
	Kind     string `json:"kind"`
	ID       string `json:"id"`
	// Op is created, removed, changed, or written: a write too large for
	// its values to be kept (on etcd, near its request limit).
	Op     string `json:"op"`
	Field  string `json:"field,omitempty"`
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
}

// StatusAtArgs asks ModelAdmin.StatusAt for a model as it was at a past
// point (provisionctl status --at).
type StatusAtArgs struct {
	// Model is a model's name or UUID, as it was named at that point
	// ("": as ModelArgs).
	Model string `json:"model,omitempty"`
	// At is a revision (12345) or an RFC 3339 time inside the history
	// kept.
	At string `json:"at"`
}

// StatusAtResult is a model's status as it was at a revision: the
// revision shown and the time of its commit ("" when that revision has
// no history record).
type StatusAtResult struct {
	Revision uint64      `json:"revision"`
	Time     string      `json:"time,omitempty"` // RFC 3339, UTC
	Status   ModelStatus `json:"status"`
}
