#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# fabtests' fi_mcast (v1.17.0, /opt/fabtests) over the dpdk provider between two processes joined
# by one net_memif link (role=auto: the first is the memif server): the listener (-M) joins the
# group and waits for the greeting; the sender joins with tx op_flags FI_MULTICAST and sends the
# greeting to fi_mc_addr. Both take the group from fi_getinfo(node = the group), so they join with
# the provider's own address format. Skipped (exit 77) when fabtests are not installed.
#   mcast_fabtests_test.sh [group]
set -uo pipefail
: "${FI_PROVIDER_PATH:?meson sets FI_PROVIDER_PATH}"
group=${1:-239.1.2.3}
bin=${FABTESTS_BIN:-/opt/fabtests/bin}
[ -x "$bin/fi_mcast" ] || { echo "no $bin/fi_mcast: skipped"; exit 77; }
run=$(mktemp -d /tmp/dpfab-mcast.XXXXXX)
cleanup() {
  [ -n "${lst:-}" ] && kill "$lst" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$run"
}
trap cleanup EXIT
export FI_DPDK_PORTS="net_memif0,role=auto,socket-abstract=no,socket=$run/memif.sock"
export FI_DPDK_IPV4=auto

timeout 30 "$bin/fi_mcast" -p dpdk -M "$group" >"$run/listener.log" 2>&1 &
lst=$!
sleep 1  # the listener is the memif server: let it create the socket and join
timeout 20 "$bin/fi_mcast" -p dpdk "$group" >"$run/sender.log" 2>&1
sc=$?
wait "$lst"
lc=$?
lst=
echo "== listener (exit $lc)"; grep -v "returned -61\|ofi_mrail" "$run/listener.log"
echo "== sender (exit $sc)"; grep -v "returned -61\|ofi_mrail" "$run/sender.log"
[ "$lc" -eq 0 ] && [ "$sc" -eq 0 ] && grep -q "Data check OK" "$run/listener.log"
