// SPDX-License-Identifier: BSD-3-Clause
//
// RdmCore: the FI_EP_RDM protocol of one endpoint, without ports, mbufs or CQ rings: messages
// (FI_MSG) and tagged messages (FI_TAGGED) of any size up to max_msg_size, reliable and in order
// per peer, over the reliability layer of rdm_peer.h. Frames leave through CoreSink::transmit,
// completions through CoreSink::complete; frames come in through on_frame and time through
// progress(now). drivers/ofi maps fi_* calls onto send/recv/cancel and the sink onto frames and
// CQ/counter writes.
//
// Messages. A message of at most eager_max bytes goes eagerly: kEager segments of seg_size bytes,
// one message after the other (segments of two eager messages to one peer never interleave, so
// the receiver reassembles one eager message per peer at a time, straight into the posted buffer
// when a receive matched the first segment, else into an unexpected buffer). A larger message
// uses a receiver-driven rendezvous: kRts carries tag, CQ data and length; the receiver answers
// kCts with the bytes it grants once a receive matches (nothing big is buffered blindly: an
// unmatched RTS costs one descriptor); the sender then sends the granted bytes as kRdvData
// segments, which may interleave with later messages. A receive shorter than the message takes
// what fits and completes with FI_ETRUNC (olen = the rest); the sender completes normally.
//
// Completion semantics. A send completes (FI_SEND, with FI_MSG or FI_TAGGED) when every packet
// of it is acknowledged by the peer (FI_DELIVERY_COMPLETE-like for eager data; for rendezvous
// after the granted data is acknowledged). An inject copies the data (at most inject_size) and
// completes as SendOp::completion says (fi_inject: never; fi_sendmsg with FI_INJECT: as asked);
// a message of at most copy_max bytes may be copied the same way to complete at once. A
// receive completes (FI_RECV, FI_MSG/FI_TAGGED, FI_REMOTE_CQ_DATA when the message had data) when
// all its bytes are in the buffer; src is the sender's fi_addr.
//
// Unexpected messages. An eager message with no matching receive is kept in one of
// unexpected_slots buffers of eager_max bytes; with none free, its first packet is refused and
// the sender backs off (RNR, rdm_peer.h): back-pressure, not loss. An RTS with no match keeps a
// descriptor only (unexpected entries, also bounded, refused the same way when none is free).
//
// FI_PEEK / FI_CLAIM / FI_DISCARD (tagged receives, fi_tagged(3)): PEEK looks for an unexpected
// message that matches without taking it and completes with its length, tag and data (buf NULL),
// or with the error FI_ENOMSG; PEEK|CLAIM also reserves it for this context, which a later
// receive with FI_CLAIM and the same context takes (its tag arguments are ignored); PEEK|DISCARD
// and CLAIM|DISCARD drop the message (a rendezvous message is answered with a zero grant so its
// sender completes) and complete with len 0.
//
// Errors. A peer declared unreachable (rdm_peer.h: retransmissions or keepalive probes
// unanswered; probes run while we wait on a peer with nothing in flight: a CTS, the rest of a
// message) completes every send to it and every receive bound to one of its messages with
// FI_EHOSTUNREACH; later sends to it fail at once.
//
// FI_MULTI_RECV (FI_MSG receives): the buffer stays posted and each message it matches takes the
// next bytes of it (a message longer than what is left is truncated); each completion points
// into it (buf, len). Once less than min_multi_recv bytes are left the buffer is released, and
// the last completion of a message placed in it carries FI_MULTI_RECV. fi_cancel releases it as
// well (FI_ECANCELED with FI_MULTI_RECV when no message is still arriving into it).
//
// Peer restart. A peer that comes back with a new epoch (another process at the same address)
// is detected by its first packet; what involved the old instance completes with
// FI_EHOSTUNREACH and the peer is reachable again (also after it was declared unreachable).
//
// RMA and atomics (SendOp::kind). A write (kWrite) goes as kWrite segments through the send queue
// like an eager message (any size up to max_msg_size: the window flow-controls it, and the target
// places each segment straight into the registered region, so nothing is buffered at either
// end); its first segment is checked against the whole target range (CoreConfig::mrs: key,
// bounds, FI_REMOTE_WRITE), every segment against its own range, and a write that fails a check
// is placed no further and answered with kRmaResp and the error. The last segment asks for a
// kRmaResp (kRdmRespReq) when the write reports a completion: the write completes when that
// answer arrives (delivery complete: the data is in the target's memory), with its status. A
// read (kRead) sends one kReadReq; the target checks it and streams the data back as kReadResp
// segments (copied into stage_slots buffers of its own while in flight, so that closing the
// region never leaves a retransmission pointing into freed memory; no more than those are out
// at a time), or answers kRmaResp with the error; the read completes when all its bytes are in
// the local buffers. An atomic (kAtomic, one packet of operands) executes at the target's poll
// step (atomic.h) and is answered with kRmaResp (status, and the old values for fetching and
// compare atomics). The target reports what reached its memory: a write with remote CQ data
// completes on the receive side (FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA), and writes,
// atomics and reads count on the FI_REMOTE_WRITE / FI_REMOTE_READ counters and the region's own.
// Nothing of a failed operation is reported at the target.
//
// Ordering (per pair of endpoints). Requests are processed at the target in the order they
// were sent (the stream is in order, writes' segments never interleave with other sends of the
// queue). A read is answered over time; until its data is all copied out, a write, an atomic or
// a message from the same peer is refused (RNR, the sender backs off and resends), so a write or
// message posted after a read never changes what the read returns (WAR, SAR). Hence RAR, RAW,
// WAR, WAW, SAR, SAW and SAS for RMA and atomics. FI_FENCE holds an operation (and everything
// after it to that peer) until every operation posted before it to that peer has completed.
//
// Fast paths. Most messages of an RDM conversation are small, in order, and find their receive
// posted. Two paths serve them with less work, and hand anything else to the general code above:
//   - send: a message of at most seg_size bytes to a peer with nothing queued (no earlier
//     message or rendezvous segment waiting for the window) goes out from send() itself, as the
//     only packet pump() would send, without the send queue. When it cannot go at once (window
//     full, RNR pause, the port refused the frame) it is queued as any message and pump() sends
//     it later, in order;
//   - receive: a packet that holds a whole eager message (length <= seg_size) matched by a
//     posted receive completes it at once, without the reassembly state of a message still
//     arriving. When the packet is the next of the peer's stream and the receive is not a
//     multi-recv buffer, on_frame consumes it itself, around the reliability layer's
//     take_next/delivered_next (rdm_peer.h), instead of through its general frame handling and
//     PeerHost::deliver; otherwise (a packet held out of order until the hole filled, a part
//     carved from a multi-recv buffer) deliver_eager does the same. An unexpected message, a
//     message of several packets, or a receive that has to wait (RNR) take the general path.
// Either way the frames, completions and their order are those of the general path
// (CoreConfig::fast_paths = false; test/unit/proto/rdm_fast_path_test.cc compares both).
//
// Not yet: iov (one buffer per operation), fi_cancel of sends.
//
// Threading: one owner at a time (a progress lcore, or an application thread holding the
// endpoint's progress lock): every call, and every sink callback it makes, happens on the owner;
// nothing here is atomic or locked. The driver serialises application calls with the progress
// step.
//
// Wiring it into an endpoint (drivers/ofi and lib/progress, not done yet):
//   - an RDM endpoint is a proto::Receiver on its own UDP port: deliver() decodes the RDM header
//     (wire::decode_rdm on the frame's payload, counting rejects), maps the source to the AV's
//     fi_addr (SourceLookup; unknown sources are dropped) and calls on_frame, then frees the mbuf
//     (the core copies what it keeps); the decoder accepts Type::kRdm and DgramEndpoint drops
//     it, so an RDM frame reaching a DGRAM port is counted (rx_not_dgram), not delivered;
//   - CoreSink::transmit builds an mbuf: rdm_outer_header + encode_rdm + the data, encode_mbuf,
//     Link::transmit; CoreSink::complete writes the CQ entry (err != 0: write_error) and bumps
//     the counters; with FI_RM_ENABLED check would_fit before send/recv;
//   - progress(now) runs in the poll step and, for sleeping endpoints, from the wakeup thread at
//     next_deadline() (retransmission timers have no fd); `now` is CLOCK_MONOTONIC in ns;
//   - add_peer on a peer's first traffic, not on fi_av_insert (peer = the endpoint's peer id,
//     rdm_endpoint.h: an address only in the AV costs the core nothing); seg_size =
//     max_payload(mtu) - kRdmHeaderLen; getinfo advertises FI_EP_RDM, FI_MSG | FI_TAGGED |
//     FI_SOURCE | FI_DIRECTED_RECV | FI_MULTI_RECV, msg_order FI_ORDER_SAS, comp_order
//     FI_ORDER_NONE (a rendezvous receive completes after later eager ones), max_msg_size,
//     inject_size.
#pragma once

