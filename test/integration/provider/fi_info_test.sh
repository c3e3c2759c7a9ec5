#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Stock fi_info (Debian's libfabric-bin) with our plugin on FI_PROVIDER_PATH: it lists the
# provider and every FI_DPDK_* parameter, `fi_info -l` still works, and a bad configuration gives
# a clear error instead of a crash.
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
fails=0
check() {  # check <description> <command...>
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fails=$((fails + 1)); fi
}
out=$(mktemp); err=$(mktemp)
trap 'rm -f "$out" "$err" "${bad:-}"' EXIT

stock timeout 60 fi_info -p dpdk >"$out" 2>"$err"; rc=$?
check "fi_info -p dpdk exits 0 (rc=$rc)" test "$rc" -eq 0
check "fi_info -p dpdk lists provider dpdk" grep -q '^provider: dpdk$' "$out"
check "fi_info -p dpdk shows FI_EP_DGRAM" grep -q 'type: FI_EP_DGRAM' "$out"
check "fi_info -p dpdk shows FI_EP_MSG" grep -q 'type: FI_EP_MSG' "$out"
check "fi_info -p dpdk lists its native RDM first" \
  bash -c "grep -m1 '^provider:' '$out' | grep -q '^provider: dpdk$' && grep -m1 'type:' '$out' | grep -q FI_EP_RDM"
check "fi_info -p dpdk lists no utility provider over dpdk" bash -c "! grep -q 'provider: dpdk;' '$out'"
check "fi_info -p dpdk shows the memif domain" grep -q 'domain: net_memif0' "$out"

stock timeout 60 fi_info -p dpdk -e >"$out" 2>"$err"; rc=$?
check "fi_info -p dpdk -e exits 0 (rc=$rc)" test "$rc" -eq 0
for key in CONFIG EAL_ARGS PORTS IPV4 LCORES MBUFS RX_DEPTH TX_DEPTH SPIN_US; do
  check "fi_info -e lists FI_DPDK_$key with help" grep -aq "^# FI_DPDK_$key: String" "$out"
done

stock timeout 60 fi_info -l >"$out" 2>"$err"; rc=$?
check "fi_info -l exits 0 (rc=$rc)" test "$rc" -eq 0
check "fi_info -l lists dpdk" grep -q '^dpdk:' "$out"
check "fi_info -l still lists tcp" grep -q '^tcp:' "$out"

stock timeout 60 fi_info -p tcp >"$out" 2>"$err"; rc=$?
check "fi_info -p tcp works with our plugin present (rc=$rc)" test "$rc" -eq 0

# Hints naming dpdk start EAL, unless they ask for what dpdk never offers (an endpoint type or a
# primary capability it lacks): such a process must not bring up DPDK and its ports (on a role=auto
# memif socket it would take a later process's place).
for ask in "-t FI_EP_DGRAM -c FI_RMA" "-t FI_EP_DGRAM -c FI_ATOMIC"; do
  # shellcheck disable=SC2086
  FI_LOG_LEVEL=info FI_DPDK_PORTS=net_null0 stock timeout 60 fi_info -p dpdk $ask >"$out" 2>"$err"
  rc=$?
  check "fi_info -p dpdk $ask: no infos (rc=$rc)" test "$rc" -ne 0 -a "$rc" -lt 128
  check "fi_info -p dpdk $ask: EAL not started" bash -c "! grep -q 'starting EAL' '$err'"
done
# RMA and atomics: on FI_EP_RDM and FI_EP_MSG.
for ask in "-t FI_EP_MSG -c FI_RMA" "-c FI_RMA" "-t FI_EP_RDM -c FI_ATOMIC"; do
  # shellcheck disable=SC2086
  FI_DPDK_PORTS=net_null0 stock timeout 60 fi_info -p dpdk $ask >"$out" 2>"$err"
  rc=$?
  check "fi_info -p dpdk $ask: dpdk offers it (rc=$rc)" grep -q '^provider: dpdk$' "$out"
done
FI_LOG_LEVEL=info FI_DPDK_PORTS=net_null0 stock timeout 60 fi_info -p dpdk -t FI_EP_RDM \
  >"$out" 2>"$err"; rc=$?
check "fi_info -p dpdk -t FI_EP_RDM: EAL started (rc=$rc)" grep -q 'starting EAL' "$err"
check "fi_info -p dpdk -t FI_EP_RDM: dpdk's own RDM first" \
  bash -c "grep -m1 '^provider:' '$out' | grep -q '^provider: dpdk$'"
