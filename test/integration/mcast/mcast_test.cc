// SPDX-License-Identifier: BSD-3-Clause
//
// FI_MULTICAST on FI_EP_DGRAM endpoints through the real libfabric core, on one net_ring port (a
// loopback: what a port sends comes back to it, so every member on the port, the sender included,
// receives each group datagram). fi_cm(3) fi_join / fi_close / fi_mc_addr, fi_eq(3)
// FI_JOIN_COMPLETE, fi_getinfo(3) FI_MULTICAST.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#include <chrono>
#include <cstring>
#include <string>

#include "fixture.h"

using namespace dpfab::test;

namespace {

using Clock = std::chrono::steady_clock;

sockaddr_in group_sin(const char* ip, uint16_t port) {
  sockaddr_in s{};
  s.sin_family = AF_INET;
  s.sin_port = htons(port);
  inet_pton(AF_INET, ip, &s.sin_addr);
  return s;
}

// The provider's 16-byte address (lib/wire/address.h): version 1, reserved, MAC, IPv4, UDP port,
// endpoint id, multi-byte fields in network order.
struct DpdkAddr {
  uint8_t version = 1;
  uint8_t reserved = 0;
  uint8_t mac[6] = {};
  uint32_t ipv4_be = 0;
  uint16_t udp_port_be = 0;
  uint16_t ep_id_be = 0;
};
static_assert(sizeof(DpdkAddr) == 16);

DpdkAddr group_dpdk(const char* ip, uint16_t port) {
  DpdkAddr a;
  inet_pton(AF_INET, ip, &a.ipv4_be);
  a.udp_port_be = htons(port);
  return a;
}

class Mcast : public DomainTest {
 protected:
  struct Ep : Endpoint {
    fi_addr_t self = FI_ADDR_NOTAVAIL;  // its own address in the shared AV (FI_SOURCE)
  };

  InfoPtr hints() const override {
    return dpdk_hints(FI_EP_DGRAM, FI_MSG | FI_MULTICAST | FI_SOURCE);
  }
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(DomainTest::SetUp());
    ASSERT_TRUE(d_.info->caps & FI_MULTICAST) << "FI_MULTICAST is offered on DGRAM endpoints";
    ASSERT_EQ(d_.open_av(&av_), 0) << d_.failed;
    ASSERT_EQ(d_.open_eq(&eq_), 0) << d_.failed;
    for (Ep* x : {&a_, &b_, &c_}) ASSERT_NO_FATAL_FAILURE(open_ep(x, d_.info, true));
  }

  void open_ep(Ep* x, fi_info* info, bool bind_eq, bool enable = true) {
    EpOptions o;
    o.av = av_;
    o.eq = bind_eq ? eq_ : nullptr;
    o.enable = enable;
    ASSERT_EQ(x->open(d_, o, info), 0) << x->failed;
    if (!enable) return;
    ASSERT_EQ(x->insert_into(av_, &x->self), 0) << x->failed;
  }

  void close_ep(Ep* x) {
    EXPECT_EQ(x->close(), 0) << x->failed;
    x->self = FI_ADDR_NOTAVAIL;
  }

  void TearDown() override {
    for (Ep* x : {&a_, &b_, &c_}) close_ep(x);
    EXPECT_EQ(close_fid(&av_), 0);
    EXPECT_EQ(close_fid(&eq_), 0);
    DomainTest::TearDown();
  }

  // fi_join, then the FI_JOIN_COMPLETE event read from the EQ (at most 5 s), checked.
  fid_mc* join(Ep& x, const void* addr, uint64_t flags = 0) {
    fid_mc* mc = nullptr;
    int ctx = 0;
    int r = fi_join(x.ep, addr, flags, &mc, &ctx);
    EXPECT_EQ(r, 0);
    if (r != 0) return nullptr;
    uint32_t event = 0;
    fi_eq_entry entry{};
    ssize_t n = -FI_EAGAIN;
    for (auto deadline = Clock::now() + std::chrono::seconds(5);
         n == -FI_EAGAIN && Clock::now() < deadline;)
      n = fi_eq_read(eq_, &event, &entry, sizeof(entry), 0);
    EXPECT_EQ(n, static_cast<ssize_t>(sizeof(entry)));
    EXPECT_EQ(event, static_cast<uint32_t>(FI_JOIN_COMPLETE));
    EXPECT_EQ(entry.fid, &mc->fid) << "the event names the multicast fid";
    EXPECT_EQ(entry.context, &ctx) << "and carries the context given to fi_join";
    EXPECT_EQ(mc->fid.fclass, static_cast<size_t>(FI_CLASS_MC));
    return mc;
  }

