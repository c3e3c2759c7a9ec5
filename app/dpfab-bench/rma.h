// SPDX-License-Identifier: BSD-3-Clause
//
// dpfab-bench's one-sided workloads (fi_rma(3), fi_atomic(3)), on endpoints opened with FI_RMA
// and FI_ATOMIC, in the spin mode (they poll memory and the CQ; reading the CQ is also what
// progresses a provider with manual progress):
//   rma-write  ping-pong by RMA writes: the client writes `size` bytes into the server's region,
//              the server sees the last 8 bytes change and writes `size` bytes back into the
//              client's; latency = half the round trip (as ib_write_lat)
//   rma-read   the client reads `size` bytes of the server's region; latency = the read's
//              completion time (a round trip)
//   rma-bw     the client writes windows of --window writes of `size` bytes into the server's
//              region and waits for their completions; bandwidth over the timed window
//   atomic     the client does windows of --window 8-byte fetch-and-add (FI_UINT64, FI_SUM) on
//              one word of the server's region; the rate of atomics (msg_rate), the word's final
//              value checked with a read
// Each side registers one region (FI_REMOTE_READ | FI_REMOTE_WRITE, local FI_READ | FI_WRITE)
// and tells the other its key and address (offsets when the provider does not use virtual
// addresses).
#pragma once

#include <rdma/fi_domain.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common.h"
#include "endpoint.h"

namespace dpfab::bench {

/// Whether a workload is one-sided (runs on RMA endpoints, spin mode only).
bool is_rma(Workload w);

/// One registered region of `len` bytes.
class RmaRegion {
 public:
  RmaRegion() = default;
  RmaRegion(const RmaRegion&) = delete;
  RmaRegion& operator=(const RmaRegion&) = delete;
  ~RmaRegion();
  /// Registers it in `domain` for the remote side and the local operations. "" or an error.
  std::string open(fid_domain* domain, const fi_info* info, size_t len);
  char* data() { return buf_; }
  size_t size() const { return len_; }
  uint64_t key() const { return key_; }
  /// The address a peer names byte 0 with (its virtual address, or 0 without FI_MR_VIRT_ADDR).
  uint64_t addr() const { return addr_; }
  void* desc() const { return desc_; }

 private:
  fid_mr* mr_ = nullptr;
  char* buf_ = nullptr;
  size_t len_ = 0;
  uint64_t key_ = 0, addr_ = 0;
  void* desc_ = nullptr;
};

/// What the client measured in an RMA case (the fields of the record's figures).
struct RmaMeasured {
  std::vector<double> samples_us;
  uint64_t iterations = 0, ops = 0;
  double duration_s = 0;
  Usage usage;
  std::string error;
};

/// The client side of one case: `region` is the client's, (rkey, raddr) the server's.
RmaMeasured run_rma_client(const Options& o, Endpoint& ep, RmaRegion& region, uint64_t rkey,
                           uint64_t raddr, Workload w, size_t size, uint32_t window);

class Oob;
/// The server side of one case: progresses the endpoint (and answers rma-write's writes) until
/// the client speaks on the out-of-band socket. Returns "" or an error; *usage gets the server's
/// usage over the time it served.
std::string serve_rma(Endpoint& ep, Oob& oob, RmaRegion& region, uint64_t rkey, uint64_t raddr,
                      Workload w, size_t size, int timeout_ms, Usage* usage);

}  // namespace dpfab::bench
