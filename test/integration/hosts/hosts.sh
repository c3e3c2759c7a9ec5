#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Several "hosts" on one box, for integration tests of dpfab's data path.
#
# A host is a network namespace with one interface, dp0, that has an IPv4 address in
# 10.199.<set>.0/24 (traffic stays on this machine) and a fixed MAC 02:64:68:<set>:00:<host+1>.
# Two hosts are joined by a veth pair; one or more than two by veth pairs to a bridge (br0) in a
# namespace of its own. Names are dpfab-<owner pid>-<owner start time>-<set>-h<i> (and -br): the
# owner is the process the hosts belong to; the start time (field 22 of /proc/<pid>/stat) tells
# a live owner from a recycled pid. Nothing is created outside these namespaces (the veths are
# made inside them) and nothing else is ever touched.
#
# As a bash library:
#     source test/integration/hosts/hosts.sh
#     hosts_create 2                       # HOSTS_NS[i] HOSTS_IF[i] HOSTS_IP[i] HOSTS_MAC[i] ...
#     hosts_exec 0 ping -c1 -W1 "${HOSTS_IP[1]}"
#     hosts_spawn 1 env $(hosts_env 1 af_xdp) ./dpfab-info >log 2>&1; hosts_wait "$HOSTS_PID" 20
# Everything this shell created goes away when it exits, is interrupted or terminated (traps on
# EXIT, INT, TERM) and, through a reaper process, when it is killed outright. Bash runs a trap
# only between commands: a script that should clean up at once on TERM waits with `wait`, not
# with a long foreground command.
#
# As a command (the C++ helper hosts.h uses these; see `hosts.sh help`):
#     hosts.sh create --owner PID [--set K] [-n N] [--mtu M] [--queues Q] [--subnet A.B.C]
#                     [--no-kernel-ip] [--ipv6]
#     hosts.sh destroy --owner PID [--start T] [--set K]
#     hosts.sh cleanup-stale              # leftovers of owners that are gone
#     hosts.sh list
#     hosts.sh reap --owner PID           # waits for PID to end, then destroys what it owned
#
# What the DPDK ports need (DPDK 22.11, checked on veth):
# - net_af_packet0,iface=dp0: nothing more. The kernel sees every frame too (it answers ARP and
#   ping for its own address, and sends ICMP unreachable for UDP to ports it has no socket on;
#   --no-kernel-ip keeps the kernel out of IPv4).
# - net_af_xdp0,iface=dp0,start_queue=0,queue_count=1: the XDP program takes every frame of its
#   rx queue away from the kernel (ping fails while the port is open). The PMD reads the channel
#   count of veth as 1, so queue_count must be 1, and frames go to whichever veth rx queue the
#   sender's tx queue maps to: the veths here have one queue each (--queues changes it), else an
#   xsk on queue 0 can miss all traffic. Needs CAP_IPC_LOCK or an RLIMIT_MEMLOCK above the whole
#   mempool (the UMEM is the mempool; 4095 mbufs do not fit in 8 MiB), and a pool of more than
#   2048 + rx depth mbufs (the PMD fills its fill ring with 2048 at queue setup). Veth runs XDP in
#   native (driver) mode, copy mode (no zero-copy); the PMD offers no devarg for generic mode.
#   Native XDP on veth refuses a peer MTU above 3498 ("Peer MTU is too large to set XDP").
#   libbpf/libxdp warnings about bpffs ("No bpffs found at /sys/fs/bpf", "Can't use dispatcher")
#   and "skipping unrecognized data section" are harmless: libxdp then loads a single program.
#   A process killed with SIGKILL leaves its XDP program attached; the next one reuses it.
# - A frame the kernel sends through a veth carries an unfinished UDP checksum (CHECKSUM_PARTIAL:
#   the pseudo-header sum only, left to an offload that never happens); af_packet and af_xdp hand
#   it over as it is and dpfab's decoder drops it as a bad checksum. For a kernel UDP socket as a
#   peer, turn the offload off on its end: `ethtool -K dp0 tx off` (kernel_peer_test.cc).
# - Both PMDs report the DPDK link as up even when the kernel link is down: read the kernel
#   state (`ip -n NS link`, LOWER_UP) to know whether the wire is there.
# - net_memif across namespaces needs socket-abstract=no (abstract unix sockets belong to a
#   network namespace; 22.11's default is abstract) and the server must start first (a 22.11
#   client fails to start when the socket does not exist yet). hosts_memif_pair gives the specs.
# - IPv6 is off in our namespaces (no neighbour discovery or MLD frames in the provider's rx;
#   --ipv6 keeps it), and the bridge has multicast snooping off (multicast floods to every host).

