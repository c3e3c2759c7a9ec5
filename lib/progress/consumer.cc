// SPDX-License-Identifier: BSD-3-Clause
#include "progress/consumer.h"

#include "common/clock.h"
#include "progress/lcores.h"
#include "progress/wakeup.h"

namespace dpfab::progress {

void PortConsumer::attach(PortEngine* engine, const SpinConfig& spin) noexcept {
  engine_ = engine;
  port_id_ = engine ? engine->port()->info().port_id : 0;
  spin_.configure(spin);
}

size_t PortConsumer::progress() noexcept {
  if (!engine_) return 0;
  if (lcores_running()) {
    consumer_polled(port_id_);  // keeps the lcore awake, unparks it if parked
    return 0;
  }
  return engine_->progress();
}

int64_t PortConsumer::spin_ns() noexcept {
  if (!engine_ || lcores_running()) return 0;
  return spin_.budget();
}

void PortConsumer::waited(int64_t waited_ns, bool ready, bool slept) noexcept {
  if (!engine_ || lcores_running()) return;
  spin_.observe(waited_ns, ready, slept);
  engine_->wake().stats().spin_budget_ns.store(spin_.budget(), std::memory_order_relaxed);
}

void PortConsumer::woke(int64_t slept_at_ns) noexcept {
  if (!engine_ || lcores_running()) return;
  // A kick sent while we slept: from it to now is what this wake cost (IPI, scheduler, return
  // from poll). A kick from before the sleep woke nobody and says nothing.
  const int64_t kicked = engine_->wake().take_kick_time();
  if (kicked <= slept_at_ns) return;
  spin_.observe_wake(clock::mono_ns() - kicked);
  engine_->wake().stats().wake_cost_ns.store(spin_.wake_cost_ns(), std::memory_order_relaxed);
}

int64_t PortConsumer::poll_interval_ns() const noexcept {
  // Nobody moves an uncovered port for a sleeper without the wakeup thread: poll it every 100 us.
  if (!engine_ || lcores_running() || wakeup_running() || engine_->wake().covered()) return -1;
  return 100'000;
}

std::span<const int> PortConsumer::sleep_fds() const noexcept {
  if (!engine_ || lcores_running()) return {};
  return engine_->wake().fds();
}

bool PortConsumer::prepare_sleep() noexcept {
  // A port its fds do not cover is watched by the wakeup thread instead (arm_kind); the
  // same-host path, where there is one, is armed either way (its eventfd is in the fds).
  if (!engine_ || lcores_running()) return true;
  if (!engine_->wake().covered() && !engine_->local_node()) return true;
  return engine_->prepare_sleep();
}

void PortConsumer::arm_deadline() noexcept {
  if (engine_ && !lcores_running() && engine_->wake().covered()) engine_->arm_deadline();
}

uint8_t PortConsumer::arm_kind(bool on_fds) const noexcept {
  if (!engine_ || lcores_running()) return 0;
  return on_fds && engine_->wake().covered() ? 0 : kWatch;
}

void PortConsumer::armed(uint8_t kind) noexcept {
  if (kind == kWatch) consumer_armed(port_id_);
}

void PortConsumer::disarmed(uint8_t kind) noexcept {
  if (kind == kWatch) consumer_disarmed(port_id_);
}

void PortConsumer::interrupted() noexcept {
  if (engine_) on_signal(port_id_);
}

}  // namespace dpfab::progress