#include <rdma/fabric.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "common/result.h"
#include "proto/mr_table.h"
#include "proto/rdm_match.h"
#include "proto/rdm_peer.h"
#include "wire/rdm.h"

namespace dpfab::proto::rdm {

struct CoreConfig {
  ReliabilityConfig rel;
  /// Data bytes per packet (port payload - kRdmHeaderLen); the default is MTU 1500's (1388).
  uint32_t seg_size = static_cast<uint32_t>(wire::max_payload(1500) - wire::kRdmHeaderLen);
  /// Larger messages use rendezvous. Also what this core takes eagerly (longer eager messages are
  /// dropped as protocol errors) and the size of each unexpected slot.
  uint64_t eager_max = 16384;
  /// The eager limit of sends to peers marked same-host (set_peer_same_host); 0: eager_max. Above
  /// it a message goes by rendezvous, which the same-host path carries by reference (one copy).
  uint64_t eager_max_same_host = 0;
  uint64_t max_msg_size = 1ull << 30;  ///< larger sends fail with -FI_EMSGSIZE
  uint32_t tx_ops = 256;               ///< sends in progress (<= 65536: msg ids)
  uint32_t rx_ops = 256;               ///< receives posted or in progress
  uint32_t unexpected = 512;           ///< unexpected message descriptors
  uint32_t unexpected_slots = 64;      ///< buffers of eager_max bytes for unexpected eager data
  uint32_t reorder_slots = 1024;       ///< out-of-order packet copies, shared by all peers
  uint32_t inject_size = 64;
  /// A message send of at most copy_max bytes that asks to complete at once (SendOp::complete_now
  /// with inject) is copied like an inject: the copy slots hold max(inject_size, copy_max) bytes.
  /// 0: inject_size. RMA writes and atomics keep inject_size.
  uint32_t copy_max = 0;
  /// Past this many active peers their timers are kept in a heap (RdmShared::timers), off again
  /// at a quarter of it; below, next_deadline visits them. 0: always (the unit tests run so).
  uint32_t timer_heap_from = 8;
  /// While the heap is on, progress() runs only the timers that are due; it visits every active
  /// peer (queued sends retried, idle peers no longer active) after the port refused a frame and
  /// at least this often.
  uint64_t timer_visit_ns = 1'000'000;
  uint64_t min_multi_recv = 1024;  ///< FI_OPT_MIN_MULTI_RECV
  uint64_t tx_retry_ns = 2000;     ///< after the port refused a frame, try again this much later
  uint32_t epoch = 0;              ///< this instance's epoch; 0 picks a random one
  /// Whether the sink counts send (tx) and receive (rx) completions (a counter is bound). When it
  /// does not, a completion that wants no CQ entry (Completion::cq false: fi_inject, selective
  /// completion) would do nothing, and the core does not make the call.
  bool tx_counted = true, rx_counted = true;
  /// The fast paths (see "Fast paths" above). Off, every message takes the general path, with the
  /// same frames, completions and statistics (but CoreStats::fast_*): the unit tests compare.
  bool fast_paths = true;
  /// Whether counters count writes (FI_WRITE), reads (FI_READ) and the remote operations at this
  /// target (FI_REMOTE_WRITE, FI_REMOTE_READ), as tx_counted for sends.
  bool write_counted = false, read_counted = false;
  /// The target side of RMA and atomics: the domain's regions (null: this endpoint is no target;
  /// requests are refused with FI_EKEYREJECTED) and this endpoint's token (FI_MR_ENDPOINT).
  const MrTable* mrs = nullptr;
  uint64_t ep_token = 0;
  uint32_t stage_slots = 128;  ///< read data and atomic results in flight (copies of seg_size)
  uint32_t responders = 64;    ///< reads being answered, all peers
  uint32_t resp_queue = 1024;  ///< kRmaResp answers waiting for the window
  /// The most bytes of operands (compare values included) an atomic carries; at most inject_size
  /// and one packet's data (less is taken).
  uint32_t atomic_max = 1024;
};

/// Local buffers of an operation (fi_sendv, fi_writev, fi_readv, fi_recvv; fi_atomicv's ioc).
inline constexpr size_t kMaxIov = 4;
struct Iov {
  void* base = nullptr;
  size_t len = 0;
};

/// What a SendOp is: a message (fi_send, fi_tsend), an RMA write or read, an atomic.
enum class OpKind : uint8_t { kMsg, kWrite, kRead, kAtomic };

/// One completion, in the terms of fi_cq_tagged_entry + fi_cq_err_entry. err is 0 or a positive
/// FI_E* value (FI_ETRUNC, FI_ENOMSG, FI_ECANCELED, FI_EHOSTUNREACH).
struct Completion {
  void* context = nullptr;
  uint64_t flags = 0;
  size_t len = 0;
  void* buf = nullptr;
  uint64_t data = 0;
  uint64_t tag = 0;
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  int err = 0;
  size_t olen = 0;
  /// Whether a CQ entry is wanted; false: counters only (selective completion, inject).
  bool cq = true;
  /// Whether counters count it (false: a send completed early already counted).
  bool count = true;
  /// At the target of a write, read or atomic: the counter the region has bound for the event
  /// (MrTable::Ref::counter), or null.
  void* region_cntr = nullptr;
};

/// What the core needs of the endpoint around it (owner thread only). The callbacks must not call
/// back into the core (queue work and do it after the core call returns).
class CoreSink {
 public:
  virtual ~CoreSink() = default;
  /// Sends one RDM frame (RDM header + data) to `peer`. @return false when the port did not
  /// take it (PeerHost::transmit): the core retries after tx_retry_ns.
  virtual bool transmit(fi_addr_t peer, const wire::RdmHeader& h,
                        std::span<const uint8_t> data) noexcept = 0;
  virtual void complete(const Completion& c) noexcept = 0;
  /// Copies `n` bytes at address `addr` of `peer`'s memory to `dst` (a same-host peer's
  /// rendezvous message by reference, wire::kRdmRef; the core calls it only for such an RTS).
  /// @return 0, or a positive fi_errno for the receive's error completion (FI_EHOSTUNREACH: the
  /// peer's process is gone; FI_EIO: its memory cannot be read there).
  virtual int read_peer(fi_addr_t peer, uint64_t addr, void* dst, size_t n) noexcept {
    (void)peer, (void)addr, (void)dst, (void)n;
    return FI_EIO;
  }
};

struct SendOp {
  fi_addr_t dest = 0;
  const void* buf = nullptr;
  size_t len = 0;
  void* context = nullptr;
  uint64_t tag = 0;   ///< tagged only
  uint64_t data = 0;  ///< with has_data only
  bool tagged = false;
  bool has_data = false;  ///< fi_senddata: remote CQ data
  /// Copy the data now: at most inject_size bytes, or copy_max for a message with complete_now.
  bool inject = false;
  /// Write a completion on success. Errors complete too, except for an inject without one
  /// (fi_inject: no context to report it with).
  bool completion = true;
  /// With inject: complete now, when the data is copied (FI_INJECT_COMPLETE), not when the peer
  /// acknowledges it; later errors are not reported (the application has its buffer back).
  bool complete_now = false;
  /// Several local buffers: iov_count > 0 replaces buf (len is their total). Sends and writes
  /// gather from them, reads scatter into them (`iov`, below).
  uint8_t iov_count = 0;
  OpKind kind = OpKind::kMsg;
  bool fence = false;  ///< FI_FENCE: held until every earlier operation to `dest` completed
  /// kWrite / kRead / kAtomic: the target region's key and the address of the first byte.
  uint64_t rkey = 0, raddr = 0;
  /// kAtomic: fi_op and fi_datatype; `len` bytes of operands at buf/iov (count * size), and
  /// for compare atomics as many compare values at `compare`; fetch and compare atomics return
  /// the old values into `result` (result_count buffers of `len` bytes in all).
  uint8_t atomic_op = 0, datatype = 0;
  bool fetch = false, compare_op = false;
  const void* compare = nullptr;
  uint8_t result_count = 0;
  // The arrays last: copy_op copies the fields above whole and only the entries in use below.
  Iov iov[kMaxIov] = {};
  Iov result[kMaxIov] = {};
};

/// `to` = `from`, less the unused iov and result entries (what a one-buffer send carries is a
/// third of the struct): the send path's copy of the op into its table (RdmCore::send).
inline void copy_op(SendOp& to, const SendOp& from) noexcept {
  static_assert(std::is_trivially_copyable_v<SendOp> && std::is_standard_layout_v<SendOp>);
  // A field added after the arrays would not be copied: they must stay last.
  static_assert(offsetof(SendOp, result) == offsetof(SendOp, iov) + sizeof(SendOp::iov) &&
                offsetof(SendOp, result) + sizeof(SendOp::result) == sizeof(SendOp));
  std::memcpy(static_cast<void*>(&to), &from, offsetof(SendOp, iov));
  for (uint8_t k = 0; k < from.iov_count && k < kMaxIov; ++k) to.iov[k] = from.iov[k];
  for (uint8_t k = 0; k < from.result_count && k < kMaxIov; ++k) to.result[k] = from.result[k];
}

struct RecvOp {
  void* buf = nullptr;
  size_t len = 0;
  void* context = nullptr;
  RecvMatch match;
  uint64_t flags = 0;  ///< FI_PEEK, FI_CLAIM, FI_DISCARD (tagged only); FI_MULTI_RECV (untagged)
  bool completion = true;  ///< CQ entries on success (false: selective completion, counters only)
  /// Several buffers (fi_recvv): iov_count > 0 replaces buf (len is their total; not with
  /// FI_MULTI_RECV). Last: copy_op copies only the entries in use.
  uint8_t iov_count = 0;
  Iov iov[kMaxIov] = {};
};

/// copy_op of a receive: its iov entries in use only (RdmCore::recv's copy into its table).
inline void copy_op(RecvOp& to, const RecvOp& from) noexcept {
  static_assert(std::is_trivially_copyable_v<RecvOp> && std::is_standard_layout_v<RecvOp>);
  static_assert(offsetof(RecvOp, iov) + sizeof(RecvOp::iov) == sizeof(RecvOp));  // last
  std::memcpy(static_cast<void*>(&to), &from, offsetof(RecvOp, iov));
  for (uint8_t k = 0; k < from.iov_count && k < kMaxIov; ++k) to.iov[k] = from.iov[k];
}

/// Counters of the core (owner thread writes; tests and stats read).
struct CoreStats {
  uint64_t sent_eager = 0, sent_rendezvous = 0, received = 0, truncated = 0;
  uint64_t unexpected = 0, unexpected_refused = 0, protocol_errors = 0, unknown_peer = 0;
  uint64_t peer_restarts = 0;  ///< a peer came back with a new epoch (see restart())
  /// Messages that took the fast paths: sent from send() itself, completed from one packet.
  uint64_t fast_sends = 0, fast_receives = 0;
  /// RMA and atomics posted here, and served here as their target; target_refused: requests
  /// answered with an error (key, bounds, rights); target_gated: packets refused while a read
  /// from their sender was still being answered (WAR/SAR ordering).
  uint64_t writes = 0, reads = 0, atomics = 0;
  uint64_t target_writes = 0, target_reads = 0, target_atomics = 0;
  uint64_t target_refused = 0, target_gated = 0;
  /// Rendezvous messages by reference (set_peer_reads_us): RTSs that named our buffer, and
  /// messages we copied out of a peer's memory ourselves.
  uint64_t ref_sent = 0, ref_received = 0;
  /// Timer passes (progress()), of them visits of every active peer (the others, with the timer
  /// heap on, ran only the due peers), and the peers whose timers the passes ran in all.
  uint64_t timer_passes = 0, timer_visits = 0, timer_peers = 0;
};

class RdmCore final : private PeerHost {
 public:
  /// -FI_EINVAL for a config it cannot run with, -FI_ENOMEM; -FI_EIO when epoch is 0 and no
  /// random one can be had. Control path (allocates); errors are returned, not thrown.
  static Result<std::unique_ptr<RdmCore>> create(const CoreConfig& cfg, CoreSink* sink);
  ~RdmCore() override;

