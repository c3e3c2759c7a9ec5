// SPDX-License-Identifier: BSD-3-Clause
//
// One side of one (provider, endpoint type, waiting mode) group: fabric, domain, the completion
// queue opened for the waiting mode (with its wait set, poll set or worker), the endpoint and its
// address vector or connection, registered buffers with receives kept posted, and the waiting loop
// of each mode. Plain libfabric: only the worker mode uses the dpdk provider's extension, reached
// through fi_open_ops, and is reported unsupported where fi_open_ops refuses it.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common.h"

struct fi_dpdk_worker;
struct fi_dpdk_worker_ops;

namespace dpfab::bench {

struct InfoDeleter {
  void operator()(fi_info* i) const { fi_freeinfo(i); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

/// The fi_info entry the benchmark uses for `provider` and endpoint type `ep_type` ("dgram",
/// "rdm", "msg"): an entry whose prov_name is exactly the provider, else (per `layered`: "rxm"
/// accepts "<provider>;ofi_rxm", "all" any "<provider>;..." layer, "none" nothing), preferring the
/// domain named `iface`. With `rma` the entry also offers FI_RMA and FI_ATOMIC (the one-sided
/// workloads). Returns a copy (fi_dupinfo), or null with *why set.
InfoPtr choose_info(const std::string& provider, const std::string& ep_type,
                    const std::string& layered, const std::string& iface, std::string* why,
                    bool rma = false);

/// libfabric's words for an error code: "fi_cq_open: Function not implemented (-38)".
std::string fi_error(const char* call, int ret);

/// Largest message the benchmark sends, and the most memory its buffers of one side take.
inline constexpr size_t kMaxBufferBytes = size_t{16} << 20;
inline constexpr size_t kMaxPoolBytes = size_t{128} << 20;

/// A received message waiting for the application.
struct Rx {
  const char* data;
  size_t len;
  uint32_t slot;
};

class Endpoint {
 public:
  Endpoint() = default;
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;
  ~Endpoint();

  /// Opens fabric, domain, the mode's wait objects and CQ, buffers of buf_size bytes, and (for
  /// DGRAM/RDM) the address vector and endpoint with receives posted. For MSG the endpoint comes
  /// with listen()/accept() or connect(). With on_counter the mode waits on a completion counter
  /// bound to the endpoint instead of the CQ (which is then FI_WAIT_NONE and only read).
  /// Returns "" or what failed.
  std::string open(const fi_info* info, Mode mode, size_t buf_size, bool on_counter = false);

  /// DGRAM/RDM: this endpoint's address. MSG server: opens a passive endpoint, listens and
  /// returns its address. Returns "" or an error.
  std::string local_name(std::string* name, bool msg_server);
  /// DGRAM/RDM: inserts the peer's address into the AV. Returns "" or an error.
  std::string add_peer(const std::string& name);
  /// MSG server: waits (timeout_ms) for the connection request, opens the endpoint, posts
  /// receives, accepts, and waits for FI_CONNECTED. Returns "" or an error.
  std::string accept(int timeout_ms);
  /// MSG client: opens the endpoint, posts receives, connects to `name`, waits for FI_CONNECTED.
  std::string connect(const std::string& name, int timeout_ms);

  /// Largest message this endpoint may send (min of buf_size, max_msg_size, kMaxBufferBytes).
  size_t max_size() const { return max_size_; }
  /// Receives kept posted and sends that may be in flight.
  uint32_t rx_depth() const { return rx_count_; }
  uint32_t tx_depth() const { return tx_count_; }

  /// A free send buffer (waits for a send completion while none is free, until deadline_ns).
  /// Returns the slot, or a negative -FI_E* (-FI_ETIMEDOUT at the deadline).
  int acquire_tx(int64_t deadline_ns);
  char* tx_buf(uint32_t slot) { return buf_ + static_cast<size_t>(rx_count_ + slot) * buf_size_; }
  /// Sends `len` bytes of tx_buf(slot) to the peer (retries -FI_EAGAIN, progressing, until
  /// deadline_ns). Returns 0 or a negative -FI_E*; the slot is free again at its completion.
  int send(uint32_t slot, size_t len, int64_t deadline_ns);

  /// Waits in this endpoint's mode until a received message is queued or deadline_ns passes.
  /// Returns 1 when one is queued, 0 at the deadline, a negative -FI_E* on error (error()).
  int wait_rx(int64_t deadline_ns);
  /// Takes the oldest received message; false when none. Give the slot back with repost().
  bool pop_rx(Rx* rx);
  /// Posts the receive buffer again. Returns 0 or a negative -FI_E*.
  int repost(uint32_t slot);

  /// The objects themselves, for the one-sided workloads (rma.h), which read the CQ directly.
  fid_ep* ep() const { return ep_; }
  fid_cq* cq() const { return cq_; }
  fid_domain* domain() const { return domain_; }
  fi_addr_t peer() const { return peer_; }
  const fi_info* info() const { return info_.get(); }

  /// Times the waiting call was entered after the CQ was found empty and returned (see
  /// doc/benchmark.md, "Workloads and what the figures mean").
  uint64_t wakeups() const { return wakeups_; }
  /// Blocking waits that ended at their timeout although a completion was ready right after:
  /// wake-ups that the provider did not deliver (the benchmark's timeout did).
  uint64_t missed_wakeups() const { return missed_; }
  /// The first error seen on the data path (error completions, failed waits), or "".
  const std::string& error() const { return error_; }
  /// Returns the first error seen and forgets it (so that the next case starts clean).
  std::string take_error() { return std::exchange(error_, {}); }

 private:
  struct Ctx {
    fi_context2 ctx;  // first: the provider may use it (FI_CONTEXT/FI_CONTEXT2)
    uint32_t slot;
    bool rx;
  };
  std::string open_ep(fi_info* info);
  std::string post_all_rx();
  ssize_t read_cq();  // reads and handles completions; count, or negative error
  int handle(const fi_cq_msg_entry* e, ssize_t n);
  int wait_step(int64_t deadline_ns);  // one blocking (or spinning) step of the mode

  Mode mode_ = Mode::kSpin;
  InfoPtr info_;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_wait* waitset_ = nullptr;
  fid_poll* pollset_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_cntr* cntr_ = nullptr;  // with on_counter: what the mode waits on
  fid* waited_ = nullptr;     // &cq_->fid or &cntr_->fid
  uint64_t cntr_seen_ = 0;    // counter value (completions + errors) at the last CQ read
  fid_av* av_ = nullptr;
  fid_eq* eq_ = nullptr;
  fid_pep* pep_ = nullptr;
  fid_ep* ep_ = nullptr;
  fid_mr* mr_ = nullptr;
  void* desc_ = nullptr;
  fi_dpdk_worker_ops* wops_ = nullptr;
  fi_dpdk_worker* worker_ = nullptr;
  int wait_fd_ = -1;  // fd: the CQ's fd; worker: the worker's efd
  int epoll_fd_ = -1;
  std::vector<struct pollfd> pollfds_;
  fi_addr_t peer_ = FI_ADDR_UNSPEC;

  char* buf_ = nullptr;
  size_t buf_size_ = 0, max_size_ = 0;
  uint32_t rx_count_ = 0, tx_count_ = 0;
  std::vector<Ctx> ctx_;
  std::vector<uint32_t> tx_free_;
  std::deque<Rx> rx_ready_;
  uint64_t wakeups_ = 0;
  uint64_t missed_ = 0;
  bool timed_out_ = false;  // the last blocking call returned at its timeout
  std::string error_;
};

}  // namespace dpfab::bench
