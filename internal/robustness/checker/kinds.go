package checker

import "strings"

// Watcher kinds: which facade's watch a stream is, and so which writes
// it must deliver. Each stream is checked against the writes its kind
// matches (Matches), by the same rules (Watches); a notify watcher's
// deliveries name the one entity its writes are of (Stream.Scope's), so
// that a notify stream is an entity stream of one entity.
const (
	// KindModel is ModelAdmin.WatchModel: every change to the default
	// model's entities, named "KIND/ID" (every write whose Op.Model is
	// "" and that names an Entity).
	KindModel = "model"
	// KindMachines is Provisioner.WatchModelMachines: a top-level
	// machine's id when it is added, when it dies and when it is removed
	// (a lifecycle watcher: but a removal is not reported once the death
	// was).
	KindMachines = "machines"
	// KindContainers is Provisioner.WatchContainers of the host machine
	// Stream.Scope (type lxd): the lifecycle of its containers, as
	// KindMachines.
	KindContainers = "containers"
	// KindConfig is Provisioner.WatchForModelConfigChanges, a notify
	// watcher: the default model's config written (registers config/KEY).
	KindConfig = "config"
	// KindScale is CAASUnitProvisioner.WatchApplicationsScale of the
	// application Stream.Scope, a notify watcher: its scale written
	// (register application/APP#scale).
	KindScale = "scale"
	// KindModelResumed is ModelAdmin.WatchModel as KindModel, opened with
	// the header from-revision and, after each reconnection, opened again
	// resumed from the revision its last value covered: its subscriptions
	// are one stream (Stream.Resumes), whose first value after each
	// resumption is what changed while it was away.
	KindModelResumed = "model-resumed"
	// KindCAASModel is ModelAdmin.WatchModel of the CAAS model (named
	// Stream.Scope): every write whose Op.Model is it (units, the scale,
	// the pod spec).
	KindCAASModel = "caas-model"
	// KindStartTimes is Provisioner.WatchModelMachineStartTimes: a
	// top-level machine's id at each change of its life, its removal
	// included (it is no lifecycle watcher), or of its agent's start time
	// (no agent runs in the workload).
	KindStartTimes = "start-times"
	// KindRemovals is MachineUndertaker.WatchMachineRemovals of the
	// default model, a notify watcher: a machine or container removed
	// (or marked for removal, which the workload does not do). Its
	// deliveries name NotifyEntity(KindRemovals).
	KindRemovals = "removals"
	// KindPodSpec is CAASUnitProvisioner.WatchPodSpec of the application
	// Stream.Scope, a notify watcher: its pod spec written.
	KindPodSpec = "podspec"
	// KindModels is ModelAdmin.WatchModels: the controller's models
	// (model UUIDs, named "model/UUID"), each added and removed
	// (registers modelrec/NAME#life, Op.Model ModelsModel).
	KindModels = "models"
	// KindErrorRetry (Provisioner.WatchMachineErrorRetry, a timer) and
	// KindAPIHostPorts (Provisioner.WatchAPIHostPorts: the daemons come
	// and go) are held across reconnections like the others, but no
	// write of the workload is theirs: their deliveries are counted, not
	// checked.
	KindErrorRetry   = "error-retry"
	KindAPIHostPorts = "api-host-ports"
)

// ModelsModel is the Op.Model of writes of the controller's models
// themselves (their life): no model's, the controller's.
const ModelsModel = "(controller)"

// WatchKinds are the watcher kinds, in the order a report lists them.
var WatchKinds = []string{KindModel, KindModelResumed, KindMachines, KindStartTimes, KindContainers, KindRemovals,
	KindConfig, KindScale, KindCAASModel, KindPodSpec, KindModels, KindErrorRetry, KindAPIHostPorts}

// NotifyEntity is what a delivery of a notify watcher of kind (on scope)
// names: the entity its writes are of, or, for a watcher of writes of
// many entities (KindRemovals), a name of its own under which the checker
// takes them together.
func NotifyEntity(kind, scope string) string {
	switch kind {
	case KindRemovals:
		return "removals"
	case KindPodSpec:
		return "podspec/" + scope
	case KindScale:
		return "application/" + scope
	case KindErrorRetry:
		return "error-retry"
	case KindAPIHostPorts:
		return "api-host-ports"
	}
	return ""
}

// Matches reports whether a write op is one a watcher of kind (on scope)
// must deliver.
func Matches(kind, scope string, op Op) bool {
	if !op.Write || op.Entity == "" {
		return false
	}
	switch kind {
	case "", KindModel, KindModelResumed:
		return op.Model == ""
	case KindCAASModel:
		return op.Model == scope
	case KindModels:
		return op.Model == ModelsModel && strings.HasSuffix(op.Register, "#life")
	case KindRemovals:
		return op.Model == "" && strings.HasPrefix(op.Register, "machine/") &&
			strings.HasSuffix(op.Register, "#life") && op.Value == "removed"
	case KindPodSpec:
		return op.Register == "application/"+scope+"#podspec"
	case KindStartTimes:
		id, ok := strings.CutPrefix(op.Register, "machine/")
		if !ok || op.Model != "" {
			return false
		}
		id, ok = strings.CutSuffix(id, "#life")
		return ok && parentID(id) == ""
	case KindMachines, KindContainers:
		id, ok := strings.CutPrefix(op.Register, "machine/")
		if !ok || op.Model != "" {
			return false
		}
		id, ok = strings.CutSuffix(id, "#life")
		if !ok {
			return false
		}
		if kind == KindMachines {
			return parentID(id) == ""
		}
		return parentID(id) == scope
	case KindConfig:
		return op.Model == "" && strings.HasPrefix(op.Register, "config/")
	case KindScale:
		return op.Register == "application/"+scope+"#scale"
	}
	return false
}

// lifecycleReported drops from one entity's life writes (in call order)
// the removals a lifecycle watcher does not report: those after a death,
// which it reported (and then forgot the id).
func lifecycleReported(ws []Op) []Op {
	out := ws[:0:0]
	for i, w := range ws {
		if w.Value == "removed" && i > 0 && ws[i-1].Value == "dead" {
			continue
		}
		out = append(out, w)
	}
	return out
}

// parentID is the host of container id "H/TYPE/N" ("" for a machine):
// state.ParentID's rule, which the checker (importing nothing of the
// project's) cannot call.
func parentID(id string) string {
	i := strings.LastIndexByte(id, '/')
	if i < 0 {
		return ""
	}
	j := strings.LastIndexByte(id[:i], '/')
	if j < 0 {
		return ""
	}
	return id[:j]
}