  /// Makes `addr` a peer (control path; allocates). addr < 2^20. 0, -FI_EINVAL, -FI_ENOMEM.
  int add_peer(fi_addr_t addr) noexcept;

  /// fi_send/fi_tsend/.../inject, and the RMA and atomic calls (op.kind). 0; -FI_EMSGSIZE beyond
  /// max_msg_size (inject_size for inject, atomic_max for atomics); -FI_EINVAL for an unknown
  /// peer, an atomic whose op and datatype do not go together (atomic.h) or whose length is not a
  /// whole number of elements; -FI_EHOSTUNREACH when the peer is unreachable; -FI_EAGAIN when
  /// tx_ops operations are in progress.
  ssize_t send(const SendOp& op, uint64_t now) noexcept { return send(op, op.dest, now); }
  /// send() to `peer` (op.dest is not read).
  ssize_t send(const SendOp& op, fi_addr_t peer, uint64_t now) noexcept;
  /// fi_recv/fi_trecv(msg). 0; -FI_EAGAIN when rx_ops receives are posted; -FI_EINVAL for
  /// PEEK/CLAIM/DISCARD on an untagged receive, DISCARD without PEEK or CLAIM, MULTI_RECV on a
  /// tagged one or with a buffer shorter than min_multi_recv.
  ssize_t recv(const RecvOp& op, uint64_t now) noexcept;
  /// Whether recv() may send frames now, and so needs the time it is given: only when unexpected
  /// messages wait (a receive that takes or discards a rendezvous one sends its grant) or grants
  /// wait for window. Otherwise recv() sends nothing and moves no deadline (next_deadline() stays),
  /// and it may be given any time no earlier than the last one given (a caller whose clock costs
  /// saves reading it).
  bool recv_needs_time() const noexcept { return unexpected_in_use() != 0 || !cts_.empty(); }
  /// fi_cancel of a posted receive: completes it with FI_ECANCELED. 0 or -FI_ENOENT.
  int cancel(void* context) noexcept;

