// SPDX-License-Identifier: BSD-3-Clause
//
// PortConsumer: how an application thread's waits progress, arm and sleep on one port (the
// wait::ProgressSource of a libfabric domain; doc/design.md, "Sleeping on the port").
//
//   - Manual progress (no worker lcore owns the port): progress() is one poll step of the port's
//     engine, run inline by fi_cq_read, sread, fi_poll, fi_trywait, ... A sleeper sleeps on the
//     port's wake fds (PortWake) as well as on its object's signal: prepare_sleep() arms them and
//     polls once more, and the woken thread runs the poll step itself: one OS wakeup per message.
//     A consumer that cannot see those fds (an application waiting on the FI_WAIT_MUTEX_COND
//     pair), or a port they do not cover (af_packet, af_xdp, ring, null, a memif peer that is not
//     dpfab), has the wakeup thread watch the port while it is armed (wakeup.h).
//   - Automatic progress (a worker lcore owns the port): progress() only tells the lcore that a
//     consumer is active (it keeps spinning, or comes back from parking); sleepers sleep on their
//     signal, which the lcore raises.
//   - The spin budget before a sleep learns from the waits it sees (spin.h).
#pragma once

#include <span>

#include "progress/engine.h"
#include "progress/spin.h"
#include "wait/waitable.h"

namespace dpfab::progress {

class PortConsumer final : public wait::ProgressSource {
 public:
  /// Attaches the port's engine (null: a port the application owns: nothing to progress).
  void attach(PortEngine* engine, const SpinConfig& spin) noexcept;
  PortEngine* engine() const noexcept { return engine_; }

  size_t progress() noexcept override;
  int64_t spin_ns() noexcept override;
  void waited(int64_t waited_ns, bool ready, bool slept) noexcept override;
  void woke(int64_t slept_at_ns) noexcept override;
  int64_t poll_interval_ns() const noexcept override;
  std::span<const int> sleep_fds() const noexcept override;
  bool prepare_sleep() noexcept override;
  void arm_deadline() noexcept override;
  uint8_t arm_kind(bool on_fds) const noexcept override;
  void armed(uint8_t kind) noexcept override;
  void disarmed(uint8_t kind) noexcept override;
  void interrupted() noexcept override;

  const SpinBudget& spin() const noexcept { return spin_; }

 private:
  static constexpr uint8_t kWatch = 1;  // arm_kind: the wakeup thread watches the port
  PortEngine* engine_ = nullptr;
  uint16_t port_id_ = 0;
  SpinBudget spin_;
};

}  // namespace dpfab::progress