  // fi_cq_readfrom until something other than -FI_EAGAIN, at most `ms`.
  static ssize_t read(fid_cq* cq, fi_cq_data_entry* e, fi_addr_t* src, int ms = 5000) {
    auto deadline = Clock::now() + std::chrono::milliseconds(ms);
    ssize_t r;
    while ((r = fi_cq_readfrom(cq, e, 1, src)) == -FI_EAGAIN && Clock::now() < deadline) {
    }
    return r;
  }

  // Expects one receive completion on `x` with `text`, from `from` (FI_SOURCE).
  void expect_received(Ep& x, const char* buf, const char* text, fi_addr_t from) {
    fi_cq_data_entry e{};
    fi_addr_t src = FI_ADDR_NOTAVAIL;
    ASSERT_EQ(read(x.cq, &e, &src), 1);
    EXPECT_TRUE(e.flags & FI_RECV);
    EXPECT_EQ(e.len, std::strlen(text) + 1);
    EXPECT_STREQ(buf, text);
    EXPECT_EQ(src, from) << "FI_SOURCE names the sender";
  }

  // Expects no completion on `x` for 300 ms (the frame was handled: callers check another
  // member's copy first, and all members' copies are delivered in one poll step).
  void expect_nothing(Ep& x) {
    fi_cq_data_entry e{};
    EXPECT_EQ(read(x.cq, &e, nullptr, 300), -FI_EAGAIN);
  }

  // Sends `text` to `dest` from `x` and reads the send completion.
  void send(Ep& x, const char* text, fi_addr_t dest) {
    int ctx;
    ASSERT_EQ(fi_send(x.ep, text, std::strlen(text) + 1, nullptr, dest, &ctx), 0);
    fi_cq_data_entry e{};
    ASSERT_EQ(read(x.cq, &e, nullptr), 1);
    EXPECT_EQ(e.op_context, &ctx);
    EXPECT_TRUE(e.flags & FI_SEND);
  }

  fid_av* av_ = nullptr;
  fid_eq* eq_ = nullptr;
  Ep a_, b_, c_;
};

}  // namespace

TEST_F(Mcast, JoinReportsFiJoinCompleteWithTheMcFidAndContext) {
  auto g = group_sin("239.1.2.3", 7000);
  fid_mc* mc = join(a_, &g);
  ASSERT_NE(mc, nullptr);
  EXPECT_NE(fi_mc_addr(mc), FI_ADDR_NOTAVAIL);
  EXPECT_EQ(fi_close(&mc->fid), 0);
}

