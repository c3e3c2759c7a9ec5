#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Open MPI ping-pong latency (mpi_pingpong.py, 2 ranks on this host) over the dpdk provider next
# to Open MPI's own transports, in one run: what a user of `--mca mtl ofi` gets against tcp.
#   test/perf/mpi_latency.sh [size ...]          (after scripts/build.sh; root for --allow-run-as-root)
# Cases: dpdk-port (pml cm, mtl ofi, mtl_ofi_provider_include dpdk, one net_memif link with the
# same-host path off, FI_PROVIDER unset: the DPDK data path), dpdk-shm (the same with the same-host
# path on, the default: the ranks are same-host peers), ofi-tcp (pml cm, mtl ofi, libfabric's tcp provider on lo), ob1-tcp (pml ob1, btl
# tcp,self: Open MPI's own sockets), ob1-vader (btl vader,self: shared memory, the floor).
# Ranks busy-poll (Open MPI never blocks in the provider): run it on a quiet machine, two cores.
set -uo pipefail
here=$(dirname "$(readlink -f "$0")")
root=$(readlink -f "$here/../..")
export FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-$root/build/drivers/ofi}
[ -f "$FI_PROVIDER_PATH/libdpdk-fi.so" ] || { echo "build first (scripts/build.sh)"; exit 2; }
py=/usr/bin/python3
"$py" -c 'import mpi4py' 2>/dev/null || { echo "needs python3-mpi4py"; exit 2; }
unset FI_PROVIDER FI_DPDK_PORTS FI_DPDK_IPV4 FI_DPDK_SHM
run=$(mktemp -d /tmp/dpfab-mpilat.XXXXXX)
trap 'rm -rf "$run"' EXIT
common=(--allow-run-as-root -np 2 --bind-to core --mca btl_tcp_if_include lo
  --mca oob_tcp_if_include lo)

case_run() {
  local name=$1
  shift
  echo "== $name"
  timeout -k 5 120 mpirun "${common[@]}" "$@" "$py" "$here/mpi_pingpong.py" "${sizes[@]}" \
    2>"$run/$name.err" | sed "s/^/$name /" || { echo "$name: failed"; tail -5 "$run/$name.err"; }
}
sizes=("$@")
for path in port shm; do
  shm=off
  [ "$path" = shm ] && shm=on
  case_run "dpdk-$path" --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include dpdk \
    --mca mtl_base_verbose 1 -x FI_PROVIDER_PATH -x "FI_DPDK_SHM=$shm" \
    -x "FI_DPDK_PORTS=net_memif0,role=auto,socket-abstract=no,socket=$run/memif-$path.sock"
  # Both ranks' mtl must have opened the dpdk domain (the memif port), not another transport.
  [ "$(grep -c 'mtl:ofi:provider: net_memif0$' "$run/dpdk-$path.err")" -eq 2 ] ||
    echo "dpdk-$path: the ranks did not both open the dpdk domain (see mtl_base_verbose in the log)"
done
case_run ofi-tcp --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include tcp -x FI_TCP_IFACE=lo
case_run ob1-tcp --mca pml ob1 --mca btl tcp,self
case_run ob1-vader --mca pml ob1 --mca btl vader,self