# The HOSTS_* variables are for the scripts that source this file.
# shellcheck disable=SC2034

if [ -z "${BASH_VERSION:-}" ]; then
  echo "hosts.sh: needs bash" >&2
  # shellcheck disable=SC2317
  return 1 2>/dev/null || exit 1
fi

HOSTS_SH_PATH=$(readlink -f "${BASH_SOURCE[0]}")
HOSTS_IFACE=dp0                  # the interface of every host
HOSTS_TIMEOUT=${HOSTS_TIMEOUT:-10}   # seconds any one step may take

# ---------------------------------------------------------------------------------------------
# Helpers shared by the library and the command.

# Prints field 22 (start time in clock ticks since boot) of /proc/<pid>/stat; fails if no such
# process.
_hosts_starttime() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }   # the command name may contain spaces and parentheses
  # shellcheck disable=SC2086
  set -- $stat
  printf '%s\n' "${20}"
}

_hosts_tmpdir() { printf '%s/dpfab-%s-%s\n' "${TMPDIR:-/tmp}" "$1" "$2"; }

# Our namespaces (first word of each `ip netns list` line) that match an extended regex.
_hosts_ns_matching() {
  ip netns list 2>/dev/null | while read -r name _; do
    [[ $name =~ $1 ]] && printf '%s\n' "$name"
  done
  return 0
}

# Runs a command; on failure prints it with its output to stderr and returns its status.
_hosts_do() {
  local out rc=0
  out=$(timeout "$HOSTS_TIMEOUT" "$@" 2>&1) || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "hosts.sh: '$*' failed ($rc): $out" >&2
  fi
  return "$rc"
}

