// SPDX-License-Identifier: BSD-3-Clause
//
// The memif kick: an rx interrupt between the two dpfab processes of one memif link.
//
// DPDK 22.11's memif PMD has no rx interrupt (it masks MEMIF_RING_FLAG_MASK_INT on its own rings
// and has no rx_queue_intr_enable), so a sleeping consumer on memif was woken only by the wakeup
// thread's idle polls (20 us to 1 ms apart). When both ends are dpfab, they open a side channel
// of their own next to the memif socket and use it as the interrupt memif does not give:
//
//   - Each end makes a "kick page" (a sealed memfd holding one flag) and an eventfd, and sends both
//     to the other end over an abstract unix socket named after the memif link (the memif server
//     listens, the client connects), with SCM_RIGHTS.
//   - Receiver (the wakeup thread, when it starts watching the port): K1 flag = 1 (seq_cst RMW);
//     K2 one more poll step; K3 sleep on its eventfd. After a kick: drain the eventfd, poll, arm
//     again (K1, K2). When it stops watching: flag = 0.
//   - Sender (PortEngine::transmit, under the TX lock, after the frames went into the memif ring):
//     S1 full fence; S2 if the peer's flag is 1 and exchange(0) returns 1, write the peer's
//     eventfd -- after the TX lock is released (the decision is made under it, the write is
//     deferred: wait/wake_batch.h). Only the first send after the receiver armed pays the
//     syscall.
//   The sender also stores the time of the kick in the peer's page (next to the flag, CLOCK_
//   MONOTONIC ns), so that the woken end learns what its wakes cost (spin.h).
//   Store buffering: either K2 sees the frame (the ring's head was stored before S1), or S2 sees
//   the flag (stored at K1, before K2's read of the head). No frame waits for an idle poll.
//   - The argument needs the peer's sender to hold our half when we rely on it. Having the peer's
//     hello says only that we can kick the peer, not that the peer can kick us: the peer may not
//     have read our hello yet (its wakeup thread preempted). So an end that took the peer's hello
//     (and handed it to its sender) answers with an ack; only an end that got the ack lets its
//     sleepers rely on the kick (peer_kicks_us()); until then the port is polled while idle.
//     Trusting the hello alone stranded a frame for as long as the sleeper's wait (seen under
//     ASan on a loaded machine: the first reply of a link, sent before the peer read our hello).
//
// Bad input from the socket (any local process can connect to an abstract name) is refused and
// loses nothing: wrong credentials (another user), a hello without its magic or fds, a memfd that
// is not sealed against shrinking (a page that could shrink under us would be a SIGBUS) or is too
// small. The wakeup thread keeps a slow safety poll while kicks are in use.
//
// Threads: the wakeup thread owns the channel (connect, accept, hello, arm). The sender reads the
// peer's half under the engine's TX lock and counts a kick it decided on as in flight until its
// eventfd write is done; the channel hands the half to `publish` (which sets it under that lock)
// when it arrives, and withdraws it (publish({}), which also waits for the kicks in flight) before
// it unmaps the page or closes the fd, so a sender never touches a peer's half after it was
// released.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "common/fd.h"

namespace dpfab::progress {

class KickChannel {
 public:
  /// The peer's half, for the sender: its flag, the time of the last kick and its eventfd (all
  /// valid while published).
  struct Peer {
    std::atomic<uint32_t>* flag = nullptr;
    std::atomic<int64_t>* kicked_ns = nullptr;
    int wake_fd = -1;
  };

  /// `link` names the memif link identically at both ends (socket path and interface id);
  /// `server`: this end listens (memif's server); `publish` hands the peer's half to the sender
  /// (and {} to withdraw it) and says whether the sender took it. A withdrawal the sender did not
  /// take (its TX lock held for too long: a signal handler that calls exit() on the thread that
  /// holds it) leaves the peer's page mapped and its eventfd open, for a sender that may still
  /// kick them. Nothing is opened until open().
  KickChannel(std::string link, bool server, std::function<bool(Peer)> publish) noexcept;
  ~KickChannel();
  KickChannel(const KickChannel&) = delete;
  KickChannel& operator=(const KickChannel&) = delete;

