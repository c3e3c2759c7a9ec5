// SPDX-License-Identifier: BSD-3-Clause
//
// Fault injection through a real port: EAL with one net_ring port (a loopback: what is sent comes
// back), its engine with set_faults, and two DGRAM endpoints. Each datagram carries its sequence
// number; the receiver reposts its buffers as they complete. Loss drops about the rate and the
// counter says which; duplication delivers each datagram twice; corruption delivers none and the
// decoder rejects every one; reordering changes the order and loses nothing; a seed replays the
// same faults.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "common/config.h"
#include "progress/engine.h"
#include "proto/dgram.h"
#include "ring_engine.h"

using namespace dpfab;
using test::ring_engine;

namespace {

config::FaultConfig rates(double loss, double reorder, double dup, double corrupt,
                          uint64_t seed = 1) {
  config::FaultConfig f;
  f.loss = loss;
  f.reorder = reorder;
  f.dup = dup;
  f.corrupt = corrupt;
  f.seed = seed;
  return f;
}

struct Counts {
  uint64_t dropped, reordered, duplicated, corrupted, rejected;
  static Counts now() {
    const auto& f = ring_engine()->stats().faults;
    return {f.dropped.load(), f.reordered.load(), f.duplicated.load(), f.corrupted.load(),
            ring_engine()->decode_stats().rejected()};
  }
  Counts since(const Counts& b) const {
    return {dropped - b.dropped, reordered - b.reordered, duplicated - b.duplicated,
            corrupted - b.corrupted, rejected - b.rejected};
  }
};

// A sender and a receiver on the port; the receiver keeps kBuffers receives posted.
class Faults : public testing::Test {
 protected:
  static constexpr size_t kBuffers = 128;

  void SetUp() override {
    event::CqConfig c;
    c.format = FI_CQ_FORMAT_DATA;
    c.size = 1024;
    cq_a_ = std::move(event::Cq::create(c, nullptr).value());
    cq_b_ = std::move(event::Cq::create(c, nullptr).value());
    a_ = std::move(proto::DgramEndpoint::create(ring_engine(), {}).value());
    b_ = std::move(proto::DgramEndpoint::create(ring_engine(), {}).value());
    port_a_ = ring_engine()->bind_ephemeral(a_.get());
    port_b_ = ring_engine()->bind_ephemeral(b_.get());
    a_->set_address(port_a_, 0);
    b_->set_address(port_b_, 0);
    a_->bind_cq(cq_a_.get(), true, true, false);
    b_->bind_cq(cq_b_.get(), true, true, false);
    for (size_t i = 0; i < kBuffers; ++i) post(i);
  }

  void TearDown() override {
    ASSERT_EQ(ring_engine()->set_faults({}), 0);
    ring_engine()->unbind(port_a_);
    ring_engine()->unbind(port_b_);
    ring_engine()->with_rx_owner([&] {
      a_->clear_backlog_locked();
      b_->clear_backlog_locked();
    });
  }

  void post(size_t i) {
    iovec iov{&bufs_[i], sizeof(uint32_t)};
    ASSERT_EQ(b_->post_recv(&iov, 1, &bufs_[i], 0), 0);
  }

  // One progress step, then every completion: its sequence number in `arrived`, buffer reposted.
  void step() {
    ring_engine()->progress();
    fi_cq_data_entry e[64];
    ssize_t n;
    while ((n = cq_b_->read(e, 64, nullptr)) > 0)
      for (ssize_t i = 0; i < n; ++i) {
        auto* buf = static_cast<uint32_t*>(e[i].op_context);
        arrived_.push_back(*buf);
        post(static_cast<size_t>(buf - bufs_));
      }
    ASSERT_NE(n, -FI_EAVAIL) << "no error completions expected";
  }

  // Sends datagrams 0..n-1 (inject: no send completions), `window` at a time between steps, so
  // that the receive side takes them in bursts.
  void send_all(uint32_t n, uint32_t window = 8) {
    auto addr = b_->address();
    proto::Destination d;
    std::memcpy(d.mac.addr_bytes, addr.mac, 6);
    d.ipv4_be = addr.ipv4_be;
    d.udp_port_be = addr.udp_port_be;
    for (uint32_t seq = 0; seq < n; ++seq) {
      iovec iov{&seq, sizeof(seq)};
      ssize_t r;
      while ((r = a_->send(&iov, 1, d, nullptr, 0, false, 0, true)) == -FI_EAGAIN) step();
      ASSERT_EQ(r, 0);
      if ((seq + 1) % window == 0) step();
    }
  }

  // Steps until `done()` (5 s at most), then 20 ms more: what is still to come arrives.
  template <typename Pred>
  bool settle(Pred done) {
    using clock = std::chrono::steady_clock;
    auto deadline = clock::now() + std::chrono::seconds(5);
    while (!done() && clock::now() < deadline) step();
    bool ok = done();
    auto quiet = clock::now() + std::chrono::milliseconds(20);
    while (clock::now() < quiet) step();
    return ok;
  }

