// SPDX-License-Identifier: BSD-3-Clause
//
// Node: this process's end of the same-host path (DESIGN.md "Same-host peers", fi_dpdk(7)
// "Same-host peers"). One per port engine; its endpoints' names carry its identity (host, node,
// nonce: wire/address.h), and a peer whose name has our host reaches them through shared memory
// instead of the port.
//
// Identity and discovery. The host identity hashes the kernel's boot id and the network namespace:
// two processes with the same one reach each other's abstract unix sockets (which belong to a
// network namespace) and share memory through them. A node id is the lowest number n >= 1 whose
// abstract socket "@dpfab-shm:<n>" this process could bind (the kernel frees the name when the
// process ends, however it ends: nothing to clean up, nothing to reclaim); the nonce is random per
// node instance, so that a name that outlived its process is never taken for its successor's.
//
// Links. Two nodes share one link: a pair segment (segment.h) holding a ring per direction
// (ring.h), made by the node that connects, and each node's page (NodePage: its armed flag and
// the time of the last kick) and eventfd, all passed over the unix socket (hello.h, SCM_RIGHTS)
// after SO_PEERCRED says the peer runs as our user (or root). A link is made on demand: the
// address vector asks for it when a same-host address is inserted (connect()), the data path when
// it first sends to one it has not linked to (request()). Links to oneself (an endpoint sending to
// another endpoint of the same node) use a segment of our own and no socket.
//   Simultaneous connects of two nodes: the link the lower node id made wins. The higher node
//   accepts it and drops its own attempt; the lower node refuses the higher one's attempt while
//   its own is under way or up (hello.h kRefused), so both keep the same link.
//
// Waking a sleeper: one OS wakeup per message, as the memif kick (progress/memif_kick.h) does for
// two dpfab processes on a memif link, with one flag per node instead of one per link:
//   receiver (a consumer about to sleep, PortEngine::prepare_sleep; waitable.h A1-A3):
//     A1 drain our eventfd; A2 armed = 1 (seq_cst RMW on our page); A3 poll the rings once more.
//   sender (Conn::send, under the link's TX lock, after the record is published):
//     S1 full fence; S2 if the peer's armed is 1 and exchange(0) returns 1, store the time in the
//     peer's page and write the peer's eventfd -- after the TX lock (and the caller's locks) are
//     released (wait/wake_batch.h): no syscall under a data-path lock (common/lockcheck.h).
//   Store buffering: either A3 sees the record (its head was stored before S1), or S2 sees the
//   flag (stored at A2, before A3's load of the head). Only the first send after the receiver
//   armed pays the syscall; while the receiver is awake no sender makes one. Several senders race
//   for one exchange: one of them wakes the receiver, which then polls every ring.
//
// Many links: the ready bits. The receive side looks at every link's ring per poll while it has
// few; past kSummaryFrom links (a host of many processes that all talk to each other) that cost
// 170 ns a poll with 63 (hot-parts BM_ShmNode_EmptyPoll), so it reads one bit per link instead,
// in its page (NodePage::ready), at the bit its end of the link told the sender
// (RingControl::reader_slot). It turns NodePage::summary on (seq_cst) and sets every bit once,
// so the rings written by senders that still read 0 are read once; it goes back to every ring
// at a quarter of the links. A page whose flag a broken peer cleared is repaired the same way.
//   sender (Conn::send, after S1): when the peer's summary is 1, set our bit unless it is set.
//   receiver (poll): exchange a word of bits with 0, then read the rings whose bits it held; a
//     budget that stops in the middle sets the bits it did not finish again.
//   A record published after its ring was read sets the bit again: its sender either sees the
//   bit taken (and sets it) or saw it set before the exchange, which orders its record before
//   the read. A sender that did not know its bit yet (the link's far end came up first) leaves
//   it to the receiver, which sets it after it published the slot (add_live). A sleeper's A3
//   poll reads the bits: a sender sets its bit before S2 reads `armed`.
//
// The end of a link. A peer that exits or is killed closes its end of the socket (the kernel does
// it): the control thread sees the hangup, marks the link dead (under its TX lock: no send is
// half-written into it afterwards) and makes our eventfd readable, so that sleepers poll. The
// receive side delivers what the peer had sent before it went, then reports the link lost once
// (reap: the engine fails every operation that involved the peer, FI_EHOSTUNREACH), and the
// control thread unmaps the segment once no thread can touch it. A ring found corrupt (ring.h)
// ends the link the same way, and the peer sees us go.
//
// Threads.
//   - The control thread ("dpfab-shm", one per node, signals blocked) owns the sockets: it
//     accepts, connects, exchanges hellos, notices hangups and frees dead links. It sleeps in
//     epoll_wait and costs nothing while nothing happens.
//   - Senders: any thread (Conn::send takes the link's TX lock, a SpinLock).
//   - The receive side: one thread at a time (the port engine's RX owner): poll().
//   - connect(): control path, any thread; waits for the control thread.
// Link objects (Conn) are never freed while the node lives (a sender may hold a pointer to a
// dead one: it finds it dead under the TX lock); their memory is, once retired.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "common/counter.h"
#include "common/fd.h"
#include "common/result.h"
#include "common/spinlock.h"
#include "shm/ring.h"
#include "shm/segment.h"
#include "wait/wake_batch.h"