  /// A decoded RDM frame from `src` (the AV's fi_addr of the frame's source).
  void on_frame(fi_addr_t src, const wire::RdmHeader& h, std::span<const uint8_t> data,
                uint64_t now) noexcept;
  /// FI_OPT_MIN_MULTI_RECV (>= 1): applies to multi-receive buffers posted from now on.
  void set_min_multi_recv(uint64_t v) noexcept { cfg_.min_multi_recv = v ? v : 1; }
  uint64_t min_multi_recv() const noexcept { return cfg_.min_multi_recv; }
  /// The timer pass: due timers, and the queued sends they (or a refused frame) held back. It
  /// visits every active peer unless the timer heap is on (then only the due peers, and all of
  /// them every CoreConfig::timer_visit_ns).
  void progress(uint64_t now) noexcept;
  /// `peer` is known to be gone (a same-host peer whose process ended): it is declared
  /// unreachable now, as retransmissions left unanswered would (every operation involving it
  /// completes with FI_EHOSTUNREACH, later sends fail); a new instance is recognised by its first
  /// packet as usual. No-op for an unknown peer.
  void lose_peer(fi_addr_t peer, uint64_t now) noexcept;
  /// Rendezvous data to `peer` goes in segments of `bytes` (a power of two; 0: seg_size): a
  /// same-host peer that copies them out of our memory itself (shm, kRdmIndirect) takes large ones.
  /// Any time; later segments follow it.
  void set_peer_rdv_segment(fi_addr_t peer, uint64_t bytes) noexcept;
  /// `peer` is reached through a link that loses nothing it took (a same-host peer's rings): its
  /// retransmission timeout is at least ReliabilityConfig::lossless_rto_min_ns (RdmPeer::
  /// set_lossless), for this instance of it and later ones. Any time; no-op for an unknown peer.
  void set_peer_lossless(fi_addr_t peer) noexcept;
  /// `peer` is a process of this host (its address says so): its messages above
  /// CoreConfig::eager_max_same_host go by rendezvous, which the same-host path carries by
  /// reference with one copy, where an eager message would be copied into the rings and out of
  /// them a segment at a time. For this instance of it and later ones (an address keeps its
  /// host). Any time (it applies to sends posted later); no-op for an unknown peer.
  void set_peer_same_host(fi_addr_t peer) noexcept;
  /// `peer` can read our memory itself (a same-host peer, process_vm_readv): a rendezvous
  /// message of at most kRefMax bytes in one buffer goes as an RTS naming where it lies
  /// (wire::kRdmRef); the peer copies it into the matching receive (CoreSink::read_peer) and
  /// answers with a zero grant, which completes the send: one round trip and one copy, no
  /// kRdvData. Larger messages keep the granted rendezvous (their copies are made a segment at a
  /// time). For this instance of the peer (renew_peer forgets it). No-op for an unknown peer.
  void set_peer_reads_us(fi_addr_t peer) noexcept;
  static constexpr uint64_t kRefMax = uint64_t{1} << 20;
  /// `peer`'s address now names a new instance (a same-host peer that restarted: its node's
  /// nonce changed, which the address tells before any packet): what involved the old instance
  /// completes with FI_EHOSTUNREACH (if it has not yet), and the peer starts afresh, reachable,
  /// its epoch learnt from its first packet. No-op for an unknown peer.
  void renew_peer(fi_addr_t peer, uint64_t now) noexcept;
  /// Where the data of kRdvData packet `h` (`n` bytes) from `peer` goes if on_frame takes it now:
  /// the packet is the next of the peer's stream and the next granted bytes of a receive bound
  /// to its message. Empty otherwise (a duplicate, a protocol error: on_frame would not copy it
  /// there). The caller may put the data there itself and pass that span to on_frame, which then
  /// copies nothing (a same-host receiver reading the sender's memory: one copy).
  /// `scattered`, when given, is set when on_frame would take the packet but its bytes fall
  /// across two of the receive's buffers (no single span: the caller gives on_frame a copy).
  std::span<uint8_t> rdv_placement(fi_addr_t peer, const wire::RdmHeader& h, uint64_t n,
                                   bool* scattered = nullptr) noexcept;
  /// Sends every delayed ack now (before the endpoint closes: a peer whose last message we
  /// received must learn so, or it retransmits until it declares us unreachable).
  void flush_acks(uint64_t now) noexcept;
  /// Earliest time progress() has timer work, or UINT64_MAX. O(1): the peers' timers are kept in
  /// order as they move (RdmShared::timers).
  uint64_t next_deadline() noexcept;
  /// Tests: whether the timer heap, while it is on, holds what a visit of the active peers finds
  /// (a call that moved a timer without timers_moved() would leave it behind). Settles it.
  bool timers_consistent() noexcept;
  /// FI_EP_MSG (msg_endpoint.h), when its connection ends: every operation in progress completes
  /// with `err` (FI_ECANCELED, FI_EHOSTUNREACH): sends queued or in flight, receives posted or
  /// bound to a message (a FI_MULTI_RECV buffer reports FI_MULTI_RECV with its last one);
  /// unexpected messages are dropped (a claimed one fails its FI_CLAIM receive with `err`); every
  /// peer's reliability state starts afresh, so nothing is resent.
  void abort(int err) noexcept;

