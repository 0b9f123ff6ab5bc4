#!/usr/bin/env bash
# depcheck: enforce the dependency direction of design.md over `go list`.
#   cmd → anything, but cmd/provisionctl only → rpc/client, rpc/params, credentials, size,
#   internal/progress (the CLI goes through the API like any client), and the reference agent
#   (internal/agent, cmd/provisionagent) only → rpc/client, rpc/params, credentials (and
#   cmd/provisionagent → internal/agent); internal/daemon → anything but cmd
#   facades/* → state, watcher, storage, rpc, rpc/params, facades/facade (never each other)
#   rpc → rpc/params, internal/jsonscan; rpc/params → internal/jsonscan (the one set of small JSON scanners:
#   rpc's fast paths, and state's and state/store's readers of stored records)
#   rpc/client → rpc/params, credentials (what another repository's test imports)
#   internal/jsonscan, watcher, storage, pki, credentials → nothing of ours
#   state → state/store (the store seam: the caller opens a store and hands it over), watcher, storage,
#   environ, charm, size, internal/jsonscan; state/statetest → state, state/store, state/store/boltstore (tests' default store);
#   state/store → watcher, internal/jsonscan; state/store/{boltstore,etcdstore,storetest} → state/store, watcher, state/internal/*
#   (state/internal/failpoint: the failpoints of a -tags failpoints build)
#   (boltstore/rawbolt, the raw baseline, → boltstore); only state/store/boltstore* imports bbolt, only
#   state/store/etcdstore* and internal/etcdtest import etcd; outside state only internal/daemon, cmd,
#   internal/controllerstore (opening the controller's store from the daemon's settings: it → state,
#   state/store and both stores) and internal/migrate (copying a controller between stores: it →
#   state, state/store, both stores, internal/controllerstore, internal/blobstore, internal/agentbinaries
#   for its directory's name, credentials, pki) and internal/backup (backup archives: it → state,
#   state/store/boltstore, internal/controllerstore, internal/migrate, internal/buildinfo, credentials)
#   import the store implementations
#   environ (the built-in provider) → nothing of ours; state and facades import it
#   charm (metadata.yaml) → nothing of ours; state, facades and cmd import it
#   internal/buildinfo (version, VCS revision) → nothing of ours; cmd, facades, internal/daemon
#   internal/tlsrecord (a TLS record counter for tests) → nothing of ours
#   internal/presence (which agents are connected) → nothing of ours; facades and internal/daemon import it
#   internal/asuser (sockets opened as another local user, for tests) → nothing of ours
#   internal/connlimit (the connection cap, the pending bounds, the TLS handshake gate) → nothing of ours;
#   internal/daemon and cmd/provisionbench import it
#   internal/agentbinaries (the agent binaries' HTTP routes and each daemon's copies) → state, watcher,
#   internal/blobstore, environ, facades/facade (the error table), rpc/params (Juju's error body)
#   size (the one size parser) → nothing of ours; storage, charm, state, facades and
#   cmd/provisionctl import it
#   internal/dashboard (the status page) → state, watcher, rpc/params, size: it reads state and the
#   hub as a facade does, through its Reader (read methods only); internal/daemon glues in
#   modeladmin's status
#   internal/singular (the controller's singular workers' runner) → nothing of ours
#   internal/undertaker (the built-in machine undertaker) → state, environ, watcher
#   provisiondtest (the test kit) → internal/daemon, provisiondtest/internal/etcdhook, internal/agent (WithAgent),
#   internal/testkit/hook, rpc/client, rpc/params, credentials, watcher, watcher/watchertest;
#   provisiondtest/embeddedetcd (the kit's embedded etcd, linked in by a blank import) → internal/etcdtest,
#   provisiondtest/internal/etcdhook; provisiondtest/internal/etcdhook → nothing of ours
#   internal/testkit (this module's way to the kit's daemon, and the helpers the daemon's and the facades' tests
#   share) → provisiondtest, internal/daemon, internal/testkit/hook, rpc/client, rpc/params, state, state/store, charm, storage,
#   watcher/watchertest;
#   internal/testkit/hook → internal/daemon
#   internal/daemonproc (the built daemon run as a process) → nothing of ours
#   internal/robustness/checker (a robustness run's history and its checks) → nothing of ours
#   internal/robustness (the robustness harness) → internal/robustness/checker, internal/etcdtest (its
#   member processes), internal/daemonproc, credentials, rpc/client, rpc/params
set -euo pipefail
cd "$(dirname "$0")/.."
mod=github.com/provisiond/provisiond
fail=0
while read -r pkg imports; do
  rel=${pkg#"$mod"}; rel=${rel#/}
  for imp in $imports; do
    if [[ $imp == go.etcd.io/bbolt* && $rel != state/store/boltstore* ]]; then
      echo "depcheck: $rel imports bbolt (only state/store/boltstore may)"; fail=1
    fi
    if [[ $imp == go.etcd.io/etcd/* && $rel != state/store/etcdstore* && $rel != internal/etcdtest* ]]; then
      echo "depcheck: $rel imports $imp (only state/store/etcdstore and internal/etcdtest may import etcd)"; fail=1
    fi
    [[ $imp == "$mod"/* ]] || continue
    dep=${imp#"$mod"/}
    ok=0
    case $rel in
      cmd/provisionctl*) case $dep in rpc/client|rpc/params|credentials|size|internal/progress|internal/buildinfo) ok=1 ;; esac ;;
      cmd/provisionagent*) case $dep in internal/agent|rpc/client|rpc/params|credentials) ok=1 ;; esac ;;
      internal/agentbinaries*) case $dep in state|watcher|internal/blobstore|environ|facades/facade|rpc/params) ok=1 ;; esac ;;
      internal/agent*) case $dep in rpc/client|rpc/params|credentials) ok=1 ;; esac ;;
      cmd/*) ok=1 ;;
      internal/daemon*) [[ $dep != cmd/* ]] && ok=1 ;;
      internal/dashboard*) case $dep in state|watcher|rpc/params|size) ok=1 ;; esac ;;
      internal/singular*) ok=0 ;;
      internal/undertaker*) case $dep in state|environ|watcher) ok=1 ;; esac ;;
      provisiondtest/internal/etcdhook) ok=0 ;;
      provisiondtest/embeddedetcd) case $dep in internal/etcdtest|provisiondtest/internal/etcdhook) ok=1 ;; esac ;;
      provisiondtest*) case $dep in internal/daemon|provisiondtest/internal/etcdhook|internal/agent|internal/testkit/hook|rpc/client|rpc/params|credentials|watcher|watcher/watchertest) ok=1 ;; esac ;;
      internal/testkit/hook) case $dep in internal/daemon) ok=1 ;; esac ;;
      internal/testkit) case $dep in provisiondtest|internal/daemon|internal/testkit/hook|rpc/client|rpc/params|state|state/store|charm|storage|watcher/watchertest) ok=1 ;; esac ;;
      credentials*) ok=0 ;;
      internal/progress*) ok=0 ;;
      internal/buildinfo*) ok=0 ;;
      facades/facade*) case $dep in state|state/statetest|watcher|storage|rpc|rpc/params|environ|charm|size|internal/presence) ok=1 ;; esac ;;
      facades/*) case $dep in state|state/statetest|watcher|storage|rpc|rpc/params|facades/facade|pki|environ|charm|size|internal/buildinfo|internal/presence) ok=1 ;; esac ;;
      rpc/client*) case $dep in rpc/params|credentials) ok=1 ;; esac ;;
      rpc/params*) case $dep in internal/jsonscan) ok=1 ;; esac ;;
      internal/jsonscan*) ok=0 ;;
      rpc) case $dep in rpc/params|internal/jsonscan) ok=1 ;; esac ;;
      state/store/boltstore/rawbolt*) case $dep in state/store/boltstore) ok=1 ;; esac ;;
      state/store/boltstore*|state/store/etcdstore*|state/store/storetest*) case $dep in state/store|watcher|state/internal/*) ok=1 ;; esac ;;
      state/store) case $dep in watcher|internal/jsonscan) ok=1 ;; esac ;;
      state/statetest*) case $dep in state|state/store|state/store/boltstore|watcher|storage|environ|charm|size|state/internal/*) ok=1 ;; esac ;;
      state/internal/*) ok=0 ;;
      state*) case $dep in state/store|state/internal/*|watcher|storage|environ|charm|size|internal/jsonscan) ok=1 ;; esac ;;
      internal/etcdtest*) ok=0 ;;
      internal/daemonproc*) ok=0 ;;
      internal/robustness/checker*) ok=0 ;;
      internal/robustness*) case $dep in internal/robustness/checker|internal/etcdtest|internal/daemonproc|credentials|rpc/client|rpc/params) ok=1 ;; esac ;;
      internal/tlsrecord*) ok=0 ;;
      internal/presence*) ok=0 ;;
      internal/asuser*) ok=0 ;;
      internal/connlimit*) ok=0 ;;
      internal/backup*) case $dep in state|state/store/boltstore|internal/controllerstore|internal/migrate|internal/buildinfo|credentials) ok=1 ;; esac ;;
      internal/migrate*) case $dep in state|state/store|state/store/boltstore|state/store/etcdstore|internal/controllerstore|internal/blobstore|internal/agentbinaries|credentials|pki) ok=1 ;; esac ;;
      internal/controllerstore*) case $dep in state|state/store|state/store/boltstore|state/store/etcdstore) ok=1 ;; esac ;;
      environ*) ok=0 ;;
      charm*) case $dep in size) ok=1 ;; esac ;;
      storage*) case $dep in size) ok=1 ;; esac ;;
      size*) ok=0 ;;
      watcher/watchertest) case $dep in watcher) ok=1 ;; esac ;;
      watcher*) ok=0 ;;
      pki*) ok=0 ;;
      *) case $dep in state/store/boltstore*|state/store/etcdstore*|internal/etcdtest*) ok=0 ;; *) ok=1 ;; esac ;;
    esac
    if [[ $ok != 1 ]]; then
      echo "depcheck: $rel must not import $dep"; fail=1
    fi
  done
done < <(go list -f '{{.ImportPath}} {{join .Imports " "}}' ./...)
if [[ $fail != 0 ]]; then exit 1; fi
echo "depcheck: ok"
