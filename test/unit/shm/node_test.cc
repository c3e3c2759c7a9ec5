// SPDX-License-Identifier: BSD-3-Clause
//
// Two shm::Node instances of this process, linked as two processes' nodes would be (the socket,
// the hello, SCM_RIGHTS and the segments are the real ones; only the pid is shared).
#include "shm/node.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/fi_errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace dpfab::shm;
using namespace std::chrono_literals;

namespace {

NodeConfig test_config() {
  NodeConfig c;
  c.prefix = "dpfab-shm-unit-" + std::to_string(getpid());
  c.ring_bytes = 16 << 10;
  c.handshake_timeout_ns = 2'000'000'000;
  return c;
}

std::unique_ptr<Node> open_node(uint8_t tag, const NodeConfig& c = test_config()) {
  const uint8_t mac[6] = {2, 0, 0, 0, 0, tag};
  auto n = Node::open(c, mac, 0x0a000000u + tag);
  EXPECT_TRUE(n) << (n ? "" : n.error().message);
  return n ? std::move(n.value()) : nullptr;
}

// Waits until `pred` holds (polling), at most 5 s.
template <typename Pred>
bool eventually(Pred pred) {
  for (int i = 0; i < 5000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return pred();
}

struct Got {
  std::vector<std::string> records;
  std::vector<uint32_t> lost;
};

size_t drain(Node& n, Got& g) {
  return n.poll(
      64,
      [&](Conn&, const RecordHeader& h, const uint8_t* p) {
        g.records.emplace_back(reinterpret_cast<const char*>(p), h.len);
      },
      [&](Conn& c) { g.lost.push_back(c.node()); });
}

int send_str(Conn* c, const std::string& s) {
  const RecordHeader h{0, RecordKind::kRdm, 0, 1, 2, 3, 4, 0};
  return c->send(h, {reinterpret_cast<const uint8_t*>(s.data()), s.size()});
}

bool readable(int fd, int ms = 0) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, ms) == 1;
}

}  // namespace

TEST(ShmNode, NodesGetDistinctIdsAndTheSameHost) {
  auto a = open_node(1), b = open_node(2);
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->id(), b->id());
  EXPECT_NE(a->nonce(), 0u);
  EXPECT_EQ(a->host(), b->host());
  EXPECT_EQ(a->host(), host_id());
  EXPECT_NE(host_id(), 0u);
}

TEST(ShmNode, LinkCarriesRecordsBothWays) {
  auto a = open_node(1), b = open_node(2);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->connect(b->id(), b->nonce()), LinkState::kUp);
  Conn* ab = a->find(b->id());
  ASSERT_TRUE(ab);
  EXPECT_EQ(ab->nonce(), b->nonce());
  EXPECT_EQ(ab->mac()[5], 2);
  EXPECT_EQ(ab->ipv4_be(), 0x0a000002u);
  ASSERT_TRUE(eventually([&] {
    Conn* c = b->find(a->id());
    return c && c->state() == LinkState::kUp;
  }));
  Conn* ba = b->find(a->id());
  EXPECT_EQ(ba->nonce(), a->nonce());
  EXPECT_TRUE(ab->cma() && ba->cma()) << "one process reads its own memory";

  ASSERT_EQ(send_str(ab, "ping"), 0);
  Got gb;
  ASSERT_TRUE(eventually([&] { return drain(*b, gb) > 0; }));
  ASSERT_EQ(gb.records.size(), 1u);
  EXPECT_EQ(gb.records[0], "ping");
  ASSERT_EQ(send_str(ba, "pong"), 0);
  Got ga;
  ASSERT_TRUE(eventually([&] { return drain(*a, ga) > 0; }));
  EXPECT_EQ(ga.records.at(0), "pong");
  EXPECT_EQ(a->tx_records(), 1u);
  EXPECT_EQ(a->tx_bytes(), 4u);
  EXPECT_EQ(b->stats().rx_records.load(), 1u);
  EXPECT_EQ(a->links_up(), 1u);
}

