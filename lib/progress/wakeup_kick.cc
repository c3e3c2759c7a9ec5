// SPDX-License-Identifier: BSD-3-Clause
//
// The memif kick's side channel on the wakeup thread: connecting (client, with back-off) and
// accepting (server), the hello, and watching our wake fd while the thread watches the port
// (memif_kick.h). Sleepers on the port's own fds use the same wake fd (port_wake.h).
#include <rdma/fi_errno.h>
#include <sys/epoll.h>

#include <algorithm>

#include "common/log.h"
#include "progress/wakeup_internal.h"

namespace dpfab::progress::detail {
namespace {

// A new connection (accepted, or connected by us): its fd joins the epoll set for the hello and
// for the peer's end. A closed connection leaves the set by itself.
void kick_connected(Thread& t, PortWatch& p) noexcept {
  if (!add_kick_fd(t, p, p.kick->conn_fd(), &p.conn_ev))
    DPFAB_WARN(FI_LOG_CORE, "memif kick: cannot watch the connection");
}

}  // namespace

// Adds one of the kick channel's fds to the epoll set (level-triggered, tagged with the port).
bool add_kick_fd(Thread& t, PortWatch& p, int fd, rte_epoll_event* ev) noexcept {
  *ev = {};
  ev->epdata.event = EPOLLIN;
  ev->epdata.data = &p;
  return fd >= 0 && rte_epoll_ctl(t.epfd.get(), EPOLL_CTL_ADD, fd, ev) == 0;
}

// K1 (memif_kick.h): our wake fd watched, the peer asked to kick us. The caller polls after it.
void arm_kick(Thread& t, PortWatch& p) noexcept {
  if (!p.wake_added) p.wake_added = add_kick_fd(t, p, p.kick->wake_fd(), &p.wake_ev);
  if (p.wake_added) p.kick->arm();
}

// Client: connects to the peer's kick listener when due (backing off while nobody listens).
void kick_try_connect(Thread& t, PortWatch& p, int64_t now) noexcept {
  if (!p.kick || p.kick->listen_fd() >= 0 || p.kick->connected() || now < p.next_connect_ns) return;
  if (p.kick->accept_or_connect()) {
    kick_connected(t, p);
    p.connect_backoff_ns = kKickRetryMinNs;
    p.next_connect_ns = kNever;
  } else {
    p.next_connect_ns = now + p.connect_backoff_ns;
    p.connect_backoff_ns = std::min(p.connect_backoff_ns * 2, kKickRetryMaxNs);
  }
}

// An event on one of the kick channel's fds. Returns false when `fd` is not one of them.
bool on_kick_fd(Thread& t, PortWatch& p, int fd, int64_t now) noexcept {
  KickChannel& k = *p.kick;
  const bool had_peer = p.kicked();
  if (fd == k.wake_fd()) {
    // The peer kicked us (and cleared our flag): read what came, arm again, look once more.
    k.drain();
    p.kicks.fetch_add(1, std::memory_order_relaxed);
    if (!p.active) return true;
    service(p, Cause::kRxInterrupt, now);
    k.arm();
    service(p, Cause::kRxInterrupt, now);
    return true;
  }
  if (fd == k.listen_fd()) {
    if (k.accept_or_connect()) kick_connected(t, p);  // replaces a connection we had
  } else if (fd == k.conn_fd()) {
    k.on_conn_readable();
    if (!k.connected() && k.listen_fd() < 0) {  // a client connects again (to the next server)
      p.connect_backoff_ns = kKickRetryMinNs;
      p.next_connect_ns = now + kKickRetryMinNs;
    }
  } else {
    return false;
  }
  if (had_peer == p.kicked()) return true;
  // Sleepers on the port's own fds rely on the kick from now on (or no longer: then consumers
  // that arm have this thread watch the port again). Telemetry reads it there too.
  p.engine->wake().set_kick_in_use(p.kicked());
  DPFAB_INFO(FI_LOG_CORE, "port %s: memif kick %s", p.engine->port()->info().name.c_str(),
             p.kicked() ? "in use: sleepers are woken by the peer" : "gone: polled while idle");
  if (p.kicked() && p.active) {
    arm_kick(t, p);  // kicks came into use while watching
    service(p, Cause::kIdlePoll, now);
  } else {
    // Kicks are gone. Sleepers that armed while they were in use sleep on the port's fds with
    // nobody watching: fire the port's timer fd (rekick, now that the kick is not in use) so that
    // they arm again, and are watched from then on.
    p.engine->wake().rekick();
    if (p.active) {  // idle polls again, from the shortest interval
      p.interval_ns.store(kIdlePollMinNs, std::memory_order_relaxed);
      p.next_poll_ns = now;
    }
  }
  return true;
}

}  // namespace dpfab::progress::detail
