// SPDX-License-Identifier: BSD-3-Clause
//
// FI_EP_MSG through the real libfabric core, in one process on a net_ring loopback port (meson:
// FI_DPDK_PORTS=net_ring0, FI_DPDK_MSG_CONNECT_TIMEOUT_MS=1500): a passive endpoint and a
// connector on one port, the accepting endpoint made from the FI_CONNREQ's info. Connection data
// both ways, transfers of every kind (untagged, tagged, remote CQ data, inject, rendezvous sizes)
// both ways, shutdown from either side (FI_SHUTDOWN on both, posted receives flushed with
// FI_ECANCELED), fi_close without fi_shutdown, and the connection failures: a reject with data
// (FI_ECONNREFUSED, err_data), no listener (FI_ECONNREFUSED from the port), an address nobody
// answers ARP for (FI_EHOSTUNREACH), a request nobody accepts (FI_ETIMEDOUT), each within a bound.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "msg_helpers.h"

using namespace dpfab::test;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

// One completion on each of `x` and `y` within 5 s (their reads progress the port they share).
bool both(Conn& x, fi_cq_tagged_entry* cx, Conn& y, fi_cq_tagged_entry* cy) {
  bool gx = false, gy = false;
  for (auto end = Clock::now() + std::chrono::seconds(5); !(gx && gy) && Clock::now() < end;) {
    if (!gx) gx = fi_cq_read(x.cq, cx, 1) == 1;
    if (!gy) gy = fi_cq_read(y.cq, cy, 1) == 1;
  }
  return gx && gy;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

class Msg : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(server.open(), 0);
    ASSERT_EQ(client.open(), 0);
    ASSERT_EQ(listener.open(server), 0);
  }
  void TearDown() override {
    if (req_info) fi_freeinfo(req_info);
  }

  // The client connects with `data`; the server reads the FI_CONNREQ (into req_info).
  void request(const std::vector<uint8_t>& data = {}, const void* to = nullptr) {
    ASSERT_EQ(c.open(client, client.info), 0);
    ASSERT_EQ(fi_connect(c.ep, to ? to : listener.addr, data.data(), data.size()), 0);
    CmEvent e = read_cm(server.eq, 2000);
    ASSERT_EQ(e.rc, int(sizeof(fi_eq_cm_entry) + data.size()));
    ASSERT_EQ(e.event, FI_CONNREQ);
    EXPECT_EQ(e.fid, &listener.pep->fid);
    ASSERT_NE(e.info, nullptr);
    EXPECT_EQ(e.data, data);
    ASSERT_NE(e.info->handle, nullptr);
    EXPECT_EQ(e.info->handle->fclass, FI_CLASS_CONNREQ);
    ASSERT_NE(e.info->dest_addr, nullptr);  // the connector's address
    req_info = e.info;
  }
  // request(), then the server accepts with `data`: both sides connected.
  void connect(const std::vector<uint8_t>& cdata = {}, const std::vector<uint8_t>& sdata = {}) {
    request(cdata);
    ASSERT_EQ(s.open(server, req_info), 0);
    ASSERT_EQ(fi_accept(s.ep, sdata.data(), sdata.size()), 0);
    CmEvent ec = read_cm(client.eq, 2000);
    ASSERT_EQ(ec.rc, int(sizeof(fi_eq_cm_entry) + sdata.size()));
    ASSERT_EQ(ec.event, FI_CONNECTED);
    EXPECT_EQ(ec.fid, &c.ep->fid);
    EXPECT_EQ(ec.data, sdata);
    CmEvent es = read_cm(server.eq, 2000);
    ASSERT_EQ(es.rc, int(sizeof(fi_eq_cm_entry)));  // no data on the listening side
    ASSERT_EQ(es.event, FI_CONNECTED);
    EXPECT_EQ(es.fid, &s.ep->fid);
  }
  // A connect that must fail: the error entry on the client's EQ within `bound_s`.
  CmEvent expect_failure(double bound_s) {
    const auto t0 = Clock::now();
    CmEvent e = read_cm(client.eq, static_cast<int>(bound_s * 1000) + 500);
    EXPECT_EQ(e.rc, -FI_EAVAIL) << "rc " << e.rc << " event " << e.event;
    EXPECT_EQ(e.fid, &c.ep->fid);
    EXPECT_LE(seconds_since(t0), bound_s);
    return e;
  }

  MsgSide server, client;
  Listener listener;
  Conn c, s;  // client's and server's connected endpoints
  fi_info* req_info = nullptr;
};

