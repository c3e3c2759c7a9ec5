#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# MPI one-sided communication (mpi_osc_check.py: Put, Get, Accumulate, Get_accumulate and
# Fetch_and_op under fence and passive-target epochs, every result checked, then timed) through
# Open MPI 4.1's osc rdma on btl ofi, over dpdk and, in the same run, over libfabric's stock
# sockets provider (the same mca settings, both provider includes set to sockets), and over Open
# MPI's own tcp (pml ob1, btl tcp, osc pt2pt: what one-sided runs on without a libfabric RMA
# provider), and prints their latencies side by side.
#   ompi_osc_test.sh [ranks]        (default 2; dpdk over one memif link with 2 ranks, over
#                                    af_packet veths on a bridge with 4: ../ompi/ompi_test.sh)
# Passes when every run's checks pass (and, for dpdk, every rank did RMA over dpdk).
set -uo pipefail
: "${FI_PROVIDER_PATH:?meson sets FI_PROVIDER_PATH}"
here=$(dirname "$(readlink -f "$0")")
ranks=${1:-2}
limit=${DPFAB_OMPI_TIMEOUT:-120}
py=
for p in /usr/bin/python3 python3; do
  if "$p" -c 'import mpi4py' 2>/dev/null; then py=$(command -v "$p"); break; fi
done
[ -n "$py" ] || { echo "FAIL: no python3 with mpi4py (python3-mpi4py)"; exit 1; }
run=$(mktemp -d /tmp/dpfab-osc.XXXXXX)
trap 'rm -rf "$run"' EXIT
failed=0

# dpdk: ompi_test.sh's osc steps (its links, its rank wrapper, its checks).
pmd=memif
[ "$ranks" -gt 2 ] && pmd=af_packet
DPFAB_OMPI_TIMEOUT=$limit bash "$here/../ompi/ompi_test.sh" "$pmd" osc >"$run/dpdk.log" 2>&1
rc=$?
grep -E "^(ok|FAIL|==)|mpi-osc" "$run/dpdk.log"
[ "$rc" -eq 0 ] || { failed=1; tail -40 "$run/dpdk.log"; }
dpdk=$(grep -oE "mpi-osc-latency: .*" "$run/dpdk.log" | head -1)

# other NAME MPIRUN-ARGS...: the same check under mpirun with other transports. Under a sanitizer
# build the core still loads this build's plugin (FI_PROVIDER_PATH), whose runtime must come
# first (DPFAB_STOCK_PRELOAD, as ../ompi/ompi_test.sh does).
other() {
  local name=$1 log="$run/$1.log"
  shift
  local pre=()
  [ -n "${DPFAB_STOCK_PRELOAD:-}" ] &&
    pre=(-x "LD_PRELOAD=$DPFAB_STOCK_PRELOAD" -x ASAN_OPTIONS=detect_leaks=0)
  timeout -k 5 "$limit" mpirun --allow-run-as-root -np "$ranks" --oversubscribe --bind-to none \
    --mca mpi_yield_when_idle 1 "${pre[@]}" "$@" "$py" "$here/mpi_osc_check.py" time >"$log" 2>&1
  local rc=$?
  if [ "$rc" -eq 0 ] && grep -q "^mpi-osc: OK" "$log"; then
    echo "ok: one-sided checked over $name ($ranks ranks)"
  else
    echo "FAIL: one-sided over $name (exit $rc)"
    tail -30 "$log"
    failed=1
  fi
  grep -oE "mpi-osc-latency: .*" "$log" | head -1
}
# libfabric's sockets provider through exactly the same Open MPI components. Its progress thread
# otherwise sleeps up to 10 ms between polls (FI_SOCKETS_PE_WAITTIME): measured here, 24-34 ms per
# operation instead of 0.07-0.4 ms. (FI_SOCKETS_IFACE=lo makes its AV refuse the mtl's addresses.)
FI_SOCKETS_PE_WAITTIME=0 other sockets --mca pml cm --mca mtl ofi \
  --mca mtl_ofi_provider_include sockets --mca btl self,ofi --mca btl_ofi_provider_include sockets \
  --mca osc rdma -x FI_SOCKETS_PE_WAITTIME
sockets=$(grep -oE "mpi-osc-latency: .*" "$run/sockets.log" | head -1)
# Open MPI's own tcp: one-sided emulated over point-to-point messages.
other tcp --mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo --mca osc pt2pt
tcp=$(grep -oE "mpi-osc-latency: .*" "$run/tcp.log" | head -1)

# The latencies side by side (us, one operation + flush, 8 bytes, median of 5 rounds of 300).
python3 - "$dpdk" "$sockets" "$tcp" <<'PY'
import sys
names = ["dpdk (osc rdma, btl ofi)", "sockets (osc rdma, btl ofi)", "tcp (osc pt2pt, btl tcp)"]
rows = []
for name, line in zip(names, sys.argv[1:]):
    f = line.split()[1:]
    rows.append((name, dict(zip(f[0::2], map(float, f[1::2])))))
print(f"{'one-sided, 8 B':30s}" + "".join(f"{op:>10s}" for op in ("put", "get", "acc", "fop")))
for name, d in rows:
    print(f"{name:30s}" + "".join(f"{d.get(op, float('nan')):10.2f}" for op in ("put", "get", "acc", "fop")))
base = rows[0][1]
for name, d in rows[1:]:
    if base and d:
        print(f"dpdk / {name.split()[0]}: " + ", ".join(
            f"{op} x{base[op] / d[op]:.2f}" for op in ("put", "get", "acc", "fop") if op in base and op in d))
PY
[ "$failed" -eq 0 ]
