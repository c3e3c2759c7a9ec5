// SPDX-License-Identifier: BSD-3-Clause
#include "shm/node.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <pthread.h>
#include <rdma/fi_errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "common/clock.h"
#include "common/fence.h"
#include "common/log.h"
#include "shm/hello.h"

namespace dpfab::shm {
// The first page of a pair segment (the rest: ring 0, the connector's, then ring 1). Each end
// writes there whether it can read the other's memory (process_vm_readv, probed at the hello):
// its sender asks for a cross-memory copy only from a peer that can make it.
struct SegmentHeader {
  char magic[8];
  uint32_t version;
  uint32_t ring_bytes;
  std::atomic<uint32_t> connector_reads_acceptor;
  std::atomic<uint32_t> acceptor_reads_connector;
};

namespace {

constexpr size_t kPageBytes = 4096;
constexpr char kSegMagic[8] = {'d', 'p', 'f', 'a', 'b', 'S', 'G', '1'};
constexpr unsigned kPageSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
constexpr int kMaxFds = 4;

uint64_t fnv1a(const void* p, size_t n, uint64_t h = 1469598103934665603ull) noexcept {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

uint32_t random32() noexcept {
  uint32_t r = 0;
  while (r == 0) {
    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
      r = static_cast<uint32_t>(clock::mono_ns() ^ (static_cast<uint64_t>(getpid()) << 16));
  }
  return r;
}

socklen_t abstract_addr(const std::string& name, sockaddr_un* sa) noexcept {
  *sa = {};
  sa->sun_family = AF_UNIX;
  const size_t len = std::min(name.size(), sizeof(sa->sun_path) - 1);
  std::memcpy(sa->sun_path + 1, name.data(), len);  // sun_path[0] == 0: abstract namespace
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + len);
}

std::string node_name(const std::string& prefix, uint32_t id) {
  return prefix + ":" + std::to_string(id);
}

// The peer runs as our user: nothing else may map our segments or read our memory.
bool peer_creds(int fd, pid_t* pid) noexcept {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
  *pid = cred.pid;
  return cred.uid == geteuid();
}

// A kick writes the peer's eventfd: anything else (a pipe could block the sender) is refused.
bool is_eventfd(int fd) noexcept {
  char path[64], target[64] = {};
  std::snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(path, target, sizeof(target) - 1);
  return n > 0 && std::strcmp(target, "anon_inode:[eventfd]") == 0;
}

// Receives one message and its fds (closed by `fds` unless kept). -1: nothing yet; 0: the peer
// closed; else the message length.
ssize_t recv_msg(int fd, uint8_t* buf, size_t len, UniqueFd* fds, int* nfds) noexcept {
  char cbuf[CMSG_SPACE(kMaxFds * sizeof(int))] = {};
  iovec iov{buf, len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof(cbuf);
  const ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return -1;
  *nfds = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int f;
      std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (*nfds < kMaxFds)
        fds[(*nfds)++].reset(f);
      else
        close(f);
    }
  }
  if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) return static_cast<ssize_t>(len) + 1;
  return n < 0 ? 0 : n;
}

bool probe_ok(pid_t pid, uint64_t addr, const uint8_t* want) noexcept {
  uint8_t got[16];
  iovec local{got, sizeof(got)};
  iovec remote{reinterpret_cast<void*>(addr), sizeof(got)};
  return pid > 0 && process_vm_readv(pid, &local, 1, &remote, 1, 0) == sizeof(got) &&
         std::memcmp(got, want, sizeof(got)) == 0;
}

}  // namespace

const char* link_state_name(LinkState s) noexcept {
  switch (s) {
    case LinkState::kConnecting:
      return "connecting";
    case LinkState::kUp:
      return "up";
    case LinkState::kDead:
      return "dead";
    case LinkState::kStale:
      return "stale";
    case LinkState::kRefused:
      return "refused";
  }
  return "?";
}

uint64_t host_id() noexcept {
  char boot[64] = {};
  if (int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC); fd >= 0) {
    (void)!read(fd, boot, sizeof(boot) - 1);
    close(fd);
  }
  char ns[64] = {};
  (void)!readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
  uint64_t h = fnv1a(boot, std::strlen(boot));
  h = fnv1a("|", 1, h);
  h = fnv1a(ns, std::strlen(ns), h);
  return h ? h : 1;
}

// ---- Conn: the data path ------------------------------------------------------------------------

Conn::~Conn() = default;

bool Conn::peer_reads_us() const noexcept {
  if (role_ == Role::kSelf) return cma_;
  if (!shdr_) return false;
  return (role_ == Role::kConnector ? shdr_->acceptor_reads_connector
                                    : shdr_->connector_reads_acceptor)
             .load(std::memory_order_relaxed) != 0;
}

