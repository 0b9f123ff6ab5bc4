// Package agent is provisiond's reference agent: it drives the public API
// the way Juju's agents do, against a simulated cloud (SimCloud), so that
// what operators ask for with provisionctl actually happens. It is our own
// client of the API like any other: it imports rpc/client, rpc/params and
// credentials, nothing else of provisiond's (make depcheck).
// cmd/provisionagent runs it on a running daemon; provisiond serve --agent
// sim runs it in the daemon's process; provisionbench's churn workload
// drives it.
//
// # What it runs
//
// As the controller agent (credentials.yaml's controller-agent), one
// provisioner per model, following the models (ModelAdmin.WatchModels, as
// the admin user):
//   - IAAS models: the environ provisioner (Provisioner v11:
//     WatchModelMachines, Life, InstanceId, ProvisioningInfo, SetPasswords,
//     the cloud's StartInstance, SetInstanceInfo with a nonce, hardware,
//     network config and volumes, SetInstanceStatus), which starts a machine
//     agent for each machine it provisions; dead machines have their
//     instance stopped and are removed (Remove), dying ones that never
//     started are made dead first (EnsureDead).
//   - CAAS models: the unit provisioner (CAASUnitProvisioner v2:
//     WatchApplications, Life, ApplicationCharmInfo, WatchApplicationsScale,
//     WatchPodSpec, WatchApplicationsTrustHash, ApplicationsScale,
//     DeploymentMode, ProvisioningInfo, ApplicationsTrust,
//     ApplicationsConfig, then UpdateApplicationsService and
//     UpdateApplicationsUnits with the pods and their filesystems and
//     volumes); as Juju's worker, it acts only on a dead (or removed)
//     application: its service and pods are deleted and its cluster
//     resources cleared (ClearApplicationsResources, which removes it).
//
// Each machine agent logs in as its machine with the password and nonce its
// provisioner set, reports itself started (SetStatus), the containers it
// can host (SetSupportedContainers) and its network (SetObservedNetworkConfig),
// and runs the container provisioner of its machine (WatchContainers per
// container type, HostChangesForContainers, PrepareContainerInterfaceInfo,
// ProvisioningInfo, SetPasswords, SetInstanceInfo, SetInstanceStatus), which
// starts the containers' own agents. Dying containers are torn down by their
// host: their agent makes them dead (EnsureDead), the host releases their
// addresses (ReleaseContainerAddresses) and removes them (Remove). A dying
// machine's agent makes it dead once it hosts no containers.
//
// # Goroutines and connections
//
// Run owns every goroutine the agent starts and returns only when all of
// them have: one follows the models (its connection: the admin's on /api);
// one per model runs its provisioner (its connection: the controller
// agent's on the model, plus the admin's for the model's subnets); one per
// machine agent (its own connection); and, inside a run, one per watcher
// (Next blocks) and one per CAAS application. Each of them is stopped by
// cancelling its context; a worker whose connection fails (the daemon
// restarted) reconnects with backoff (Config.MinBackoff doubling to
// MaxBackoff, with jitter), trying the addresses in turn.
//
// # Resuming its watchers
//
// Every watcher the agent holds reports revisions (it opens them with
// provisiond's "from-revision" header key, which Juju's agents never
// send): each worker keeps, across its reconnections, the revision up to
// which the events it received cover every change, and the ids received
// and not yet acted on. Reconnected (the same daemon restarted, or
// another of the controller after a failover), it opens each watcher
// again resumed after that revision: the initial event lists only what
// changed meanwhile (a notify watcher fires only if its thing changed),
// and the worker acts on that and on what it had not acted on. When the
// daemon answers watcher reset (the history after the revision is no
// longer kept) it watches afresh, the full initial event bringing it back
// in step. The unit provisioner starts the application workers of its
// last run again (they ran on its connection), each resuming its own
// three watchers. Config.Observe is told of each event (EventWatched).
//
// Machine agents are the agents of running
// instances, so they outlive their provisioner's reconnects; they stop
// when their machine is removed, when their model goes, and when Run ends.
//
// The simulated cloud keeps its instances and pods in memory: a new
// process knows none of them, and leaves machines provisioned by an earlier
// one alone (a dying one it makes dead and removes, as nothing else can).
package agent
