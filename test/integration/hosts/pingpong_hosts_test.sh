#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Stock fi_pingpong (Debian's libfabric-bin) over the dpdk provider between two network
# namespaces joined by a veth pair: once on net_af_packet, once on net_af_xdp; DGRAM, the native
# RDM or connected MSG endpoints (-e rdm, -e msg: every size of the list up to 1 MiB, so the
# rendezvous too). Data integrity
# checks on (-c; fi_pingpong's -v is debug output, not a check); every size of fi_pingpong's list.
# fi_pingpong exchanges addresses over TCP: on af_xdp the XDP program takes every frame of the
# veth from the kernel, so the control connection runs over a second veth pair (oob0,
# 10.198.<set>.0/24). Prints fi_pingpong's figures.
#   pingpong_hosts_test.sh [iterations] [dgram|rdm|msg]
set -uo pipefail
: "${FI_PROVIDER_PATH:?meson sets FI_PROVIDER_PATH}"
here=$(dirname "$(readlink -f "$0")")
# shellcheck source=SCRIPTDIR/hosts.sh
source "$here/hosts.sh"
iters=${1:-300}
ep=${2:-dgram}
case $ep in dgram|rdm|msg) ;; *) echo "FAIL: endpoint type '$ep' (dgram, rdm or msg)"; exit 1 ;; esac
logs=$(mktemp -d /tmp/dpfab-pingpong-hosts.XXXXXX)
trap 'rm -rf "$logs"' EXIT   # hosts.sh chains its own cleanup after this one

command -v fi_pingpong >/dev/null || { echo "FAIL: fi_pingpong not found (libfabric-bin)"; exit 1; }
passed=0 failed=0
for pmd in af_packet af_xdp; do
  hosts_create 2 || { echo "FAIL: hosts_create"; exit 1; }
  oob=10.198.$HOSTS_SET
  ip -n "${HOSTS_NS[0]}" link add oob0 type veth peer name oob0 netns "${HOSTS_NS[1]}" || exit 1
  for i in 0 1; do
    ip -n "${HOSTS_NS[i]}" addr add "$oob.$((i + 1))/24" dev oob0 &&
      ip -n "${HOSTS_NS[i]}" link set oob0 up || exit 1
  done
  port=$((20000 + RANDOM % 20000))
  # af_xdp: the UMEM is the mempool, and the PMD fills 2048 buffers at queue setup (hosts.sh).
  # Under scripts/test.sh's sanitizer build, fi_pingpong (not ip) gets the ASan runtime preloaded.
  common=(FI_DPDK_MBUFS=4095
    ${DPFAB_STOCK_PRELOAD:+LD_PRELOAD=$DPFAB_STOCK_PRELOAD ASAN_OPTIONS=detect_leaks=0}
    timeout 60 fi_pingpong -p dpdk -e "$ep" -c -I "$iters")
  # shellcheck disable=SC2046  # hosts_env prints one VAR=value per line
  hosts_spawn 0 env $(hosts_env 0 "$pmd") "${common[@]}" -B "$port" >"$logs/$pmd.server" 2>&1
  srv=$HOSTS_PID
  sleep 1   # the server opens its port and listens on the control socket
  # shellcheck disable=SC2046
  hosts_exec 1 env $(hosts_env 1 "$pmd") "${common[@]}" -P "$port" "$oob.1" >"$logs/$pmd.client" 2>&1
  crc=$?
  hosts_wait "$srv" 30
  src=$?
  echo "== $pmd server (exit $src)"; grep -v -e '^libbpf' -e '^libxdp' "$logs/$pmd.server"
  echo "== $pmd client (exit $crc)"; grep -v -e '^libbpf' -e '^libxdp' "$logs/$pmd.client"
  if [ "$src" -eq 0 ] && [ "$crc" -eq 0 ] && grep -q "usec/xfer" "$logs/$pmd.client"; then
    echo "ok: fi_pingpong -e $ep over $pmd between two namespaces"
    passed=$((passed + 1))
  else
    echo "FAIL: fi_pingpong -e $ep over $pmd between two namespaces"
    failed=$((failed + 1))
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