# Ends every process inside a namespace (TERM, then KILL after 2 s) and deletes the namespace.
_hosts_delete_ns() {
  local ns=$1 pids i
  pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
  if [ -n "${pids// /}" ]; then
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null
    for ((i = 0; i < 20; i++)); do
      [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break
      sleep 0.1
    done
    pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
    # shellcheck disable=SC2086
    [ -n "${pids// /}" ] && kill -KILL $pids 2>/dev/null
  fi
  ip netns del "$ns" 2>/dev/null || [ ! -e "/run/netns/$ns" ]
}

# Removes the namespaces of owner $1 with start time $2 (only set $3 when given) and, for the
# whole owner, its temporary folder (memif sockets).
_hosts_destroy() {
  local owner=$1 start=$2 set=${3:-} ns rc=0
  [[ $owner =~ ^[0-9]+$ && $start =~ ^[0-9]+$ ]] || { echo "hosts.sh: bad owner" >&2; return 2; }
  [ -z "$set" ] || [[ $set =~ ^[0-9]+$ ]] || { echo "hosts.sh: bad set" >&2; return 2; }
  local re="^dpfab-$owner-$start-${set:-[0-9]+}-(h[0-9]+|br)\$"
  for ns in $(_hosts_ns_matching "$re"); do
    _hosts_delete_ns "$ns" || rc=1
  done
  if [ -z "$set" ]; then
    rm -rf -- "$(_hosts_tmpdir "$owner" "$start")"
  fi
  return $rc
}

# Creates one set and prints its description:
#   set <k>
#   host <i> <namespace> <interface> <ipv4> <prefix length> <mac>
#   bridge <namespace>                       (one host, or more than two)
#   dir <owner's temporary folder>
# On failure removes what it made and returns 1.
_hosts_create_set() {
  local owner=$1 start=$2 set=$3 n=$4 mtu=$5 queues=$6 subnet=$7 kernel_ip=$8 ipv6=$9
  local base="dpfab-$owner-$start-$set" br="" i ns mac q=""
  local -a nss=()
  [ "$queues" -gt 0 ] && q="numtxqueues $queues numrxqueues $queues"
  for ((i = 0; i < n; i++)); do nss+=("$base-h$i"); done
  [ "$n" -ne 2 ] && br="$base-br"

  _hosts_make() {
    local ns
    for ns in "${nss[@]}" $br; do
      _hosts_do ip netns add "$ns" || return 1
      if [ "$ipv6" = no ]; then
        # Before any interface exists, so that none gets an IPv6 address or sends ND/MLD.
        # shellcheck disable=SC2016
        ip netns exec "$ns" sh -c 'for f in all default; do
            echo 1 > /proc/sys/net/ipv6/conf/$f/disable_ipv6; done' 2>/dev/null || true
      fi
      _hosts_do ip -n "$ns" link set lo up || return 1
    done
    if [ -z "$br" ]; then
      # shellcheck disable=SC2086
      _hosts_do ip -n "${nss[0]}" link add "$HOSTS_IFACE" $q type veth \
        peer name "$HOSTS_IFACE" $q netns "${nss[1]}" || return 1
    else
      _hosts_do ip -n "$br" link add br0 type bridge mcast_snooping 0 || return 1
      [ "$mtu" -gt 0 ] && { _hosts_do ip -n "$br" link set br0 mtu "$mtu" || return 1; }
      for ((i = 0; i < n; i++)); do
        # shellcheck disable=SC2086
        _hosts_do ip -n "${nss[i]}" link add "$HOSTS_IFACE" $q type veth \
          peer name "p$i" $q netns "$br" || return 1
        [ "$mtu" -gt 0 ] && { _hosts_do ip -n "$br" link set "p$i" mtu "$mtu" || return 1; }
        _hosts_do ip -n "$br" link set "p$i" master br0 up || return 1
      done
      _hosts_do ip -n "$br" link set br0 up || return 1
    fi
    for ((i = 0; i < n; i++)); do
      ns=${nss[i]}
      mac=$(printf '02:64:68:%02x:00:%02x' $((set % 256)) $((i + 1)))
      _hosts_do ip -n "$ns" link set "$HOSTS_IFACE" address "$mac" || return 1
      [ "$mtu" -gt 0 ] && { _hosts_do ip -n "$ns" link set "$HOSTS_IFACE" mtu "$mtu" || return 1; }
      if [ "$kernel_ip" = yes ]; then
        _hosts_do ip -n "$ns" addr add "$subnet.$((i + 1))/24" dev "$HOSTS_IFACE" || return 1
      fi
      _hosts_do ip -n "$ns" link set "$HOSTS_IFACE" up || return 1
    done
    # Carrier: a veth is up once both ends are.
    local deadline=$((SECONDS + HOSTS_TIMEOUT))
    for ns in "${nss[@]}"; do
      until ip -n "$ns" link show "$HOSTS_IFACE" 2>/dev/null | grep -q 'LOWER_UP'; do
        if [ "$SECONDS" -ge "$deadline" ]; then
          echo "hosts.sh: $ns/$HOSTS_IFACE has no carrier after ${HOSTS_TIMEOUT}s" >&2
          return 1
        fi
        sleep 0.05
      done
    done
  }

  if ! _hosts_make; then
    _hosts_destroy "$owner" "$start" "$set" >/dev/null 2>&1
    return 1
  fi
  mkdir -p "$(_hosts_tmpdir "$owner" "$start")"
  echo "set $set"
  for ((i = 0; i < n; i++)); do
    printf 'host %d %s %s %s 24 02:64:68:%02x:00:%02x\n' "$i" "${nss[i]}" "$HOSTS_IFACE" \
      "$subnet.$((i + 1))" $((set % 256)) $((i + 1))
  done
  [ -n "$br" ] && echo "bridge $br"
  echo "dir $(_hosts_tmpdir "$owner" "$start")"
  return 0
}

# Parses create options into the caller's locals n mtu queues subnet kernel_ip ipv6 (and owner,
# set when $1 is "cli"). Returns 2 on a bad option.
_hosts_parse_create() {
  local mode=$1
  shift
  while [ $# -gt 0 ]; do
    case $1 in
      -n) n=$2; shift ;;
      --mtu) mtu=$2; shift ;;
      --queues) queues=$2; shift ;;
      --subnet) subnet=$2; shift ;;
      --no-kernel-ip) kernel_ip=no ;;
      --ipv6) ipv6=yes ;;
      --owner) [ "$mode" = cli ] || return 2; owner=$2; shift ;;
      --set) [ "$mode" = cli ] || return 2; set=$2; shift ;;
      [0-9]*) n=$1 ;;
      *) echo "hosts.sh: unknown option '$1'" >&2; return 2 ;;
    esac
    shift
  done
  [[ $n =~ ^[0-9]+$ && $n -ge 1 && $n -le 250 ]] || { echo "hosts.sh: bad -n '$n'" >&2; return 2; }
  [[ $mtu =~ ^[0-9]+$ ]] || { echo "hosts.sh: bad --mtu '$mtu'" >&2; return 2; }
  [[ $queues =~ ^[0-9]+$ ]] || { echo "hosts.sh: bad --queues '$queues'" >&2; return 2; }
  [[ -z $subnet || $subnet =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
    { echo "hosts.sh: bad --subnet '$subnet' (want A.B.C)" >&2; return 2; }
  return 0
}

# The DPDK port spec of interface $1 for PMD $2 (af_packet | af_xdp), device index $3 (0).
_hosts_spec() {
  case $2 in
    af_packet) printf 'net_af_packet%s,iface=%s\n' "${3:-0}" "$1" ;;
    af_xdp) printf 'net_af_xdp%s,iface=%s,start_queue=0,queue_count=1\n' "${3:-0}" "$1" ;;
    *) echo "hosts.sh: unknown PMD '$2' (af_packet | af_xdp)" >&2; return 2 ;;
  esac
}