TEST(ShmNode, FullRingIsBackPressureNotLoss) {
  auto a = open_node(1), b = open_node(2);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->connect(b->id(), b->nonce()), LinkState::kUp);
  Conn* ab = a->find(b->id());
  const std::string rec(1000, 'r');
  int sent = 0;
  while (send_str(ab, rec) == 0) ++sent;
  EXPECT_EQ(send_str(ab, rec), -FI_EAGAIN);
  EXPECT_GT(sent, 4);
  Got g;
  drain(*b, g);
  EXPECT_EQ(send_str(ab, rec), 0) << "room again once the receiver released; state "
                                  << link_state_name(ab->state()) << " full "
                                  << a->stats().tx_full.load() << " got " << g.records.size();
  while (drain(*b, g)) {
  }
  EXPECT_EQ(g.records.size(), static_cast<size_t>(sent + 1));
  EXPECT_EQ(send_str(ab, std::string(ab->max_payload() + 1, 'x')), -FI_EMSGSIZE);
}

TEST(ShmNode, SenderKicksOnlyAnArmedReceiverOnce) {
  auto a = open_node(1), b = open_node(2);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->connect(b->id(), b->nonce()), LinkState::kUp);
  Conn* ab = a->find(b->id());
  Got g;
  drain(*b, g);
  uint64_t v;
  while (readable(b->wake_fd())) (void)!read(b->wake_fd(), &v, sizeof(v));  // the link's rekick
  ASSERT_EQ(send_str(ab, "awake"), 0);
  EXPECT_FALSE(readable(b->wake_fd())) << "nobody sleeps: no syscall, no kick";
  const uint64_t kicks = a->stats().kicks_sent.load();
  b->arm();  // A1-A2: the receiver is about to sleep
  ASSERT_EQ(send_str(ab, "wake up"), 0);
  EXPECT_TRUE(readable(b->wake_fd(), 1000));
  ASSERT_EQ(send_str(ab, "again"), 0);
  EXPECT_EQ(a->stats().kicks_sent.load(), kicks + 1) << "the flag was taken by the first";
  EXPECT_GT(b->take_kick_time(), 0);
  EXPECT_EQ(b->take_kick_time(), 0) << "taken once";
  drain(*b, g);
  EXPECT_EQ(g.records.size(), 3u);
}

