#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Installs what the project needs from Debian 12's apt packages, by name. Idempotent and quick
# when everything is present (no apt-get update unless something is missing).
#   scripts/setup.sh          every build and test dependency (scripts/test.sh)
#   scripts/setup.sh --main   only what the main job needs: the plugin, dpfab-bench and dpfab-info
#                             and their run time (scripts/main.sh)
set -euo pipefail

main_packages=(
  build-essential meson ninja-build pkg-config
  libdpdk-dev dpdk                   # DPDK 22.11: headers, PMDs (net_memif), dpdk-telemetry.py
  libfabric-dev libfabric-bin        # libfabric 1.17 core (shm, udp, tcp to compare), fi_info
  libnuma-dev
  libcli11-dev nlohmann-json3-dev    # dpfab-bench: command line, JSON
  gnuplot-nox                        # dpfab-bench: plots
)
test_packages=(
  dpdk-dev                           # dpdk-testpmd (traffic checks of the test hosts)
  libgtest-dev libgmock-dev libbenchmark-dev
  iproute2 iputils-ping ethtool      # ip netns / veth test hosts, ping, checksum offload off
  clang-format                       # the format check
  clang libclang-rt-14-dev           # ThreadSanitizer builds and libFuzzer targets
  spin                               # the Promela model of the arm/trywait protocol
  python3                            # the layout lint, test scripts
  openmpi-bin python3-mpi4py         # Open MPI 4.1 (mtl ofi) and mpi4py: the integration-ompi-* tests
)
packages=("${main_packages[@]}")
[ "${1:-}" = --main ] || packages+=("${test_packages[@]}")

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
