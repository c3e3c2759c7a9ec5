#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Tests of hosts.sh as a bash library and as a command: topology, addresses, link state, MTU,
# background commands, port specs, and that everything goes away when the owner exits, fails, is
# interrupted, terminated or killed, or (cleanup-stale) has ended long ago. Needs root, iproute2
# and ping (iputils-ping).
set -uo pipefail
here=$(dirname "$(readlink -f "$0")")
hosts_sh=$here/hosts.sh
# shellcheck source=SCRIPTDIR/hosts.sh
source "$hosts_sh"

passed=0 failed=0
check() {
  local what=$1
  shift
  if "$@"; then
    echo "ok: $what"
    passed=$((passed + 1))
  else
    echo "FAIL: $what"
    failed=$((failed + 1))
  fi
}
ns_exists() { ip netns list | awk '{print $1}' | grep -qxF -- "$1"; }
none_exist() {
  local n
  for n in "$@"; do ns_exists "$n" && return 1; done
  return 0
}
# Waits up to 10 s until none of the namespaces exist.
eventually_none_exist() {
  local i
  for ((i = 0; i < 100; i++)); do
    none_exist "$@" && return 0
    sleep 0.1
  done
  return 1
}
# Waits up to 10 s until no process has this command line.
eventually_none_exist_proc() {
  local i
  for ((i = 0; i < 100; i++)); do
    pgrep -f -- "$1" >/dev/null || return 0
    sleep 0.1
  done
  return 1
}
contains() { grep -qE -- "$2" <<<"$1"; }
ping_ok() { hosts_exec "$1" ping -c1 -W1 "${@:3}" "$2" >/dev/null 2>&1; }

tmp=$(mktemp -d)
# hosts.sh chains its own cleanup to this trap. dpfab-other-<pid> is a namespace this test makes
# to check that cleanup-stale leaves foreign names alone.
trap 'rm -rf "$tmp"; ip netns del "dpfab-other-$$" 2>/dev/null' EXIT

# --- two hosts over a veth pair -------------------------------------------------------------
check "hosts_create 2 succeeds" hosts_create 2
start=$(_hosts_starttime $$)
check "names are dpfab-<pid>-<start>-<set>-h<i>" \
  test "${HOSTS_NS[*]}" = "dpfab-$$-$start-0-h0 dpfab-$$-$start-0-h1"
check "two hosts have no bridge namespace" test -z "$HOSTS_BRIDGE_NS"
check "both namespaces exist" ns_exists "${HOSTS_NS[0]}"
for i in 0 1; do
  addr=$(ip -n "${HOSTS_NS[i]}" -br addr show dev dp0)
  link=$(ip -n "${HOSTS_NS[i]}" -d link show dev dp0)
  check "host $i: dp0 has 10.199.0.$((i + 1))/24 and is UP ($addr)" \
    contains "$addr" "^dp0@[^ ]+ +UP +10\.199\.0\.$((i + 1))/24"
  check "host $i: carrier (LOWER_UP)" contains "$link" 'LOWER_UP'
  check "host $i: MAC ${HOSTS_MAC[i]}" contains "$link" "link/ether ${HOSTS_MAC[i]} "
  check "host $i: one tx and one rx queue (af_xdp sees every frame)" \
    contains "$link" 'numtxqueues 1 numrxqueues 1'
  check "host $i: no IPv6 address (no ND/MLD frames)" \
    test -z "$(ip -n "${HOSTS_NS[i]}" -6 addr show dev dp0)"
  check "host $i: lo is up" contains "$(ip -n "${HOSTS_NS[i]}" -br link show lo)" 'UNKNOWN|UP'
done
check "the veth is not in the root namespace" test -z "$(ip -br link show dp0 2>/dev/null)"
check "host 0 pings host 1" ping_ok 0 "${HOSTS_IP[1]}"
check "host 1 pings host 0" ping_ok 1 "${HOSTS_IP[0]}"

check "af_packet port spec" test "$(hosts_port_spec 0 af_packet)" = "net_af_packet0,iface=dp0"
check "af_xdp port spec" \
  test "$(hosts_port_spec 1 af_xdp)" = "net_af_xdp0,iface=dp0,start_queue=0,queue_count=1"
check "provider environment of host 1" test "$(hosts_env 1 af_packet | tr '\n' ' ')" = \
  "FI_DPDK_PORTS=net_af_packet0,iface=dp0 FI_DPDK_IPV4=10.199.0.2/24 "
