#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Stock fi_pingpong (Debian's libfabric-bin) over the dpdk provider, DGRAM: a server and a client
# process joined by one net_memif link (role=auto: the first is the memif server). Data integrity
# checks on (-c); every size of fi_pingpong's list. Prints fi_pingpong's figures.
#   pingpong_test.sh [iterations]
set -uo pipefail
: "${FI_PROVIDER_PATH:?meson sets FI_PROVIDER_PATH}"
iters=${1:-200}
run=$(mktemp -d /tmp/dpfab-pingpong.XXXXXX)
oob=$((20000 + RANDOM % 20000))
cleanup() {
  [ -n "${srv:-}" ] && kill "$srv" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$run"
}
trap cleanup EXIT
export FI_DPDK_PORTS="net_memif0,role=auto,socket-abstract=no,socket=$run/memif.sock"
export FI_DPDK_IPV4=auto

timeout 60 fi_pingpong -p dpdk -e dgram -c -I "$iters" -B "$oob" >"$run/server.log" 2>&1 &
srv=$!
sleep 1  # the server is the memif server: let it create the socket and listen
timeout 60 fi_pingpong -p dpdk -e dgram -c -I "$iters" -P "$oob" 127.0.0.1 >"$run/client.log" 2>&1
crc=$?
wait "$srv"
src=$?
srv=
echo "== server (exit $src)"; cat "$run/server.log"
echo "== client (exit $crc)"; cat "$run/client.log"
[ "$src" -eq 0 ] && [ "$crc" -eq 0 ] && grep -q "usec/xfer" "$run/client.log"