int Conn::send(const RecordHeader& h, std::span<const uint8_t> a,
               std::span<const uint8_t> b) noexcept {
  const size_t n = a.size() + b.size();
  tx_lock_.lock();
  const LinkState st = state_.load(std::memory_order_acquire);
  if (st != LinkState::kUp) {
    tx_lock_.unlock();
    return st == LinkState::kConnecting ? -FI_EAGAIN : -FI_EHOSTUNREACH;
  }
  if (n > max_payload_) {
    tx_lock_.unlock();
    return -FI_EMSGSIZE;
  }
  RecordHeader* r = tx_.reserve(n);
  if (!r) {
    tx_lock_.unlock();
    owner_->stats_.tx_full.fetch_add(1, std::memory_order_relaxed);
    return -FI_EAGAIN;
  }
  *r = h;
  r->len = static_cast<uint32_t>(n);
  auto* p = reinterpret_cast<uint8_t*>(r) + kRecordHeaderBytes;
  if (!a.empty()) std::memcpy(p, a.data(), a.size());
  if (!b.empty()) std::memcpy(p + a.size(), b.data(), b.size());
  tx_.commit();
  // S1-S2 (node.h): the head stored above before the peer's flag is read.
  full_fence();
  if (peer_page_->summary.load(std::memory_order_relaxed)) mark_ready();
  int fd = -1;
  if (peer_page_->armed.load(std::memory_order_relaxed) &&
      peer_page_->armed.exchange(0, std::memory_order_acq_rel) != 0) {
    peer_page_->kicked_ns.store(clock::mono_ns(), std::memory_order_relaxed);
    kicks_in_flight_.fetch_add(1, std::memory_order_relaxed);  // ordered by the unlock
    fd = peer_wake_fd_;
  }
  bump(tx_records_);  // under the TX lock: one writer
  bump(tx_bytes_, n);
  tx_lock_.unlock();
  if (fd >= 0) wait::WakeBatch::defer(&Conn::kick_deferred, this, static_cast<uint64_t>(fd));
  return 0;
}

void Conn::mark_ready() noexcept {
  // After S1: the record is published before the slot is read (Node::add_live) and before the
  // bit is (Node::poll takes the bits before it reads the rings).
  if (reader_slot_ == 0) {
    const uint32_t s = tx_.reader_slot();
    if (s == 0 || s > kMaxNodeLinks) return;  // not yet (the peer sets the bit itself then)
    reader_slot_ = s;
  }
  const size_t i = reader_slot_ - 1;
  const uint64_t bit = uint64_t{1} << (i % 64);
  std::atomic<uint64_t>& w = peer_page_->ready[i / 64];
  if (!(w.load(std::memory_order_relaxed) & bit)) w.fetch_or(bit, std::memory_order_seq_cst);
}

void Conn::kick_deferred(void* conn, uint64_t fd) noexcept {
  auto* c = static_cast<Conn*>(conn);
  eventfd_write(static_cast<int>(fd), 1);
  c->owner_->stats_.kicks_sent.fetch_add(1, std::memory_order_relaxed);
  // Release: the write is done before the control thread sees the count drop and closes the fd.
  c->kicks_in_flight_.fetch_sub(1, std::memory_order_release);
}

int Conn::read_peer(void* dst, uint64_t addr, size_t len) const noexcept {
  NodeStats& st = owner_->stats_;
  if (role_ == Role::kSelf) {
    std::memcpy(dst, reinterpret_cast<const void*>(addr), len);
  } else {
    size_t done = 0;
    while (done < len) {
      iovec local{static_cast<uint8_t*>(dst) + done, len - done};
      iovec remote{reinterpret_cast<void*>(addr + done), len - done};
      const ssize_t n = process_vm_readv(pid_, &local, 1, &remote, 1, 0);
      if (n <= 0) {
        st.cma_failed.fetch_add(1, std::memory_order_relaxed);
        return -FI_EIO;
      }
      done += static_cast<size_t>(n);
    }
  }
  st.cma_reads.fetch_add(1, std::memory_order_relaxed);
  st.cma_bytes.fetch_add(len, std::memory_order_relaxed);
  return 0;
}

// ---- Node: set-up -------------------------------------------------------------------------------