  const CoreStats& stats() const noexcept { return stats_; }
  const ReliabilityStats& reliability_stats() const noexcept { return shared_.stats; }
  const RdmPeer* peer(fi_addr_t a) const noexcept;
  uint32_t epoch() const noexcept { return shared_.epoch; }
  /// Sends and receives in progress (0 when everything completed): the endpoint's RM check on
  /// every send and receive post, and tests.
  size_t tx_in_use() const noexcept { return tx_free_.in_use(); }
  /// Injected sends (fi_inject, or completed when copied: FI_INJECT_COMPLETE) whose packets are
  /// not all acknowledged yet: the application is done with them, so closing the endpoint now
  /// would lose messages it was told were sent.
  size_t injected_unacked() const noexcept;
  size_t rx_in_use() const noexcept { return rx_free_.in_use(); }
  size_t unexpected_in_use() const noexcept { return unexp_free_.in_use(); }
  /// Target side: reads being answered, answers queued, stage buffers in flight (0 when idle).
  size_t target_in_use() const noexcept;
  /// The fi_cq flags of an operation's completion at the initiator.
  static uint64_t completion_flags(const SendOp& op) noexcept;

 private:
  struct TxOp;
  struct RxOp;
  struct Unexp;
  struct PeerState;
  struct PeerRma;
  struct Responder {
    uint32_t next = kNone;
    bool in_use = false;
    fi_addr_t peer = 0;
    uint32_t msg_id = 0;
    uint64_t key = 0, addr = 0, len = 0, off = 0;
  };
  struct Resp {
    fi_addr_t peer;
    uint32_t msg_id;
    uint32_t status;
    uint32_t stage;  // kNone: no data
    uint32_t len;
  };
  struct Cts {
    fi_addr_t peer;
    uint32_t msg_id;
    uint64_t granted;
  };

