#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Runs libfabric's fabtests (the conformance suite) against this build's provider: the unit tests,
# and the client/server tests as two processes over one net_memif link. fabtests are not in
# Debian: build them yourself from a libfabric source checkout of the same version as the system
# libfabric (see doc/conformance.md, "Building fabtests 1.17"); this script only runs them.
#   scripts/fabtests.sh [--build DIR] [FABTESTS_BIN]   (default build, /opt/fabtests/bin)
# --build DIR takes the plugin of another build folder: scripts/compat.sh runs a newer
# libfabric's fabtests against a build made with that libfabric (put its lib/ on
# LD_LIBRARY_PATH). Tests a fabtests release renamed run under either name (fi_msg_inject, 1.18
# fi_inject_test; fi_bw, 2.0 fi_flood); those it removed are reported as not there
# (fi_dgram_waitset and fi_poll: 2.0 deprecated wait sets and poll sets). What changed in a test
# follows the fabtests' version: FABTESTS_VERSION, else the libfabric.pc next to FABTESTS_BIN
# (fabtests installed into a libfabric prefix), else the system libfabric's.
# DPFAB_FABTESTS_ONLY=REGEX runs only the tests whose command line (name and arguments) matches
# the extended regular expression, e.g. DPFAB_FABTESTS_ONLY='rma|atomic|_mr'.
# Ends with "N passed, M failed"; each failure's output is printed. Needs root for fi_av_test
# (it runs in a network namespace whose kernel owns the addresses it inserts) and for
# fi_rdm_shared_av (three processes: two network namespaces over a veth).
#
#   scripts/fabtests.sh --quick [--no-oob] [FABTESTS_BIN]
# runs fabtests' own runfabtests.sh -t quick against dpdk instead, both processes of each test on
# one memif socket (role=auto: the server comes first), in two passes. First every test but the
# FI_EP_MSG ones, with out-of-band address exchange (-b; --no-oob runs without it: every RDM and
# DGRAM client/server test is then "Notrun", dpfab's addresses being automatic where runfabtests
# gives both processes -s 127.0.0.1); the MSG tests are excluded there
# (scripts/fabtests-dpdk.exclude, runfabtests.sh -f): with -E their client asks fi_getinfo for a
# source address only and calls fi_connect with no destination, for every provider (tcp fails
# them too). Then the MSG tests alone, without -b, as runfabtests runs them for tcp: -s 127.0.0.1
# on both sides, a loopback address dpdk resolves to the process at the other end of the memif
# link (fi_dpdk(7), "Loopback addresses"); scripts/fabtests-dpdk-msg.exclude excludes the rest.
# Prints Pass/Fail/Notrun per test and "N passed, M failed, K notrun" over both passes; the full
# YAML of each pass (with the output of failed tests) is kept in a file it names.
# runfabtests.sh kill -9s every fi_* process on the machine when it finishes or a test times out,
# and kills only the `timeout` wrapper of a server it gives up on (the test process stays behind):
# a copy patched at run time, in a temporary folder, kills only the fi_* processes it started, and
# a server it gives up on with all its descendants.
set -uo pipefail
cd "$(dirname "$0")/.."
quick=0 oob=-b build=build
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1; shift ;;
    --no-oob) oob=; shift ;;
    --build) build=$2; shift 2 ;;
    -*) echo "usage: $0 [--build DIR] [--quick [--no-oob]] [FABTESTS_BIN]"; exit 2 ;;
    *) break ;;
  esac
done
bin=${1:-/opt/fabtests/bin}
[ -x "$bin/fi_getinfo_test" ] || { echo "no fabtests in $bin"; exit 2; }
version=${FABTESTS_VERSION:-}
[ -z "$version" ] && [ -f "$bin/../lib/pkgconfig/libfabric.pc" ] &&
  version=$(sed -n 's/^Version: *//p' "$bin/../lib/pkgconfig/libfabric.pc")