namespace dpfab::shm {

struct NodeConfig {
  std::string dir;                  ///< where segments live; empty: anonymous memfds (segment.h)
  uint32_t ring_bytes = 128 << 10;  ///< data area of each ring (valid_ring_size)
  bool cma = true;                  ///< read peers' memory with process_vm_readv where allowed
  /// Abstract socket names are "<prefix>:<node id>"; tests use a prefix of their own.
  std::string prefix = "dpfab-shm";
  /// Hellos and acks not answered in this long end the attempt (the peer is then taken as
  /// gone: its operations fail). Long: a peer whose process is alive answers, however loaded the
  /// host (64 busy-polling processes on 2 cores took seconds); one that dies closes its socket.
  int64_t handshake_timeout_ns = 60'000'000'000;
};

/// The host identity: the same for every process that shares this boot and network namespace
/// (never 0).
uint64_t host_id() noexcept;

/// Links a node polls at most (its poll list).
inline constexpr size_t kMaxNodeLinks = 4096;

/// A node's shared page (one 4 KiB memfd page, sealed): what peers' senders write.
struct NodePage {
  std::atomic<uint32_t> armed;     ///< A2 sets it, a sender's S2 takes it
  uint32_t magic;                  ///< kNodePageMagic
  std::atomic<int64_t> kicked_ns;  ///< CLOCK_MONOTONIC ns of the last kick (spin.h learns)
  /// 1 while the node reads `ready` instead of looking at every ring (many links): senders then
  /// set their ring's bit after each record (on the line senders read for `armed` anyway).
  std::atomic<uint32_t> summary;
  /// One bit per poll-list slot (RingControl::reader_slot - 1): the ring may hold records.
  alignas(64) std::atomic<uint64_t> ready[kMaxNodeLinks / 64];
};
static_assert(sizeof(NodePage) <= 4096);
inline constexpr uint32_t kNodePageMagic = 0x64706e32;  // "dpn2": with `ready` ("dpn1" without)

enum class LinkState : uint8_t {
  kConnecting,  ///< hello sent (or to be sent), no answer yet: senders wait (-FI_EAGAIN)
  kUp,          ///< records flow
  kDead,        ///< was up; the peer is gone (or the ring broke): its operations fail
  kStale,       ///< no such node instance (gone before we linked): its operations fail
  kRefused,     ///< the node exists but will not link (another user): use the port instead
};
const char* link_state_name(LinkState s) noexcept;

/// Counters of one node (relaxed atomics; any thread reads).
struct NodeStats {
  std::atomic<uint64_t> links_up{0};        ///< links made (either side)
  std::atomic<uint64_t> links_lost{0};      ///< links that ended (peer gone, ring corrupt)
  std::atomic<uint64_t> links_failed{0};    ///< attempts that did not come up (stale, refused)
  std::atomic<uint64_t> hellos_refused{0};  ///< malformed or unacceptable hellos
  std::atomic<uint64_t> corrupt{0};         ///< rings found corrupt
  std::atomic<uint64_t> tx_full{0};
  /// Written by the receive side only (one thread at a time). Sent records are counted per link
  /// (under its TX lock, without a locked add): Node::tx_records().
  std::atomic<uint64_t> rx_records{0}, rx_bytes{0};
  std::atomic<uint64_t> kicks_sent{0};
  std::atomic<uint64_t> cma_reads{0}, cma_bytes{0}, cma_failed{0};
};

class Node;
struct SegmentHeader;

/// One link: to a peer node (or to ourselves).
class Conn {
 public:
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn();