# Starts a reaper for owner $1 (start time $2): a process in its own session, with no terminal
# and no inherited output, that waits for the owner to end and then removes what it owned.
# Prints its pid.
_hosts_start_reaper() {
  setsid bash "$HOSTS_SH_PATH" reap --owner "$1" --start "$2" </dev/null >/dev/null 2>&1 &
  printf '%s\n' "$!"
}

# ---------------------------------------------------------------------------------------------
# The library (for bash tests that source this file).

# Sourcing the file again keeps the state of the first time (sets, pids, traps, reaper).
if [ -z "${HOSTS_OWNER:-}" ] || [ "$HOSTS_OWNER" != $$ ]; then
  HOSTS_OWNER=$$
  HOSTS_OWNER_START=$(_hosts_starttime $$)
  HOSTS_NEXT_SET=${HOSTS_NEXT_SET:-0}
  HOSTS_PIDS=()
  HOSTS_REAPER=""
  HOSTS_TRAPS=""
  HOSTS_MEMIF_NEXT=0
fi

# hosts_create [N] [-n N] [--mtu M] [--queues Q] [--subnet A.B.C] [--no-kernel-ip] [--ipv6]
# Creates N hosts (default 2) as a new set and describes it in:
#   HOSTS_N, HOSTS_SET, HOSTS_NS[i], HOSTS_IF[i] (dp0), HOSTS_IP[i] (10.199.<set>.<i+1>),
#   HOSTS_PREFIX (24), HOSTS_MAC[i], HOSTS_BRIDGE_NS (empty for two hosts), HOSTS_DIR.
# Installs the cleanup traps and the reaper on first use. Returns 1 (having removed what it
# made) on failure, 2 on a bad option. Call it in the main shell, not in $(...).
hosts_create() {
  local n=2 mtu=0 queues=1 subnet="" kernel_ip=yes ipv6=no out line
  _hosts_parse_create lib "$@" || return 2
  local set=$HOSTS_NEXT_SET
  HOSTS_NEXT_SET=$((HOSTS_NEXT_SET + 1))
  [ -n "$subnet" ] || subnet="10.199.$((set % 256))"
  _hosts_install_traps
  out=$(_hosts_create_set "$HOSTS_OWNER" "$HOSTS_OWNER_START" "$set" "$n" "$mtu" "$queues" \
    "$subnet" "$kernel_ip" "$ipv6") || return 1
  HOSTS_N=$n HOSTS_SET=$set HOSTS_PREFIX=24 HOSTS_BRIDGE_NS="" HOSTS_DIR=""
  HOSTS_NS=() HOSTS_IF=() HOSTS_IP=() HOSTS_MAC=()
  while read -r -a line; do
    case ${line[0]:-} in
      host)
        HOSTS_NS[line[1]]=${line[2]} HOSTS_IF[line[1]]=${line[3]}
        HOSTS_IP[line[1]]=${line[4]} HOSTS_MAC[line[1]]=${line[6]} ;;
      bridge) HOSTS_BRIDGE_NS=${line[1]} ;;
      dir) HOSTS_DIR=${line[1]} ;;
    esac
  done <<<"$out"
  return 0
}