[ -z "$version" ] && version=$(pkg-config --modversion libfabric 2>/dev/null)
version=${version:-1.17.0}
# Whether the fabtests are of version $1 or later.
since() { [ "$(printf '%s\n%s\n' "$1" "$version" | sort -V | head -n 1)" = "$1" ]; }
FI_PROVIDER_PATH=$(realpath "$build")/drivers/ofi
export FI_PROVIDER_PATH
[ -f "$FI_PROVIDER_PATH/libdpdk-fi.so" ] || { echo "build first (scripts/build.sh)"; exit 2; }
unset FI_DPDK_PORTS FI_DPDK_IPV4 FI_PROVIDER
run=$(mktemp -d /tmp/dpfab-fabtests.XXXXXX)
trap 'rm -rf "$run"' EXIT
passed=0 failed=0

# runfabtests.sh -t quick dpdk, from its share/fabtests folder (where it finds its exclude files),
# as a copy whose cleanup kills only its own fi_* descendants.
run_quick() {
  local share=${bin%/}/../share/fabtests src=${bin%/}/runfabtests.sh patched=$run/runfabtests.sh
  local exclude=$PWD/scripts/fabtests-dpdk.exclude
  [ -f "$src" ] || { echo "no runfabtests.sh in $bin"; exit 2; }
  [ -d "$share" ] || share=$bin
  {
    sed -n 1p "$src"
    cat <<'EOF'
# Patched by dpfab's scripts/fabtests.sh: cleanup kills the fi_* processes this script started
# (its descendants), not every fi_* process on the host.
dpfab_descendants() {
	local c
	for c in $(ps -o pid= --ppid "$1"); do echo "$c"; dpfab_descendants "$c"; done
}
dpfab_kill_own_fi() {
	local p
	for p in $(dpfab_descendants $$); do
		[[ $(ps -o comm= -p "$p" 2>/dev/null) == fi_* ]] && kill -9 "$p" 2>/dev/null
	done
	return 0
}
# A server given up on: the process it started (timeout) and what that started (the test).
dpfab_kill_tree() {
	local p
	for p in $(dpfab_descendants "$1") "$1"; do kill -9 "$p" 2>/dev/null; done
	return 0
}
EOF
    sed -e '1d' -e "/ps -eo comm,pid | grep '^fi_'/d" \
      -e 's/^function cleanup {$/function cleanup {\n\tdpfab_kill_own_fi/' \
      -e 's/kill -9 \$s_pid/dpfab_kill_tree $s_pid/' "$src"
  } >"$patched"
  if grep -q "ps -eo comm,pid" "$patched" || [ "$(grep -c dpfab_kill_own_fi "$patched")" -ne 2 ] ||
    grep -q 'kill -9 \$s_pid' "$patched" || ! grep -q 'dpfab_kill_tree \$s_pid' "$patched"; then
    echo "cannot patch $src: its cleanup is not the one of fabtests 1.17"
    exit 2
  fi
  local logs=() pass opts excl log pid rc summary ok=0 keys
  export FI_DPDK_PORTS="net_memif0,role=auto,socket-abstract=no,socket=$run/memif.sock"
  # main: all but the MSG tests, with -b; msg: the MSG tests, without; mr-rdm and mr-msg:
  # fi_multi_mr -e rdm and -e msg with the application's keys (fabtests-dpdk-mr.exclude).
  for pass in main msg mr-rdm mr-msg; do
    keys=provider
    case $pass in
      main) opts=(${oob}) excl=$exclude ;;
      msg) opts=() excl=$PWD/scripts/fabtests-dpdk-msg.exclude ;;
      mr-rdm) opts=(${oob} -e "-e msg") excl=$PWD/scripts/fabtests-dpdk-mr.exclude keys=application ;;
      mr-msg) opts=(-e "-e rdm") excl=$PWD/scripts/fabtests-dpdk-mr.exclude keys=application ;;
    esac
    log=$(mktemp "/tmp/dpfab-runfabtests-$pass.XXXXXX.yaml")
    logs+=("$log")
    # A session of its own, so that an interrupted run takes its children with it and nothing
    # else.
    (cd "$share" && FI_DPDK_MR_KEYS=$keys exec setsid bash "$patched" -v "${opts[@]}" \
      -T "${FABTESTS_TIMEOUT:-60}" -f "$excl" -p "${bin%/}" -t quick dpdk) >"$log" 2>&1 &
    pid=$!
    trap 'kill -TERM -- -'"$pid"' 2>/dev/null; rm -rf "$run"; exit 130' INT TERM
    wait "$pid"
    rc=$?
    trap - INT TERM
    [ "$rc" -ne 0 ] && echo "runfabtests.sh ($pass pass) exit $rc" && ok=1
  done
  # The second pass lists as excluded what the first ran: each test once, with its real result.
  python3 - "${logs[@]}" <<'PY'
