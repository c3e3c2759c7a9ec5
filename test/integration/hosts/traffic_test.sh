#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Frames really cross between the hosts of hosts.sh: dpdk-testpmd sends (txonly) in one host and
# receives (rxonly) in another, on the DPDK port specs that hosts.sh gives the provider:
#   af_packet -> af_packet and af_xdp -> af_xdp over a veth pair, af_packet -> af_xdp across the
#   bridge of three hosts (unicast to the third host's MAC), and memif between two namespaces.
# Each case passes when testpmd counted frames sent and frames received. Prints the command
# lines. Needs root and dpdk-testpmd (Debian package dpdk-dev). Busy-polls two lcores for about
# five seconds per case: run it alone.
set -uo pipefail
here=$(dirname "$(readlink -f "$0")")
# shellcheck source=SCRIPTDIR/hosts.sh
source "$here/hosts.sh"

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

if ! command -v dpdk-testpmd >/dev/null; then
  echo "FAIL: dpdk-testpmd not found (apt-get install dpdk-dev)"
  echo "0 passed, 1 failed"
  exit 1
fi
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT   # hosts.sh chains its own cleanup after this one

# send RX_HOST RX_VDEV TX_HOST TX_VDEV NAME [TESTPMD TX ARGS...]: receiver first, then the sender
# for about three seconds; prints both command lines and the counts; true when both are > 0.
send() {
  local rxh=$1 rxv=$2 txh=$3 txv=$4 name=$5 rxpid txpid sent got
  shift 5
  hosts_testpmd_spawn "$rxh" "$rxv" rxonly >"$logs/$name.rx" 2>&1
  rxpid=$HOSTS_PID
  echo "  rx: $HOSTS_TESTPMD_CMD"
  # Ports started (a memif server waits for its client only after this line).
  hosts_wait_for_log "$logs/$name.rx" 'Checking link statuses' 20 ||
    { echo "  rx did not start:"; tail -5 "$logs/$name.rx"; }
  hosts_testpmd_spawn "$txh" "$txv" txonly "$@" >"$logs/$name.tx" 2>&1
  txpid=$HOSTS_PID
  echo "  tx: $HOSTS_TESTPMD_CMD"
  hosts_wait_for_log "$logs/$name.tx" 'forwards packets on' 20 ||
    { echo "  tx did not start:"; tail -5 "$logs/$name.tx"; }
  sleep 3
  hosts_testpmd_stop "$txpid" >/dev/null
  sleep 0.5
  hosts_testpmd_stop "$rxpid" >/dev/null
  sent=$(hosts_testpmd_count "$logs/$name.tx" TX)
  got=$(hosts_testpmd_count "$logs/$name.rx" RX)
  echo "  $name: sent $sent, received $got"
  if [ "$sent" -eq 0 ] || [ "$got" -eq 0 ]; then
    grep -hiE 'fail|error|cause|cannot' "$logs/$name.rx" "$logs/$name.tx" | grep -v -- '-errors' |
      sort | uniq -c | head -10
    return 1
  fi
}

hosts_create 2 || { echo "FAIL: hosts_create 2"; exit 1; }
echo "two hosts: ${HOSTS_NS[*]}"
check "af_packet -> af_packet over veth" \
  send 1 "$(hosts_port_spec 1 af_packet)" 0 "$(hosts_port_spec 0 af_packet)" af_packet
check "af_xdp -> af_xdp over veth" \
  send 1 "$(hosts_port_spec 1 af_xdp)" 0 "$(hosts_port_spec 0 af_xdp)" af_xdp
hosts_memif_pair
check "memif server (host 0) <- client (host 1), socket-abstract=no" \
  send 0 "$HOSTS_MEMIF_SERVER" 1 "$HOSTS_MEMIF_CLIENT" memif

hosts_create 3 || { echo "FAIL: hosts_create 3"; exit 1; }
echo "three hosts: ${HOSTS_NS[*]}, bridge $HOSTS_BRIDGE_NS"
check "af_packet (host 0) -> af_xdp (host 2) through the bridge" \
  send 2 "$(hosts_port_spec 2 af_xdp)" 0 "$(hosts_port_spec 0 af_packet)" bridge \
  "--eth-peer=0,${HOSTS_MAC[2]}"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
