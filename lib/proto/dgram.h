// SPDX-License-Identifier: BSD-3-Clause
//
// The FI_EP_DGRAM protocol: one message per frame, unreliable, unordered.
//
// Threads. Application threads post receives and send; the receive side of the port is owned by
// one thread at a time (a progress lcore, or the application thread doing manual progress), which
// calls deliver(). Posted receives travel from application threads to that owner through a
// multi-producer rte_ring (no lock the owner could wait on); cancel() takes the port's receive
// side itself (Link::with_rx_owner) to search them.
//
// Held datagrams. A frame that finds no receive posted (or no CQ room) is kept in its mbuf, in a
// backlog of kBacklog frames per endpoint, until a receive comes. Those mbufs come from the pool
// that transmit allocates from, so the port's endpoints together hold at most half of it
// (Link::try_hold_mbufs); beyond that a frame is dropped and counted (rx_held_limit), as DGRAM is
// unreliable: no copy, no allocation on the receive path, and sends always find mbufs.
//
// Resource management (FI_RM_ENABLED, the default): a send that could not complete into a full
// CQ is refused with -FI_EAGAIN before anything is sent; a received frame whose completion would
// not fit is dropped and counted (DGRAM is unreliable), leaving the posted receive in place.
#pragma once

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "common/result.h"
#include "event/cntr.h"
#include "event/cq.h"
#include "proto/endpoint.h"
#include "wire/address.h"
#include "wire/format.h"

struct rte_ring;

namespace dpfab::proto {

inline constexpr size_t kMaxIov = 4;

/// A resolved destination: what the send path needs to build a frame.
struct Destination {
  rte_ether_addr mac{};
  uint32_t ipv4_be = 0;
  uint16_t udp_port_be = 0;
  uint16_t ep_id_be = 0;
  /// The destination's host part (wire::Address): a peer of this host is reached through the
  /// same-host path.
  uint64_t host_be = 0;
  uint32_t node_be = 0;
  uint32_t nonce_be = 0;
};

/// How the endpoint maps a received frame's source to an fi_addr (FI_SOURCE); the address
/// vector implements it.
class SourceLookup {
 public:
  virtual ~SourceLookup() = default;
  virtual fi_addr_t reverse(uint32_t ipv4_be, uint16_t udp_port_be,
                            uint16_t ep_id_be) const noexcept = 0;
};

struct DgramStats {
  std::atomic<uint64_t> tx_frames{0}, rx_frames{0};
  std::atomic<uint64_t> rx_no_buffer{0};  ///< no receive posted and the backlog full: dropped
  std::atomic<uint64_t> rx_held{0};       ///< held back until a receive was posted
  /// no receive posted and the port's receivers hold their share of the mbufs (half the pool,
  /// proto::Link::held_limit): dropped, so that transmit always finds mbufs
  std::atomic<uint64_t> rx_held_limit{0};
  std::atomic<uint64_t> rx_cq_full{0};    ///< no CQ room and the backlog full: dropped
  std::atomic<uint64_t> rx_truncated{0};  ///< FI_ETRUNC completions
  std::atomic<uint64_t> rx_not_dgram{0};  ///< frames of another type (RDM) sent to us: dropped
  /// Datagrams sent through the same-host path (the port carried the rest of tx_frames), and
  /// datagrams to a same-host peer whose process was gone (dropped).
  std::atomic<uint64_t> tx_local{0}, tx_local_gone{0};
};

class DgramEndpoint final : public Receiver {
 public:
  struct Config {
    size_t rx_size = 512;                      ///< posted receives (rx_attr->size)
    size_t max_msg = wire::max_payload(1500);  ///< largest payload (MTU - headers)
    size_t inject_size = wire::max_payload(1500);
    bool source = false;     ///< FI_SOURCE: completions carry the sender's fi_addr
    bool rm_enabled = true;  ///< FI_RM_ENABLED: refuse work whose completion would not fit
  };
  static Result<std::unique_ptr<DgramEndpoint>> create(Link* link, const Config& cfg);
  ~DgramEndpoint() override;

  // ---- bindings (control path, before enable) ----
  void bind_cq(event::Cq* cq, bool tx, bool rx, bool selective) noexcept;
  void bind_cntr(event::Cntr* c, bool tx, bool rx) noexcept;
  void bind_source_lookup(const SourceLookup* s) noexcept { source_lookup_ = s; }
  /// Our UDP port and endpoint id (network byte order), set at enable.
  void set_address(uint16_t udp_port_be, uint16_t ep_id_be) noexcept;
  wire::Address address() const noexcept;