import re, sys
results = {}
for path in sys.argv[1:]:
    name = None
    for line in open(path, errors="replace"):
        m = re.match(r"- name:\s+(.*)", line)
        if m:
            name = re.sub(r'\s*-p "dpdk"', "", m.group(1)).strip()
            continue
        m = re.match(r"  result:\s+(\S+)", line)
        if m and name is not None:
            if m.group(1) != "Excluded" or name not in results:
                results[name] = m.group(1)
            name = None
counts = {}
for name, r in results.items():
    counts[r] = counts.get(r, 0) + 1
    print(f"{r.lower():9s}{name}")
notrun = counts.get("Notrun", 0) + counts.get("Excluded", 0)
print(f'{counts.get("Pass", 0)} passed, {counts.get("Fail", 0)} failed, {notrun} notrun')
sys.exit(1 if counts.get("Fail", 0) or not counts else 0)
PY
  summary=$?
  if [ "$summary" -ne 0 ] || [ "$ok" -ne 0 ]; then
    echo "runfabtests.sh output (with each failure's): ${logs[*]}"
  else
    rm -f "${logs[@]}"
  fi
  [ "$summary" -eq 0 ] && [ "$ok" -eq 0 ]
  exit
}
[ "$quick" -eq 1 ] && run_quick

# Whether the test named by the arguments (its command line) is to run (DPFAB_FABTESTS_ONLY).
want() {
  [ -z "${DPFAB_FABTESTS_ONLY:-}" ] || [[ "$*" =~ $DPFAB_FABTESTS_ONLY ]]
}

report() {  # NAME STATUS LOG...
  local name=$1 status=$2
  shift 2
  if [ "$status" -eq 0 ]; then
    echo "ok: $name"
    passed=$((passed + 1))
  else
    echo "FAIL: $name (exit $status)"
    tail -n 15 "$@"
    failed=$((failed + 1))
  fi
}

# The unit tests take the first entry they get (dpdk's native RDM; fi_getinfo_test -e rdm asks
# for it). FI_PROVIDER='^ofi_rxd' keeps a layered entry away should the core ever offer one.
unit() {  # NAME ARGS...
  local name=$1
  shift
  want "$name $*" || return 0
  FI_PROVIDER='^ofi_rxd' FI_DPDK_PORTS=net_null0 timeout 120 "$bin/$name" -p dpdk "$@" \
    >"$run/$name.log" 2>&1
  report "$name $*" $? "$run/$name.log"
}