// Past Node::kSummaryFrom links the receive side reads the ready bits senders set in its page
// instead of every ring: records already in the rings when it switches, a budget that stops in
// the middle, a sleeper's kick and links that end (the bits off again at a quarter) lose nothing.
TEST(ShmNode, ManyLinksAreReadThroughTheReadyBits) {
  auto rx = open_node(1);
  ASSERT_TRUE(rx);
  constexpr size_t kLinks = 12;
  static_assert(kLinks > Node::kSummaryFrom);
  std::vector<std::unique_ptr<Node>> tx;
  std::vector<Conn*> to_rx;
  for (size_t k = 0; k < kLinks; ++k) {
    tx.push_back(open_node(static_cast<uint8_t>(10 + k)));
    ASSERT_TRUE(tx.back());
    ASSERT_EQ(tx.back()->connect(rx->id(), rx->nonce()), LinkState::kUp);
    to_rx.push_back(tx.back()->find(rx->id()));
  }
  ASSERT_TRUE(eventually([&] { return rx->links_up() == kLinks; }));
  // Three records in every ring before the receiver's first poll (which switches to the bits).
  for (size_t r = 0; r < 3; ++r)
    for (size_t k = 0; k < kLinks; ++k)
      ASSERT_EQ(send_str(to_rx[k], std::to_string(k) + ":" + std::to_string(r)), 0);
  EXPECT_FALSE(rx->reads_summary());
  Got g;
  auto poll = [&](size_t budget) {
    return rx->poll(
        budget,
        [&](Conn&, const RecordHeader& h, const uint8_t* p) {
          g.records.emplace_back(reinterpret_cast<const char*>(p), h.len);
        },
        [&](Conn& c) { g.lost.push_back(c.node()); });
  };
  for (int i = 0; i < 100 && g.records.size() < 3 * kLinks; ++i) poll(5);  // budgets end mid-ring
  EXPECT_TRUE(rx->reads_summary());
  ASSERT_EQ(g.records.size(), 3 * kLinks);
  for (size_t k = 0; k < kLinks; ++k) {  // each once, in its ring's order
    std::vector<std::string> of_k;
    for (const auto& rec : g.records)
      if (rec.substr(0, rec.find(':')) == std::to_string(k)) of_k.push_back(rec);
    ASSERT_EQ(of_k, (std::vector<std::string>{std::to_string(k) + ":0", std::to_string(k) + ":1",
                                              std::to_string(k) + ":2"}));
  }
  EXPECT_EQ(poll(64), 0u);
  EXPECT_FALSE(rx->maybe_ready());
  // One record at a time from each link in turn: the next poll finds it, and only it.
  for (size_t i = 0; i < 5 * kLinks; ++i) {
    g.records.clear();
    ASSERT_EQ(send_str(to_rx[i % kLinks], "turn " + std::to_string(i)), 0);
    EXPECT_TRUE(rx->maybe_ready());
    ASSERT_EQ(poll(64), 1u) << "turn " << i;
    EXPECT_EQ(g.records.at(0), "turn " + std::to_string(i));
    EXPECT_EQ(poll(64), 0u);
  }
  // A receiver about to sleep is kicked by the next record, which its poll then finds.
  uint64_t v;
  while (readable(rx->wake_fd())) (void)!read(rx->wake_fd(), &v, sizeof(v));
  rx->arm();
  g.records.clear();
  ASSERT_EQ(send_str(to_rx[7], "wake up"), 0);
  EXPECT_TRUE(readable(rx->wake_fd(), 1000));
  ASSERT_EQ(poll(64), 1u);
  EXPECT_EQ(g.records.at(0), "wake up");
  // All but two links end: reported lost once each, then every ring is read again.
  for (size_t k = 0; k < kLinks - 2; ++k) tx[k].reset();
  ASSERT_TRUE(eventually([&] {
    poll(64);
    return g.lost.size() == kLinks - 2;
  }));
  poll(64);
  EXPECT_FALSE(rx->reads_summary());
  g.records.clear();
  ASSERT_EQ(send_str(to_rx[kLinks - 2], "still here"), 0);
  ASSERT_EQ(send_str(to_rx[kLinks - 1], "me too"), 0);
  ASSERT_TRUE(eventually([&] {
    poll(64);
    return g.records.size() == 2;
  }));
}

TEST(ShmNode, StaleAndMissingNodesFail) {
  auto a = open_node(1), b = open_node(2);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->connect(b->id(), b->nonce() ^ 1), LinkState::kStale)
      << "an earlier instance's nonce";
  const uint32_t gone = b->id();
  b.reset();
  EXPECT_EQ(a->connect(gone, 12345), LinkState::kStale) << "nobody has that node id any more";
  EXPECT_EQ(a->connect(0, 1), LinkState::kStale);
  EXPECT_EQ(a->connect(Node::kMaxNodes, 1), LinkState::kStale);
  EXPECT_GE(a->stats().links_failed.load(), 2u);
}

