// Package crashtest is the crash-safety harness: it runs the built
// provisiond binary on a real data dir, drives concurrent acknowledged
// writes through the API (over the real TLS websocket, with rpc/client),
// kills the process with SIGKILL at random moments, restarts it, and
// checks after every kill that
//
//   - the bbolt file passes the consistency check (provisiond check, run as
//     the operator would run it);
//   - every acknowledged write is there: a write is recorded as
//     acknowledged only when its reply arrived without error; a write whose
//     reply had not arrived when the process died is "in flight" and may or
//     may not be there, but nothing else may be;
//   - the revision never goes backwards: the revision on disk is at least
//     the one before the daemon started plus one per acknowledged write, and
//     at least every revision a client saw on /metrics;
//   - after the restart, agents reconnect (the controller agent, a machine
//     agent with its last acknowledged password, the admin user) and see
//     through the API exactly the model that is on disk: the initial
//     WatchModelMachines snapshot, statuses, instance ids, life, models and
//     model config.
//
// The workload, per cycle: an admin adding and removing models
// (ModelAdmin.AddModel/RemoveModel), one setting model config keys
// (ModelAdmin.SetModelConfig) and one adding machines to the controller
// model (ModelAdmin.AddMachines, one or two a call); several controller
// agent connections (Provisioner v11) setting machine and instance
// statuses (SetStatus, SetInstanceStatus) and agent passwords
// (SetPasswords) of provisioned machines, and taking the machines the
// admin added through their life (SetInstanceInfo, EnsureDead, Remove),
// handed over as soon as their AddMachines was acknowledged; and one
// controller agent connection per application of a CAAS model reporting
// its pods (CAASUnitProvisioner v2 UpdateApplicationsUnits: scale,
// operator status, a changing set of pods with provider ids, addresses
// and statuses). Everything is made through the API: the setup start adds
// the provisioned machines, the CAAS model and its applications.
//
// Every value the workload writes is tracked in a register (one per model
// slot, config key, machine status, password, machine life and CAAS
// application: its scale, operator status and pods), each
// written by exactly one writer goroutine, one call at a time. So after a
// kill a register holds either its last acknowledged value or the one
// value in flight; anything else is a lost (or invented) write. A machine
// acknowledged by AddMachines must be there; a machine no register names
// must be one of those the AddMachines call in flight asked for.
//
// In etcd mode (Config.Etcd) the daemon runs with --store etcd on a
// cluster that outlives the kills; the checks after each kill read the
// controller through a state opened on the prefix (there is no file to
// check), once etcd has decided what the dead daemon had sent it
// (Etcd.Settle: a write in flight may be applied after the kill), and
// everything else is the same: the same workload, registers and revision
// checks, the agents logging in again after each restart.
//
// Run returns a *Violation for a durability or consistency failure and an
// ordinary error when the harness itself could not do its job. The
// planted-bug test builds the daemon with -tags crashbug (see
// state/store/boltstore/crashbug.go: the committer answers a batch, waits, and only
// then commits) and shows Run reports a lost acknowledged write.
package crashtest