# Client/server over one memif link, with fixed addresses so that the tests' own address exchange
# (no -E: the server's FI_SOURCE address, the client's node/service) works as on a real network.
# The benchmarks (fi_*_pingpong) always exchange addresses over a TCP socket bound to -s, and
# fi_multi_recv, fi_unexpected_msg and fi_rdm_rma_trigger always use that socket (FT_OPT_OOB_*):
# they get -E and the loopback address instead.
pair() {  # NAME ARGS...
  local name=$1 sock="$run/memif.sock" s c
  shift
  want "$name $*" || return 0
  local label="$name $*" srv=(-s 10.77.0.1) cli=(-s 10.77.0.2 "$@" 10.77.0.1)
  # fabtests 1.19's fi_rdm_tagged_peek synchronises over that socket too.
  if [[ $name == *pingpong* || $name == fi_multi_recv || $name == fi_unexpected_msg ||
    $name == fi_rdm_rma_trigger ]] || { [[ $name == fi_rdm_tagged_peek ]] && since 1.19; }; then
    srv=(-E)
    cli=(-E "$@" 127.0.0.1)
  fi
  FI_DPDK_PORTS="net_memif0,role=server,socket-abstract=no,socket=$sock" FI_DPDK_IPV4=10.77.0.1/24 \
    timeout 60 "$bin/$name" -p dpdk "${srv[@]}" "$@" >"$run/server.log" 2>&1 &
  s=$!
  for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
  sleep 0.3
  FI_DPDK_PORTS="net_memif0,role=client,socket-abstract=no,socket=$sock" FI_DPDK_IPV4=10.77.0.2/24 \
    timeout 60 "$bin/$name" -p dpdk "${cli[@]}" >"$run/client.log" 2>&1
  c=$?
  wait "$s"
  s=$?
  [ "$s" -eq 0 ] && [ "$c" -eq 0 ]
  report "$label" $? "$run/server.log" "$run/client.log"
  grep -h -A1 "usec/xfer" "$run/client.log" | tail -n 1
  rm -f "$sock"
}

# FI_EP_MSG, as runfabtests runs them for tcp: -s 127.0.0.1 on both sides (the client connects to
# 127.0.0.1, which dpdk resolves to the process at the other end of the memif link: fi_dpdk(7),
# "Loopback addresses"). fi_cm_data also opens its own TCP socket to that address, and
# fi_msg_sockets binds its passive endpoint to it with fi_setname.
pair_lo() {  # NAME ARGS...
  local name=$1 sock="$run/memif.sock" s c
  shift
  want "$name $*" || return 0
  FI_DPDK_PORTS="net_memif0,role=server,socket-abstract=no,socket=$sock" \
    timeout 60 "$bin/$name" -p dpdk -s 127.0.0.1 "$@" >"$run/server.log" 2>&1 &
  s=$!
  for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
  sleep 0.3
  FI_DPDK_PORTS="net_memif0,role=client,socket-abstract=no,socket=$sock" \
    timeout 60 "$bin/$name" -p dpdk -s 127.0.0.1 "$@" 127.0.0.1 >"$run/client.log" 2>&1
  c=$?
  wait "$s"
  s=$?
  [ "$s" -eq 0 ] && [ "$c" -eq 0 ]
  report "$name $*" $? "$run/server.log" "$run/client.log"
  grep -h -A1 "usec/xfer" "$run/client.log" | tail -n 1
  rm -f "$sock"
}

unit fi_getinfo_test
unit fi_getinfo_test -e rdm
unit fi_eq_test
unit fi_cq_test
unit fi_cntr_test
# Memory registration (fi_mr_reg/regv/regattr over every access combination; FI_RMA in the
# hints). fi_getinfo_test's RMA cases (FI_RMA with FI_MR_BASIC, FI_MR_SCALABLE and the mr_mode
# bits, the RMA, atomic and trigger capabilities) run in the two above. Not with -e msg: its
# caps4 case adds the capabilities of the first entry libfabric lists (tcp;ofi_rxm's FI_TAGGED
# and FI_MULTI_RECV) to FI_EP_MSG hints, which no MSG endpoint offers (tcp's fails it too).
unit fi_mr_test