# hosts_exec I CMD...: runs CMD in host I's namespace, in the foreground.
hosts_exec() {
  local i=$1
  shift
  [ -n "${HOSTS_NS[i]:-}" ] || { echo "hosts_exec: no host $i" >&2; return 2; }
  ip netns exec "${HOSTS_NS[i]}" "$@"
}

# hosts_spawn I CMD...: runs CMD in host I's namespace in the background (redirect the call to
# capture its output); sets HOSTS_PID (the command's own pid: `ip netns exec` execs it) and adds
# it to HOSTS_PIDS, which the cleanup ends.
hosts_spawn() {
  local i=$1
  shift
  [ -n "${HOSTS_NS[i]:-}" ] || { echo "hosts_spawn: no host $i" >&2; return 2; }
  ip netns exec "${HOSTS_NS[i]}" "$@" &
  HOSTS_PID=$!
  HOSTS_PIDS+=("$HOSTS_PID")
}

# Whether pid $1 is a live (not zombie) child of this shell.
_hosts_is_our_live_child() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  # shellcheck disable=SC2086
  set -- $stat
  [ "$1" != Z ] && [ "$2" = "$$" ]
}

# hosts_wait PID [SECONDS=10] [SIGNAL=TERM]: waits for a background command; when it is still
# running after SECONDS sends SIGNAL, then SIGKILL 2 s later, and returns 124 (as timeout(1)).
# Otherwise returns its exit status.
hosts_wait() {
  local pid=$1 secs=${2:-10} sig=${3:-TERM} i
  for ((i = 0; i < secs * 20; i++)); do
    _hosts_is_our_live_child "$pid" || break
    sleep 0.05
  done
  if _hosts_is_our_live_child "$pid"; then
    kill "-$sig" "$pid" 2>/dev/null
    for ((i = 0; i < 40; i++)); do
      _hosts_is_our_live_child "$pid" || break
      sleep 0.05
    done
    _hosts_is_our_live_child "$pid" && kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
    return 124
  fi
  wait "$pid" 2>/dev/null
}

# hosts_wait_for_log FILE REGEX [SECONDS=15]: waits until FILE has a line matching the extended
# REGEX; returns 1 if it has none after SECONDS.
hosts_wait_for_log() {
  local i
  for ((i = 0; i < ${3:-15} * 20; i++)); do
    grep -qE -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}

# hosts_port_spec I af_packet|af_xdp [INDEX]: prints host I's DPDK port spec.
hosts_port_spec() {
  [ -n "${HOSTS_IF[$1]:-}" ] || { echo "hosts_port_spec: no host $1" >&2; return 2; }
  _hosts_spec "${HOSTS_IF[$1]}" "$2" "${3:-0}"
}

# hosts_env I af_packet|af_xdp: prints FI_DPDK_PORTS=... and FI_DPDK_IPV4=... (one per line, no
# spaces) for a provider process in host I: `hosts_spawn 0 env $(hosts_env 0 af_xdp) app`.
hosts_env() {
  local spec
  spec=$(hosts_port_spec "$1" "$2") || return 2
  printf 'FI_DPDK_PORTS=%s\nFI_DPDK_IPV4=%s/%s\n' "$spec" "${HOSTS_IP[$1]}" "$HOSTS_PREFIX"
}

# hosts_memif_pair: a unique socket for one memif link between two processes (they may be in any
# namespaces, or none). Sets HOSTS_MEMIF_SOCK and the specs HOSTS_MEMIF_SERVER,
# HOSTS_MEMIF_CLIENT and HOSTS_MEMIF_AUTO (dpfab's role=auto; not for testpmd). Start the server
# first. The socket goes with the owner's temporary folder at cleanup.
hosts_memif_pair() {
  _hosts_install_traps
  local dir
  dir=$(_hosts_tmpdir "$HOSTS_OWNER" "$HOSTS_OWNER_START")
  mkdir -p "$dir" || return 1
  HOSTS_MEMIF_SOCK="$dir/memif$HOSTS_MEMIF_NEXT.sock"
  HOSTS_MEMIF_NEXT=$((HOSTS_MEMIF_NEXT + 1))
  local common="socket-abstract=no,socket=$HOSTS_MEMIF_SOCK"
  HOSTS_MEMIF_SERVER="net_memif0,role=server,$common"
  HOSTS_MEMIF_CLIENT="net_memif0,role=client,$common"
  HOSTS_MEMIF_AUTO="net_memif0,role=auto,$common"
}

