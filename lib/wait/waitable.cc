// SPDX-License-Identifier: BSD-3-Clause
#include "wait/waitable.h"

#include <rte_pause.h>
#include <sys/epoll.h>

#include "wait/aggregator.h"

namespace dpfab::wait {

Waitable::~Waitable() {
  leave_all_sets();
  disarm();  // an armed period the consumer never ended (trywait, then close) ends here
}

void Waitable::leave_all_sets() noexcept {
  for (auto& slot : subs_)
    if (Subscription* sub = slot.load(std::memory_order_acquire)) sub->agg->remove(this);
}

void Waitable::notify_subscribers() noexcept {
  // Announces this producer to unsubscribe() before the slots are read; pairs with the seq_cst
  // slot clear + in_notify_ load there.
  in_notify_.fetch_add(1, std::memory_order_seq_cst);
  for (auto& slot : subs_) {
    Subscription* sub = slot.load(std::memory_order_acquire);
    if (sub) sub->agg->member_notified(sub);
  }
  in_notify_.fetch_sub(1, std::memory_order_release);
}

int Waitable::subscribe(Subscription* sub) noexcept {
  for (auto& slot : subs_) {
    Subscription* s = slot.load(std::memory_order_relaxed);
    if (s && s->agg == sub->agg) return -FI_EALREADY;
  }
  for (auto& slot : subs_) {
    Subscription* expected = nullptr;
    // Release: a producer that sees the pointer sees the subscription's fields.
    if (slot.compare_exchange_strong(expected, sub, std::memory_order_release,
                                     std::memory_order_relaxed)) {
      nsubs_.fetch_add(1, std::memory_order_release);
      return FI_SUCCESS;
    }
  }
  return -FI_ENOSPC;
}

void Waitable::unsubscribe(Subscription* sub) noexcept {
  for (auto& slot : subs_) {
    Subscription* expected = sub;
    if (slot.compare_exchange_strong(expected, nullptr, std::memory_order_seq_cst)) {
      nsubs_.fetch_sub(1, std::memory_order_release);
      break;
    }
  }
  // A producer that loaded the slot before we cleared it has in_notify_ > 0 until it is done
  // with `sub` (seq_cst on both sides: either it sees nullptr, or we see its increment).
  while (in_notify_.load(std::memory_order_seq_cst) != 0) rte_pause();
}

int Waitable::export_wait_fd() noexcept {
  if (!signal_ || signal_->fd() < 0) return -FI_ENODATA;
  ProgressSource* src = progress_source();
  const std::span<const int> fds = src ? src->sleep_fds() : std::span<const int>();
  const int efd = signal_->export_fd();
  if (fds.empty()) return efd;
  std::lock_guard lock(export_mutex_);
  if (epoll_fd_.valid()) return epoll_fd_.get();
  UniqueFd ep(epoll_create1(EPOLL_CLOEXEC));
  if (!ep.valid()) return -FI_EMFILE;
  epoll_event ev{};
  ev.events = EPOLLIN;
  if (epoll_ctl(ep.get(), EPOLL_CTL_ADD, efd, &ev) != 0) return -FI_EMFILE;
  for (int fd : fds)
    if (epoll_ctl(ep.get(), EPOLL_CTL_ADD, fd, &ev) != 0 && errno != EEXIST) return -FI_EMFILE;
  epoll_fd_ = std::move(ep);
  return epoll_fd_.get();
}

size_t Waitable::export_poll_fds(int* out, size_t max) noexcept {
  if (!signal_ || signal_->fd() < 0) return 0;
  ProgressSource* src = progress_source();
  const std::span<const int> fds = src ? src->sleep_fds() : std::span<const int>();
  size_t n = 0;
  auto put = [&](int fd) {
    if (n < max) out[n] = fd;
    ++n;
  };
  put(signal_->export_fd());
  for (int fd : fds) put(fd);
  return n;
}

}  // namespace dpfab::wait
