#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Open MPI 4.1 (Debian's openmpi-bin) over the dpdk provider with the default configuration, as a
# new user tries it on one box: no FI_DPDK_* variable, no network set-up, 8 ranks (pml cm, mtl ofi,
# mtl_ofi_provider_include dpdk; mpi_yield_when_idle on 2 cores). The first two ranks share the
# default memif link (role=auto), the others get the domain "shm" (no port of their own); all of
# them reach each other through the same-host path. Runs mpi4py's ringtest (1 KiB and 1 MiB) and
# mpi_collectives_check.py, then MPI one-sided communication through osc rdma on btl ofi over the
# same path (../rma/mpi_osc_check.py: Put, Get, Accumulate, Get_accumulate, Fetch_and_op under fence
# and passive-target epochs), asserts that every rank's mtl opened a dpdk domain and every rank's
# btl endpoint did RMA over dpdk, and that nothing of ours is left in /dev/shm.
#   ompi_default_test.sh <mpi_collectives_check.py> [ranks (8)]
set -uo pipefail
: "${FI_PROVIDER_PATH:?meson sets FI_PROVIDER_PATH}"
check=${1:?path of mpi_collectives_check.py}
ranks=${2:-8}
# The default configuration: nothing of ours in the environment (the built-in defaults, or the
# installed dpfab.conf, apply).
while read -r v; do unset "$v"; done < <(env | grep -o '^FI_DPDK_[A-Z_]*')
unset FI_PROVIDER
limit=${DPFAB_OMPI_TIMEOUT:-180}

command -v mpirun >/dev/null || { echo "FAIL: mpirun not found (openmpi-bin)"; exit 1; }
py=
for p in /usr/bin/python3 python3; do
  if "$p" -c 'import mpi4py' 2>/dev/null; then py=$(command -v "$p"); break; fi
done
[ -n "$py" ] || { echo "FAIL: no python3 with mpi4py (python3-mpi4py)"; exit 1; }

run=$(mktemp -d /tmp/dpfab-ompi-shm.XXXXXX)
tag="$$-$RANDOM"
job=
kill_ranks() {
  local p
  for p in /proc/[0-9]*; do
    grep -qzx "DPFAB_OMPI_RUN=$tag" "$p/environ" 2>/dev/null && kill -KILL "${p#/proc/}" 2>/dev/null
  done
}
cleanup() {
  if [ -n "$job" ]; then
    kill -TERM "$job" 2>/dev/null
    wait "$job" 2>/dev/null
  fi
  kill_ranks
  rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

shm_before=$(ls /dev/shm 2>/dev/null | grep -c dpfab)
export DPFAB_OMPI_RUN=$tag FI_LOG_LEVEL=${FI_LOG_LEVEL:-warn}
mpiargs=(--allow-run-as-root -np "$ranks" --oversubscribe --bind-to none
  --mca mpi_yield_when_idle 1
  --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include dpdk --mca mtl_base_verbose 1
  -x FI_PROVIDER_PATH -x FI_LOG_LEVEL -x DPFAB_OMPI_RUN)
if [ -n "${DPFAB_STOCK_PRELOAD:-}" ]; then
  mpiargs+=(-x "LD_PRELOAD=$DPFAB_STOCK_PRELOAD" -x ASAN_OPTIONS=detect_leaks=0)
fi

passed=0 failed=0
stepargs=()  # mpirun arguments of one step
# step NAME SUCCESS-REGEX CMD...: runs CMD under mpirun (bounded) and passes when mpirun succeeded,
# the output matches the regex, and every rank's mtl ofi chose a dpdk domain: the default memif
# port (net_memif0) or "shm". (The mtl takes its info before the runtime starts, when the domains
# are the configured ports: a rank that cannot open net_memif0 opens the placeholder "shm" behind
# that name, fi_dpdk(7) "Domains".)
step() {
  local name=$1 want=$2 log="$run/step$((passed + failed)).log" rc t0=$SECONDS memif shm others
  shift 2
  timeout -k 5 "$limit" mpirun "${mpiargs[@]}" "${stepargs[@]}" "$@" >"$log" 2>&1 &
  job=$!
  wait "$job"
  rc=$?
  job=
  kill_ranks
  memif=$(grep -c "mtl:ofi:provider: net_memif0\$" "$log")
  shm=$(grep -c "mtl:ofi:provider: shm\$" "$log")
  others=$(grep "mtl:ofi:provider: " "$log" | grep -vcE "mtl:ofi:provider: (net_memif0|shm)\$")
  # One-sided: every rank's btl endpoint wrote, read or did atomics over dpdk (its close log); the
  # ranks on the domain "shm" have no port, so theirs went through shared memory.
  local rma=$ranks
  [ ${#stepargs[@]} -gt 0 ] &&
    rma=$(grep -cE "rdm endpoint closed: .* (writes [1-9]|reads [1-9]|atomics [1-9])" "$log")
  echo "== $name (exit $rc, $((SECONDS - t0)) s; domains: net_memif0 $memif, shm $shm, other $others)"
  grep -v "rdm endpoint closed: .* writes 0 reads 0 atomics 0," "$log"
  if [ "$rc" -eq 0 ] && grep -qE -- "$want" "$log" && [ $((memif + shm)) -eq "$ranks" ] &&
    [ "$others" -eq 0 ] && [ "$rma" -ge "$ranks" ]; then
    echo "ok: $name"
    passed=$((passed + 1))
  else
    echo "FAIL: $name (ranks that did RMA over dpdk: $rma of $ranks)"
    failed=$((failed + 1))
  fi
}

step "ringtest 1 KiB, $ranks ranks" "time for 100 loops" "$py" -m mpi4py.bench ringtest -n 1024 -s 10 -l 100
step "ringtest 1 MiB, $ranks ranks" "time for 3 loops" "$py" -m mpi4py.bench ringtest -n 1048576 -s 1 -l 3
step "collectives checked, $ranks ranks" "^mpi-collectives: OK" "$py" "$check" 2
# One-sided through osc rdma on btl ofi over dpdk only (no other btl to a remote rank); the
# provider logs each endpoint's RMA counts when it closes.
stepargs=(--mca btl self,ofi --mca btl_ofi_provider_include dpdk --mca osc rdma
  -x FI_LOG_PROV=dpdk -x FI_LOG_SUBSYS=ep_ctrl)
FI_LOG_PROV=dpdk FI_LOG_SUBSYS=ep_ctrl FI_LOG_LEVEL=info \
  step "one-sided checked (osc rdma, btl ofi), $ranks ranks" "^mpi-osc: OK" "$py" \
  "$(dirname "$check")/../rma/mpi_osc_check.py"
stepargs=()

shm_after=$(ls /dev/shm 2>/dev/null | grep -c dpfab)
if [ "$shm_after" -le "$shm_before" ]; then
  echo "ok: nothing of ours left in /dev/shm"
  passed=$((passed + 1))
else
  echo "FAIL: /dev/shm holds $((shm_after - shm_before)) new dpfab entries:"; ls -la /dev/shm
  failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