  uint32_t node() const noexcept { return node_; }
  uint32_t nonce() const noexcept { return nonce_; }
  const uint8_t* mac() const noexcept { return mac_; }
  uint32_t ipv4_be() const noexcept { return ipv4_be_; }
  /// Whether process_vm_readv of the peer's memory works (probed when the link was made).
  bool cma() const noexcept { return cma_; }
  /// Whether the peer can read our memory (its probe of us succeeded): a sender may then leave
  /// large data where it is (kRdmIndirect). A recent value; false until the peer told.
  bool peer_reads_us() const noexcept;
  LinkState state() const noexcept { return state_.load(std::memory_order_acquire); }
  /// The largest payload one record may carry.
  uint64_t max_payload() const noexcept { return max_payload_; }

  /// Sends one record: `h` (its len is set here) and the payload `a` then `b`. Any thread; no
  /// syscall (a kick is deferred to the caller's wait::WakeBatch, or made before returning).
  /// @return 0; -FI_EAGAIN when the ring is full or the link is not up yet (try again later);
  ///         -FI_EHOSTUNREACH when the peer is gone or the link failed; -FI_EMSGSIZE above
  ///         max_payload().
  int send(const RecordHeader& h, std::span<const uint8_t> a,
           std::span<const uint8_t> b = {}) noexcept;

  /// Copies `len` bytes at `addr` in the peer's memory to `dst` (process_vm_readv). Receive side;
  /// a syscall: not under a data-path lock other threads spin on. 0; -FI_EIO.
  int read_peer(void* dst, uint64_t addr, size_t len) const noexcept;

 private:
  friend class Node;
  enum class Role : uint8_t { kConnector, kAcceptor, kSelf };
  Conn(Node* owner, Role role) noexcept : owner_(owner), role_(role) {}
  static void kick_deferred(void* conn, uint64_t fd) noexcept;  // wait::WakeBatch::Fn

  Node* owner_;
  Role role_;
  uint32_t node_ = 0, nonce_ = 0;  // the peer's (set from its hello or ack; the target before)
  uint8_t mac_[6] = {};
  uint32_t ipv4_be_ = 0;
  pid_t pid_ = 0;
  bool cma_ = false;
  uint64_t max_payload_ = 0;
  std::atomic<LinkState> state_{LinkState::kConnecting};

  // Send side (under tx_lock_).
  alignas(64) SpinLock tx_lock_{"shm link TX"};
  RingWriter tx_;
  NodePage* peer_page_ = nullptr;
  int peer_wake_fd_ = -1;
  std::atomic<uint32_t> kicks_in_flight_{0};  // decided under tx_lock_, eventfd write pending
  uint32_t reader_slot_ = 0;                  // the peer's RingControl::reader_slot, once known
  void mark_ready() noexcept;                 // under tx_lock_: our bit in the peer's `ready`
  std::atomic<uint64_t> tx_records_{0}, tx_bytes_{0};  // under tx_lock_ (bump), read by anyone