  RdmCore(const CoreConfig& cfg, CoreSink* sink);

  // PeerHost
  bool transmit(fi_addr_t peer, const wire::RdmHeader& h,
                std::span<const uint8_t> data) noexcept override;
  bool deliver(fi_addr_t peer, const wire::RdmHeader& h,
               std::span<const uint8_t> data) noexcept override;
  void acked(fi_addr_t peer, uint32_t cookie) noexcept override;
  void unreachable(fi_addr_t peer) noexcept override;
  // Completes every operation involving `peer` with `err` (unreachable: FI_EHOSTUNREACH).
  void fail_peer(fi_addr_t peer, int err) noexcept;

  PeerState* state(fi_addr_t a) noexcept;
  // A peer restarted (RdmPeer::is_restart; `first` is the new instance's first packet):
  // operations involving its old instance complete with FI_EHOSTUNREACH, and the peer starts
  // afresh, reachable again.
  void restart(PeerState& p, fi_addr_t addr, const wire::RdmHeader& first) noexcept;
  // We wait on the peer: a CTS, or the rest of one of its messages.
  bool expecting(const PeerState& p) const noexcept;
  void activate(PeerState& p) noexcept;
  void timer_heap_off() noexcept;        // RdmShared::timers: every peer untracked
  void due_pass(uint64_t now) noexcept;  // progress() with the heap on: the due peers only
  uint64_t settled_earliest() noexcept;  // RdmShared::timers, settled: its earliest
  // After every call into a peer's reliability layer that may move one of its timers (send,
  // on_frame, take_next, delivered_next, poll, keepalive, flush_ack, lose): RdmShared::timers
  // follows while it is on. The unit tests check that none was left out (timers_consistent).
  void timers_moved(RdmPeer& r) noexcept {
    if (shared_.heap_on) [[unlikely]]
      shared_.list(&r);
  }
  void pump(PeerState& p, uint64_t now) noexcept;
  void pump_cts(uint64_t now) noexcept;
  ssize_t post_multi(const RecvOp& op) noexcept;
  void init_rx(uint32_t r, const RecvOp& op) noexcept;
  static bool wants_ack(const TxOp& t) noexcept;
  uint64_t eager_max_to(const PeerState& p) const noexcept;
  // The kEager header of the segment of `t` at t.next_off with `n` bytes.
  wire::RdmHeader eager_header(const TxOp& t, uint64_t n) const noexcept;
  bool send_eager_segment(PeerState& p, uint32_t op, uint64_t now) noexcept;
  // send()'s fast path: sends the one packet of eager message `op` to a peer with nothing queued
  // (what pump() would do, without the queue). False: not sent (queue it).
  bool try_send_now(PeerState& p, uint32_t op, uint64_t now) noexcept;
  // Whether a completion would do anything (a CQ entry, or a counter that counts it).
  bool reported(bool cq, bool count, bool tx) const noexcept {
    return cq || (count && (tx ? cfg_.tx_counted : cfg_.rx_counted));
  }
  // Whether a counter counts the completions of operations like `op` (sends, writes, reads).
  bool kind_counted(const SendOp& op) const noexcept {
    switch (op.kind) {
      case OpKind::kWrite:
        return cfg_.write_counted;
      case OpKind::kRead:
        return cfg_.read_counted;
      case OpKind::kAtomic:
        return op.fetch || op.compare_op ? cfg_.read_counted : cfg_.write_counted;
      default:
        return cfg_.tx_counted;
    }
  }
  bool send_rdv_segment(PeerState& p, uint32_t op, uint64_t now) noexcept;
  /// p.rel replaced by a fresh RdmPeer for `addr` (a restarted or reset peer), lossless if p is.
  void fresh_rel(PeerState& p, fi_addr_t addr) noexcept;
  void complete_tx(uint32_t op, int err) noexcept;
  void maybe_complete_tx(uint32_t op) noexcept;
  // The bytes [off, off + max) of t's data that lie in one of its buffers (the span may be
  // shorter: it ends where that buffer does).
  std::span<const uint8_t> data_at(const TxOp& t, uint64_t off, uint64_t max) const noexcept;
  // Whether an operation posted before `op` to its peer has not completed (FI_FENCE).
  bool earlier_incomplete(uint32_t op) const noexcept;