Result<std::unique_ptr<Node>> Node::open(const NodeConfig& cfg, const uint8_t mac[6],
                                         uint32_t ipv4_be, bool derive_address) {
  if (!valid_ring_size(cfg.ring_bytes))
    return make_error(-FI_EINVAL, "shm: ring size must be a power of two, 4 KiB to 64 MiB");
  std::unique_ptr<Node> n(new (std::nothrow) Node());
  if (!n) return make_error(-FI_ENOMEM, "shm: out of memory");
  n->cfg_ = cfg;
  n->host_ = host_id();
  n->nonce_ = random32();
  std::memcpy(n->mac_, mac, 6);
  n->ipv4_be_ = ipv4_be;
  if (getrandom(n->probe_, sizeof(n->probe_), GRND_NONBLOCK) != sizeof(n->probe_))
    for (size_t i = 0; i < sizeof(n->probe_); ++i) n->probe_[i] = static_cast<uint8_t>(random32());
  n->slots_.reset(new (std::nothrow) std::atomic<Conn*>[kMaxNodes]);
  n->requested_.reset(new (std::nothrow) std::atomic<uint32_t>[kMaxNodes]);
  n->live_.reset(new (std::nothrow) std::atomic<Conn*>[kMaxLinks]);
  if (!n->slots_ || !n->requested_ || !n->live_)
    return make_error(-FI_ENOMEM, "shm: out of memory");
  for (uint32_t i = 0; i < kMaxNodes; ++i) {
    n->slots_[i].store(nullptr, std::memory_order_relaxed);
    n->requested_[i].store(0, std::memory_order_relaxed);
  }
  for (size_t i = 0; i < kMaxLinks; ++i) n->live_[i].store(nullptr, std::memory_order_relaxed);

  // Our page: a sealed memfd page peers map to arm-check and kick us.
  n->page_fd_.reset(memfd_create("dpfab-shm-node", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!n->page_fd_.valid() || fchmod(n->page_fd_.get(), 0600) != 0 ||
      ftruncate(n->page_fd_.get(), kPageBytes) != 0 ||
      fcntl(n->page_fd_.get(), F_ADD_SEALS, kPageSeals) != 0)
    return make_error(-FI_EMFILE, std::string("shm: node page: ") + std::strerror(errno));
  void* page = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, n->page_fd_.get(), 0);
  if (page == MAP_FAILED)
    return make_error(-FI_ENOMEM, std::string("shm: node page: ") + std::strerror(errno));
  n->page_map_ = Mapping(page, kPageBytes);
  n->page_ = new (page) NodePage{};
  n->page_->magic = kNodePageMagic;
  n->wake_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  n->doorbell_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  n->epfd_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!n->wake_.valid() || !n->doorbell_.valid() || !n->epfd_.valid())
    return make_error(-FI_EMFILE, "shm: cannot make the node's eventfds/epoll fd");

  // The node id: the lowest free name (the kernel releases it with the socket).
  for (uint32_t id = 1; id < kMaxNodes && !n->listen_.valid(); ++id) {
    UniqueFd s(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s.valid()) return make_error(-FI_EMFILE, "shm: cannot make the node's socket");
    sockaddr_un sa;
    const socklen_t len = abstract_addr(node_name(cfg.prefix, id), &sa);
    if (bind(s.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0) {
      if (errno == EADDRINUSE) continue;
      return make_error(-FI_EOTHER, std::string("shm: bind: ") + std::strerror(errno));
    }
    if (listen(s.get(), 64) != 0)
      return make_error(-FI_EOTHER, std::string("shm: listen: ") + std::strerror(errno));
    n->listen_ = std::move(s);
    n->id_ = id;
  }
  if (!n->listen_.valid()) return make_error(-FI_EADDRINUSE, "shm: no free node id on this host");
  if (derive_address) {
    const uint8_t derived[6] = {
        0x06, 0x64, 0x70, 0, static_cast<uint8_t>(n->id_ >> 8), static_cast<uint8_t>(n->id_)};
    std::memcpy(n->mac_, derived, 6);
    n->ipv4_be_ = htonl(n->id_);
  }
  if (!cfg.dir.empty()) {
    if (size_t swept = sweep(cfg.dir))
      DPFAB_INFO(FI_LOG_CORE, "shm: removed %zu segment file(s) left in %s by killed processes",
                 swept, cfg.dir.c_str());
  }

  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &n->listen_tag_;
  if (epoll_ctl(n->epfd_.get(), EPOLL_CTL_ADD, n->listen_.get(), &ev) != 0)
    return make_error(-FI_EOTHER, "shm: epoll_ctl");
  ev.data.ptr = &n->doorbell_tag_;
  if (epoll_ctl(n->epfd_.get(), EPOLL_CTL_ADD, n->doorbell_.get(), &ev) != 0)
    return make_error(-FI_EOTHER, "shm: epoll_ctl");

  // The control thread: no signal of the application's lands on it.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const int r = pthread_create(&n->tid_, nullptr, &Node::run, n.get());
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (r != 0) return make_error(-FI_EOTHER, std::string("shm: thread: ") + std::strerror(r));
  n->thread_started_ = true;
  pthread_setname_np(n->tid_, "dpfab-shm");
  // A real-time application (chrt -f, SCHED_FIFO/RR) that busy-polls never yields its CPU to a
  // thread of its own priority, which this one inherited: the handshakes a spinning sender waits
  // for would never run (two fi_pingpong under chrt -f 1 hung). The control thread sleeps in
  // epoll_wait and runs for microseconds per handshake: it gets one priority above its opener's.
  int policy = 0;
  sched_param sp{};
  if (pthread_getschedparam(pthread_self(), &policy, &sp) == 0 &&
      (policy == SCHED_FIFO || policy == SCHED_RR)) {
    sp.sched_priority = std::min(sp.sched_priority + 1, sched_get_priority_max(policy));
    if (int e = pthread_setschedparam(n->tid_, policy, &sp); e != 0)
      DPFAB_WARN(FI_LOG_CORE,
                 "shm: the control thread keeps the application's real-time priority (%s): a "
                 "thread busy-polling at that priority delays same-host handshakes",
                 std::strerror(e));
  }
  DPFAB_INFO(FI_LOG_CORE, "shm: node %u (nonce %08x, host %016llx) listens on @%s", n->id_,
             n->nonce_, static_cast<unsigned long long>(n->host_),
             node_name(cfg.prefix, n->id_).c_str());
  return n;
}

