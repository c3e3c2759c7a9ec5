#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# mpirun's per-rank wrapper of ompi_test.sh: chooses the rank's dpdk port and address from
# OMPI_COMM_WORLD_RANK, then execs the command (same pid: the rank is the command).
#   DPFAB_OMPI_PMD      memif | af_packet | af_xdp | tap
#   DPFAB_OMPI_SOCKET   memif: the socket both ranks share (role=auto: the first is the server)
#   DPFAB_OMPI_IF       af_packet, af_xdp, tap: interface name prefix, rank r uses <prefix>r<r>
#   DPFAB_OMPI_NET      the first three octets of the ranks' addresses (rank r: .<r+1>/24)
r=${OMPI_COMM_WORLD_RANK:?not started by mpirun}
case ${DPFAB_OMPI_PMD:-} in
  memif) FI_DPDK_PORTS="net_memif0,role=auto,socket-abstract=no,socket=$DPFAB_OMPI_SOCKET" ;;
  af_packet) FI_DPDK_PORTS="net_af_packet0,iface=${DPFAB_OMPI_IF}r$r" ;;
  af_xdp) FI_DPDK_PORTS="net_af_xdp0,iface=${DPFAB_OMPI_IF}r$r,start_queue=0,queue_count=1" ;;
  tap) FI_DPDK_PORTS="net_tap0,iface=${DPFAB_OMPI_IF}r$r" ;;
  *) echo "ompi_rank.sh: DPFAB_OMPI_PMD '${DPFAB_OMPI_PMD:-}' unknown" >&2; exit 2 ;;
esac
FI_DPDK_IPV4="$DPFAB_OMPI_NET.$((r + 1))/24"
export FI_DPDK_PORTS FI_DPDK_IPV4
exec "$@"
