#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Stock fi_pingpong (Debian's libfabric-bin) over the dpdk provider: a server and a client process
# joined by one net_memif link (role=auto: the first is the memif server). Data integrity checks
# on (-c); every size of fi_pingpong's list (RDM and MSG: up to 1 MiB, through the rendezvous), or
# the sizes given. MSG: the server sends its passive endpoint's name over fi_pingpong's TCP
# control connection and the client connects to it. Prints fi_pingpong's figures.
#   pingpong_test.sh [iterations] [dgram|rdm|msg] [fi_pingpong -S argument]
set -uo pipefail
: "${FI_PROVIDER_PATH:?meson sets FI_PROVIDER_PATH}"
# Under scripts/test.sh's sanitizer build the plugin needs the ASan runtime loaded first: stock
# programs that dlopen it (fi_info, fi_pingpong) get it preloaded, leak checks off (their own
# allocations are not ours to judge); system tools do not.
stock() {
  if [ -n "${DPFAB_STOCK_PRELOAD:-}" ]; then
    LD_PRELOAD=$DPFAB_STOCK_PRELOAD ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 "$@"
  else
    "$@"
  fi
}
iters=${1:-200}
ep=${2:-dgram}
sizes=()
[ -n "${3:-}" ] && sizes=(-S "$3")
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

stock timeout 60 fi_pingpong -p dpdk -e "$ep" -c -I "$iters" "${sizes[@]}" -B "$oob" \
  >"$run/server.log" 2>&1 &
srv=$!
sleep 1  # the server is the memif server: let it create the socket and listen
stock timeout 60 fi_pingpong -p dpdk -e "$ep" -c -I "$iters" "${sizes[@]}" -P "$oob" 127.0.0.1 \
  >"$run/client.log" 2>&1
crc=$?
wait "$srv"
src=$?
srv=
echo "== server (exit $src)"; cat "$run/server.log"
echo "== client (exit $crc)"; cat "$run/client.log"
[ "$src" -eq 0 ] && [ "$crc" -eq 0 ] && grep -q "usec/xfer" "$run/client.log"