check "an unknown PMD is refused" bash -c "! bash '$hosts_sh' port-spec af_foo 2>/dev/null"
check "the command prints the same spec" \
  test "$(bash "$hosts_sh" port-spec af_xdp dp0)" = "$(hosts_port_spec 0 af_xdp)"

# --- background commands --------------------------------------------------------------------
hosts_spawn 0 sleep 30
pid=$HOSTS_PID
# `ip netns exec` enters the namespace, then execs: wait for it to get there.
in_ns() {
  local i
  for ((i = 0; i < 100; i++)); do
    contains "$(ip netns pids "$1")" "^$2\$" && return 0
    sleep 0.05
  done
  return 1
}
check "a spawned command runs inside the host's namespace" in_ns "${HOSTS_NS[0]}" "$pid"
rc=0
hosts_wait "$pid" 1 || rc=$?
check "hosts_wait stops it after its timeout and returns 124 (rc=$rc)" test "$rc" -eq 124
check "and it is gone" test ! -e "/proc/$pid"
hosts_spawn 1 sh -c 'exit 3'
rc=0
hosts_wait "$HOSTS_PID" 5 || rc=$?
check "hosts_wait returns the exit status (rc=$rc)" test "$rc" -eq 3
# shellcheck disable=SC2016
hosts_spawn 1 sh -c 'echo "in $(ip -br addr show dev dp0 | cut -d" " -f1)"' >"$tmp/out" 2>&1
hosts_wait "$HOSTS_PID" 5
check "a redirected spawn writes its output there" grep -q '^in dp0' "$tmp/out"

# --- more hosts, through a bridge, with an MTU ----------------------------------------------
set0=("${HOSTS_NS[@]}")
check "hosts_create 3 --mtu 3000 succeeds" hosts_create 3 --mtu 3000
check "second set is set 1 in 10.199.1.0/24" \
  test "$HOSTS_SET ${HOSTS_IP[*]}" = "1 10.199.1.1 10.199.1.2 10.199.1.3"
check "a bridge namespace" test "$HOSTS_BRIDGE_NS" = "dpfab-$$-$start-1-br"
check "bridge br0 has three ports" \
  test "$(ip -n "$HOSTS_BRIDGE_NS" -br link show master br0 | wc -l)" -eq 3
check "bridge floods multicast (snooping off)" \
  contains "$(ip -n "$HOSTS_BRIDGE_NS" -d link show br0)" 'mcast_snooping 0'
check "dp0 has mtu 3000" contains "$(ip -n "${HOSTS_NS[2]}" link show dp0)" 'mtu 3000 '
for a in 0 1 2; do
  for b in 0 1 2; do
    [ "$a" = "$b" ] && continue
    check "host $a pings host $b with 3000-byte unfragmented packets" \
      ping_ok "$a" "${HOSTS_IP[b]}" -M "do" -s 2972
  done
done
check "a 3001-byte unfragmented packet does not go" bash -c "! ip netns exec '${HOSTS_NS[0]}' \
  ping -c1 -W1 -M do -s 2973 ${HOSTS_IP[1]} >/dev/null 2>&1"
check "the first set is still there" ns_exists "${set0[1]}"

check "hosts_create 1 --no-kernel-ip succeeds" hosts_create 1 --no-kernel-ip
check "one host hangs on a bridge" test -n "$HOSTS_BRIDGE_NS"
check "--no-kernel-ip: no IPv4 address on dp0" \
  test -z "$(ip -n "${HOSTS_NS[0]}" -4 addr show dev dp0)"
check "--no-kernel-ip: dp0 is up" contains "$(ip -n "${HOSTS_NS[0]}" link show dp0)" 'LOWER_UP'
check "--no-kernel-ip: the provider still gets an address" \
  contains "$(hosts_env 0 af_xdp)" '^FI_DPDK_IPV4=10\.199\.2\.1/24$'

rc=0
hosts_create 2 --mtu 70000 2>"$tmp/err" || rc=$?
check "a set that cannot be made fails (rc=$rc)" test "$rc" -eq 1
check "and says why" grep -q "mtu 70000" "$tmp/err"
check "and leaves nothing of itself" \
  test -z "$(_hosts_ns_matching "^dpfab-$$-$start-3-")"