  // Receive side (the node's RX owner).
  alignas(64) RingReader rx_;
  bool live_ = false;                // in the node's poll list (control thread)
  std::atomic<bool> reaped_{false};  // reported lost by reap() (RX owner)
  std::atomic<bool> broken_{false};  // the RX owner found the ring corrupt

  SegmentHeader* shdr_ = nullptr;  // in seg_ (set before the link is up)

  // Control thread.
  UniqueFd sock_, peer_wake_, seg_fd_;
  Mapping seg_, peer_page_map_;
  int64_t deadline_ns_ = 0;      // handshake timeout
  bool discarded_ = false;       // lost the simultaneous-connect race: not in the slot
  bool yielded_ = false;         // the peer's own link wins: wait for its hello
  int64_t retry_ns_ = 0;         // connect() found the peer's backlog full: try again then
  bool retired_ = false;         // memory released
  bool ctl_registered_ = false;  // its socket is in the control thread's epoll set
};

class Node {
 public:
  static constexpr uint32_t kMaxNodes = 4096;         ///< node ids 1..kMaxNodes-1 per host
  static constexpr size_t kMaxLinks = kMaxNodeLinks;  ///< links polled at once
  /// Past this many links the receive side reads NodePage::ready rather than every ring (off
  /// again at a quarter of it).
  static constexpr size_t kSummaryFrom = 8;

  /// Opens this process's node: binds a node id, makes the page and eventfd, starts the control
  /// thread. `mac`/`ipv4_be`: the port address frames from us carry (hellos tell peers); with
  /// `derive_address` (a process without a port) they come from the node id instead, unique on
  /// this host: MAC 06:64:70:00:hh:ll, IPv4 0.0.hh.ll ("this host on this network", RFC 1122:
  /// never a destination on a wire).
  /// @return -FI_EADDRINUSE when no node id is free; -FI_EMFILE / -FI_ENOMEM / -FI_EOTHER.
  static Result<std::unique_ptr<Node>> open(const NodeConfig& cfg, const uint8_t mac[6],
                                            uint32_t ipv4_be, bool derive_address = false);
  /// Stops the control thread and closes every link (peers see us gone). No sender or poller
  /// may be running.
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  uint64_t host() const noexcept { return host_; }
  uint32_t id() const noexcept { return id_; }
  uint32_t nonce() const noexcept { return nonce_; }
  const uint8_t* mac() const noexcept { return mac_; }
  uint32_t ipv4_be() const noexcept { return ipv4_be_; }
  const NodeConfig& config() const noexcept { return cfg_; }
  /// The eventfd peers write when we are armed (sleepers wait on it with the port's fds).
  int wake_fd() const noexcept { return wake_.get(); }

  // ---- data path, any thread ----

  /// The current link to node `node`, of any state, or null when none was ever tried. A caller
  /// compares its nonce() with the address's: another instance means the address is stale.
  Conn* find(uint32_t node) const noexcept {
    return node < kMaxNodes ? slots_[node].load(std::memory_order_acquire) : nullptr;
  }
  /// Asks the control thread to link to (node, nonce) (no-op when a link or a request for it is
  /// there). No syscall: the doorbell is written when the caller's wait::WakeBatch closes.
  void request(uint32_t node, uint32_t nonce) noexcept;

  // ---- control path ----

  /// Links to (node, nonce) and waits until the link is up or failed, at most the handshake
  /// timeout. Any thread but the control thread. @return the link's state then.
  LinkState connect(uint32_t node, uint32_t nonce) noexcept;

  // ---- sleeping (waitable.h A1-A2 for the same-host path) ----