TEST_F(Msg, TheEntryOffersConnectionsAndConnectionDataUpTo256Bytes) {
  EXPECT_EQ(server.info->ep_attr->type, FI_EP_MSG);
  EXPECT_TRUE(server.info->caps & FI_MSG);
  EXPECT_TRUE(server.info->caps & FI_TAGGED);
  size_t size = 0, len = sizeof(size);
  ASSERT_EQ(fi_getopt(&listener.pep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &size, &len), 0);
  EXPECT_EQ(size, 256u);
  ASSERT_EQ(c.open(client, client.info), 0);
  size = 0;
  ASSERT_EQ(fi_getopt(&c.ep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &size, &len), 0);
  EXPECT_EQ(size, 256u);
  // More than that is refused at once (fabtests fi_cm_data checks it).
  std::vector<uint8_t> big(257);
  EXPECT_EQ(fi_connect(c.ep, listener.addr, big.data(), big.size()), -FI_EINVAL);
}

TEST_F(Msg, ConnectAcceptTransferEveryKindBothWaysThenShutdown) {
  connect(bytes("hello from the client"), bytes("welcome"));
  // fi_getpeer names the other side.
  uint8_t peer[16];
  size_t len = sizeof(peer);
  ASSERT_EQ(fi_getpeer(c.ep, peer, &len), 0);
  uint8_t sname[16];
  len = sizeof(sname);
  ASSERT_EQ(fi_getname(&s.ep->fid, sname, &len), 0);
  EXPECT_EQ(std::memcmp(peer, sname, 16), 0);

  for (size_t size : {size_t{0}, size_t{1}, size_t{1000}, size_t{20'000}, size_t{1} << 20}) {
    for (int dir = 0; dir < 2; ++dir) {
      Conn& from = dir ? s : c;
      Conn& to = dir ? c : s;
      std::vector<uint8_t> tx(size), rx(size + 8, 0xee);
      for (size_t i = 0; i < size; ++i) tx[i] = static_cast<uint8_t>(i * 7 + dir);
      // Untagged with remote CQ data, then tagged.
      ASSERT_EQ(fi_recv(to.ep, rx.data(), rx.size(), nullptr, 0, &rx), 0);
      ASSERT_EQ(fi_senddata(from.ep, tx.data(), size, nullptr, 0x1234 + size, 0, &tx), 0);
      fi_cq_tagged_entry rc{}, tc{};
      ASSERT_TRUE(both(to, &rc, from, &tc)) << size;
      EXPECT_EQ(rc.op_context, &rx);
      EXPECT_EQ(rc.len, size);
      EXPECT_TRUE(rc.flags & FI_REMOTE_CQ_DATA);
      EXPECT_EQ(rc.data, 0x1234 + size);
      EXPECT_EQ(tc.op_context, &tx);
      EXPECT_TRUE(std::equal(tx.begin(), tx.end(), rx.begin())) << size;

      std::vector<uint8_t> trx(size + 8);
      ASSERT_EQ(fi_trecv(to.ep, trx.data(), trx.size(), nullptr, 0, 77, 0, &trx), 0);
      ASSERT_EQ(fi_tsend(from.ep, tx.data(), size, nullptr, 0, 77, &tx), 0);
      ASSERT_TRUE(both(to, &rc, from, &tc)) << size;
      EXPECT_EQ(rc.op_context, &trx);
      EXPECT_EQ(rc.tag, 77u);
      EXPECT_TRUE(std::equal(tx.begin(), tx.end(), trx.begin())) << size;
    }
  }
  // fi_inject: no completion on the sender.
  char msg[] = "injected";
  char got[16] = {};
  ASSERT_EQ(fi_recv(s.ep, got, sizeof(got), nullptr, 0, got), 0);
  ASSERT_EQ(fi_inject(c.ep, msg, sizeof(msg), 0), 0);
  fi_cq_tagged_entry comp{};
  ASSERT_EQ(s.wait(&comp, 5000), 0);
  EXPECT_STREQ(got, "injected");

  // The client shuts down: FI_SHUTDOWN on both sides; the server's posted receive is flushed.
  char late[8];
  ASSERT_EQ(fi_recv(s.ep, late, sizeof(late), nullptr, 0, late), 0);
  ASSERT_EQ(fi_shutdown(c.ep, 0), 0);
  CmEvent ec = read_cm(client.eq, 2000);
  EXPECT_EQ(ec.event, FI_SHUTDOWN);
  EXPECT_EQ(ec.fid, &c.ep->fid);
  CmEvent es = read_cm(server.eq, 2000);
  EXPECT_EQ(es.event, FI_SHUTDOWN);
  EXPECT_EQ(es.fid, &s.ep->fid);
  fi_cq_err_entry err{};
  ASSERT_EQ(s.wait(&comp, 2000, &err), -FI_EAVAIL);
  EXPECT_EQ(err.err, FI_ECANCELED);
  EXPECT_EQ(err.op_context, late);
  // Nothing moves afterwards; a second shutdown is harmless and writes no second event.
  EXPECT_EQ(fi_send(c.ep, msg, 1, nullptr, 0, nullptr), -FI_ENOTCONN);
  EXPECT_EQ(fi_recv(s.ep, late, sizeof(late), nullptr, 0, late), -FI_ENOTCONN);
  EXPECT_EQ(fi_shutdown(s.ep, 0), 0);
  EXPECT_EQ(fi_shutdown(c.ep, 0), 0);
  EXPECT_EQ(read_cm(server.eq, 200).rc, -FI_EAGAIN);
  EXPECT_EQ(read_cm(client.eq, 200).rc, -FI_EAGAIN);
}

TEST_F(Msg, ServerShutdownFlushesTheClientsReceives) {
  connect();
  char buf[64];
  ASSERT_EQ(fi_recv(c.ep, buf, sizeof(buf), nullptr, 0, buf), 0);
  ASSERT_EQ(fi_shutdown(s.ep, 0), 0);
  EXPECT_EQ(read_cm(server.eq, 2000).event, FI_SHUTDOWN);
  EXPECT_EQ(read_cm(client.eq, 2000).event, FI_SHUTDOWN);
  fi_cq_tagged_entry comp{};
  fi_cq_err_entry err{};
  ASSERT_EQ(c.wait(&comp, 2000, &err), -FI_EAVAIL);
  EXPECT_EQ(err.err, FI_ECANCELED);
}

TEST_F(Msg, ClosingWithoutShutdownTellsThePeer) {
  connect();
  const auto t0 = Clock::now();
  s.close();
  CmEvent e = read_cm(client.eq, 2000);
  EXPECT_EQ(e.event, FI_SHUTDOWN);
  EXPECT_EQ(e.fid, &c.ep->fid);
  EXPECT_LE(seconds_since(t0), 1.0);
}

TEST_F(Msg, RejectDeliversTheRejectingSidesDataInErrData) {
  request(bytes("may I?"));
  const auto why = bytes("no, not today");
  ASSERT_EQ(fi_reject(listener.pep, req_info->handle, why.data(), why.size()), 0);
  CmEvent e = expect_failure(1.0);
  EXPECT_EQ(e.err, FI_ECONNREFUSED);
  EXPECT_EQ(e.data, why);
  // The request is answered: neither a second reject nor an accept of it is possible.
  EXPECT_EQ(fi_reject(listener.pep, req_info->handle, nullptr, 0), -FI_EINVAL);
  ASSERT_EQ(s.open(server, req_info), -FI_EINVAL);
}

TEST_F(Msg, ConnectToAPortWithoutListenerIsRefusedByThePort) {
  uint8_t to[16];
  std::memcpy(to, listener.addr, 16);
  to[12] ^= 0x40;  // another UDP port (network order, byte 12 of the address): nobody there
  ASSERT_EQ(c.open(client, client.info), 0);
  ASSERT_EQ(fi_connect(c.ep, to, "x", 1), 0);
  CmEvent e = expect_failure(1.0);
  EXPECT_EQ(e.err, FI_ECONNREFUSED);
  EXPECT_TRUE(e.data.empty());
}

TEST_F(Msg, ConnectToAnAddressNobodyAnswersIsUnreachable) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(9228);
  inet_pton(AF_INET, "10.254.254.254", &sin.sin_addr);
  ASSERT_EQ(c.open(client, client.info), 0);
  ASSERT_EQ(fi_connect(c.ep, &sin, nullptr, 0), 0);
  CmEvent e = expect_failure(1.5);  // ARP: 3 requests 200 ms apart
  EXPECT_EQ(e.err, FI_EHOSTUNREACH);
}

TEST_F(Msg, ARequestNobodyAcceptsTimesOut) {
  request();                        // the server has it and does nothing
  CmEvent e = expect_failure(2.5);  // FI_DPDK_MSG_CONNECT_TIMEOUT_MS=1500
  EXPECT_EQ(e.err, FI_ETIMEDOUT);
}

TEST_F(Msg, CallsOutOfStateAreRefused) {
  ASSERT_EQ(c.open(client, client.info), 0);
  char b[8] = {};
  EXPECT_EQ(fi_send(c.ep, b, 1, nullptr, 0, nullptr), -FI_ENOTCONN);  // not connected yet
  EXPECT_EQ(fi_shutdown(c.ep, 0), -FI_ENOTCONN);
  EXPECT_EQ(fi_accept(c.ep, nullptr, 0), -FI_EOPBADSTATE);  // not made from a request
  size_t len = sizeof(b);
  EXPECT_EQ(fi_getpeer(c.ep, b, &len), -FI_ENOTCONN);
  ASSERT_EQ(fi_connect(c.ep, listener.addr, nullptr, 0), 0);
  EXPECT_EQ(fi_connect(c.ep, listener.addr, nullptr, 0), -FI_EISCONN);
  EXPECT_EQ(fi_connect((fid_ep*)listener.pep, listener.addr, nullptr, 0), -FI_EOPNOTSUPP);
  CmEvent e = read_cm(server.eq, 2000);
  ASSERT_EQ(e.event, FI_CONNREQ);
  req_info = e.info;
  ASSERT_EQ(s.open(server, req_info), 0);
  EXPECT_EQ(fi_connect(s.ep, listener.addr, nullptr, 0), -FI_EOPBADSTATE);
  ASSERT_EQ(fi_accept(s.ep, nullptr, 0), 0);
  EXPECT_EQ(fi_accept(s.ep, nullptr, 0), -FI_EISCONN);
  EXPECT_EQ(read_cm(client.eq, 2000).event, FI_CONNECTED);
  EXPECT_EQ(read_cm(server.eq, 2000).event, FI_CONNECTED);
  EXPECT_EQ(fi_shutdown(c.ep, 1), -FI_EBADFLAGS);
}

// Control progress is manual: EQs without a wait object, read with fi_eq_read alone (no sread, no
// CQ read), make the connection. The reads are the only progress (the wakeup thread polls the
// port for sleepers only, and nobody sleeps).
TEST(MsgEqRead, EqReadsAloneMakeTheConnection) {
  MsgSide server, client;  // their EQs without a wait object
  ASSERT_EQ(server.open(nullptr, nullptr, 0, FI_WAIT_NONE), 0);
  ASSERT_EQ(client.open(nullptr, nullptr, 0, FI_WAIT_NONE), 0);
  Listener listener;
  ASSERT_EQ(listener.open(server), 0);
  Conn c, s;  // their CQs are never read
  ASSERT_EQ(c.open(client, client.info), 0);
  ASSERT_EQ(fi_connect(c.ep, listener.addr, nullptr, 0), 0);

  // Reads `eq` (and `other`, as a single-threaded application polls both) until `want`, 5 s.
  auto poll_for = [](fid_eq* eq, fid_eq* other, uint32_t want, fi_info** info) {
    alignas(fi_eq_cm_entry) uint8_t buf[sizeof(fi_eq_cm_entry) + 64];
    const auto t0 = Clock::now();
    while (seconds_since(t0) < 5) {
      uint32_t event = 0;
      const ssize_t r = fi_eq_read(eq, &event, buf, sizeof(buf), 0);
      if (r >= static_cast<ssize_t>(sizeof(fi_eq_cm_entry))) {
        if (event != want) return false;
        fi_eq_cm_entry entry;
        std::memcpy(&entry, buf, sizeof(entry));
        if (info) *info = entry.info;
        return true;
      }
      if (r != -FI_EAGAIN) return false;
      (void)fi_eq_read(other, &event, buf, sizeof(buf), FI_PEEK);
    }
    return false;
  };
  fi_info* req = nullptr;
  ASSERT_TRUE(poll_for(server.eq, client.eq, FI_CONNREQ, &req));
  const int opened = s.open(server, req);
  fi_freeinfo(req);
  ASSERT_EQ(opened, 0);
  ASSERT_EQ(fi_accept(s.ep, nullptr, 0), 0);
  EXPECT_TRUE(poll_for(client.eq, server.eq, FI_CONNECTED, nullptr));
  EXPECT_TRUE(poll_for(server.eq, client.eq, FI_CONNECTED, nullptr));
}

// A server waiting for requests in each wait object its EQ may have is woken by the frame that
// brings one (another thread connects 200 ms after it started waiting): fi_eq_sread (UNSPEC, FD,
// MUTEX_COND, YIELD), fi_trywait + poll on the FI_GETWAIT fd (FD) or pollfd array (POLLFD), and
// fi_wait on a wait set (SET). Nobody else progresses the port meanwhile.
TEST_F(Msg, EveryEqWaitObjectWakesOnARequest) {
  for (fi_wait_obj w : {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_POLLFD, FI_WAIT_MUTEX_COND,
                        FI_WAIT_YIELD, FI_WAIT_SET}) {
    SCOPED_TRACE(w);
    fid_wait* set = nullptr;
    fi_eq_attr attr{};
    attr.wait_obj = w;
    if (w == FI_WAIT_SET) {
      fi_wait_attr wa{};
      wa.wait_obj = FI_WAIT_UNSPEC;
      ASSERT_EQ(fi_wait_open(server.fabric, &wa, &set), 0);
      attr.wait_set = set;
    }
    fid_eq* eq = nullptr;
    ASSERT_EQ(fi_eq_open(server.fabric, &attr, &eq, nullptr), 0);
    fid_pep* pep = nullptr;
    ASSERT_EQ(fi_passive_ep(server.fabric, server.info, &pep, nullptr), 0);
    ASSERT_EQ(fi_pep_bind(pep, &eq->fid, 0), 0);
    ASSERT_EQ(fi_listen(pep), 0);
    uint8_t addr[16];
    size_t len = sizeof(addr);
    ASSERT_EQ(fi_getname(&pep->fid, addr, &len), 0);

    uint32_t event = 0;
    alignas(fi_eq_cm_entry) uint8_t buf[sizeof(fi_eq_cm_entry) + 64];
    double took = -1;
    std::thread waiter([&] {
      const auto t0 = Clock::now();
      const auto end = t0 + std::chrono::seconds(3);
      ssize_t r = -FI_EAGAIN;
      while (r == -FI_EAGAIN && Clock::now() < end) {
        if (w == FI_WAIT_FD || w == FI_WAIT_POLLFD) {
          fid* fids[] = {&eq->fid};
          if (fi_trywait(server.fabric, fids, 1) == FI_SUCCESS) {
            std::vector<pollfd> pfds;
            if (w == FI_WAIT_FD) {
              int fd = -1;
              if (fi_control(&eq->fid, FI_GETWAIT, &fd) != 0) return;
              pfds.push_back({fd, POLLIN, 0});
            } else {
              int fds[8];
              fi_wait_pollfd pf{};
              pf.fd = reinterpret_cast<struct pollfd*>(fds);
              pf.nfds = 0;
              (void)fi_control(&eq->fid, FI_GETWAIT, &pf);  // -FI_ETOOSMALL: the count
              std::vector<pollfd> all(pf.nfds);
              pf.fd = all.data();
              if (fi_control(&eq->fid, FI_GETWAIT, &pf) != 0) return;
              pfds = all;
            }
            poll(pfds.data(), pfds.size(), 1000);
          }
          r = fi_eq_read(eq, &event, buf, sizeof(buf), 0);
        } else if (w == FI_WAIT_SET) {
          fi_wait(set, 1000);
          r = fi_eq_read(eq, &event, buf, sizeof(buf), 0);
        } else {
          r = fi_eq_sread(eq, &event, buf, sizeof(buf), 1000, 0);
        }
      }
      if (r > 0) took = std::chrono::duration<double>(Clock::now() - t0).count();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    Conn conn;
    ASSERT_EQ(conn.open(client, client.info), 0);
    ASSERT_EQ(fi_connect(conn.ep, addr, nullptr, 0), 0);
    waiter.join();
    EXPECT_EQ(event, FI_CONNREQ);
    EXPECT_GT(took, 0.15);
    EXPECT_LT(took, 1.5);
    fi_eq_cm_entry entry;
    std::memcpy(&entry, buf, sizeof(entry));
    if (event == FI_CONNREQ) {
      EXPECT_EQ(fi_reject(pep, entry.info->handle, nullptr, 0), 0);
      fi_freeinfo(entry.info);
    }
    EXPECT_EQ(read_cm(client.eq, 2000).err, FI_ECONNREFUSED);
    conn.close();
    EXPECT_EQ(fi_close(&pep->fid), 0);
    EXPECT_EQ(fi_close(&eq->fid), 0);
    if (set) {
      EXPECT_EQ(fi_close(&set->fid), 0);
    }
  }
}

// Counters instead of CQs count a connected endpoint's transfers; fi_cntr_wait progresses the port.
TEST_F(Msg, CountersCountConnectedTransfers) {
  fid_cntr *ctx = nullptr, *crx = nullptr;
  fi_cntr_attr ca{};
  ca.events = FI_CNTR_EVENTS_COMP;
  ca.wait_obj = FI_WAIT_UNSPEC;
  ASSERT_EQ(fi_cntr_open(client.domain, &ca, &ctx, nullptr), 0);
  ASSERT_EQ(fi_cntr_open(server.domain, &ca, &crx, nullptr), 0);
  fid_ep* cep = nullptr;
  ASSERT_EQ(fi_endpoint(client.domain, client.info, &cep, nullptr), 0);
  ASSERT_EQ(fi_ep_bind(cep, &ctx->fid, FI_SEND | FI_RECV), 0);
  ASSERT_EQ(fi_ep_bind(cep, &client.eq->fid, 0), 0);
  ASSERT_EQ(fi_connect(cep, listener.addr, nullptr, 0), 0);
  CmEvent e = read_cm(server.eq, 2000);
  ASSERT_EQ(e.event, FI_CONNREQ);
  fid_ep* sep = nullptr;
  ASSERT_EQ(fi_endpoint(server.domain, e.info, &sep, nullptr), 0);
  fi_freeinfo(e.info);
  ASSERT_EQ(fi_ep_bind(sep, &crx->fid, FI_SEND | FI_RECV), 0);
  ASSERT_EQ(fi_ep_bind(sep, &server.eq->fid, 0), 0);
  ASSERT_EQ(fi_accept(sep, nullptr, 0), 0);
  ASSERT_EQ(read_cm(client.eq, 2000).event, FI_CONNECTED);
  ASSERT_EQ(read_cm(server.eq, 2000).event, FI_CONNECTED);
  std::vector<char> rx(10 * 100);
  for (int i = 0; i < 10; ++i)
    ASSERT_EQ(fi_recv(sep, rx.data() + 100 * i, 100, nullptr, 0, nullptr), 0);
  char tx[100] = "counted";
  for (int i = 0; i < 10; ++i) ASSERT_EQ(fi_send(cep, tx, sizeof(tx), nullptr, 0, nullptr), 0);
  EXPECT_EQ(fi_cntr_wait(crx, 10, 3000), 0);
  EXPECT_EQ(fi_cntr_wait(ctx, 10, 3000), 0);
  EXPECT_EQ(fi_cntr_read(crx), 10u);
  EXPECT_STREQ(rx.data() + 900, "counted");
  for (fid* f : {&cep->fid, &sep->fid, &ctx->fid, &crx->fid}) EXPECT_EQ(fi_close(f), 0);
}

// A loopback address names this host: on a port inside it (ring, memif) the connect reaches the
// passive endpoint at the other end of the link (here: ourselves), and getinfo maps FI_SOURCE
// 127.0.0.1 to the port (fabtests pass -s 127.0.0.1).
TEST_F(Msg, LoopbackAddressesReachThisHostsListener) {
  InfoPtr src;
  InfoPtr hints = msg_hints();
  ASSERT_EQ(getinfo(hints.get(), &src, "127.0.0.1", "9228", FI_SOURCE), 0);
  fi_info* si = first_dpdk(src.get());
  ASSERT_NE(si, nullptr);
  ASSERT_NE(si->src_addr, nullptr);
  uint8_t self[16];
  std::memcpy(self, listener.addr, 16);
  EXPECT_EQ(std::memcmp(static_cast<uint8_t*>(si->src_addr) + 8, self + 8, 4), 0);  // our IPv4
  EXPECT_EQ(static_cast<uint8_t*>(si->src_addr)[12], 0x24);                         // 9228
  // RDM and DGRAM have no use for it: no entry.
  InfoPtr rdm;
  InfoPtr rhints = dpdk_hints(FI_EP_RDM);
  EXPECT_EQ(getinfo(rhints.get(), &rdm, "127.0.0.1", "9228", FI_SOURCE), -FI_ENODATA);

  char port[8];
  snprintf(port, sizeof(port), "%u", (listener.addr[12] << 8) | listener.addr[13]);
  InfoPtr dst;
  ASSERT_EQ(getinfo(hints.get(), &dst, "127.0.0.1", port), 0);
  fi_info* di = first_dpdk(dst.get());
  ASSERT_NE(di, nullptr);
  ASSERT_NE(di->dest_addr, nullptr);
  request({}, di->dest_addr);
  ASSERT_EQ(s.open(server, req_info), 0);
  ASSERT_EQ(fi_accept(s.ep, nullptr, 0), 0);
  EXPECT_EQ(read_cm(client.eq, 2000).event, FI_CONNECTED);
  EXPECT_EQ(read_cm(server.eq, 2000).event, FI_CONNECTED);
}

}  // namespace
