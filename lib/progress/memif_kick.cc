// SPDX-License-Identifier: BSD-3-Clause
#include "progress/memif_kick.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "common/clock.h"
#include "common/fence.h"
#include "common/log.h"

namespace dpfab::progress {
namespace {

constexpr size_t kPageSize = 4096;
constexpr char kMagic[8] = {'d', 'p', 'f', 'a', 'b', 'k', '1', 0};
// The answer to a hello that was taken (no fds): the peer's sender holds our half from now on.
constexpr char kAckMagic[8] = {'d', 'p', 'f', 'a', 'b', 'k', 'a', 0};
constexpr unsigned kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

// A kick page (a zeroed memfd page): the flag (K1, S2) and the time of the last kick (set by the
// peer's sender, taken by the owner). A peer without the time leaves it 0.
struct KickPage {
  std::atomic<uint32_t> flag;
  std::atomic<int64_t> kicked_ns;
};
static_assert(sizeof(KickPage) <= kPageSize);

socklen_t abstract_addr(const std::string& name, sockaddr_un* sa) {
  *sa = {};
  sa->sun_family = AF_UNIX;
  size_t len = std::min(name.size(), sizeof(sa->sun_path) - 1);
  std::memcpy(sa->sun_path + 1, name.data(), len);  // sun_path[0] == 0: abstract namespace
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + len);
}

// Only a process of our own user (or root) may be our peer.
bool peer_allowed(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
  return cred.uid == getuid() || cred.uid == 0;
}

void* map_page(int fd) {
  void* p = mmap(nullptr, kPageSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

KickChannel::KickChannel(std::string link, bool server, std::function<bool(Peer)> publish) noexcept
    : name_("dpfab-kick:" + std::move(link)), server_(server), publish_(std::move(publish)) {}

KickChannel::~KickChannel() {
  drop_peer();
  if (my_page_) munmap(my_page_, kPageSize);
}

bool KickChannel::open() noexcept {
  page_fd_.reset(memfd_create("dpfab-kick", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!page_fd_.valid() || ftruncate(page_fd_.get(), kPageSize) != 0 ||
      fcntl(page_fd_.get(), F_ADD_SEALS, kSeals) != 0)
    return false;
  my_page_ = map_page(page_fd_.get());
  if (!my_page_) return false;
  auto* page = new (my_page_) KickPage{};
  my_flag_ = &page->flag;
  my_kicked_ns_ = &page->kicked_ns;
  wake_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_.valid()) return false;
  if (!server_) return true;
  listen_.reset(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  sockaddr_un sa;
  socklen_t len = abstract_addr(name_, &sa);
  if (!listen_.valid() || bind(listen_.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0 ||
      listen(listen_.get(), 4) != 0) {
    DPFAB_INFO(FI_LOG_CORE, "memif kick: cannot listen on @%s: %s", name_.c_str(),
               std::strerror(errno));
    listen_.reset();
    return false;
  }
  return true;
}

bool KickChannel::accept_or_connect() noexcept {
  UniqueFd fd;
  if (server_) {
    fd.reset(accept4(listen_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) return false;
  } else {
    if (conn_.valid() || !wake_.valid()) return false;
    fd.reset(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    sockaddr_un sa;
    socklen_t len = abstract_addr(name_, &sa);
    if (!fd.valid() || connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0)
      return false;  // no dpfab server (yet), or memif's peer is another program
  }
  if (!peer_allowed(fd.get())) {
    refused.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  // A new connection replaces the old one: the memif peer was replaced too.
  drop_connection();
  conn_ = std::move(fd);
  if (!send_hello()) {
    drop_connection();
    return false;
  }
  return true;
}

bool KickChannel::send_hello() noexcept {
  int fds[2] = {page_fd_.get(), wake_.get()};
  char cbuf[CMSG_SPACE(sizeof(fds))] = {};
  iovec iov{const_cast<char*>(kMagic), sizeof(kMagic)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof(cbuf);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(fds));
  std::memcpy(CMSG_DATA(c), fds, sizeof(fds));
  return sendmsg(conn_.get(), &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof(kMagic));
}

bool KickChannel::send_ack() noexcept {
  return send(conn_.get(), kAckMagic, sizeof(kAckMagic), MSG_NOSIGNAL) ==
         static_cast<ssize_t>(sizeof(kAckMagic));
}

void KickChannel::on_conn_readable() noexcept {
  char buf[sizeof(kMagic) + 1];
  char cbuf[CMSG_SPACE(4 * sizeof(int))] = {};
  iovec iov{buf, sizeof(buf)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof(cbuf);
  ssize_t n = recvmsg(conn_.get(), &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  // Whatever fds came are ours to close unless they are kept below.
  UniqueFd got[4];
  int nfds = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count && nfds < 4; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      got[nfds++].reset(fd);
    }
  }
  if (n <= 0) {  // the peer is gone
    drop_connection();
    disconnects.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (n == static_cast<ssize_t>(sizeof(kAckMagic)) && nfds == 0 &&
      std::memcmp(buf, kAckMagic, sizeof(kAckMagic)) == 0) {
    acked_ = true;  // the peer's sender kicks us from now on
    return;
  }
  struct stat st {};
  bool ok = n == static_cast<ssize_t>(sizeof(kMagic)) &&
            std::memcmp(buf, kMagic, sizeof(kMagic)) == 0 && nfds == 2 &&
            fstat(got[0].get(), &st) == 0 && st.st_size >= static_cast<off_t>(kPageSize) &&
            (fcntl(got[0].get(), F_GET_SEALS) & F_SEAL_SHRINK) != 0;
  void* page = ok ? map_page(got[0].get()) : nullptr;
  if (!page) {
    refused.fetch_add(1, std::memory_order_relaxed);
    DPFAB_INFO(FI_LOG_CORE, "memif kick: refused a malformed hello on @%s", name_.c_str());
    drop_connection();
    return;
  }
  drop_peer();
  peer_page_ = page;
  peer_wake_ = std::move(got[1]);
  peer_.flag = &static_cast<KickPage*>(page)->flag;
  peer_.kicked_ns = &static_cast<KickPage*>(page)->kicked_ns;
  peer_.wake_fd = peer_wake_.get();
  if (publish_ && !publish_(peer_)) {  // the sender never had it: ours to let go
    DPFAB_WARN(FI_LOG_CORE, "memif kick: could not hand the peer's kick to the sender on @%s",
               name_.c_str());
    peer_ = {};
    peer_wake_.reset();
    munmap(peer_page_, kPageSize);
    peer_page_ = nullptr;
    return;
  }
  hellos.fetch_add(1, std::memory_order_relaxed);
  // After publish: the peer relies on our kicks only once our sender holds its half.
  if (!send_ack())
    DPFAB_INFO(FI_LOG_CORE, "memif kick: could not acknowledge on @%s", name_.c_str());
}

void KickChannel::drop_connection() noexcept {
  conn_.reset();
  acked_ = false;
  drop_peer();
}

void KickChannel::drop_peer() noexcept {
  if (peer_.flag && publish_ && !publish_({})) {  // the sender lets go first
    // It may still kick the page and the eventfd: leave both to the process (leaked, once).
    DPFAB_WARN(FI_LOG_CORE,
               "memif kick: the sender did not let go of the peer's kick on @%s; its page and "
               "eventfd are left open",
               name_.c_str());
    (void)peer_wake_.release();
    peer_page_ = nullptr;
  }
  peer_ = {};
  peer_wake_.reset();
  if (peer_page_) munmap(peer_page_, kPageSize);
  peer_page_ = nullptr;
}

bool KickChannel::drain() noexcept {
  eventfd_t v;  // not a semaphore eventfd: one read takes the whole count
  return eventfd_read(wake_.get(), &v) == 0;
}

bool KickChannel::take_kick(const Peer& p) noexcept {
  full_fence();  // S1: our ring store before the flag's load (the peer's K1/K2 pair)
  if (p.flag->load(std::memory_order_relaxed) &&
      p.flag->exchange(0, std::memory_order_acq_rel) != 0) {
    if (p.kicked_ns) p.kicked_ns->store(clock::mono_ns(), std::memory_order_relaxed);
    return true;
  }
  return false;
}

void KickChannel::kick_fd(int wake_fd) noexcept { eventfd_write(wake_fd, 1); }

}  // namespace dpfab::progress