  std::unique_ptr<event::Cq> cq_a_, cq_b_;
  std::unique_ptr<proto::DgramEndpoint> a_, b_;
  uint16_t port_a_ = 0, port_b_ = 0;
  uint32_t bufs_[kBuffers] = {};
  std::vector<uint32_t> arrived_;
};

TEST_F(Faults, WithoutFaultsEveryDatagramArrivesOnceInOrder) {
  const Counts before = Counts::now();
  send_all(300);
  ASSERT_TRUE(settle([&] { return arrived_.size() >= 300; }));
  ASSERT_EQ(arrived_.size(), 300u);
  for (uint32_t i = 0; i < 300; ++i) EXPECT_EQ(arrived_[i], i);
  const Counts d = Counts::now().since(before);
  EXPECT_EQ(d.dropped + d.reordered + d.duplicated + d.corrupted + d.rejected, 0u);
}

TEST_F(Faults, HalfTheDatagramsAreLostAndTheCounterSaysHowMany) {
  constexpr uint32_t kN = 2000;
  ASSERT_EQ(ring_engine()->set_faults(rates(0.5, 0, 0, 0)), 0);
  const Counts before = Counts::now();
  send_all(kN);
  ASSERT_TRUE(settle([&] { return arrived_.size() + Counts::now().since(before).dropped >= kN; }));
  const Counts d = Counts::now().since(before);
  EXPECT_EQ(arrived_.size() + d.dropped, kN);
  EXPECT_NEAR(static_cast<double>(d.dropped), kN / 2.0, 5 * std::sqrt(kN * 0.25));
  EXPECT_EQ(d.reordered + d.duplicated + d.corrupted + d.rejected, 0u);
  EXPECT_TRUE(std::is_sorted(arrived_.begin(), arrived_.end()));
  std::printf("loss 0.5: %zu of %u arrived, %llu dropped\n", arrived_.size(), kN,
              static_cast<unsigned long long>(d.dropped));
}

TEST_F(Faults, AtDuplicationOneEveryDatagramArrivesTwice) {
  constexpr uint32_t kN = 500;
  ASSERT_EQ(ring_engine()->set_faults(rates(0, 0, 1, 0)), 0);
  const Counts before = Counts::now();
  send_all(kN);
  ASSERT_TRUE(settle([&] { return arrived_.size() >= 2 * kN; }));
  ASSERT_EQ(arrived_.size(), 2 * kN);
  for (uint32_t i = 0; i < 2 * kN; ++i) EXPECT_EQ(arrived_[i], i / 2) << i;  // original, copy
  const Counts d = Counts::now().since(before);
  EXPECT_EQ(d.duplicated, kN);
  EXPECT_EQ(d.dropped + d.reordered + d.corrupted + d.rejected, 0u);
}

TEST_F(Faults, AtCorruptionOneNoDatagramArrivesAndTheDecoderRejectsEach) {
  constexpr uint32_t kN = 500;
  ASSERT_EQ(ring_engine()->set_faults(rates(0, 0, 0, 1)), 0);
  const Counts before = Counts::now();
  send_all(kN);
  ASSERT_TRUE(settle([&] { return Counts::now().since(before).rejected >= kN; }));
  const Counts d = Counts::now().since(before);
  EXPECT_EQ(d.corrupted, kN);
  EXPECT_EQ(d.rejected, kN);
  EXPECT_TRUE(arrived_.empty()) << arrived_.size() << " corrupted datagrams were delivered";
  EXPECT_EQ(d.dropped + d.reordered + d.duplicated, 0u);
  const auto& ds = ring_engine()->decode_stats();
  std::printf("corrupt 1: %u frames, rejects so far: ip-checksum %llu, udp-checksum %llu\n", kN,
              static_cast<unsigned long long>(ds.get(wire::Verdict::kIpChecksum)),
              static_cast<unsigned long long>(ds.get(wire::Verdict::kUdpChecksum)));
}

TEST_F(Faults, ReorderingChangesTheOrderAndLosesNothing) {
  constexpr uint32_t kN = 1000;
  ASSERT_EQ(ring_engine()->set_faults(rates(0, 0.2, 0, 0)), 0);
  const Counts before = Counts::now();
  send_all(kN);
  ASSERT_TRUE(settle([&] { return arrived_.size() >= kN; }));
  ASSERT_EQ(arrived_.size(), kN);
  std::vector<uint32_t> sorted = arrived_;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < kN; ++i) ASSERT_EQ(sorted[i], i) << "each datagram exactly once";
  int inversions = 0;
  for (size_t i = 1; i < arrived_.size(); ++i) inversions += arrived_[i] < arrived_[i - 1];
  const Counts d = Counts::now().since(before);
  EXPECT_GT(d.reordered, kN / 10);
  EXPECT_GT(inversions, 0);
  EXPECT_EQ(d.dropped + d.duplicated + d.corrupted + d.rejected, 0u);
  std::printf("reorder 0.2: %llu held back, %d inversions\n",
              static_cast<unsigned long long>(d.reordered), inversions);
}

TEST_F(Faults, TheSameSeedLosesTheSameDatagrams) {
  constexpr uint32_t kN = 400;
  std::vector<uint32_t> runs[2];
  for (auto& run : runs) {
    ASSERT_EQ(ring_engine()->set_faults(rates(0.3, 0, 0, 0, 77)), 0);  // a new generator
    const Counts before = Counts::now();
    arrived_.clear();
    send_all(kN);
    ASSERT_TRUE(
        settle([&] { return arrived_.size() + Counts::now().since(before).dropped >= kN; }));
    run = arrived_;
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_LT(runs[0].size(), kN);
}

}  // namespace