  /// Makes our kick page and eventfd and, for the server, listens. False when any of it failed
  /// (the port is then polled while idle, as before).
  bool open() noexcept;

  /// Server: the listening socket (for the owner's epoll). Client: -1.
  int listen_fd() const noexcept { return listen_.get(); }
  /// The connection (accepted or connected), -1 without one: readable for the peer's hello,
  /// and when the peer is gone.
  int conn_fd() const noexcept { return conn_.get(); }
  /// Server: accepts a waiting connection, replacing the current one. Client: connects when not
  /// connected. Either way sends our hello. True when a new connection was made.
  bool accept_or_connect() noexcept;
  /// The connection is readable: takes the peer's hello (publishes it and acknowledges it) or its
  /// ack of ours, or notices that the peer is gone (then withdraws its half and drops the
  /// connection).
  void on_conn_readable() noexcept;

  /// The peer's half once its hello arrived; {} before, and after the connection ended.
  Peer peer() const noexcept { return peer_; }
  /// Whether the peer acknowledged our hello: its sender holds our half and kicks us when we arm.
  /// False before, and after the connection ended. Owner thread.
  bool peer_kicks_us() const noexcept { return acked_; }
  bool connected() const noexcept { return conn_.valid(); }

  /// Our eventfd: readable after the peer kicked us.
  int wake_fd() const noexcept { return wake_.get(); }
  /// K1: asks the peer to kick us on its next send (a seq_cst RMW; the caller polls after it).
  void arm() noexcept { my_flag_->exchange(1, std::memory_order_seq_cst); }
  /// Whether our flag is still set (the peer has not kicked since the last arm). Relaxed.
  bool flag_set() const noexcept { return my_flag_->load(std::memory_order_relaxed) != 0; }
  /// Asks the peer not to kick us (sends stay free of syscalls while we are awake).
  void disarm() noexcept { my_flag_->store(0, std::memory_order_relaxed); }
  /// Reads our eventfd empty (one read). Returns whether it was readable.
  bool drain() noexcept;
  /// The CLOCK_MONOTONIC time (ns) at which the peer last kicked us, once (0 after, and when it
  /// has not kicked since: a peer without kick times leaves it 0). What a woken sleeper takes to
  /// learn what its wake cost (spin.h).
  int64_t take_kick_time() noexcept {
    return my_kicked_ns_->exchange(0, std::memory_order_relaxed);
  }

  /// S1, S2: whether the peer is armed and must be kicked (its flag taken, the time of the kick
  /// stored in its page). Called under the sender's TX lock, after the frames were put in the
  /// ring; the caller then writes p.wake_fd (kick_fd) once it has released the lock.
  static bool take_kick(const Peer& p) noexcept;
  /// The kick's syscall: writes the peer's eventfd (after take_kick said so).
  static void kick_fd(int wake_fd) noexcept;
  /// take_kick, then kick_fd, for a caller that holds no lock.
  static void kick(const Peer& p) noexcept {
    if (take_kick(p)) kick_fd(p.wake_fd);
  }

  /// Counters (owner thread writes, anyone reads).
  std::atomic<uint64_t> hellos{0}, refused{0}, disconnects{0};

 private:
  bool send_hello() noexcept;
  bool send_ack() noexcept;
  void drop_connection() noexcept;
  void drop_peer() noexcept;

  std::string name_;  // abstract socket name, without the leading NUL
  bool server_;
  std::function<bool(Peer)> publish_;
  UniqueFd listen_, conn_, wake_, page_fd_;
  std::atomic<uint32_t>* my_flag_ = nullptr;
  std::atomic<int64_t>* my_kicked_ns_ = nullptr;
  void* my_page_ = nullptr;
  void* peer_page_ = nullptr;
  UniqueFd peer_wake_;
  Peer peer_;
  bool acked_ = false;  // the peer took our hello (its ack came on this connection)
};

}  // namespace dpfab::progress