Node::~Node() {
  if (thread_started_) {
    stop_.store(true, std::memory_order_release);
    eventfd_write(doorbell_.get(), 1);
    pthread_join(tid_, nullptr);
  }
  // No sender or poller runs any more: every link's memory goes (peers see the sockets close).
  std::lock_guard lock(mu_);
  for (auto& c : all_) {
    c->sock_.reset();
    c->seg_.reset();
    c->peer_page_map_.reset();
    c->peer_wake_.reset();
  }
}

uint64_t Node::tx_records() const noexcept {
  std::lock_guard lock(mu_);
  uint64_t n = 0;
  for (const auto& c : all_) n += c->tx_records_.load(std::memory_order_relaxed);
  return n;
}

uint64_t Node::tx_bytes() const noexcept {
  std::lock_guard lock(mu_);
  uint64_t n = 0;
  for (const auto& c : all_) n += c->tx_bytes_.load(std::memory_order_relaxed);
  return n;
}

void* Node::run(void* self) noexcept {
  static_cast<Node*>(self)->loop();
  return nullptr;
}

void Node::ring_doorbell() noexcept { eventfd_write(doorbell_.get(), 1); }

void Node::doorbell_deferred(void* node, uint64_t) noexcept {
  static_cast<Node*>(node)->ring_doorbell();
}

void Node::rekick() noexcept { eventfd_write(wake_.get(), 1); }

void Node::arm() noexcept {
  eventfd_t v;
  (void)eventfd_read(wake_.get(), &v);  // A1 (non-blocking)
  // A2: pairs with the sender's S1 fence (store buffering, node.h).
  page_->armed.exchange(1, std::memory_order_seq_cst);
}

void Node::request(uint32_t node, uint32_t nonce) noexcept {
  if (node == 0 || node >= kMaxNodes || nonce == 0) return;
  if (Conn* c = find(node); c && c->nonce_ == nonce) return;  // tried (or trying) already
  if (requested_[node].exchange(nonce, std::memory_order_relaxed) == nonce) return;
  requests_.store(true, std::memory_order_release);
  wait::WakeBatch::defer(&Node::doorbell_deferred, this);
}

LinkState Node::connect(uint32_t node, uint32_t nonce) noexcept {
  if (node == 0 || node >= kMaxNodes || nonce == 0) return LinkState::kStale;
  if (node == id_) {
    if (nonce != nonce_) return LinkState::kStale;
    std::lock_guard lock(mu_);
    if (!find(node) && !make_self()) return LinkState::kRefused;
    return find(node)->state();
  }
  request(node, nonce);
  std::unique_lock lock(mu_);
  const int64_t until = clock::mono_ns() + cfg_.handshake_timeout_ns + 1'000'000'000;
  for (;;) {
    Conn* c = find(node);
    if (c && c->nonce_ == nonce && c->state() != LinkState::kConnecting) return c->state();
    const int64_t now = clock::mono_ns();
    if (now >= until) return c && c->nonce_ == nonce ? c->state() : LinkState::kConnecting;
    cv_.wait_for(lock, std::chrono::nanoseconds(std::min<int64_t>(until - now, 100'000'000)));
  }
}

// ---- the control thread -------------------------------------------------------------------------

void Node::loop() noexcept {
  epoll_event evs[16];
  while (!stop_.load(std::memory_order_acquire)) {
    int64_t now = clock::mono_ns();
    int64_t next = INT64_MAX;
    {
      std::lock_guard lock(mu_);
      for (auto& c : all_)
        if (c->state() == LinkState::kConnecting && !c->discarded_ && !c->retired_) {
          next = std::min(next, c->deadline_ns_);
          if (c->retry_ns_) next = std::min(next, c->retry_ns_);
        }
    }
    const int timeout_ms =
        next == INT64_MAX
            ? 1000
            : static_cast<int>(std::clamp<int64_t>((next - now) / 1'000'000 + 1, 1, 1000));
    const int n = epoll_wait(epfd_.get(), evs, 16, timeout_ms);
    for (int i = 0; i < n; ++i) {
      void* tag = evs[i].data.ptr;
      if (tag == &listen_tag_) {
        on_listen();
      } else if (tag == &doorbell_tag_) {
        eventfd_t v;
        (void)eventfd_read(doorbell_.get(), &v);
      } else {
        std::lock_guard lock(mu_);
        on_socket(static_cast<Conn*>(tag));
      }
    }
    if (requests_.exchange(false, std::memory_order_acq_rel)) {
      for (uint32_t id = 1; id < kMaxNodes; ++id)
        if (const uint32_t nonce = requested_[id].exchange(0, std::memory_order_relaxed)) {
          std::lock_guard lock(mu_);
          start_connect(id, nonce);
        }
    }
    now = clock::mono_ns();
    {
      std::lock_guard lock(mu_);
      for (size_t i = 0; i < all_.size(); ++i) {
        Conn* c = all_[i].get();
        if (c->state() != LinkState::kConnecting || c->discarded_ || c->retired_) continue;
        if (now >= c->deadline_ns_) {
          DPFAB_WARN(FI_LOG_CORE, "shm: node %u: handshake with node %u timed out", id_, c->node_);
          fail(c, c->role_ == Conn::Role::kAcceptor ? LinkState::kStale : LinkState::kDead);
        } else if (c->retry_ns_ && now >= c->retry_ns_) {
          c->retry_ns_ = 0;
          try_connect(c);
        }
      }
    }
    housekeep();
  }
}

