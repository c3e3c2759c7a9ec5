// SPDX-License-Identifier: BSD-3-Clause
//
// PortShare (proto/msg_passive.h), the receiver that holds a UDP port's MSG endpoints, answers
// for its slots: its timer_due_ns() is the earliest of theirs and agrees with what its backlog
// pass returns, so the deadline a sleeper arms after a step that took frames
// (PortEngine::refresh_rx_deadline, which asks timer_due_ns and runs nothing) still counts the
// accepted endpoints' delayed acks and retransmissions. No EAL, no port: the slots are fakes.
#include <gtest/gtest.h>

#include <cstdint>

#include "proto/msg_passive.h"

using namespace dpfab;

namespace {

// A receiver whose deadline the test sets; its backlog pass runs nothing and counts its calls.
class FakeReceiver final : public proto::Receiver {
 public:
  explicit FakeReceiver(uint64_t due) : due_(due) {}
  bool deliver(const wire::Frame&, rte_mbuf*) noexcept override { return false; }
  uint64_t timer_due_ns() const noexcept override { return due_; }
  uint64_t backlog_pass(size_t* done) noexcept override {
    ++passes;
    *done += 0;
    return due_;
  }
  void set_due(uint64_t d) noexcept { due_ = d; }
  int passes = 0;

 private:
  uint64_t due_;
};

proto::msg::ListenTable::Key key(uint32_t conn) {
  proto::msg::ListenTable::Key k;
  k.ip_be = 0x0100007f;
  k.port_be = 0x1234;
  k.conn_id = conn;
  return k;
}

TEST(PortShare, TimerDueIsTheEarliestOfItsSlotsAndAgreesWithItsBacklogPass) {
  proto::MsgPortStats stats;
  FakeReceiver passive(UINT64_MAX), a(5'000'000), b(3'000'000);
  proto::PortShare share(nullptr, &stats, &passive);
  EXPECT_EQ(share.timer_due_ns(), UINT64_MAX) << "only the passive endpoint, with no deadline";
  ASSERT_NE(share.add(&a, key(1)), 0);
  ASSERT_NE(share.add(&b, key(2)), 0);
  EXPECT_EQ(share.timer_due_ns(), 3'000'000u);
  size_t done = 0;
  EXPECT_EQ(share.backlog_pass(&done), share.timer_due_ns());
  EXPECT_EQ(a.passes + b.passes + passive.passes, 3) << "the pass visits every slot once";
  // The deadline moves without a pass (a poll step's frames): timer_due_ns sees it at once and
  // runs nobody's work.
  a.set_due(1'000'000);
  passive.set_due(2'000'000);
  EXPECT_EQ(share.timer_due_ns(), 1'000'000u);
  EXPECT_EQ(a.passes + b.passes + passive.passes, 3);
  a.set_due(UINT64_MAX);
  EXPECT_EQ(share.timer_due_ns(), 2'000'000u);
  EXPECT_EQ(share.backlog_pass(&done), 2'000'000u);
}

}  // namespace