TEST_F(Mcast, EveryEndpointThatJoinedReceivesEachGroupMessageWithFiSource) {
  auto g = group_sin("239.1.2.3", 7000);
  fid_mc* ma = join(a_, &g);
  fid_mc* mb = join(b_, &g);
  ASSERT_TRUE(ma && mb);
  char ia[32] = {}, ib[32] = {}, ic[32] = {};
  ASSERT_EQ(fi_recv(a_.ep, ia, sizeof(ia), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  ASSERT_EQ(fi_recv(b_.ep, ib, sizeof(ib), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  ASSERT_EQ(fi_recv(c_.ep, ic, sizeof(ic), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  send(a_, "to the group", fi_mc_addr(ma));
  expect_received(b_, ib, "to the group", a_.self);
  expect_received(a_, ia, "to the group", a_.self);  // net_ring loops the sender's frame back
  expect_nothing(c_);                                // not a member
  EXPECT_EQ(fi_close(&ma->fid), 0);
  EXPECT_EQ(fi_close(&mb->fid), 0);
}

TEST_F(Mcast, ClosingTheMcStopsDeliveryToThatEndpointOnly) {
  auto g = group_sin("239.1.2.3", 7000);
  fid_mc* ma = join(a_, &g);
  fid_mc* mb = join(b_, &g);
  ASSERT_TRUE(ma && mb);
  ASSERT_EQ(fi_close(&mb->fid), 0);
  char ia[32] = {}, ib[32] = {};
  ASSERT_EQ(fi_recv(a_.ep, ia, sizeof(ia), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  ASSERT_EQ(fi_recv(b_.ep, ib, sizeof(ib), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  send(a_, "after the leave", fi_mc_addr(ma));
  expect_received(a_, ia, "after the leave", a_.self);
  expect_nothing(b_);
  // Joining again restores delivery (a held-back frame is not expected: B left before it came).
  mb = join(b_, &g);
  ASSERT_NE(mb, nullptr);
  ASSERT_EQ(fi_recv(a_.ep, ia, sizeof(ia), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  send(a_, "joined again", fi_mc_addr(ma));
  expect_received(b_, ib, "joined again", a_.self);
  expect_received(a_, ia, "joined again", a_.self);
  EXPECT_EQ(fi_close(&ma->fid), 0);
  EXPECT_EQ(fi_close(&mb->fid), 0);
}

TEST_F(Mcast, MembersOfAnotherGroupOrUdpPortReceiveNothing) {
  auto g = group_sin("239.1.2.3", 7000);
  auto same_mac_other_group = group_sin("239.129.2.3", 7000);  // 01:00:5e:01:02:03 as well
  auto other_port = group_sin("239.1.2.3", 7001);
  fid_mc* ma = join(a_, &g);
  fid_mc* mb = join(b_, &same_mac_other_group);
  fid_mc* mc = join(c_, &other_port);
  ASSERT_TRUE(ma && mb && mc);
  char ia[32] = {}, ib[32] = {}, ic[32] = {};
  ASSERT_EQ(fi_recv(a_.ep, ia, sizeof(ia), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  ASSERT_EQ(fi_recv(b_.ep, ib, sizeof(ib), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  ASSERT_EQ(fi_recv(c_.ep, ic, sizeof(ic), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  send(a_, "only 7000", fi_mc_addr(ma));
  expect_received(a_, ia, "only 7000", a_.self);
  expect_nothing(b_);
  expect_nothing(c_);
  for (fid_mc* m : {ma, mb, mc}) EXPECT_EQ(fi_close(&m->fid), 0);
}

TEST_F(Mcast, AGroupInTheProvidersAddressFormatJoinsAndAnAvEntrySendsToIt) {
  // fi_getinfo(node = a group) hands the application our 16-byte format with no MAC; fabtests'
  // fi_mcast joins with exactly that.
  DpdkAddr g = group_dpdk("239.7.7.7", 9228);
  fid_mc* mb = join(b_, &g);
  ASSERT_NE(mb, nullptr);
  // A non-member sends through an AV entry of the group: its MAC is the group's, no ARP.
  fi_addr_t group_in_av = FI_ADDR_NOTAVAIL;
  ASSERT_EQ(fi_av_insert(av_, &g, 1, &group_in_av, 0, nullptr), 1);
  char ib[32] = {};
  ASSERT_EQ(fi_recv(b_.ep, ib, sizeof(ib), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  send(c_, "via the av", group_in_av);
  expect_received(b_, ib, "via the av", c_.self);
  EXPECT_EQ(fi_close(&mb->fid), 0);
}

TEST_F(Mcast, FiJoinGetsFiGetinfoDestAddrForAGroupNode) {
  auto hints = dpdk_hints();
  hints->ep_attr->type = FI_EP_DGRAM;
  hints->caps = FI_MSG | FI_MULTICAST;
  InfoPtr info;
  ASSERT_EQ(getinfo(hints.get(), &info, "239.9.9.9", "9228"), 0);
  fi_info* e = first_dpdk(info.get());
  ASSERT_NE(e, nullptr);
  ASSERT_NE(e->dest_addr, nullptr);
  fid_mc* mc = join(a_, e->dest_addr);
  ASSERT_NE(mc, nullptr);
  EXPECT_EQ(fi_close(&mc->fid), 0);
}

TEST_F(Mcast, AddressesThatAreNotAGroupAreEinval) {
  fid_mc* mc = nullptr;
  auto unicast = group_sin("10.0.0.1", 7000);
  EXPECT_EQ(fi_join(a_.ep, &unicast, 0, &mc, nullptr), -FI_EINVAL);
  auto broadcast = group_sin("255.255.255.255", 7000);
  EXPECT_EQ(fi_join(a_.ep, &broadcast, 0, &mc, nullptr), -FI_EINVAL);
  auto no_port = group_sin("239.1.2.3", 0);
  EXPECT_EQ(fi_join(a_.ep, &no_port, 0, &mc, nullptr), -FI_EINVAL);
  DpdkAddr ours = group_dpdk("10.0.0.1", 7000);
  EXPECT_EQ(fi_join(a_.ep, &ours, 0, &mc, nullptr), -FI_EINVAL);
  DpdkAddr wrong_mac = group_dpdk("239.1.2.3", 7000);
  wrong_mac.mac[0] = 0x02;
  EXPECT_EQ(fi_join(a_.ep, &wrong_mac, 0, &mc, nullptr), -FI_EINVAL);
  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "ff02::1", &v6.sin6_addr);
  EXPECT_EQ(fi_join(a_.ep, &v6, 0, &mc, nullptr), -FI_ENOSYS);
  auto g = group_sin("239.1.2.3", 7000);
  EXPECT_EQ(fi_join(a_.ep, &g, FI_TAGGED, &mc, nullptr), -FI_EBADFLAGS);
  EXPECT_EQ(fi_join(a_.ep, nullptr, 0, &mc, nullptr), -FI_EINVAL);
  // Nothing was joined and no event written.
  uint32_t event;
  fi_eq_entry entry;
  EXPECT_EQ(fi_eq_read(eq_, &event, &entry, sizeof(entry), 0), -FI_EAGAIN);
}

TEST_F(Mcast, AnEndpointWithoutFiMulticastCannotJoin) {
  InfoPtr plain(fi_dupinfo(d_.info));
  plain->caps = FI_MSG | FI_SEND | FI_RECV;
  Ep x;
  ASSERT_NO_FATAL_FAILURE(open_ep(&x, plain.get(), true));
  auto g = group_sin("239.1.2.3", 7000);
  fid_mc* mc = nullptr;
  EXPECT_EQ(fi_join(x.ep, &g, 0, &mc, nullptr), -FI_EOPNOTSUPP);
  close_ep(&x);
}

TEST_F(Mcast, JoinNeedsABoundEqAndAnEnabledEndpoint) {
  auto g = group_sin("239.1.2.3", 7000);
  fid_mc* mc = nullptr;
  Ep no_eq;
  ASSERT_NO_FATAL_FAILURE(open_ep(&no_eq, d_.info, false));
  EXPECT_EQ(fi_join(no_eq.ep, &g, 0, &mc, nullptr), -FI_ENOEQ);
  close_ep(&no_eq);
  Ep not_enabled;
  ASSERT_NO_FATAL_FAILURE(open_ep(&not_enabled, d_.info, true, false));
  EXPECT_EQ(fi_join(not_enabled.ep, &g, 0, &mc, nullptr), -FI_EOPBADSTATE);
  close_ep(&not_enabled);
}

TEST_F(Mcast, TheEndpointStaysBusyUntilItsMcIsClosed) {
  auto g = group_sin("239.1.2.3", 7000);
  fid_mc* mc = join(c_, &g);
  ASSERT_NE(mc, nullptr);
  EXPECT_EQ(fi_close(&c_.ep->fid), -FI_EBUSY);
  EXPECT_EQ(fi_close(&mc->fid), 0);
  EXPECT_EQ(fi_close(&c_.ep->fid), 0);
  c_.ep = nullptr;
}

TEST_F(Mcast, SendOnlyAndReceiveOnlyJoins) {
  auto g = group_sin("239.1.2.3", 7000);
  fid_mc* send_only = join(a_, &g, FI_SEND);
  fid_mc* recv_only = join(b_, &g, FI_RECV);
  ASSERT_TRUE(send_only && recv_only);
  char buf[32] = {};
  EXPECT_EQ(fi_send(b_.ep, buf, 4, nullptr, fi_mc_addr(recv_only), nullptr), -FI_EPERM)
      << "a receive-only member may not send to the group";
  char ia[32] = {}, ib[32] = {};
  ASSERT_EQ(fi_recv(a_.ep, ia, sizeof(ia), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  ASSERT_EQ(fi_recv(b_.ep, ib, sizeof(ib), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  send(a_, "send only", fi_mc_addr(send_only));
  expect_received(b_, ib, "send only", a_.self);
  expect_nothing(a_);  // a send-only member receives nothing, not even its own frame
  EXPECT_EQ(fi_close(&send_only->fid), 0);
  EXPECT_EQ(fi_close(&recv_only->fid), 0);
}

TEST_F(Mcast, AClosedMcAddressIsNoLongerADestination) {
  auto g = group_sin("239.1.2.3", 7000);
  fid_mc* mc = join(a_, &g);
  ASSERT_NE(mc, nullptr);
  const fi_addr_t addr = fi_mc_addr(mc);
  ASSERT_EQ(fi_close(&mc->fid), 0);
  char buf[4] = {};
  EXPECT_EQ(fi_send(a_.ep, buf, sizeof(buf), nullptr, addr, nullptr), -FI_EINVAL);
}
