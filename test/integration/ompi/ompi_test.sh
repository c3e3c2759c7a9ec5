#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Open MPI 4.1 (Debian's openmpi-bin) over the dpdk provider, as a user runs it: pml cm, mtl ofi,
# mtl_ofi_provider_include dpdk, FI_PROVIDER_PATH and no FI_PROVIDER. Runs mpi4py's ringtest
# (1 KiB and 1 MiB messages) and mpi_collectives_check.py (Allreduce, Alltoall(v), Bcast, Gather,
# object collectives; every result checked), and asserts that the mtl of every rank opened a dpdk
# domain (the port's ethdev name, which mtl_base_verbose prints), so that a job that ran over
# another transport fails.
#   ompi_test.sh memif              2 ranks over one net_memif link (role=auto)
#   ompi_test.sh af_packet|af_xdp   4 ranks, each on a veth of its own joined to one Linux bridge
#                                   in the root namespace (Open MPI's runtime reaches its server
#                                   over loopback: ranks cannot sit in network namespaces)
#   ompi_test.sh tap                4 ranks, each on a net_tap port whose kernel interface is a
#                                   persistent multi-queue tap made here and enslaved to the
#                                   bridge beforehand: DPDK's net_tap attaches to an existing tap
#                                   of the iface= name (a tap it makes itself lives only as long
#                                   as the rank, too late to enslave), and dpfab gives the kernel
#                                   side a MAC other than the port's (port.cc), or the bridge would
#                                   keep the port's frames for the host
# ompi_rank.sh picks each rank's port and FI_DPDK_IPV4 from OMPI_COMM_WORLD_RANK. Needs root
# (veths, bridge), openmpi-bin and python3-mpi4py.
#   ompi_test.sh PMD osc            MPI one-sided communication instead (../rma/mpi_osc_check.py): osc
#                                   rdma over btl ofi, both the mtl's and the btl's provider include
#                                   set to dpdk; passes when every rank's btl endpoint did RMA over
#                                   dpdk (the provider's close log, FI_LOG_LEVEL=info) and prints
#                                   the one-sided latencies (../rma/ompi_osc_test.sh compares them)
#
# Settings: ranks poll (Open MPI reads the CQ, it never blocks in the provider); with 4 ranks on
# 2 cores, mpi_yield_when_idle=1 makes an idle rank give its core away (measured here: a 1 KiB
# ring round of 4 ranks over af_packet 1.5-6 ms with it, 38 ms without). --bind-to none lets the
# kernel move ranks off cores that other jobs keep busy.
#
# The af_packet PMD of DPDK 22.11 joins each socket to the fanout group (getpid() ^ ifindex) &
# 0xffff (drivers/net/af_packet/rte_eth_af_packet.c, rte_pmd_init_internals); two processes whose
# pid and ifindex XOR to the same id on different interfaces collide (PACKET_FANOUT: EINVAL, the
# port is not created). Ranks of one job have nearby pids (consecutive veths would collide), so
# rank r's veth gets ifindex base + r * 16384: the XOR of two ranks' ifindexes has its low 14 bits
# clear, that of two pids less than 16384 apart never does.
set -uo pipefail
: "${FI_PROVIDER_PATH:?meson sets FI_PROVIDER_PATH}"
unset FI_PROVIDER   # the job must choose dpdk by itself
here=$(dirname "$(readlink -f "$0")")
pmd=${1:-memif}
steps=${2:-checks}
case $pmd in
  memif) ranks=2 domain=net_memif0 ;;
  af_packet) ranks=4 domain=net_af_packet0 ;;
  af_xdp) ranks=4 domain=net_af_xdp0 ;;
  tap) ranks=4 domain=net_tap0 ;;
  *) echo "usage: $0 memif|af_packet|af_xdp|tap"; exit 2 ;;
esac
limit=${DPFAB_OMPI_TIMEOUT:-60}   # seconds per mpirun

command -v mpirun >/dev/null || { echo "FAIL: mpirun not found (openmpi-bin)"; exit 1; }
py=
for p in /usr/bin/python3 python3; do
  if "$p" -c 'import mpi4py' 2>/dev/null; then py=$(command -v "$p"); break; fi
done
[ -n "$py" ] || { echo "FAIL: no python3 with mpi4py (python3-mpi4py)"; exit 1; }

