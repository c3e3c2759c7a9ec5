// SPDX-License-Identifier: BSD-3-Clause
//
// UdpClaims: which UDP ports of one address the other processes of this host hold, for choosing
// ephemeral ports. Several processes can share one address: each opens its own af_packet or
// af_xdp port on one kernel interface (same MAC, same IPv4 when FI_DPDK_IPV4 says so), and every
// frame reaches all of them; only the UDP port tells their endpoints apart, as it does for kernel
// sockets. Each process's engine demultiplexes only its own ports, so two processes that chose the
// same ephemeral port would both take each other's traffic.
//
// Only ports that several processes can open on one link need claims: af_packet and af_xdp (a
// memif link joins exactly two processes, a NIC port belongs to one). A claim is an exclusive
// flock(2) on a file named after the network namespace, the address (MAC and IPv4) and the port
// in a folder of this host (kDefaultDir, mode 01777 like /tmp). The kernel drops the lock when its
// process ends, however it ends, so a port of a process that exited or was killed is free again
// at once: a restarted process gets the same ephemeral port (its peers recognise it as a restart).
// The files stay (empty, reused).
//
// Threads: any; claims are made and dropped on the control path (endpoint enable and close).
#pragma once

#include <rte_ether.h>

#include <cstdint>
#include <string>

#include "common/fd.h"

namespace dpfab::progress {

class UdpClaims {
 public:
  static constexpr const char* kDefaultDir = "/tmp/dpfab-udp";

  explicit UdpClaims(std::string dir = kDefaultDir) : dir_(std::move(dir)) {}

  /// Claims `udp_port_be` (network order) of (mac, ipv4_be) for this process.
  /// @return the claim (the lock goes with it), or an invalid UniqueFd when another open claim
  ///         holds the port (in this process or another), or the folder or file cannot be made
  ///         (then nothing can be known: the caller decides).
  /// @param held set to true when the port is held by another claim (as opposed to an error).
  UniqueFd try_claim(const rte_ether_addr& mac, uint32_t ipv4_be, uint16_t udp_port_be,
                     bool* held = nullptr) const noexcept;

  const std::string& dir() const noexcept { return dir_; }

 private:
  std::string dir_;
};

}  // namespace dpfab::progress