FI_DPDK_PORTS=net_null0 stock timeout 60 fi_info -p dpdk -t FI_EP_MSG >"$out" 2>"$err"; rc=$?
check "fi_info -p dpdk -t FI_EP_MSG: dpdk's MSG entry (rc=$rc)" \
  bash -c "test $rc -eq 0 && grep -q 'type: FI_EP_MSG' '$out' && ! grep -q 'provider: dpdk;' '$out'"

FI_DPDK_MBUFS=lots stock timeout 60 fi_info -p dpdk >"$out" 2>"$err"; rc=$?
check "bad FI_DPDK_MBUFS: no infos, no crash (rc=$rc)" test "$rc" -ne 0 -a "$rc" -lt 128
check "bad FI_DPDK_MBUFS: message names the variable" grep -q "FI_DPDK_MBUFS: key 'mbufs': 'lots'" "$err"

bad=$(mktemp --suffix=.conf)
printf '[dpdk]\nmbufs = 4095\nrx_depht = 12\n' >"$bad"
FI_DPDK_CONFIG=$bad stock timeout 60 fi_info -p dpdk >"$out" 2>"$err"; rc=$?
check "bad file: no infos, no crash (rc=$rc)" test "$rc" -ne 0 -a "$rc" -lt 128
check "bad file: message names file, line and key" grep -q "$bad:3: unknown key 'rx_depht'" "$err"

FI_DPDK_PORTS=net_nosuchpmd0 stock timeout 60 fi_info -p dpdk >"$out" 2>"$err"; rc=$?
check "unknown vdev: no infos, no crash (rc=$rc)" test "$rc" -ne 0 -a "$rc" -lt 128
check "unknown vdev: message names the port" grep -q "net_nosuchpmd0" "$err"

# memif MTU (dpfab's own mtu= key): jumbo frames by default, each in one memif buffer.
sock=/tmp/dpfab-fi-info-mtu-$$.sock
memif="net_memif0,role=auto,socket-abstract=no,socket=$sock"
max_msg() {  # max_msg <ep type> <ports>: the first max_msg_size fi_info shows, or nothing
  FI_DPDK_PORTS=$2 stock timeout 60 fi_info -p dpdk -t "$1" -v 2>"$err" |
    awk '/max_msg_size:/ { print $2; exit }'
}
check "memif default MTU 9000: DGRAM max_msg_size 8952" test "$(max_msg FI_EP_DGRAM "$memif")" = 8952
check "memif mtu=1500: DGRAM max_msg_size 1452" test "$(max_msg FI_EP_DGRAM "$memif,mtu=1500")" = 1452
check "memif mtu=4000: DGRAM max_msg_size 3952" test "$(max_msg FI_EP_DGRAM "$memif,mtu=4000")" = 3952
FI_DPDK_PORTS="$memif,mtu=9000" stock timeout 60 fi_info -p dpdk -t FI_EP_RDM -v >"$out" 2>"$err"
check "memif mtu=9000: RDM inject_size stays a standard frame's (1388)" \
  grep -q 'inject_size: 1388' "$out"
FI_DPDK_PORTS="$memif,mtu=9000,bsize=2048" stock timeout 60 fi_info -p dpdk >"$out" 2>"$err"
rc=$?
check "memif bsize below the frame: no infos, no crash (rc=$rc)" test "$rc" -ne 0 -a "$rc" -lt 128
check "memif bsize below the frame: the warning says why" \
  grep -q "bsize=2048 cannot hold a frame of mtu=9000" "$err"
FI_DPDK_PORTS="$memif,mtu=70000" stock timeout 60 fi_info -p dpdk >"$out" 2>"$err"; rc=$?
check "memif mtu out of range: no infos (rc=$rc)" test "$rc" -ne 0 -a "$rc" -lt 128
check "memif mtu out of range: the warning names the value" grep -q "mtu=70000: not a number" "$err"
FI_DPDK_PORTS="net_null0,mtu=9000" stock timeout 60 fi_info -p dpdk >"$out" 2>"$err"; rc=$?
check "mtu= on a non-memif port: refused with a reason (rc=$rc)" \
  grep -q "mtu= is for memif ports" "$err"
rm -f "$sock"

echo "fi_info checks: $fails failed"
exit $((fails > 0))