  /// A1-A2: drains our eventfd, sets our armed flag (seq_cst RMW). The caller polls after it.
  void arm() noexcept;
  /// Makes our eventfd readable: sleepers look again (a link came up or went away).
  void rekick() noexcept;
  /// The time of the last kick a peer stored in our page, once (0: none since).
  int64_t take_kick_time() noexcept {
    return page_->kicked_ns.exchange(0, std::memory_order_relaxed);
  }

  // ---- receive side: one thread at a time (the engine's RX owner) ----

  /// Reads at most `budget` records from the links' rings, in turn, and calls
  /// on_record(Conn&, const RecordHeader&, const uint8_t* payload) for each (the payload is
  /// valid during the call only). Links that ended are drained, then reported to
  /// on_lost(Conn&), once each. @return records read.
  template <typename OnRecord, typename OnLost>
  size_t poll(size_t budget, OnRecord&& on_record, OnLost&& on_lost) noexcept;
  /// Whether any link's ring may hold a record (one relaxed load per link; per 64 links while
  /// reads_summary()).
  bool maybe_ready() const noexcept;
  /// Whether poll() reads NodePage::ready (past kSummaryFrom links) rather than every ring.
  bool reads_summary() const noexcept { return summary_; }

  const NodeStats& stats() const noexcept { return stats_; }
  NodeStats& stats() noexcept { return stats_; }
  /// Links up now (control thread's count).
  size_t links_up() const noexcept { return up_.load(std::memory_order_relaxed); }
  /// Records and their payload bytes sent on every link so far. Control path (takes a lock).
  uint64_t tx_records() const noexcept;
  uint64_t tx_bytes() const noexcept;

 private:
  friend class Conn;
  Node() = default;
  static void* run(void* self) noexcept;
  static void doorbell_deferred(void* node, uint64_t) noexcept;
  void loop() noexcept;
  void on_listen() noexcept;
  void on_socket(Conn* c) noexcept;
  void on_hello(Conn* c, const uint8_t* bytes, size_t n, UniqueFd* fds, int nfds) noexcept;
  void on_ack(Conn* c, const uint8_t* bytes, size_t n, UniqueFd* fds, int nfds) noexcept;
  void start_connect(uint32_t node, uint32_t nonce) noexcept;
  void try_connect(Conn* c) noexcept;
  bool make_self() noexcept;
  bool send_msg(int fd, const uint8_t* msg, const int* fds, int nfds) noexcept;
  void establish(Conn* c) noexcept;
  void fail(Conn* c, LinkState why) noexcept;
  void end_link(Conn* c) noexcept;
  void housekeep() noexcept;
  void set_state(Conn* c, LinkState s) noexcept;
  void add_live(Conn* c) noexcept;
  bool ctl_add(Conn* c) noexcept;
  void ctl_del(Conn* c) noexcept;
  void ring_doorbell() noexcept;
  // The receive side's part of a link that ended (poll()).
  template <typename OnRecord, typename OnLost>
  void reap(Conn* c, size_t slot, OnRecord& on_record, OnLost& on_lost) noexcept;
  // Reads the records of link `c` (poll-list `slot`) until it is empty or `n` reaches `budget`;
  // a corrupt ring ends the link. @return whether the budget stopped it (it may have more).
  template <typename OnRecord, typename OnLost>
  bool drain(Conn* c, size_t slot, size_t budget, size_t& n, OnRecord& on_record,
             OnLost& on_lost) noexcept;

  NodeConfig cfg_;
  uint64_t host_ = 0;
  uint32_t id_ = 0, nonce_ = 0;
  uint8_t mac_[6] = {};
  uint32_t ipv4_be_ = 0;
  alignas(16) uint8_t probe_[16] = {};

  UniqueFd listen_, wake_, doorbell_, epfd_, page_fd_;
  Mapping page_map_;
  NodePage* page_ = nullptr;

