// SPDX-License-Identifier: BSD-3-Clause
#include "progress/parker.h"

#include <errno.h>
#include <poll.h>
#include <rdma/fi_errno.h>
#include <time.h>

#include "common/clock.h"

namespace dpfab::progress {
namespace {

int64_t now_ns() noexcept { return clock::mono_ns(); }

}  // namespace

const char* cause_name(Cause c) noexcept {
  switch (c) {
    case Cause::kRxInterrupt:
      return "rx_interrupt";
    case Cause::kIdlePoll:
      return "idle_poll";
    case Cause::kDoorbell:
      return "doorbell";
    case Cause::kTimer:
      return "timer";
    case Cause::kSignal:
      return "signal";
    case Cause::kStop:
      return "stop";
  }
  return "?";
}

Status Parker::init(unsigned lcore) noexcept {
  lcore_ = lcore;
  efd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!efd_.valid()) return make_error(-FI_EMFILE, "lcore parking: eventfd failed");
  return Ok{};
}

void Parker::drain() noexcept {
  uint64_t v;
  eventfd_read(efd_.get(), &v);  // non-blocking: EAGAIN when not raised
}

int64_t Parker::sleep(std::span<const int> port_fds) noexcept {
  int64_t t0 = now_ns();
  constexpr size_t kMax = 16;
  pollfd p[kMax];
  p[0] = pollfd{efd_.get(), POLLIN, 0};
  size_t n = 1;
  for (int fd : port_fds)
    if (n < kMax) p[n++] = pollfd{fd, POLLIN, 0};
  while (parked_.load(std::memory_order_acquire)) {
    int r = poll(p, n, -1);
    if (r > 0) {
      bool by_port = false;
      for (size_t i = 1; i < n; ++i) by_port |= p[i].revents != 0;
      // Woken by a port's own fd, not by an unparker: leave the parked state ourselves (an
      // unparker that races us writes the eventfd, drained by the next L1).
      if (by_port && back_out())
        stats.unparks[static_cast<size_t>(Cause::kRxInterrupt)].fetch_add(
            1, std::memory_order_relaxed);
      break;
    }
    if (r < 0 && errno != EINTR) break;
  }
  drain();
  int64_t slept = now_ns() - t0;
  stats.parked_ns.fetch_add(static_cast<uint64_t>(slept), std::memory_order_relaxed);
  return slept;
}

}  // namespace dpfab::progress