TEST(ShmNode, PeerThatGoesIsDrainedThenReportedLostOnce) {
  auto a = open_node(1), b = open_node(2);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->connect(b->id(), b->nonce()), LinkState::kUp);
  ASSERT_TRUE(eventually([&] { return b->find(a->id()) != nullptr; }));
  Conn* ba = b->find(a->id());
  ASSERT_TRUE(eventually([&] { return ba->state() == LinkState::kUp; }));
  ASSERT_EQ(send_str(ba, "last words"), 0);
  const uint32_t bid = b->id();
  b.reset();  // its sockets close: as if the process ended
  Conn* ab = a->find(bid);
  ASSERT_TRUE(eventually([&] { return ab->state() == LinkState::kDead; }));
  EXPECT_TRUE(readable(a->wake_fd(), 1000)) << "sleepers are told to look";
  Got g;
  drain(*a, g);
  ASSERT_EQ(g.records.size(), 1u) << "what it sent before it went arrives first";
  EXPECT_EQ(g.records[0], "last words");
  ASSERT_EQ(g.lost.size(), 1u);
  EXPECT_EQ(g.lost[0], bid);
  drain(*a, g);
  EXPECT_EQ(g.lost.size(), 1u) << "reported once";
  EXPECT_EQ(send_str(ab, "too late"), -FI_EHOSTUNREACH);
  EXPECT_EQ(a->stats().links_lost.load(), 1u);
}

TEST(ShmNode, RestartedPeerGetsANewLink) {
  auto a = open_node(1);
  auto b = open_node(2);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->connect(b->id(), b->nonce()), LinkState::kUp);
  const uint32_t id = b->id();
  b.reset();
  ASSERT_TRUE(eventually([&] { return a->find(id)->state() == LinkState::kDead; }));
  Got g;
  drain(*a, g);
  b = open_node(2);  // the lowest free id: the same one, another instance
  ASSERT_TRUE(b);
  ASSERT_EQ(b->id(), id);
  ASSERT_EQ(a->connect(b->id(), b->nonce()), LinkState::kUp);
  ASSERT_EQ(send_str(a->find(id), "hello again"), 0);
  Got gb;
  ASSERT_TRUE(eventually([&] { return drain(*b, gb) > 0; }));
  EXPECT_EQ(gb.records[0], "hello again");
}

TEST(ShmNode, SelfLinkLoopsBack) {
  auto a = open_node(1);
  ASSERT_TRUE(a);
  ASSERT_EQ(a->connect(a->id(), a->nonce()), LinkState::kUp);
  Conn* self = a->find(a->id());
  ASSERT_EQ(send_str(self, "me"), 0);
  Got g;
  drain(*a, g);
  ASSERT_EQ(g.records.size(), 1u);
  EXPECT_EQ(g.records[0], "me");
  uint64_t v = 42, back = 0;
  ASSERT_EQ(self->read_peer(&back, reinterpret_cast<uint64_t>(&v), sizeof(v)), 0);
  EXPECT_EQ(back, 42u);
}

TEST(ShmNode, CrossMemoryReadCopiesFromThePeer) {
  auto a = open_node(1), b = open_node(2);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->connect(b->id(), b->nonce()), LinkState::kUp);
  Conn* ab = a->find(b->id());
  ASSERT_TRUE(ab->cma());
  std::vector<uint8_t> src(1 << 20), dst(src.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 13);
  ASSERT_EQ(ab->read_peer(dst.data(), reinterpret_cast<uint64_t>(src.data()), src.size()), 0);
  EXPECT_EQ(src, dst);
  EXPECT_EQ(ab->read_peer(dst.data(), 8, 64), -FI_EIO) << "an address the peer has not mapped";
  EXPECT_EQ(a->stats().cma_failed.load(), 1u);
}