  // Data path reads: the link of each node id, and the links the receive side polls.
  std::unique_ptr<std::atomic<Conn*>[]> slots_;
  std::unique_ptr<std::atomic<uint32_t>[]> requested_;  // nonce asked for by request(), 0: none
  std::atomic<bool> requests_{false};
  std::unique_ptr<std::atomic<Conn*>[]> live_;  // control thread adds, RX owner removes
  std::atomic<size_t> live_used_{0};            // slots ever used
  std::atomic<uint64_t> ended_{0};              // links marked dead: the RX owner looks
  uint64_t ended_seen_ = 0;                     // RX owner
  size_t next_poll_ = 0;                        // RX owner: round robin start
  std::atomic<size_t> live_count_{0};           // links in live_ now
  bool summary_ = false;                        // RX owner: page_->summary is 1
  size_t next_word_ = 0;                        // RX owner: round robin start in `ready`
  std::atomic<size_t> up_{0};

  // Control thread.
  pthread_t tid_{};
  bool thread_started_ = false;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;  // all_, connect() waiters; never taken on the data path
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Conn>> all_;
  std::atomic<bool> housekeep_{false};  // the RX owner reaped links: free them
  int listen_tag_ = 0, doorbell_tag_ = 0;
  NodeStats stats_;
};

// ---- inline: the receive side --------------------------------------------------------------

inline bool Node::maybe_ready() const noexcept {
  const size_t used = live_used_.load(std::memory_order_acquire);
  if (summary_) {  // (RX owner: poll's decision, not the page, which peers can write)
    for (size_t w = 0; w < (used + 63) / 64; ++w)
      if (page_->ready[w].load(std::memory_order_relaxed)) return true;
    return false;
  }
  for (size_t i = 0; i < used; ++i)
    if (Conn* c = live_[i].load(std::memory_order_relaxed); c && c->rx_.maybe_ready()) return true;
  return false;
}

template <typename OnRecord, typename OnLost>
[[gnu::always_inline]] inline bool Node::drain(Conn* c, size_t slot, size_t budget, size_t& n,
                                               OnRecord& on_record, OnLost& on_lost) noexcept {
  RecordHeader h;
  const uint8_t* p;
  size_t got = 0;
  uint64_t bytes = 0;
  for (;;) {
    const auto st = n < budget ? c->rx_.next(&h, &p) : RingReader::Status::kEmpty;
    if (st != RingReader::Status::kRecord) {
      if (st == RingReader::Status::kCorrupt && !c->reaped_.load(std::memory_order_relaxed)) {
        stats_.corrupt.fetch_add(1, std::memory_order_relaxed);
        c->broken_.store(true, std::memory_order_release);
        // The control thread ends the link (the peer sees us go); we report it lost now.
        housekeep_.store(true, std::memory_order_release);
        reap(c, slot, on_record, on_lost);
        wait::WakeBatch::defer(&Node::doorbell_deferred, this);
      }
      break;
    }
    ++n, ++got;
    bytes += h.len;
    on_record(*c, h, p);
  }
  if (got) {
    c->rx_.release();
    bump(stats_.rx_records, got);  // the receive side is the only writer
    bump(stats_.rx_bytes, bytes);
  }
  return n >= budget;  // this link may have more
}

template <typename OnRecord, typename OnLost>
size_t Node::poll(size_t budget, OnRecord&& on_record, OnLost&& on_lost) noexcept {
  const size_t used = live_used_.load(std::memory_order_acquire);
  if (used == 0) return 0;
  // Links that ended since the last look: drained and reported first. A link enters the poll
  // list just before it goes up (establish): one still kConnecting there is coming up, not
  // ending. (Reaping it reported a live peer lost and stopped polling its ring for good: two of
  // 64 processes never heard each other, a race another link's end had to coincide with.)
  if (const uint64_t ended = ended_.load(std::memory_order_acquire); ended != ended_seen_) {
    ended_seen_ = ended;
    for (size_t i = 0; i < used; ++i) {
      Conn* c = live_[i].load(std::memory_order_acquire);
      if (!c) continue;
      const LinkState st = c->state();
      if (st != LinkState::kUp && st != LinkState::kConnecting) reap(c, i, on_record, on_lost);
    }
  }
  const size_t live = live_count_.load(std::memory_order_relaxed);
  const bool want = live > kSummaryFrom || (summary_ && live > kSummaryFrom / 4);
  if (want && (!summary_ || page_->summary.load(std::memory_order_relaxed) != 1)) {
    // Many links: from now on the bits say which rings to read (a look at every ring cost 170 ns
    // with 63 links, hot-parts BM_ShmNode_EmptyPoll). A sender that read summary 0 before this
    // store published its record before it (S1's fence): every ring's bit is set after it, so
    // the loop below reads them all once. The same repairs a page a broken peer rewrote (peers
    // map it writable): the senders it misled are read again.
    page_->summary.store(1, std::memory_order_seq_cst);
    summary_ = true;
    for (size_t w = 0; w < (used + 63) / 64; ++w)
      page_->ready[w].store(~uint64_t{0}, std::memory_order_seq_cst);
  } else if (summary_ && !want) {
    page_->summary.store(0, std::memory_order_relaxed);  // every ring is read again
    summary_ = false;
  }
  size_t n = 0;
  if (summary_) {
    const size_t words = (used + 63) / 64;
    const size_t start = next_word_ < words ? next_word_ : 0;
    for (size_t k = 0; k < words; ++k) {
      const size_t w = (start + k) % words;
      if (page_->ready[w].load(std::memory_order_relaxed) == 0) continue;
      // Taken before the rings are read: a record published after a ring was read sets its bit
      // again (a sender that still saw it set published before this exchange).
      uint64_t bits = page_->ready[w].exchange(0, std::memory_order_seq_cst);
      while (bits) {
        const size_t i = w * 64 + static_cast<size_t>(__builtin_ctzll(bits));
        Conn* c = i < used ? live_[i].load(std::memory_order_acquire) : nullptr;
        if (c && drain(c, i, budget, n, on_record, on_lost)) {
          // The budget is spent: what is left goes first next time.
          page_->ready[w].fetch_or(bits, std::memory_order_relaxed);
          next_word_ = w;
          return n;
        }
        bits &= bits - 1;
      }
    }
    next_word_ = (start + 1) % words;
    return n;
  }
  const size_t start = next_poll_ < used ? next_poll_ : 0;
  for (size_t k = 0; k < used && n < budget; ++k) {
    const size_t i = (start + k) % used;
    Conn* c = live_[i].load(std::memory_order_acquire);
    if (!c || !c->rx_.maybe_ready()) continue;
    if (drain(c, i, budget, n, on_record, on_lost)) {
      next_poll_ = i;  // this link may have more: it goes first next time
      return n;
    }
  }
  next_poll_ = (start + 1) % used;
  return n;
}

template <typename OnRecord, typename OnLost>
void Node::reap(Conn* c, size_t slot, OnRecord& on_record, OnLost& on_lost) noexcept {
  if (c->reaped_.load(std::memory_order_relaxed)) return;
  // What the peer sent before it went is delivered (a client that sends its last message and
  // exits at once must not lose it), then the link is reported lost.
  RecordHeader h;
  const uint8_t* p;
  size_t got = 0;
  while (c->rx_.next(&h, &p) == RingReader::Status::kRecord) {
    on_record(*c, h, p);
    ++got;
  }
  if (got) {
    c->rx_.release();
    bump(stats_.rx_records, got);
  }
  on_lost(*c);
  c->reaped_.store(true, std::memory_order_release);
  live_[slot].store(nullptr, std::memory_order_release);
  live_count_.fetch_sub(1, std::memory_order_relaxed);
  housekeep_.store(true, std::memory_order_release);
  wait::WakeBatch::defer(&Node::doorbell_deferred, this);
}

}  // namespace dpfab::shm