# fi_av_test inserts six consecutive addresses from -g: a kernel on the other end of a veth owns
# them and answers ARP. (fabtests 1.17's av_good_2vector_async expects the count back from an
# FI_EVENT insertion; fi_av(3) and libfabric's own util AV return 0: that case fails, and the
# completion it leaves on the shared EQ fails the asynchronous cases after it. With that check
# changed to 0 in unit/av_test.c every case passes. See doc/conformance.md, "What fails and why".)
if [ "$(id -u)" -eq 0 ] && want fi_av_test; then
  for e in dgram rdm; do
    (
      trap - EXIT  # hosts.sh chains the cleanup it finds: not the run folder's
      # shellcheck source=../test/integration/hosts/hosts.sh
      source test/integration/hosts/hosts.sh
      hosts_create 2 >/dev/null || exit 1
      net=${HOSTS_IP[1]%.*}
      for i in $(seq 10 15); do ip -n "${HOSTS_NS[1]}" addr add "$net.$i/24" dev dp0 || exit 1; done
      # shellcheck disable=SC2046
      hosts_exec 0 env $(hosts_env 0 af_packet) FI_PROVIDER='^ofi_rxd' timeout 120 \
        "$bin/fi_av_test" -p dpdk -e "$e" -g "$net.10" -n 6 -s "${HOSTS_IP[0]}"
    ) >"$run/av.log" 2>&1
    report "fi_av_test -e $e" $? "$run/av.log"
    grep -E "FAIL|Summary" "$run/av.log"
  done
fi

# A test of one fabtests release and not of another: its name in these fabtests, or none (and a
# line saying so). NAME [OTHER NAME]
have() {
  local n
  for n in "$@"; do [ -x "$bin/$n" ] && echo "$n" && return 0; done
  echo "not in these fabtests: $*" >&2
  return 1
}

pair fi_dgram
for c in spin sread fd yield; do pair fi_dgram_pingpong -c "$c" -I 1000; done
# fabtests 2.0 removed fi_dgram_waitset and fi_poll (wait sets and poll sets are deprecated).
have fi_dgram_waitset >/dev/null && pair fi_dgram_waitset
# fi_mcast: the listener joins the group (-M), the sender sends to it without joining.
mcast() {
  local sock="$run/mcast.sock" l sc lc
  want fi_mcast || return 0
  FI_DPDK_PORTS="net_memif0,role=server,socket-abstract=no,socket=$sock" \
    timeout 30 "$bin/fi_mcast" -p dpdk -M 239.1.2.3 >"$run/listener.log" 2>&1 &
  l=$!
  for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
  sleep 0.5
  FI_DPDK_PORTS="net_memif0,role=client,socket-abstract=no,socket=$sock" \
    timeout 20 "$bin/fi_mcast" -p dpdk 239.1.2.3 >"$run/sender.log" 2>&1
  sc=$?
  wait "$l"
  lc=$?
  [ "$sc" -eq 0 ] && [ "$lc" -eq 0 ] && grep -q "Data check OK" "$run/listener.log"
  report "fi_mcast 239.1.2.3" $? "$run/listener.log" "$run/sender.log"
  rm -f "$sock"
}
mcast
# FI_EP_RDM, native. Data checks (-v) wherever the test offers them.
# fi_poll asks for FI_EP_RDM only.
if have fi_poll >/dev/null; then for t in queue counter; do pair fi_poll -t "$t"; done; fi
pair fi_rdm
pair fi_rdm_tagged_peek
# The benchmarks run every default size up to 1 MiB: -I 100 keeps each well inside its 60 s on two
# busy cores.
for c in spin sread fd yield; do pair fi_rdm_pingpong -c "$c" -I 100 -v; done
pair fi_rdm_tagged_pingpong -I 100 -v
pair fi_rdm_tagged_bw -I 100 -v
pair fi_rdm_cntr_pingpong -I 100 -v
pair fi_unexpected_msg -e rdm -I 10
pair fi_multi_recv -e rdm -I 100 -v
# fabtests 1.15 renamed fi_inj_complete to fi_msg_inject (-A inj_complete; FI_EP_RDM by default),
# and 2.0 fi_msg_inject to fi_inject_test; -N sends with fi_sendmsg and FI_INJECT_COMPLETE in the
# call's flags instead of the op_flags.
inject=$(have fi_msg_inject fi_inject_test)
for n in "" -N; do
  # shellcheck disable=SC2086
  [ -n "$inject" ] && pair "$inject" $n -A inj_complete -e rdm -v