  // ---- data path (application threads) ----
  /// fi_recv/recvv/recvmsg. -FI_EAGAIN when rx_size receives are posted already; -FI_EINVAL for
  /// more than kMaxIov entries, a NULL `iov` with a count, or an entry with a length and a NULL
  /// buffer.
  ssize_t post_recv(const iovec* iov, size_t count, void* context, uint64_t flags) noexcept;
  /// fi_send/sendv/sendmsg/inject/senddata: `complete` false for inject (and for selective
  /// completion without FI_COMPLETION). -FI_EINVAL for an iov array post_recv would refuse;
  /// -FI_EMSGSIZE beyond max_msg (inject_size for inject),
  /// -FI_EAGAIN when the CQ has no room (RM) or the port did not take the frame, -FI_ENOMEM
  /// when no mbuf is free.
  ssize_t send(const iovec* iov, size_t count, const Destination& dst, void* context,
               uint64_t flags, bool has_data, uint64_t data, bool inject) noexcept;
  /// fi_cancel: removes the posted receive with this context and completes it with
  /// -FI_ECANCELED, owning the port's receive side meanwhile (it waits for a poll step on another
  /// thread). Not from inside a poll step.
  /// @return 0, or -FI_ENOENT when no such receive is posted.
  int cancel(void* context) noexcept {
    int r = -FI_ENOENT;
    link_->with_rx_owner([&] { r = cancel_locked(context); });
    return r;
  }
  /// cancel() for a caller that owns the receive side already.
  int cancel_locked(void* context) noexcept;

  // ---- receive side (the port's RX owner) ----
  bool deliver(const wire::Frame& f, rte_mbuf* m) noexcept override;
  bool has_backlog() const noexcept override { return backlog_head_ != backlog_tail_; }
  size_t drain_backlog() noexcept override;
  /// Frees held-back frames (endpoint close, once unbound), owning the receive side meanwhile.
  void clear_backlog() noexcept {
    link_->with_rx_owner([&] { clear_backlog_locked(); });
  }
  /// clear_backlog() for a caller that owns the receive side already.
  void clear_backlog_locked() noexcept;

  const DgramStats& stats() const noexcept { return stats_; }
  Link* link() const noexcept { return link_; }
  const Config& config() const noexcept { return cfg_; }

 private:
  struct RecvDesc {  // 96 bytes: a multiple of 4, as rte_ring_elem wants
    void* context;
    uint64_t flags;
    uint32_t count;
    uint32_t pad;
    iovec iov[kMaxIov];
    uint64_t reserved[2];
  };
  static_assert(sizeof(RecvDesc) % 4 == 0);

  DgramEndpoint(Link* link, const Config& cfg) : link_(link), cfg_(cfg) {}
  bool next_recv(RecvDesc* out) noexcept;  // RX owner: staged first, then the ring
  // Completes `d` with frame `f` (copy, completion, counter). RX owner.
  void complete_rx(const RecvDesc& d, const wire::Frame& f, const rte_mbuf* m) noexcept;

  // Frames that arrived before a receive was posted (or without CQ room), oldest first: like a
  // socket buffer, so that a peer that answers quickly is not lost. RX owner only.
 public:
  static constexpr size_t kBacklog = 256;

 private:
  struct Held {
    wire::Frame frame;
    rte_mbuf* mbuf;
  };
  std::unique_ptr<Held[]> backlog_{new Held[kBacklog]};
  size_t backlog_head_ = 0, backlog_tail_ = 0;  // ring indices, tail - head <= kBacklog
  void complete_tx(void* context, uint64_t flags) noexcept;

  Link* link_;
  Config cfg_;
  rte_ring* posted_ = nullptr;  // MPSC: application threads -> RX owner
  std::unique_ptr<char[]> ring_mem_;
  std::vector<RecvDesc> staged_;  // RX owner: taken from the ring but not used (cancel, RM)
  size_t staged_head_ = 0;
  std::atomic<size_t> posted_count_{0};

  event::Cq* tx_cq_ = nullptr;
  event::Cq* rx_cq_ = nullptr;
  bool tx_selective_ = false, rx_selective_ = false;
  event::Cntr* tx_cntr_ = nullptr;
  event::Cntr* rx_cntr_ = nullptr;
  const SourceLookup* source_lookup_ = nullptr;
  uint16_t udp_port_be_ = 0, ep_id_be_ = 0;
  std::atomic<uint16_t> ip_id_{0};
  DgramStats stats_;
};

}  // namespace dpfab::proto
