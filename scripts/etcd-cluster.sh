#!/usr/bin/env bash
# etcd-cluster: a three-member etcd and three provisiond daemons of one controller on this box,
# for trying scale-out (docs/scale-out.md). Not a way to run production: there, run etcd's own
# packages on three machines and one daemon per machine.
#
#   scripts/etcd-cluster.sh [--dir DIR] [--port PORT] [--daemons N] [--members N]
#
# It builds provisiond, provisionctl, provisionagent and etcdcluster into bin/ (Go is all it
# needs; etcdcluster runs etcd's own server, embedded, with the limits provisiond needs), starts
# the etcd members on free loopback ports, then the daemons on 127.0.0.1:PORT, PORT+1, ... (PORT
# 17071 by default; 0 picks free ports), each with its data dir and log in DIR/dK. It prints how to
# connect and waits: kill a daemon (kill -9 PID) or the etcd leader (kill -USR1 on etcdcluster's
# PID; -USR2 starts it again) to watch the others carry on. Ctrl-C (SIGINT or SIGTERM) stops the
# daemons (SIGTERM, which takes them off the API server list), then etcd, and exits 0.
#
#   --dir DIR      keep everything in DIR (made if missing, must be empty; kept at exit).
#                  Default: a new temporary directory, removed at exit.
#   --port PORT    first daemon's port (default 17071; 0: free ports)
#   --daemons N    number of daemons (default 3)
#   --members N    number of etcd members (default 3)
#
# PROVISIOND_BIN_DIR, if set, names a directory holding the binaries already built (the
# test of this script, internal/e2e, sets it); nothing is built then.
set -euo pipefail
cd "$(dirname "$0")/.."

dir="" port=17071 daemons=3 members=3 keep=0
while (($#)); do
  case $1 in
    --dir) dir=$2; keep=1; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --daemons) daemons=$2; shift 2 ;;
    --members) members=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "etcd-cluster: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ $port =~ ^[0-9]+$ && $daemons =~ ^[1-9][0-9]*$ && $members =~ ^[1-9][0-9]*$ ]] ||
  { echo "etcd-cluster: --port, --daemons and --members take numbers" >&2; exit 2; }

if [[ -z $dir ]]; then
  dir=$(mktemp -d "${TMPDIR:-/tmp}/provisiond-cluster.XXXXXX")
else
  mkdir -p "$dir"
  [[ -z $(ls -A "$dir") ]] || { echo "etcd-cluster: --dir $dir is not empty" >&2; exit 2; }
fi
dir=$(cd "$dir" && pwd)

bin=${PROVISIOND_BIN_DIR:-}
if [[ -z $bin ]]; then
  bin=$PWD/bin
  echo "building provisiond, provisionctl, provisionagent and etcdcluster into $bin ..." >&2
  go build -o "$bin/" ./cmd/provisiond ./cmd/provisionctl ./cmd/provisionagent ./cmd/etcdcluster
fi

# Each child runs in its own process group (job control), so the terminal's Ctrl-C reaches only
# this script, which then stops them in order: the daemons first, while etcd still answers.
set -m
pids=() names=()
cleanup() {
  trap - INT TERM EXIT
  echo "stopping ..." >&2
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do # the daemons (last started first), then etcd
    if kill -0 "${pids[i]}" 2>/dev/null; then
      kill -TERM "${pids[i]}" 2>/dev/null || true
      wait "${pids[i]}" 2>/dev/null || true
    fi
  done
  if ((keep)); then echo "stopped; the data and logs are in $dir" >&2; else rm -rf "$dir"; echo "stopped" >&2; fi
}
trap 'cleanup; exit 0' INT TERM
trap 'cleanup' EXIT

# wait_for FILE PID WHAT PATTERN: wait (60 s at most) until FILE has a line matching PATTERN.
wait_for() {
  local i
  for ((i = 0; i < 600; i++)); do
    if grep -q -- "$4" "$1" 2>/dev/null; then return 0; fi
    if ! kill -0 "$2" 2>/dev/null; then
      echo "etcd-cluster: $3 exited; its log ($1):" >&2; tail -n 20 "$1" >&2; exit 1
    fi
    sleep 0.1
  done
  echo "etcd-cluster: $3 not ready after 60 s; its log ($1):" >&2; tail -n 20 "$1" >&2; exit 1
}

mkdir -p "$dir/etcd"
"$bin/etcdcluster" --members "$members" --dir "$dir/etcd/data" --endpoints-file "$dir/etcd/endpoints" \
  >"$dir/etcd/etcd.log" 2>&1 &
pids+=($!) names+=(etcd)
wait_for "$dir/etcd/etcd.log" "${pids[0]}" etcdcluster "members ready"
endpoints=$(cat "$dir/etcd/endpoints")
echo "etcd:     $members members at $endpoints"
echo "          (etcdcluster pid ${pids[0]}: kill -USR1 ${pids[0]} stops the etcd leader, kill -USR2 ${pids[0]} starts it again; log $dir/etcd/etcd.log)"

for ((k = 1; k <= daemons; k++)); do
  d=$dir/d$k
  mkdir -p "$d"
  addr=127.0.0.1:$port
  ((port == 0)) || addr=127.0.0.1:$((port + k - 1))
  "$bin/provisiond" serve --store etcd --etcd-endpoints "$endpoints" --etcd-prefix /provisiond/ \
    --etcd-max-txn-ops 1024 --etcd-max-request-bytes 8388608 \
    --addr "$addr" --data-dir "$d" --log-format json 2>"$d/provisiond.log" &
  pids+=($!) names+=("d$k")
  # The first makes the controller; the others join it.
  wait_for "$d/provisiond.log" "${pids[k]}" "daemon d$k" '"msg":"serving"'
  addr=$(grep -m1 '"msg":"serving"' "$d/provisiond.log" | sed -E 's/.*"addr":"([^"]*)".*/\1/')
  echo "daemon:   d$k at $addr (pid ${pids[k]}, data dir $d, log $d/provisiond.log)"
done

cat <<EOF
ready:    $daemons daemons of one controller on $members etcd members
  $bin/provisionctl --credentials $dir/d1/credentials.yaml models
  $bin/provisionctl --credentials $dir/d2/credentials.yaml watch     # a change made through d1 shows here
  $bin/provisionagent --credentials $dir/d1/credentials.yaml          # the reference agent, provisioning what the controller asks for
  kill -9 ${pids[1]}                                                   # SIGKILL d1: agents carry on through the others
Ctrl-C stops everything.
EOF

# Wait until interrupted, saying when a process ends (a daemon killed to try failover).
declare -A gone=()
while true; do
  wait -n || true
  alive=0
  for i in "${!pids[@]}"; do
    if kill -0 "${pids[i]}" 2>/dev/null; then
      alive=1
    elif [[ -z ${gone[$i]:-} ]]; then
      gone[$i]=1
      echo "${names[i]} (pid ${pids[i]}) exited" >&2
    fi
  done
  ((alive)) || { echo "etcd-cluster: every process has exited" >&2; exit 1; }
done
