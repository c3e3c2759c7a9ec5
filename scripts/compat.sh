#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The provider against another libfabric than the system's: builds it against the libfabric
# installed under PREFIX (a second build folder, PKG_CONFIG_PATH=PREFIX/lib/pkgconfig), then runs
# that libfabric's own tools against the plugin, as scripts/fabtests.sh does for Debian's 1.17:
#   1. PREFIX's fi_info: `fi_info -l` lists dpdk, `fi_info -p dpdk` its RDM, MSG and DGRAM entries
#      (and `-v` prints them);
#   2. PREFIX's fi_pingpong -p dpdk -e rdm|msg|dgram, a server and a client over one memif link,
#      once with -v (its debugging output) and once with -c (data checks; not both: with -c, -v
#      prints a line per byte);
#   3. this build's own tests of the API versions (test/integration/api) and of the core-facing
#      objects, under PREFIX's core (COMPAT_MESON_TESTS lists them);
#   4. fabtests of the same libfabric (PREFIX/bin), through scripts/fabtests.sh --build.
#
#   scripts/compat.sh [--build DIR] [--no-fabtests] PREFIX
# DIR defaults to build-libfabric-<version> (git ignores build*/ folders). Nothing is downloaded:
# build libfabric and its fabtests into PREFIX first (doc/compat.md says how, for 2.6.0). It
# starts EAL, memif links and two processes at a time: on a shared machine run it under the lock
# the integration tests take (flock LOCKFILE scripts/compat.sh ...). Ends with
# "N passed, M failed" over its own checks, then fabtests.sh's summary.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
build="" fabtests=1
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --no-fabtests) fabtests=0; shift ;;
    -*) echo "usage: $0 [--build DIR] [--no-fabtests] PREFIX"; exit 2 ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || { echo "usage: $0 [--build DIR] [--no-fabtests] PREFIX"; exit 2; }
prefix=$(realpath "$1")
pc=$prefix/lib/pkgconfig
[ -f "$pc/libfabric.pc" ] || { echo "no libfabric in $prefix ($pc/libfabric.pc)"; exit 2; }
version=$(PKG_CONFIG_PATH=$pc pkg-config --modversion libfabric) || exit 2
build=${build:-build-libfabric-$version}
for tool in fi_info fi_pingpong; do
  [ -x "$prefix/bin/$tool" ] || { echo "no $tool in $prefix/bin"; exit 2; }
done

run=$(mktemp -d /tmp/dpfab-compat.XXXXXX)
trap 'rm -rf "$run"' EXIT
echo "== libfabric $version ($prefix), build folder $build"
if [ ! -f "$build/build.ninja" ]; then
  PKG_CONFIG_PATH=$pc meson setup "$build" >"$run/setup.log" 2>&1 || { cat "$run/setup.log"; exit 2; }
fi
# The folder must be configured against this prefix (meson keeps the libfabric it found).
grep -q "$prefix/include" "$build/compile_commands.json" 2>/dev/null ||
  ninja -C "$build" -t commands drivers/ofi/libdpdk-fi.so 2>/dev/null | grep -q "$prefix/include" ||
  { echo "$build was not configured against $prefix: remove it or pass --build"; exit 2; }
ninja -C "$build" || exit 2

export LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FI_PROVIDER_PATH=$PWD/$build/drivers/ofi
export FI_DPDK_CONFIG=$PWD/config/dpfab.conf
unset FI_PROVIDER FI_DPDK_PORTS FI_DPDK_IPV4
passed=0 failed=0
report() {  # NAME STATUS [LOG...]
  local name=$1 status=$2
  shift 2
  if [ "$status" -eq 0 ]; then
    echo "ok: $name"
    passed=$((passed + 1))
  else
    echo "FAIL: $name (exit $status)"
    [ $# -gt 0 ] && tail -n 20 "$@"
    failed=$((failed + 1))
  fi
}

echo "-- the plugin: $(ldd "$FI_PROVIDER_PATH/libdpdk-fi.so" | grep -o 'libfabric.so[^ ]* => [^ ]*')"

# 1. fi_info. getinfo answers from the configuration (one net_null port: no memif needed).
info() { FI_DPDK_PORTS=net_null0 timeout 60 "$prefix/bin/fi_info" "$@"; }
info -l >"$run/list" 2>&1
grep -q '^dpdk:' "$run/list"
report "fi_info -l lists dpdk" $? "$run/list"
grep -A1 '^dpdk:' "$run/list"
info -p dpdk >"$run/info" 2>&1
rc=$?
report "fi_info -p dpdk exits 0" "$rc" "$run/info"
for t in FI_EP_RDM FI_EP_MSG FI_EP_DGRAM; do
  grep -q "type: *$t\$" "$run/info"
  report "fi_info -p dpdk lists $t" $? "$run/info"
done
grep -E '^(provider|    fabric|    domain|    version|    type|    protocol):' "$run/info" |
  paste - - - - - - | sed 's/  */ /g'
info -p dpdk -v >"$run/info-v" 2>&1
report "fi_info -p dpdk -v exits 0 ($(wc -l <"$run/info-v") lines)" $? "$run/info-v"

# 2. fi_pingpong over one memif link: the first process (the server) serves the memif socket.
pingpong() {  # EP FLAG
  local ep=$1 flag=$2 oob=$((20000 + RANDOM % 20000)) s c
  export FI_DPDK_PORTS="net_memif0,role=auto,socket-abstract=no,socket=$run/memif.sock"
  export FI_DPDK_IPV4=auto
  timeout 60 "$prefix/bin/fi_pingpong" -p dpdk -e "$ep" "$flag" -I 100 -B "$oob" \
    >"$run/pp-server.log" 2>&1 &
  s=$!
  sleep 1
  timeout 60 "$prefix/bin/fi_pingpong" -p dpdk -e "$ep" "$flag" -I 100 -P "$oob" 127.0.0.1 \
    >"$run/pp-client.log" 2>&1
  c=$?
  wait "$s"
  s=$?
  unset FI_DPDK_PORTS FI_DPDK_IPV4
  rm -f "$run/memif.sock"
  [ "$s" -eq 0 ] && [ "$c" -eq 0 ] && grep -q "usec/xfer" "$run/pp-client.log"
  report "fi_pingpong -p dpdk -e $ep $flag (server $s, client $c)" $? "$run/pp-server.log" \
    "$run/pp-client.log"
  grep -v '^\[debug\]' "$run/pp-client.log" | grep -A3 "usec/xfer" | head -n 4
}
for ep in rdm msg dgram; do
  for flag in -v -c; do pingpong "$ep" "$flag"; done
done

# 3. This build's tests under PREFIX's core (meson sets each test's environment).
tests=${COMPAT_MESON_TESTS:-"integration-api-version integration-api-version-probe
  integration-provider-ring integration-fi-info integration-cq integration-eq integration-cntr
  integration-wait integration-av integration-ep"}
# shellcheck disable=SC2086
meson test -C "$build" --no-rebuild --print-errorlogs $tests >"$run/meson.log" 2>&1
rc=$?
grep -E '^ *[0-9]+/[0-9]+ ' "$run/meson.log"
report "meson test (this build's tests under libfabric $version)" "$rc" "$run/meson.log"
"$build/test/integration/api/api-version-probe" 2>&1 | grep -v '^libfabric:' | head -n 20

echo "$passed passed, $failed failed"
total=$failed
# 4. fabtests of the same libfabric.
if [ "$fabtests" -eq 1 ]; then
  if [ -x "$prefix/bin/fi_getinfo_test" ]; then
    echo "== fabtests $version ($prefix/bin)"
    bash scripts/fabtests.sh --build "$build" "$prefix/bin" || total=$((total + 1))
  else
    echo "no fabtests in $prefix/bin: skipped"
  fi
fi
[ "$total" -eq 0 ]
