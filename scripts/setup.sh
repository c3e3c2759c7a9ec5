#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Installs every build and test dependency from Debian 12's apt packages, by name. Idempotent and
# quick when everything is present (no apt-get update unless something is missing).
set -euo pipefail

packages=(
  build-essential meson ninja-build pkg-config
  libdpdk-dev dpdk                   # DPDK 22.11: headers, PMDs, dpdk-telemetry.py
  dpdk-dev                           # dpdk-testpmd (traffic checks of the test hosts)
  libfabric-dev libfabric-bin        # libfabric 1.17 core, fi_info, fi_pingpong
  libgtest-dev libgmock-dev libbenchmark-dev
  libnuma-dev
  libcli11-dev nlohmann-json3-dev    # dpfab-bench: command line, JSON
  gnuplot-nox                        # dpfab-bench: plots
  iproute2 iputils-ping ethtool      # ip netns / veth test hosts, ping, checksum offload off
  clang-format                       # the format check
  clang libclang-rt-14-dev           # ThreadSanitizer builds and libFuzzer targets
  spin                               # the Promela model of the arm/trywait protocol
  python3
  openmpi-bin python3-mpi4py         # Open MPI 4.1 (mtl ofi) and mpi4py: the integration-ompi-* tests
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