done
# RMA and atomics on FI_EP_RDM: every operation, data checked (-v), with delivery complete (-U)
# too; fi_rdm_atomic runs every op and datatype fi_atomicvalid accepts; FI_RMA_EVENT counters;
# triggered writes through an alias endpoint; many regions, each with its own key.
for o in write read writedata; do
  for u in "" -U; do
    # shellcheck disable=SC2086
    pair fi_rma_bw -e rdm -o "$o" -I 100 -v $u
  done
done
for u in "" -U; do
  # shellcheck disable=SC2086
  pair fi_rdm_atomic -o all -z all -I 10 $u
done
pair fi_rdm_rma_event
pair fi_rdm_rma_trigger
# fi_multi_mr writes to keys 1 and 2 at offset 0 without exchanging them: the application's keys
# and offsets (fi_dpdk(7), FI_DPDK_MR_KEYS).
FI_DPDK_MR_KEYS=application pair fi_multi_mr -e rdm -V
# FI_EP_MSG: connections (passive endpoint, fi_connect/fi_accept/fi_reject with data, shutdown).
pair_lo fi_msg
pair_lo fi_msg_epoll
pair_lo fi_msg_sockets
for c in spin sread fd yield; do pair_lo fi_msg_pingpong -c "$c" -I 100 -v; done
pair_lo fi_msg_bw -I 100 -v
pair_lo fi_cm_data
pair_lo fi_cq_data -e msg
pair_lo fi_multi_recv -e msg -I 100
pair_lo fi_unexpected_msg -e msg -I 10
# fabtests 2.0 renamed fi_bw to fi_flood (the same options).
flood=$(have fi_bw fi_flood) && pair_lo "$flood" -e msg -v -T 1
pair_lo fi_multi_ep -e msg -v
# RMA over a connection.
for o in write read writedata; do pair_lo fi_rma_bw -e msg -o "$o" -I 100 -v; done
FI_DPDK_MR_KEYS=application pair_lo fi_multi_mr -e msg -V
# fabtests 1.17's fi_msg_inject (and 2.x fi_inject_test) sets FI_EP_RDM after parsing its options:
# -e msg changes nothing, it runs the native RDM (as the -e rdm runs above).
[ -n "$inject" ] && pair "$inject" -A inj_complete -e msg -v
# Not run: fi_shared_ctx -e msg (shared contexts are not offered: both sides get -FI_ENODATA).
# fi_rdm_shared_av: the client forks; parent and child each open a port of their own and share a
# named AV (FI_SHARED_AV): the parent inserts the server, the child sends to the fi_addr it reads
# from the AV's map_addr. A memif link joins two processes only, so this runs on two network
# namespaces joined by a veth (root): the server on one, the client's two processes on one
# af_packet interface of the other (the same MAC and IPv4; their ephemeral UDP ports tell them
# apart, see fi_dpdk(7), Addressing).
if [ "$(id -u)" -eq 0 ] && want fi_rdm_shared_av; then
  (
    trap - EXIT
    # shellcheck source=../test/integration/hosts/hosts.sh
    source test/integration/hosts/hosts.sh
    hosts_create 2 >/dev/null || exit 1
    # shellcheck disable=SC2046
    hosts_spawn 0 env $(hosts_env 0 af_packet) timeout 60 "$bin/fi_rdm_shared_av" -p dpdk \
      -s "${HOSTS_IP[0]}" >"$run/server.log" 2>&1
    s=$HOSTS_PID
    hosts_wait_for_log "$run/server.log" "Waiting for message" 20 || sleep 1
    # shellcheck disable=SC2046
    hosts_exec 1 env $(hosts_env 1 af_packet) timeout 60 "$bin/fi_rdm_shared_av" -p dpdk \
      -s "${HOSTS_IP[1]}" "${HOSTS_IP[0]}" >"$run/client.log" 2>&1
    c=$?
    hosts_wait "$s" 30
    s=$?
    [ "$s" -eq 0 ] && [ "$c" -eq 0 ] && grep -q "Data check OK" "$run/server.log"
  )
  report "fi_rdm_shared_av" $? "$run/server.log" "$run/client.log"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