  // ---- RMA and atomics (rdm_core_rma.cc) ----
  // Cookies of packets whose data is a stage buffer (read data, atomic results): the buffer is
  // freed when the packet is acknowledged. TxOp cookies are below 65536.
  static constexpr uint32_t kStageCookie = 1u << 31;
  // send()'s checks of an atomic: 0, -FI_EINVAL (op and datatype do not go together, no whole
  // number of elements, no compare values or result buffers where needed), -FI_EMSGSIZE.
  int check_atomic(const SendOp& op) const noexcept;
  // Initiator: the first packet of read or atomic `op`, or the next segment of write `op`.
  bool send_rma(PeerState& p, uint32_t op, uint64_t now) noexcept;
  wire::RdmHeader write_header(const TxOp& t, uint64_t n) const noexcept;
  void deliver_read_resp(PeerState& p, const wire::RdmHeader& h,
                         std::span<const uint8_t> d) noexcept;
  void deliver_rma_resp(PeerState& p, const wire::RdmHeader& h,
                        std::span<const uint8_t> d) noexcept;
  // Target: false refuses the packet (RNR) and changes nothing.
  bool deliver_write(PeerState& p, const wire::RdmHeader& h, std::span<const uint8_t> d) noexcept;
  bool deliver_read_req(PeerState& p, const wire::RdmHeader& h) noexcept;
  bool deliver_atomic(PeerState& p, const wire::RdmHeader& h, std::span<const uint8_t> d) noexcept;
  // The peer's target-side state, made on first use (null: out of memory).
  PeerRma* rma_of(PeerState& p) noexcept;
  // A packet from `p` that must wait until p's reads are answered (WAR/SAR).
  bool gated(const PeerState& p) const noexcept;
  bool send_read_segment(PeerState& p, uint64_t now) noexcept;
  bool queue_resp(fi_addr_t peer, uint32_t msg_id, int status, uint32_t stage,
                  uint32_t len) noexcept;
  bool resp_room() const noexcept { return resp_q_.size() < cfg_.resp_queue; }
  void pump_resp(uint64_t now) noexcept;
  void free_stage(uint32_t slot) noexcept;
  uint8_t* stage_mem(uint32_t slot) noexcept {
    return stage_mem_.get() + size_t{slot} * cfg_.seg_size;
  }
  // Drops the target-side state of `peer` (its reads, answers, stage buffers).
  void drop_target_state(PeerState& p, fi_addr_t peer) noexcept;
  void remote_event(fi_addr_t peer, uint64_t flags, uint64_t len, uint64_t data, bool cq,
                    void* region_cntr) noexcept;