hosts_memif_pair
m0=$HOSTS_MEMIF_SOCK
hosts_memif_pair
check "memif pairs get distinct sockets" test "$m0" != "$HOSTS_MEMIF_SOCK"
check "memif server spec" test "$HOSTS_MEMIF_SERVER" = \
  "net_memif0,role=server,socket-abstract=no,socket=/tmp/dpfab-$$-$start/memif1.sock"
check "memif client spec" test "$HOSTS_MEMIF_CLIENT" = \
  "net_memif0,role=client,socket-abstract=no,socket=/tmp/dpfab-$$-$start/memif1.sock"

# --- the command: destroy one set, list ------------------------------------------------------
check "destroy --set 0 removes set 0" bash "$hosts_sh" destroy --owner $$ --set 0
check "set 0 is gone" none_exist "${set0[@]}"
check "set 1 is not" ns_exists "dpfab-$$-$start-1-h0"
check "list shows our live sets" \
  contains "$(bash "$hosts_sh" list)" "^dpfab-$$-$start-1-br \(owner $$ alive\)$"

# --- cleanup when the owner ends -------------------------------------------------------------
cat >"$tmp/child.sh" <<EOF
set -euo pipefail
source '$hosts_sh'
hosts_create \${1}
hosts_spawn 0 sleep 100
hosts_memif_pair
: >"\$HOSTS_MEMIF_SOCK"
echo "\${HOSTS_NS[*]} \$HOSTS_BRIDGE_NS" >"\$2.tmp"
echo "\$HOSTS_DIR" >>"\$2.tmp"
mv "\$2.tmp" "\$2"
case \$3 in
  fail) false ;;
  exit) exit 0 ;;
  *) sleep 60 & wait \$! ;;
esac
EOF
for how in exit fail TERM INT KILL; do
  rm -f "$tmp/names"
  # A background command of a script ignores SIGINT unless it is given back its default.
  env --default-signal=INT bash "$tmp/child.sh" 3 "$tmp/names" "$how" >"$tmp/child.log" 2>&1 &
  child=$!
  for ((i = 0; i < 100; i++)); do
    [ -s "$tmp/names" ] && break
    sleep 0.1
  done
  read -r -a names <"$tmp/names"
  dir=$(sed -n 2p "$tmp/names")
  check "$how: the child made four namespaces" test "${#names[@]}" -eq 4
  case $how in TERM | INT | KILL) kill "-$how" "$child" ;; esac
  rc=0
  wait "$child" || rc=$?
  check "$how: the child ended (rc=$rc)" test ! -e "/proc/$child"
  check "$how: its namespaces are gone" eventually_none_exist "${names[@]}"
  check "$how: its folder (memif sockets) is gone" test ! -e "$dir"
  check "$how: its reaper has ended" \
    eventually_none_exist_proc "hosts.sh reap --owner $child "
done 2>/dev/null

# --- cleanup-stale ---------------------------------------------------------------------------
sleep 60 &
owner=$!
out=$(bash "$hosts_sh" create --owner "$owner" -n 2)
check "create for another live owner" contains "$out" "^host 1 dpfab-$owner-[0-9]+-0-h1 dp0 "
read -r -a stale < <(awk '$1 == "host" {printf "%s ", $3}' <<<"$out")
stale_dir=$(awk '$1 == "dir" {print $2}' <<<"$out")
ip netns add "dpfab-other-$$"
bash "$hosts_sh" cleanup-stale >/dev/null
check "cleanup-stale leaves a live owner's namespaces" ns_exists "${stale[0]}"
kill "$owner"
wait "$owner" 2>/dev/null
check "list calls them stale once their owner is gone" \
  contains "$(bash "$hosts_sh" list)" "^${stale[0]} \(stale\)$"
out=$(bash "$hosts_sh" cleanup-stale)
echo "  $out"
check "cleanup-stale removes them" none_exist "${stale[@]}"
check "and the owner's folder" test ! -e "$stale_dir"
check "and leaves our own" ns_exists "dpfab-$$-$start-1-h0"
check "and leaves namespaces not named by this tool" ns_exists "dpfab-other-$$"
ip netns del "dpfab-other-$$"

hosts_cleanup
check "hosts_cleanup removes every set of this shell" \
  test -z "$(_hosts_ns_matching "^dpfab-$$-")"
check "and this shell's folder" test ! -e "/tmp/dpfab-$$-$start"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