bool Node::ctl_add(Conn* c) noexcept {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.ptr = c;
  c->ctl_registered_ = epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, c->sock_.get(), &ev) == 0;
  return c->ctl_registered_;
}

void Node::ctl_del(Conn* c) noexcept {
  if (c->ctl_registered_) epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, c->sock_.get(), nullptr);
  c->ctl_registered_ = false;
  c->sock_.reset();
}

void Node::set_state(Conn* c, LinkState s) noexcept {
  if (s != LinkState::kUp && c->state() == LinkState::kUp) {
    // Under the TX lock: a sender that took the lock before sees kUp and finishes its record;
    // one after it sees the new state. No record is half-written into a link that ended.
    c->tx_lock_.lock();
    c->state_.store(s, std::memory_order_release);
    c->tx_lock_.unlock();
  } else {
    c->state_.store(s, std::memory_order_release);
  }
  cv_.notify_all();
}

void Node::add_live(Conn* c) noexcept {
  for (size_t i = 0; i < kMaxLinks; ++i) {
    Conn* expected = nullptr;
    if (live_[i].compare_exchange_strong(expected, c, std::memory_order_release,
                                         std::memory_order_relaxed)) {
      size_t used = live_used_.load(std::memory_order_relaxed);
      while (used < i + 1 &&
             !live_used_.compare_exchange_weak(used, i + 1, std::memory_order_release)) {
      }
      c->live_ = true;
      // The producer learns which bit of our `ready` is this ring's. It may have published
      // records before it knew (the peer's end of a link comes up first): the bit is set here,
      // after the slot (a sender that read 0 published before this store: the poll after the
      // bit reads its record).
      c->rx_.set_reader_slot(static_cast<uint32_t>(i + 1));
      page_->ready[i / 64].fetch_or(uint64_t{1} << (i % 64), std::memory_order_seq_cst);
      live_count_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  DPFAB_WARN(FI_LOG_CORE, "shm: node %u: more than %zu links", id_, kMaxLinks);
}

bool Node::make_self() noexcept {
  // One ring, written and read by this process: an endpoint sending to another of the node's.
  auto seg = create_segment(cfg_.dir, segment_bytes(cfg_.ring_bytes), "dpfab-shm-self");
  if (!seg) {
    DPFAB_WARN(FI_LOG_CORE, "%s", seg.error().message.c_str());
    return false;
  }
  std::unique_ptr<Conn> c(new (std::nothrow) Conn(this, Conn::Role::kSelf));
  if (!c) return false;
  c->seg_ = std::move(seg.value().second);
  auto* base = static_cast<uint8_t*>(c->seg_.get());
  c->tx_ = RingWriter(base + kPageBytes, cfg_.ring_bytes);
  c->rx_ = RingReader(base + kPageBytes, cfg_.ring_bytes);
  c->node_ = id_;
  c->nonce_ = nonce_;
  std::memcpy(c->mac_, mac_, 6);
  c->ipv4_be_ = ipv4_be_;
  c->pid_ = getpid();
  c->cma_ = cfg_.cma;
  c->max_payload_ = c->tx_.max_payload();
  c->peer_page_ = page_;
  c->peer_wake_fd_ = wake_.get();
  c->state_.store(LinkState::kUp, std::memory_order_release);
  Conn* raw = c.get();
  try {
    all_.push_back(std::move(c));
  } catch (...) {
    return false;
  }
  add_live(raw);
  slots_[id_].store(raw, std::memory_order_release);
  up_.fetch_add(1, std::memory_order_relaxed);
  stats_.links_up.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool Node::send_msg(int fd, const uint8_t* msg, const int* fds, int nfds) noexcept {
  char cbuf[CMSG_SPACE(kMaxFds * sizeof(int))] = {};
  iovec iov{const_cast<uint8_t*>(msg), kHelloBytes};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  if (nfds > 0) {
    m.msg_control = cbuf;
    m.msg_controllen = CMSG_SPACE(static_cast<size_t>(nfds) * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(static_cast<size_t>(nfds) * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds, static_cast<size_t>(nfds) * sizeof(int));
  }
  return sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(kHelloBytes);
}

void Node::start_connect(uint32_t node, uint32_t nonce) noexcept {
  if (node == id_) {
    if (nonce == nonce_ && !find(node)) make_self();
    return;
  }
  if (Conn* old = find(node); old && old->nonce_ == nonce) return;  // tried, or trying
  std::unique_ptr<Conn> owned(new (std::nothrow) Conn(this, Conn::Role::kConnector));
  if (!owned) return;
  Conn* c = owned.get();
  try {
    all_.push_back(std::move(owned));
  } catch (...) {
    return;
  }
  c->node_ = node;
  c->nonce_ = nonce;
  c->deadline_ns_ = clock::mono_ns() + cfg_.handshake_timeout_ns;
  slots_[node].store(c, std::memory_order_release);  // senders wait (kConnecting) from now on
  try_connect(c);
}

// Connects c's socket and sends the hello (again after the peer's backlog was full).
void Node::try_connect(Conn* c) noexcept {
  c->sock_.reset(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  sockaddr_un sa;
  const socklen_t len = abstract_addr(node_name(cfg_.prefix, c->node_), &sa);
  if (!c->sock_.valid()) return fail(c, LinkState::kRefused);
  if (::connect(c->sock_.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    if (errno == EAGAIN) {  // its backlog is full: again in a millisecond
      c->sock_.reset();
      c->retry_ns_ = clock::mono_ns() + 1'000'000;
      return;
    }
    // No such node: the process that had the address is gone.
    return fail(c, LinkState::kStale);
  }
  if (!peer_creds(c->sock_.get(), &c->pid_)) {
    DPFAB_INFO(FI_LOG_CORE, "shm: node %u runs as another user: its peers use the port", c->node_);
    return fail(c, LinkState::kRefused);
  }
  if (!c->seg_) {
    auto seg = create_segment(cfg_.dir, segment_bytes(cfg_.ring_bytes), "dpfab-shm-link");
    if (!seg) {
      DPFAB_WARN(FI_LOG_CORE, "%s", seg.error().message.c_str());
      return fail(c, LinkState::kRefused);
    }
    c->seg_fd_ = std::move(seg.value().first);
    c->seg_ = std::move(seg.value().second);
    auto* base = static_cast<uint8_t*>(c->seg_.get());
    auto* sh = reinterpret_cast<SegmentHeader*>(base);
    std::memcpy(sh->magic, kSegMagic, sizeof(kSegMagic));
    sh->version = kHelloVersion;
    sh->ring_bytes = cfg_.ring_bytes;
    c->tx_ = RingWriter(base + kPageBytes, cfg_.ring_bytes);
    c->rx_ = RingReader(base + 2 * kPageBytes + cfg_.ring_bytes, cfg_.ring_bytes);
    c->max_payload_ = c->tx_.max_payload();
  }
  Hello h;
  h.kind = HelloKind::kHello;
  h.host = host_;
  h.node = id_;
  h.nonce = nonce_;
  h.to_node = c->node_;
  h.to_nonce = c->nonce_;
  h.ring_bytes = cfg_.ring_bytes;
  h.ipv4_be = ipv4_be_;
  std::memcpy(h.mac, mac_, 6);
  h.probe_addr = reinterpret_cast<uint64_t>(probe_);
  std::memcpy(h.probe, probe_, sizeof(probe_));
  h.seg_bytes = segment_bytes(cfg_.ring_bytes);
  uint8_t msg[kHelloBytes];
  encode_hello(h, msg);
  const int fds[3] = {c->seg_fd_.get(), page_fd_.get(), wake_.get()};
  if (!send_msg(c->sock_.get(), msg, fds, 3) || !ctl_add(c)) return fail(c, LinkState::kDead);
  c->seg_fd_.reset();  // it went with the hello; our mapping keeps the memory
}

void Node::on_listen() noexcept {
  for (;;) {
    UniqueFd fd(accept4(listen_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) return;
    pid_t pid = 0;
    if (!peer_creds(fd.get(), &pid)) {
      stats_.hellos_refused.fetch_add(1, std::memory_order_relaxed);
      continue;  // another user: closed
    }
    std::lock_guard lock(mu_);
    std::unique_ptr<Conn> owned(new (std::nothrow) Conn(this, Conn::Role::kAcceptor));
    if (!owned) continue;
    Conn* c = owned.get();
    try {
      all_.push_back(std::move(owned));
    } catch (...) {
      continue;
    }
    c->sock_ = std::move(fd);
    c->pid_ = pid;
    c->deadline_ns_ = clock::mono_ns() + cfg_.handshake_timeout_ns;
    if (!ctl_add(c)) fail(c, LinkState::kStale);
  }
}

void Node::on_socket(Conn* c) noexcept {
  if (!c->sock_.valid()) return;
  uint8_t buf[kHelloBytes + 1];
  UniqueFd fds[kMaxFds];
  int nfds = 0;
  const ssize_t n = recv_msg(c->sock_.get(), buf, sizeof(buf), fds, &nfds);
  if (n < 0) return;
  const LinkState st = c->state();
  if (n == 0) {  // the peer closed its end: gone
    if (st == LinkState::kUp) return end_link(c);
    if (st == LinkState::kConnecting) return fail(c, LinkState::kDead);
    return ctl_del(c);
  }
  if (st != LinkState::kConnecting) return;  // nothing is expected once up: ignored
  if (c->role_ == Conn::Role::kAcceptor) return on_hello(c, buf, static_cast<size_t>(n), fds, nfds);
  on_ack(c, buf, static_cast<size_t>(n), fds, nfds);
}

void Node::on_hello(Conn* c, const uint8_t* bytes, size_t n, UniqueFd* fds, int nfds) noexcept {
  Hello h;
  const HelloVerdict v = decode_hello({bytes, n}, &h);
  auto refuse = [&](const char* why) {
    stats_.hellos_refused.fetch_add(1, std::memory_order_relaxed);
    DPFAB_INFO(FI_LOG_CORE, "shm: node %u refused a hello: %s", id_, why);
    fail(c, LinkState::kStale);
  };
  if (v != HelloVerdict::kOk) return refuse(hello_verdict_name(v));
  if (h.kind != HelloKind::kHello || h.host != host_ || h.to_node != id_ || nfds != 3)
    return refuse("not for this node");
  Hello ack;
  ack.kind = HelloKind::kAck;
  ack.host = host_;
  ack.node = id_;
  ack.nonce = nonce_;
  ack.to_node = h.node;
  ack.to_nonce = h.nonce;
  ack.ipv4_be = ipv4_be_;
  std::memcpy(ack.mac, mac_, 6);
  ack.probe_addr = reinterpret_cast<uint64_t>(probe_);
  std::memcpy(ack.probe, probe_, sizeof(probe_));
  uint8_t msg[kHelloBytes];
  auto answer = [&](HelloStatus s) {
    ack.status = s;
    encode_hello(ack, msg);
    (void)send_msg(c->sock_.get(), msg, nullptr, 0);
    fail(c, LinkState::kStale);
  };
  if (h.to_nonce != nonce_) return answer(HelloStatus::kStale);  // an earlier instance's name
  if (h.node >= kMaxNodes || h.node == id_) return refuse("bad node id");
  // Simultaneous connects: the link of the lower node id wins (node.h).
  Conn* old = find(h.node);
  const bool old_alive = old && old != c && old->nonce_ == h.nonce &&
                         (old->state() == LinkState::kUp || old->state() == LinkState::kConnecting);
  if (old_alive) {
    if (h.node > id_ || old->state() == LinkState::kUp) return answer(HelloStatus::kYield);
    old->discarded_ = true;  // ours loses: the peer refuses it; this one takes the slot
  }
  auto seg = map_received(fds[0].get(), h.seg_bytes);
  if (!seg) return refuse(seg.error().message.c_str());
  auto page = map_received(fds[1].get(), kPageBytes);
  if (!page) return refuse(page.error().message.c_str());
  const auto* sh = static_cast<const SegmentHeader*>(seg.value().get());
  const auto* np = static_cast<const NodePage*>(page.value().get());
  if (std::memcmp(sh->magic, kSegMagic, sizeof(kSegMagic)) != 0 || sh->version != kHelloVersion ||
      sh->ring_bytes != h.ring_bytes || np->magic != kNodePageMagic)
    return refuse("segment or page header");
  if (!is_eventfd(fds[2].get())) return refuse("the wake fd is not an eventfd");
  c->seg_ = std::move(seg.value());
  c->peer_page_map_ = std::move(page.value());
  c->peer_page_ = static_cast<NodePage*>(c->peer_page_map_.get());
  c->peer_wake_ = std::move(fds[2]);
  c->peer_wake_fd_ = c->peer_wake_.get();
  c->node_ = h.node;
  c->nonce_ = h.nonce;
  std::memcpy(c->mac_, h.mac, 6);
  c->ipv4_be_ = h.ipv4_be;
  auto* base = static_cast<uint8_t*>(c->seg_.get());
  // The connector writes ring 0 and reads ring 1.
  c->rx_ = RingReader(base + kPageBytes, h.ring_bytes);
  c->tx_ = RingWriter(base + 2 * kPageBytes + h.ring_bytes, h.ring_bytes);
  c->max_payload_ = c->tx_.max_payload();
  c->cma_ = cfg_.cma && probe_ok(c->pid_, h.probe_addr, h.probe);
  c->shdr_ = reinterpret_cast<SegmentHeader*>(base);
  c->shdr_->acceptor_reads_connector.store(c->cma_, std::memory_order_relaxed);
  ack.status = HelloStatus::kOk;
  encode_hello(ack, msg);
  const int out[2] = {page_fd_.get(), wake_.get()};
  // Up (and polled) before the connector hears of it: it may send as soon as the ack arrives.
  establish(c);  // takes the slot first: senders never see the losing attempt fail
  if (old_alive) fail(old, LinkState::kStale);
  if (!send_msg(c->sock_.get(), msg, out, 2)) end_link(c);
}

void Node::on_ack(Conn* c, const uint8_t* bytes, size_t n, UniqueFd* fds, int nfds) noexcept {
  Hello h;
  const HelloVerdict v = decode_hello({bytes, n}, &h);
  if (v != HelloVerdict::kOk || h.kind != HelloKind::kAck || h.host != host_ ||
      h.node != c->node_ || h.to_node != id_ || h.to_nonce != nonce_) {
    stats_.hellos_refused.fetch_add(1, std::memory_order_relaxed);
    return fail(c, LinkState::kDead);
  }
  if (h.status == HelloStatus::kStale || h.nonce != c->nonce_) return fail(c, LinkState::kStale);
  if (h.status == HelloStatus::kYield) {
    // The peer's own link to us wins: its hello comes (or came) on our listening socket and
    // takes the slot. Until then (or the deadline) senders wait.
    c->yielded_ = true;
    if (find(c->node_) != c) {  // it came already and took the slot
      c->discarded_ = true;
      return fail(c, LinkState::kStale);
    }
    return ctl_del(c);
  }
  if (h.status != HelloStatus::kOk || nfds != 2) return fail(c, LinkState::kRefused);
  auto page = map_received(fds[0].get(), kPageBytes);
  if (!page || static_cast<const NodePage*>(page.value().get())->magic != kNodePageMagic ||
      !is_eventfd(fds[1].get())) {
    stats_.hellos_refused.fetch_add(1, std::memory_order_relaxed);
    return fail(c, LinkState::kDead);
  }
  c->peer_page_map_ = std::move(page.value());
  c->peer_page_ = static_cast<NodePage*>(c->peer_page_map_.get());
  c->peer_wake_ = std::move(fds[1]);
  c->peer_wake_fd_ = c->peer_wake_.get();
  std::memcpy(c->mac_, h.mac, 6);
  c->ipv4_be_ = h.ipv4_be;
  c->cma_ = cfg_.cma && probe_ok(c->pid_, h.probe_addr, h.probe);
  c->shdr_ = static_cast<SegmentHeader*>(c->seg_.get());
  c->shdr_->connector_reads_acceptor.store(c->cma_, std::memory_order_relaxed);
  establish(c);
}

void Node::establish(Conn* c) noexcept {
  add_live(c);
  if (!c->live_) return fail(c, LinkState::kRefused);
  slots_[c->node_].store(c, std::memory_order_release);
  up_.fetch_add(1, std::memory_order_relaxed);
  stats_.links_up.fetch_add(1, std::memory_order_relaxed);
  set_state(c, LinkState::kUp);
  DPFAB_INFO(FI_LOG_CORE, "shm: node %u linked to node %u (pid %d, %s, cross-memory %s)", id_,
             c->node_, static_cast<int>(c->pid_),
             c->role_ == Conn::Role::kConnector ? "connected" : "accepted", c->cma_ ? "on" : "off");
  rekick();  // sleepers poll again, this ring included
}

void Node::fail(Conn* c, LinkState why) noexcept {
  ctl_del(c);
  if (c->state() == LinkState::kUp) return end_link(c);
  if (c->state() == LinkState::kConnecting) {
    if (!c->discarded_ && find(c->node_) == c)
      stats_.links_failed.fetch_add(1, std::memory_order_relaxed);
    set_state(c, why);
  }
}

void Node::end_link(Conn* c) noexcept {
  ctl_del(c);
  if (c->state() != LinkState::kUp) return;
  set_state(c, LinkState::kDead);
  up_.fetch_sub(1, std::memory_order_relaxed);
  stats_.links_lost.fetch_add(1, std::memory_order_relaxed);
  // Release: the state before the count the receive side reads (it then reaps the link).
  ended_.fetch_add(1, std::memory_order_release);
  DPFAB_INFO(FI_LOG_CORE, "shm: node %u: link to node %u ended", id_, c->node_);
  rekick();  // sleepers poll: what the peer sent is delivered, then its operations fail
}

void Node::housekeep() noexcept {
  const bool asked = housekeep_.exchange(false, std::memory_order_acq_rel);
  std::lock_guard lock(mu_);
  for (auto& owned : all_) {
    Conn* c = owned.get();
    if (asked && c->broken_.load(std::memory_order_acquire) && c->state() == LinkState::kUp)
      end_link(c);  // its ring is corrupt: the peer sees us go
    if (c->retired_ || c->role_ == Conn::Role::kSelf) continue;
    const LinkState st = c->state();
    if (st == LinkState::kUp || st == LinkState::kConnecting) continue;
    if (c->live_ && !c->reaped_.load(std::memory_order_acquire)) continue;
    if (c->kicks_in_flight_.load(std::memory_order_acquire) != 0) continue;
    // Nobody touches it any more: senders find it ended under its TX lock, the receive side
    // reported it lost and dropped it from its list, no kick is in flight.
    ctl_del(c);
    c->seg_.reset();
    c->peer_page_map_.reset();
    c->peer_page_ = nullptr;
    c->peer_wake_.reset();
    c->peer_wake_fd_ = -1;
    c->retired_ = true;
  }
}

}  // namespace dpfab::shm