# hosts_testpmd_spawn I VDEV rxonly|txonly [TESTPMD ARGS...]: dpdk-testpmd on VDEV in host I (I
# = - for no namespace) without hugepages, forwarding and printing port statistics every second
# until hosts_testpmd_stop. Redirect the call to a log; sets HOSTS_PID and HOSTS_TESTPMD_CMD
# (the command line, for reports).
hosts_testpmd_spawn() {
  local i=$1 vdev=$2 mode=$3 cpus
  shift 3
  cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
  local -a cmd=(dpdk-testpmd --no-huge --no-pci --no-shconf -m 256 --log-level='*:warning'
    "--lcores=(0,1)@($cpus)" "--vdev=$vdev" -- "--forward-mode=$mode" --stats-period 1
    --total-num-mbufs=8192 "$@")
  HOSTS_TESTPMD_CMD="${cmd[*]}"
  [ "$i" = - ] || HOSTS_TESTPMD_CMD="ip netns exec ${HOSTS_NS[i]:-?} $HOSTS_TESTPMD_CMD"
  if [ "$i" = - ]; then
    "${cmd[@]}" </dev/null &
    HOSTS_PID=$!
    HOSTS_PIDS+=("$HOSTS_PID")
  else
    hosts_spawn "$i" "${cmd[@]}" </dev/null
  fi
}

# hosts_testpmd_stop PID: SIGINT (testpmd prints its final statistics and exits), SIGKILL after
# 5 s. Returns testpmd's status.
hosts_testpmd_stop() {
  kill -INT "$1" 2>/dev/null
  hosts_wait "$1" 5 INT
}

# hosts_testpmd_count LOG RX|TX: the largest RX-packets/TX-packets count in a testpmd log. The
# periodic port statistics are read, not the final summary: memif clears its counters when the
# peer leaves, and the summary is a difference of port counters.
hosts_testpmd_count() {
  grep -oE "$2-packets: +[0-9]+" "$1" 2>/dev/null | awk '$2 > m { m = $2 } END { print m + 0 }'
}

# hosts_cleanup: ends the processes started through hosts_spawn and removes every set and the
# memif sockets of this shell. Runs by itself at exit; safe to call more than once.
hosts_cleanup() {
  local pid i
  for pid in "${HOSTS_PIDS[@]}"; do
    _hosts_is_our_live_child "$pid" && kill -TERM "$pid" 2>/dev/null
  done
  for pid in "${HOSTS_PIDS[@]}"; do
    for ((i = 0; i < 40; i++)); do
      _hosts_is_our_live_child "$pid" || break
      sleep 0.05
    done
    _hosts_is_our_live_child "$pid" && kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
  done
  HOSTS_PIDS=()
  _hosts_destroy "$HOSTS_OWNER" "$HOSTS_OWNER_START"
  if [ -n "$HOSTS_REAPER" ]; then
    # Its own session and process group (setsid): the shell and its `tail`.
    kill -TERM -- "-$HOSTS_REAPER" 2>/dev/null
    HOSTS_REAPER=""
  fi
  return 0
}

_hosts_on_exit() {
  local rc=$?
  hosts_cleanup
  eval "$HOSTS_PREV_EXIT_TRAP"
  return $rc
}

_hosts_on_signal() {
  hosts_cleanup
  trap - "$1"
  [ "$1" = INT ] || trap - EXIT
  kill "-$1" "$$"
}