  bool deliver_eager(PeerState& p, const wire::RdmHeader& h, std::span<const uint8_t> d) noexcept;
  // on_frame's fast path: the next packet of `p`'s stream holds a whole eager message that a
  // posted receive (not multi-recv) takes; consumed as the general path would. False, nothing
  // done: take the general path.
  bool try_receive_now(PeerState& p, const wire::RdmHeader& h, std::span<const uint8_t> d,
                       uint64_t now) noexcept;
  bool deliver_rts(PeerState& p, const wire::RdmHeader& h) noexcept;
  void deliver_cts(PeerState& p, const wire::RdmHeader& h) noexcept;
  void deliver_rdv_data(PeerState& p, const wire::RdmHeader& h,
                        std::span<const uint8_t> d) noexcept;
  // The receive a message from `from` of `total` bytes goes to (a carved part of a multi-recv
  // buffer), or kNone; *refuse when one matched but no receive op was free for the part.
  uint32_t match_posted(fi_addr_t from, uint64_t tag, bool tagged, uint64_t total,
                        bool* refuse) noexcept;
  // Carves the next min(total, left) bytes of multi-recv buffer `parent` into a new receive op;
  // kNone when none is free. Releases the parent (sets released) when less than min_multi_recv
  // is left; the caller takes a released parent off the posted list.
  uint32_t carve(uint32_t parent, uint64_t total) noexcept;
  // Fills unexpected entry `u` (taken from unexp_free_) for the message `h` from `from` and puts
  // it on its list: an eager message with data slot `slot` (kNone: empty), or an RTS.
  void queue_unexpected(uint32_t u, fi_addr_t from, const wire::RdmHeader& h, uint32_t slot,
                        bool rts) noexcept;
  void take_unexpected(uint32_t u, uint32_t rx) noexcept;
  void discard_unexpected(uint32_t u) noexcept;
  void free_unexpected(uint32_t u) noexcept;
  // Gives up the eager message being reassembled from `p` (the peer broke the protocol or died):
  // its receive completes with `err`, its unexpected entry goes (or, claimed, fails its claim).
  void abandon_cur(PeerState& p, int err) noexcept;
  // `remote`: the message's address in the sender's memory (kRdmRef), 0 for a granted one.
  void start_rdv_rx(uint32_t rx, fi_addr_t from, uint32_t msg_id, uint64_t total,
                    uint64_t remote) noexcept;
  int read_ref(const RxOp& x, fi_addr_t from, uint64_t remote) noexcept;
  void complete_rx(uint32_t rx, int err) noexcept;
  void copy_to_rx(RxOp& r, uint64_t offset, std::span<const uint8_t> d) noexcept;
  void queue_cts(fi_addr_t peer, uint32_t msg_id, uint64_t granted) noexcept;

  CoreConfig cfg_;
  CoreSink* sink_;
  RxSlotPool slots_;
  RdmShared shared_;
  CoreStats stats_;
  uint64_t now_ = 0;         // the time of the call in progress (for callbacks from RdmPeer)
  bool tx_blocked_ = false;  // the port refused a frame since the last progress(): retry soon
  bool starved_ = false;     // a read's data waited for a copy slot: the next pass visits all
  uint64_t visit_at_ = 0;    // heap on: the timer pass visits every active peer from then

  std::vector<std::unique_ptr<PeerState>> peers_;  // by fi_addr
  size_t peer_count_ = 0;
  // Peers with something to time, send or wait for; progress() visits only these. Reserved to
  // peer_count_ entries (a peer is in it at most once).
  std::vector<PeerState*> active_;
  std::vector<TxOp> tx_;
  FreeList tx_free_;
  // tx_ops copy slots of cfg_.copy_max bytes (touched as used: LIFO free list).
  std::unique_ptr<uint8_t[]> inject_mem_;
  std::vector<RxOp> rx_;
  FreeList rx_free_;
  IndexFifo<std::vector<RxOp>> posted_msg_, posted_tagged_;
  std::vector<Unexp> unexp_;
  FreeList unexp_free_;
  IndexFifo<std::vector<Unexp>> unexp_msg_, unexp_tagged_;
  std::unique_ptr<uint8_t[]> unexp_mem_;  // unexpected_slots * eager_max
  FreeList unexp_slot_free_;
  std::vector<Cts> cts_;  // pending CTS; reserved to rx_ops + unexpected (see queue_cts)
  // Target side of RMA (allocated when cfg_.mrs is set).
  std::vector<Responder> responders_;
  FreeList responder_free_;
  std::vector<Resp> resp_q_;  // reserved to cfg_.resp_queue
  std::unique_ptr<uint8_t[]> stage_mem_;
  FreeList stage_free_;
  std::vector<fi_addr_t> stage_owner_;  // FI_ADDR_NOTAVAIL: free
};

}  // namespace dpfab::proto::rdm