run=$(mktemp -d /tmp/dpfab-ompi.XXXXXX)
tag="$$-$RANDOM"            # in every rank's environment: the cleanup finds strays by it
ifp="dpmpi$$"               # our interfaces: <ifp>br, <ifp>r<rank> (bridge side <ifp>b<rank>)
job=
made_links=0

# Ends what this script started: the bounded mpirun, then any rank left behind (a killed mpirun
# does not end its ranks), found by the tag in its environment.
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
  if [ "$made_links" -eq 1 ]; then
    for ((r = 0; r < ranks; r++)); do ip link del "${ifp}r$r" 2>/dev/null; done
    ip link del "${ifp}br" 2>/dev/null
  fi
  rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# Interfaces of earlier runs that were killed outright (their pid is gone).
remove_stale_links() {
  local l pid
  for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    [[ $l =~ ^dpmpi([0-9]+)(br|r[0-9]+)$ ]] || continue
    pid=${BASH_REMATCH[1]}
    kill -0 "$pid" 2>/dev/null || ip link del "$l" 2>/dev/null
  done
}

# One bridge, one veth pair per rank (rank side <ifp>r<r>, bridge side <ifp>b<r>), no IPv6 (no
# ND/MLD frames in the ports), no kernel IPv4 address, no forwarding.
make_links() {
  local r base try ok
  made_links=1
  ip link add "${ifp}br" type bridge mcast_snooping 0 || return 1
  [ "$pmd" = tap ] && { make_taps; return; }
  for ((try = 0; try < 5; try++)); do
    base=$((1048576 + (RANDOM * 32 + RANDOM % 32) % 1048576))
    ok=1
    for ((r = 0; r < ranks; r++)); do
      ip link add "${ifp}r$r" index $((base + r * 16384)) numtxqueues 1 numrxqueues 1 type veth \
        peer name "${ifp}b$r" numtxqueues 1 numrxqueues 1 2>/dev/null || { ok=0; break; }
    done
    [ "$ok" -eq 1 ] && break
    for ((r = 0; r < ranks; r++)); do ip link del "${ifp}r$r" 2>/dev/null; done
  done
  [ "$ok" -eq 1 ] || { echo "cannot create the veths"; return 1; }
  for ((r = 0; r < ranks; r++)); do
    for i in "${ifp}r$r" "${ifp}b$r"; do
      sysctl -qw "net.ipv6.conf.$i.disable_ipv6=1" 2>/dev/null
      sysctl -qw "net.ipv4.conf.$i.forwarding=0" 2>/dev/null
    done
    ip link set "${ifp}b$r" master "${ifp}br" up && ip link set "${ifp}r$r" up || return 1
  done
  ip link set "${ifp}br" up || return 1
  local deadline=$((SECONDS + 10))
  for ((r = 0; r < ranks; r++)); do
    until ip link show "${ifp}r$r" | grep -q LOWER_UP; do
      [ "$SECONDS" -lt "$deadline" ] || { echo "${ifp}r$r has no carrier"; return 1; }
      sleep 0.05
    done
  done
}

# tap: one persistent multi-queue tap per rank (<ifp>r<r>: net_tap0,iface=<ifp>r<r> attaches to
# it), enslaved to the bridge and up before any rank starts. Their carrier comes with the rank
# (the queue it attaches), so there is none to wait for here.
make_taps() {
  local r
  for ((r = 0; r < ranks; r++)); do
    ip tuntap add dev "${ifp}r$r" mode tap multi_queue || return 1
    sysctl -qw "net.ipv6.conf.${ifp}r$r.disable_ipv6=1" 2>/dev/null
    ip link set "${ifp}r$r" master "${ifp}br" up || return 1
  done
  ip link set "${ifp}br" up
}

export DPFAB_OMPI_PMD=$pmd DPFAB_OMPI_SOCKET=$run/memif.sock DPFAB_OMPI_IF=$ifp
export DPFAB_OMPI_NET=10.97.0 DPFAB_OMPI_RUN=$tag FI_LOG_LEVEL=${FI_LOG_LEVEL:-warn}
mpiargs=(--allow-run-as-root -np "$ranks" --oversubscribe --bind-to none
  --mca mpi_yield_when_idle 1
  --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include dpdk --mca mtl_base_verbose 1
  -x FI_PROVIDER_PATH -x FI_LOG_LEVEL
  -x DPFAB_OMPI_PMD -x DPFAB_OMPI_SOCKET -x DPFAB_OMPI_IF -x DPFAB_OMPI_NET -x DPFAB_OMPI_RUN)