TEST(ShmNode, SimultaneousConnectsEndWithOneLink) {
  for (int round = 0; round < 10; ++round) {
    auto a = open_node(1), b = open_node(2);
    ASSERT_TRUE(a && b);
    LinkState sa = LinkState::kConnecting, sb = LinkState::kConnecting;
    std::thread t([&] { sb = b->connect(a->id(), a->nonce()); });
    sa = a->connect(b->id(), b->nonce());
    t.join();
    ASSERT_EQ(sa, LinkState::kUp) << round;
    ASSERT_EQ(sb, LinkState::kUp) << round;
    ASSERT_EQ(send_str(a->find(b->id()), "a"), 0);
    ASSERT_EQ(send_str(b->find(a->id()), "b"), 0);
    Got ga, gb;
    ASSERT_TRUE(eventually([&] { return drain(*b, gb) > 0; })) << round;
    ASSERT_TRUE(eventually([&] { return drain(*a, ga) > 0; })) << round;
    EXPECT_EQ(gb.records[0], "a");
    EXPECT_EQ(ga.records[0], "b");
    EXPECT_EQ(a->links_up(), 1u);
    EXPECT_EQ(b->links_up(), 1u);
  }
}

TEST(ShmNode, RequestFromTheDataPathLinksInTheBackground) {
  auto a = open_node(1), b = open_node(2);
  ASSERT_TRUE(a && b);
  {
    dpfab::wait::WakeBatch batch;  // as under a data-path lock: the doorbell waits for it
    a->request(b->id(), b->nonce());
    EXPECT_TRUE(a->find(b->id()) == nullptr || a->find(b->id())->state() != LinkState::kUp);
  }
  ASSERT_TRUE(eventually([&] {
    Conn* c = a->find(b->id());
    return c && c->state() == LinkState::kUp;
  }));
}

TEST(ShmNode, SegmentsInADirectoryLeaveNothingBehind) {
  char dir[] = "/tmp/dpfab-shm-unit.XXXXXX";
  ASSERT_TRUE(mkdtemp(dir));
  NodeConfig c = test_config();
  c.dir = dir;
  {
    auto a = open_node(1, c), b = open_node(2, c);
    ASSERT_TRUE(a && b);
    ASSERT_EQ(a->connect(b->id(), b->nonce()), LinkState::kUp);
    ASSERT_EQ(send_str(a->find(b->id()), "file-backed"), 0);
    Got g;
    ASSERT_TRUE(eventually([&] { return drain(*b, g) > 0; }));
    EXPECT_EQ(g.records[0], "file-backed");
  }
  // A file a killed process left (its creator's lock gone) is swept by the next node.
  const std::string stale = std::string(dir) + "/dpfab-shm." + std::to_string(getuid()) + ".1.x";
  FILE* f = std::fopen(stale.c_str(), "w");
  ASSERT_TRUE(f);
  std::fclose(f);
  { auto a = open_node(3, c); }
  EXPECT_NE(access(stale.c_str(), F_OK), 0) << "swept";
  EXPECT_EQ(rmdir(dir), 0) << "nothing else left in " << dir;
}

TEST(ShmSegment, ModeIs0600AndOpenSegmentsAreRefused) {
  char dir[] = "/tmp/dpfab-shm-unit.XXXXXX";
  ASSERT_TRUE(mkdtemp(dir));
  for (const std::string& d : {std::string(), std::string(dir)}) {
    auto s = create_segment(d, 8192, "dpfab-shm-unit");
    ASSERT_TRUE(s) << s.error().message;
    struct stat st {};
    ASSERT_EQ(fstat(s.value().first.get(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u) << (d.empty() ? "memfd" : d);
    EXPECT_EQ(st.st_uid, geteuid());
    EXPECT_TRUE(map_received(s.value().first.get(), 8192)) << "our own segment is accepted";
    EXPECT_FALSE(map_received(s.value().first.get(), 16384)) << "smaller than announced";
    // A peer's segment that others may read or write is refused.
    ASSERT_EQ(fchmod(s.value().first.get(), 0644), 0);
    auto m = map_received(s.value().first.get(), 8192);
    ASSERT_FALSE(m);
    EXPECT_EQ(m.error().code, -FI_EINVAL);
  }
  EXPECT_EQ(rmdir(dir), 0) << "segment files are unlinked once mapped";
}