# Chains to an EXIT trap set before the first hosts_create; a later `trap ... EXIT` replaces
# ours (then call hosts_cleanup yourself; the reaper still cleans up after the shell ends).
_hosts_install_traps() {
  [ -n "$HOSTS_TRAPS" ] && return 0
  HOSTS_TRAPS=yes
  local prev
  prev=$(trap -p EXIT)
  prev=${prev#trap -- \'}
  prev=${prev%\' EXIT}
  HOSTS_PREV_EXIT_TRAP=${prev//\'\\\'\'/\'}
  trap _hosts_on_exit EXIT
  trap '_hosts_on_signal INT' INT
  trap '_hosts_on_signal TERM' TERM
  if [ -z "${DPFAB_HOSTS_KEEP:-}" ]; then
    HOSTS_REAPER=$(_hosts_start_reaper "$HOSTS_OWNER" "$HOSTS_OWNER_START")
  fi
}

# ---------------------------------------------------------------------------------------------
# The command.

_hosts_usage() {
  sed -n '/^# As a command/,/^# What the DPDK/p' "$HOSTS_SH_PATH" | sed '$d; s/^# \{0,1\}//'
}

_hosts_main() {
  set -uo pipefail
  local verb=${1:-help}
  [ $# -gt 0 ] && shift
  case $verb in
    create)
      local n=2 mtu=0 queues=1 subnet="" kernel_ip=yes ipv6=no owner="" set="" start
      _hosts_parse_create cli "$@" || return 2
      [[ $owner =~ ^[0-9]+$ ]] || { echo "hosts.sh create: --owner PID needed" >&2; return 2; }
      start=$(_hosts_starttime "$owner") || { echo "hosts.sh: no process $owner" >&2; return 1; }
      if [ -z "$set" ]; then
        set=0
        while [ -n "$(_hosts_ns_matching "^dpfab-$owner-$start-$set-")" ]; do set=$((set + 1)); done
      fi
      [[ $set =~ ^[0-9]+$ ]] || { echo "hosts.sh: bad --set '$set'" >&2; return 2; }
      [ -n "$subnet" ] || subnet="10.199.$((set % 256))"
      _hosts_create_set "$owner" "$start" "$set" "$n" "$mtu" "$queues" "$subnet" \
        "$kernel_ip" "$ipv6"
      ;;
    destroy | reap)
      local owner="" start="" set=""
      while [ $# -gt 0 ]; do
        case $1 in
          --owner) owner=$2; shift ;;
          --start) start=$2; shift ;;
          --set) set=$2; shift ;;
          *) echo "hosts.sh $verb: unknown option '$1'" >&2; return 2 ;;
        esac
        shift
      done
      [[ $owner =~ ^[0-9]+$ ]] || { echo "hosts.sh $verb: --owner PID needed" >&2; return 2; }
      if [ -z "$start" ]; then
        start=$(_hosts_starttime "$owner") || { echo "hosts.sh: no process $owner" >&2; return 1; }
      fi
      if [ "$verb" = reap ]; then
        # Returns when the owner has ended (a recycled pid would only delay the cleanup).
        [ "$(_hosts_starttime "$owner")" = "$start" ] && tail --pid="$owner" -s 0.2 -f /dev/null
      fi
      _hosts_destroy "$owner" "$start" "$set"
      ;;
    cleanup-stale)
      local ns owner start dir removed=0 dirs=0
      declare -A dead=()
      for ns in $(_hosts_ns_matching '^dpfab-[0-9]+-[0-9]+-'); do
        owner=${ns#dpfab-}; owner=${owner%%-*}
        start=${ns#dpfab-"$owner"-}; start=${start%%-*}
        if [ "$(_hosts_starttime "$owner" 2>/dev/null)" != "$start" ]; then
          dead["$owner-$start"]=1
          _hosts_delete_ns "$ns" && removed=$((removed + 1))
        fi
      done
      for dir in "${TMPDIR:-/tmp}"/dpfab-*-*; do
        [ -d "$dir" ] || continue
        [[ ${dir##*/} =~ ^dpfab-([0-9]+)-([0-9]+)$ ]] || continue
        owner=${BASH_REMATCH[1]} start=${BASH_REMATCH[2]}
        if [ "$(_hosts_starttime "$owner" 2>/dev/null)" != "$start" ]; then
          rm -rf -- "$dir" && dirs=$((dirs + 1))
        fi
      done
      echo "hosts.sh cleanup-stale: removed $removed namespaces of ${#dead[@]} ended owners," \
        "$dirs folders"
      ;;
    list)
      local ns owner start state
      for ns in $(_hosts_ns_matching '^dpfab-[0-9]+-[0-9]+-'); do
        owner=${ns#dpfab-}; owner=${owner%%-*}
        start=${ns#dpfab-"$owner"-}; start=${start%%-*}
        state=stale
        [ "$(_hosts_starttime "$owner" 2>/dev/null)" = "$start" ] && state="owner $owner alive"
        echo "$ns ($state)"
      done
      ;;
    port-spec) _hosts_spec "${2:-$HOSTS_IFACE}" "${1:-}" ;;
    help | -h | --help) _hosts_usage ;;
    *) echo "hosts.sh: unknown command '$verb'" >&2; _hosts_usage >&2; return 2 ;;
  esac
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  _hosts_main "$@"
  exit $?
fi