# The ports under test, not the same-host path (meson turns it off for these tests).
[ -n "${FI_DPDK_SHM:-}" ] && mpiargs+=(-x FI_DPDK_SHM)
[ -n "${FI_DPDK_CONFIG:-}" ] && mpiargs+=(-x FI_DPDK_CONFIG)
if [ "$steps" = osc ]; then
  # One-sided through osc rdma on btl ofi over dpdk only: no other osc component, no other btl
  # to a remote rank. The provider logs each endpoint's RMA counts when it closes.
  mpiargs+=(--mca btl self,ofi --mca btl_ofi_provider_include dpdk --mca osc rdma
    -x FI_LOG_PROV=dpdk -x FI_LOG_SUBSYS=ep_ctrl)
  export FI_LOG_PROV=dpdk FI_LOG_SUBSYS=ep_ctrl FI_LOG_LEVEL=info
fi
# Under scripts/test.sh's sanitizer build the plugin needs the ASan runtime loaded first.
if [ -n "${DPFAB_STOCK_PRELOAD:-}" ]; then
  mpiargs+=(-x "LD_PRELOAD=$DPFAB_STOCK_PRELOAD" -x ASAN_OPTIONS=detect_leaks=0)
fi

passed=0 failed=0
# step NAME SUCCESS-REGEX CMD...: runs CMD in every rank under mpirun (bounded), prints its
# output, and passes when mpirun succeeded, the output matches the regex, and every rank's mtl
# ofi opened the dpdk domain (and no rank another one).
step() {
  local name=$1 want=$2 log="$run/step$((passed + failed)).log" rc t0=$SECONDS ours others
  shift 2
  timeout -k 5 "$limit" mpirun "${mpiargs[@]}" "$here/ompi_rank.sh" "$@" >"$log" 2>&1 &
  job=$!
  wait "$job"
  rc=$?
  job=
  kill_ranks
  ours=$(grep -c "mtl:ofi:provider: $domain\$" "$log")
  others=$(grep "mtl:ofi:provider: " "$log" | grep -vc "mtl:ofi:provider: $domain\$")
  echo "== $name (exit $rc, $((SECONDS - t0)) s)"
  grep -v -e '^libbpf' -e '^libxdp' "$log"
  # osc: every rank's btl endpoint wrote, read or did atomics over dpdk (its close log).
  local rma=$ranks
  [ "$steps" = osc ] && rma=$(grep -cE "rdm endpoint closed: .* (writes [1-9]|reads [1-9]|atomics [1-9])" "$log")
  if [ "$rc" -eq 0 ] && grep -qE -- "$want" "$log" && [ "$ours" -eq "$ranks" ] &&
    [ "$others" -eq 0 ] && [ "$rma" -ge "$ranks" ]; then
    echo "ok: $name ($ranks ranks on $domain)"
    passed=$((passed + 1))
  else
    echo "FAIL: $name (exit $rc; ranks on $domain: $ours of $ranks, on others: $others;" \
      "ranks that did RMA over dpdk: $rma)"
    failed=$((failed + 1))
  fi
}

if [ "$pmd" != memif ]; then
  [ "$(id -u)" -eq 0 ] || { echo "FAIL: needs root (veths or taps, and a bridge)"; exit 1; }
  remove_stale_links
  make_links || { echo "FAIL: could not make the bridge and veths"; exit 1; }
  ip -br link show master "${ifp}br"
fi

if [ "$steps" = osc ]; then
  step "one-sided checked (osc rdma, btl ofi)" "^mpi-osc: OK" "$py" "$here/../rma/mpi_osc_check.py" \
    time
else
  step "ringtest 1 KiB" "time for 1000 loops" "$py" -m mpi4py.bench ringtest -n 1024 -s 100 -l 1000
  step "ringtest 1 MiB" "time for 3 loops" "$py" -m mpi4py.bench ringtest -n 1048576 -s 1 -l 3
  step "collectives checked" "^mpi-collectives: OK" "$py" "$here/mpi_collectives_check.py" 2
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
