// SPDX-License-Identifier: BSD-3-Clause
//
// RMA and atomics through the libfabric core (fi_rma(3), fi_atomic(3)) between endpoints of one
// process on a net_ring loopback port (their frames go out through the port and come back): every
// RMA call on FI_EP_RDM and FI_EP_MSG, sizes up to 8 MiB, remote CQ data and FI_RMA_EVENT
// counters at the target, FI_MR_ENDPOINT, every atomic the provider offers with its valid counts,
// atomics from two threads on one counter, and the protection failures (wrong key, closed region,
// out of bounds, read-only region, atomic out of bounds): each an error completion at the
// initiator, with no byte changed around the target region and nothing reported at the target.
#include <gtest/gtest.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_trigger.h>

#include <algorithm>
#include <atomic>
#include <complex>
#include <cstdlib>
#include <deque>
#include <string_view>
#include <thread>

#include <unistd.h>

#include "fixture.h"
#include "msg_helpers.h"
#include "process.h"

using namespace dpfab::test;

namespace {

// memcmp, with zero-length ranges (an empty vector's null data()) equal, as memcmp may not be
// given null.
bool same_bytes(const void* a, const void* b, size_t n) {
  return n == 0 || std::memcmp(a, b, n) == 0;
}

constexpr uint64_t kModes = FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
constexpr uint64_t kCaps = FI_MSG | FI_RMA | FI_ATOMIC | FI_RMA_EVENT;
constexpr int kTimeoutMs = 10000;

std::vector<uint8_t> pattern(uint64_t seed, size_t len) {
  std::vector<uint8_t> v(len);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
  return v;
}

// An RDM endpoint with its CQ and counters: `ops` counts our writes, reads and sends; `remote`
// the remote writes and reads that reach us.
struct Ep {
  fid_ep* ep = nullptr;
  fid_cq* cq = nullptr;
  fid_cntr* ops = nullptr;
  fid_cntr* remote = nullptr;
  fi_addr_t addr = FI_ADDR_NOTAVAIL;  // in the domain's AV
};

// A domain on the port with an AV, and RDM endpoints on it.
struct Rdm {
  InfoPtr info;
  fi_info* e = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  std::deque<Ep> eps;  // stable addresses: tests keep Ep pointers

  int open(uint64_t mr_mode = kModes, uint64_t caps = kCaps) {
    InfoPtr h = dpdk_hints(FI_EP_RDM);
    h->caps = caps;
    h->mode = FI_CONTEXT;
    h->domain_attr->mr_mode = static_cast<int>(mr_mode);
    if (int r = getinfo(h.get(), &info)) return r;
    e = first_dpdk(info.get());
    if (!e) return -FI_ENODATA;
    if (int r = fi_fabric(e->fabric_attr, &fabric, nullptr)) return r;
    if (int r = fi_domain(fabric, e, &domain, nullptr)) return r;
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    return fi_av_open(domain, &av_attr, &av, nullptr);
  }
  // A new enabled endpoint; its address goes into the AV.
  Ep* add() {
    Ep x;
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_DATA;
    cq_attr.size = 4096;
    fi_cntr_attr ca{};
    ca.events = FI_CNTR_EVENTS_COMP;
    if (fi_cq_open(domain, &cq_attr, &x.cq, nullptr) ||
        fi_cntr_open(domain, &ca, &x.ops, nullptr) ||
        fi_cntr_open(domain, &ca, &x.remote, nullptr) || fi_endpoint(domain, e, &x.ep, nullptr) ||
        fi_ep_bind(x.ep, &x.cq->fid, FI_TRANSMIT | FI_RECV) ||
        fi_ep_bind(x.ep, &x.ops->fid, FI_SEND | FI_WRITE | FI_READ) ||
        fi_ep_bind(x.ep, &x.remote->fid, FI_REMOTE_WRITE | FI_REMOTE_READ) ||
        fi_ep_bind(x.ep, &av->fid, 0) || fi_enable(x.ep))
      return nullptr;
    uint8_t name[64];  // 16 bytes over a port, 32 with the same-host path on
    size_t len = sizeof(name);
    if (fi_getname(&x.ep->fid, name, &len) || fi_av_insert(av, name, 1, &x.addr, 0, nullptr) != 1)
      return nullptr;
    eps.push_back(x);
    return &eps.back();
  }
  ~Rdm() {
    for (auto& x : eps) {
      fi_close(&x.ep->fid);
      fi_close(&x.remote->fid);
      fi_close(&x.ops->fid);
      fi_close(&x.cq->fid);
    }
    if (av) fi_close(&av->fid);
    if (domain) fi_close(&domain->fid);
    if (fabric) fi_close(&fabric->fid);
  }
};

// One completion on `cq`: 0 and `*c`, or -FI_EAVAIL and `*err`, or -FI_ETIMEDOUT. Reading the CQ
// runs the port's poll step, which serves the target endpoint too.
int wait(fid_cq* cq, fi_cq_data_entry* c, fi_cq_err_entry* err = nullptr,
         int timeout_ms = kTimeoutMs) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const ssize_t r = fi_cq_read(cq, c, 1);
    if (r == 1) return 0;
    if (r == -FI_EAVAIL) {
      fi_cq_err_entry e{};
      if (fi_cq_readerr(cq, &e, 0) != 1) return -FI_EOTHER;
      if (err) *err = e;
      return -FI_EAVAIL;
    }
    if (r != -FI_EAGAIN) return static_cast<int>(r);
    if (std::chrono::steady_clock::now() >= end) return -FI_ETIMEDOUT;
  }
}

// Runs the poll step for a while (what is in flight settles) and says whether `cq` stayed empty.
bool stays_empty(fid_cq* cq, fid_cq* progress, int ms = 50) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  fi_cq_data_entry c;
  while (std::chrono::steady_clock::now() < end) {
    fi_cq_read(progress, &c, 0);
    if (fi_cq_read(cq, &c, 1) != -FI_EAGAIN) return false;
  }
  return true;
}

// A registered target buffer in the middle of a larger one (guard bytes on both sides).
struct Target {
  static constexpr size_t kGuard = 4096;
  std::vector<uint8_t> mem;
  fid_mr* mr = nullptr;
  size_t len;
  Target(fid_domain* d, size_t n, uint64_t access, uint8_t fill = 0x5a)
      : mem(n + 2 * kGuard, fill), len(n) {
    EXPECT_EQ(fi_mr_reg(d, data(), n, access, 0, 0, 0, &mr, nullptr), 0);
  }
  ~Target() {
    if (mr) fi_close(&mr->fid);
  }
  uint8_t* data() { return mem.data() + kGuard; }
  uint64_t addr(size_t off = 0) { return reinterpret_cast<uintptr_t>(data()) + off; }
  uint64_t key() const { return fi_mr_key(mr); }
  bool untouched(uint8_t fill) const {
    return std::all_of(mem.begin(), mem.end(), [&](uint8_t b) { return b == fill; });
  }
  bool guards(uint8_t fill) const {
    return std::all_of(mem.begin(), mem.begin() + kGuard, [&](uint8_t b) { return b == fill; }) &&
           std::all_of(mem.end() - kGuard, mem.end(), [&](uint8_t b) { return b == fill; });
  }
};

class RmaRdm : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(d.open(), 0);
    a = d.add();
    b = d.add();
    ASSERT_TRUE(a && b);
  }
  Rdm d;
  Ep* a = nullptr;  // the initiator
  Ep* b = nullptr;  // the target
};

TEST_F(RmaRdm, InfoOffersRmaAndAtomics) {
  fi_info* e = d.e;
  EXPECT_EQ(e->caps & kCaps, kCaps);
  EXPECT_TRUE(e->tx_attr->caps & FI_WRITE && e->tx_attr->caps & FI_READ);
  EXPECT_TRUE(e->rx_attr->caps & FI_REMOTE_WRITE && e->rx_attr->caps & FI_REMOTE_READ);
  EXPECT_GE(e->tx_attr->iov_limit, 4u);
  EXPECT_EQ(e->tx_attr->rma_iov_limit, 1u);
  const uint64_t order = FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_WAR | FI_ORDER_WAW | FI_ORDER_SAR |
                         FI_ORDER_SAW | FI_ORDER_SAS;
  EXPECT_EQ(e->tx_attr->msg_order & order, order);
  EXPECT_EQ(e->ep_attr->max_order_waw_size, e->ep_attr->max_msg_size);
}

TEST_F(RmaRdm, WritesAndReadsOfEverySize) {
  Target t(d.domain, 8 << 20, FI_REMOTE_READ | FI_REMOTE_WRITE);
  uint64_t n = 0;
  for (size_t len : {size_t{0}, size_t{1}, size_t{64}, size_t{1376}, size_t{4096}, size_t{65536},
                     size_t{1} << 20, size_t{8} << 20}) {
    const auto data = pattern(len, len);
    fi_cq_data_entry c;
    ASSERT_EQ(fi_write(a->ep, data.data(), len, nullptr, b->addr, t.addr(), t.key(), &t), 0);
    ASSERT_EQ(wait(a->cq, &c), 0) << len;
    EXPECT_EQ(c.op_context, &t);
    EXPECT_EQ(c.flags, FI_RMA | FI_WRITE);
    EXPECT_TRUE(same_bytes(t.data(), data.data(), len)) << len;
    std::vector<uint8_t> back(len, 0);
    ASSERT_EQ(fi_read(a->ep, back.data(), len, nullptr, b->addr, t.addr(), t.key(), &back), 0);
    ASSERT_EQ(wait(a->cq, &c), 0) << len;
    EXPECT_EQ(c.flags, FI_RMA | FI_READ);
    EXPECT_EQ(c.len, len);
    EXPECT_EQ(back, data) << len;
    n += 2;
  }
  EXPECT_TRUE(t.guards(0x5a));
  EXPECT_EQ(fi_cntr_read(a->ops), n);
  EXPECT_EQ(fi_cntr_read(b->remote), n);
  EXPECT_TRUE(stays_empty(b->cq, a->cq)) << "no CQ entry at the target without remote CQ data";
}

TEST_F(RmaRdm, EveryCallForm) {
  Target t(d.domain, 65536, FI_REMOTE_READ | FI_REMOTE_WRITE, 0);
  fi_cq_data_entry c;
  // fi_writev with three buffers, fi_readv into two.
  auto p1 = pattern(1, 100), p2 = pattern(2, 5000), p3 = pattern(3, 7);
  iovec w[3] = {{p1.data(), p1.size()}, {p2.data(), p2.size()}, {p3.data(), p3.size()}};
  ASSERT_EQ(fi_writev(a->ep, w, nullptr, 3, b->addr, t.addr(10), t.key(), &w), 0);
  ASSERT_EQ(wait(a->cq, &c), 0);
  EXPECT_EQ(c.len, 5107u);
  std::vector<uint8_t> r1(3000), r2(2107);
  iovec r[2] = {{r1.data(), r1.size()}, {r2.data(), r2.size()}};
  ASSERT_EQ(fi_readv(a->ep, r, nullptr, 2, b->addr, t.addr(10), t.key(), &r), 0);
  ASSERT_EQ(wait(a->cq, &c), 0);
  std::vector<uint8_t> all(p1);
  all.insert(all.end(), p2.begin(), p2.end());
  all.insert(all.end(), p3.begin(), p3.end());
  EXPECT_TRUE(same_bytes(r1.data(), all.data(), 3000));
  EXPECT_TRUE(same_bytes(r2.data(), all.data() + 3000, 2107));
  // fi_writemsg with FI_REMOTE_CQ_DATA and FI_FENCE, fi_readmsg.
  auto p4 = pattern(4, 300);
  iovec one{p4.data(), p4.size()};
  fi_rma_iov rma{t.addr(20000), p4.size(), t.key()};
  fi_msg_rma m{&one, nullptr, 1, b->addr, &rma, 1, &one, 0xabcdef};
  ASSERT_EQ(fi_writemsg(a->ep, &m, FI_REMOTE_CQ_DATA | FI_FENCE | FI_DELIVERY_COMPLETE), 0);
  ASSERT_EQ(wait(a->cq, &c), 0);
  ASSERT_EQ(wait(b->cq, &c), 0) << "the target's remote CQ data";
  EXPECT_EQ(c.flags, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA);
  EXPECT_EQ(c.data, 0xabcdefu);
  std::vector<uint8_t> got(300);
  iovec gi{got.data(), got.size()};
  fi_msg_rma rm{&gi, nullptr, 1, b->addr, &rma, 1, &gi, 0};
  ASSERT_EQ(fi_readmsg(a->ep, &rm, FI_FENCE), 0);
  ASSERT_EQ(wait(a->cq, &c), 0);
  EXPECT_EQ(got, p4);
  // fi_inject_write (no completion; the counter counts it), fi_writedata, fi_inject_writedata.
  const uint64_t before = fi_cntr_read(a->ops);
  uint64_t v = 0x1122334455667788;
  ASSERT_EQ(fi_inject_write(a->ep, &v, 8, b->addr, t.addr(30000), t.key()), 0);
  ASSERT_EQ(fi_writedata(a->ep, &v, 8, nullptr, 42, b->addr, t.addr(30008), t.key(), &v), 0);
  ASSERT_EQ(wait(a->cq, &c), 0);
  EXPECT_EQ(c.op_context, &v);
  ASSERT_EQ(wait(b->cq, &c), 0);
  EXPECT_EQ(c.data, 42u);
  ASSERT_EQ(fi_inject_writedata(a->ep, &v, 8, 43, b->addr, t.addr(30016), t.key()), 0);
  ASSERT_EQ(wait(b->cq, &c), 0);
  EXPECT_EQ(c.data, 43u);
  EXPECT_EQ(fi_cntr_read(a->ops), before + 3);
  for (int k = 0; k < 3; ++k) EXPECT_TRUE(same_bytes(t.data() + 30000 + 8 * k, &v, 8));
}

// FI_RMA_EVENT: counters bound to the region count what reached it.
TEST_F(RmaRdm, RegionCountersCountRemoteAccesses) {
  Target t(d.domain, 4096, FI_REMOTE_READ | FI_REMOTE_WRITE);
  fi_cntr_attr ca{};
  ca.events = FI_CNTR_EVENTS_COMP;
  fid_cntr *wr = nullptr, *rd = nullptr;
  ASSERT_EQ(fi_cntr_open(d.domain, &ca, &wr, nullptr), 0);
  ASSERT_EQ(fi_cntr_open(d.domain, &ca, &rd, nullptr), 0);
  ASSERT_EQ(fi_mr_bind(t.mr, &wr->fid, FI_REMOTE_WRITE), 0);
  ASSERT_EQ(fi_mr_bind(t.mr, &rd->fid, FI_REMOTE_READ), 0);
  uint64_t v = 5, got = 0, one = 1;
  fi_cq_data_entry c;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(fi_write(a->ep, &v, 8, nullptr, b->addr, t.addr(), t.key(), nullptr), 0);
    ASSERT_EQ(wait(a->cq, &c), 0);
  }
  ASSERT_EQ(fi_read(a->ep, &got, 8, nullptr, b->addr, t.addr(), t.key(), nullptr), 0);
  ASSERT_EQ(wait(a->cq, &c), 0);
  ASSERT_EQ(
      fi_atomic(a->ep, &one, 1, nullptr, b->addr, t.addr(8), t.key(), FI_UINT64, FI_SUM, nullptr),
      0);
  ASSERT_EQ(wait(a->cq, &c), 0);
  EXPECT_EQ(c.flags, FI_ATOMIC | FI_WRITE);
  EXPECT_EQ(fi_cntr_read(wr), 4u);
  EXPECT_EQ(fi_cntr_read(rd), 1u);
  EXPECT_EQ(fi_cntr_read(b->remote), 5u);
  fi_close(&t.mr->fid);
  t.mr = nullptr;
  EXPECT_EQ(fi_close(&wr->fid), 0);
  EXPECT_EQ(fi_close(&rd->fid), 0);
}

// fabtests' fi_multi_mr: regions one byte apart (overlapping), each with its own requested key
// and counter, written through in turn. With FI_DPDK_MR_KEYS=application
// (integration-rma-ops-app-keys) the keys are the requested ones and addresses are offsets.
TEST_F(RmaRdm, OverlappingRegionsEachWithItsKey) {
  const uint64_t mode = d.e->domain_attr->mr_mode;
  const bool app = std::getenv("FI_DPDK_MR_KEYS") &&
                   std::string_view(std::getenv("FI_DPDK_MR_KEYS")) == "application";
  EXPECT_EQ(mode & (FI_MR_PROV_KEY | FI_MR_VIRT_ADDR),
            app ? 0u : uint64_t{FI_MR_PROV_KEY | FI_MR_VIRT_ADDR});
  constexpr size_t kLen = 4096;  // several segments
  std::vector<uint8_t> mem(kLen + 8, 0);
  fid_mr* mr[2] = {};
  fid_cntr* cn[2] = {};
  fi_cntr_attr ca{};
  ca.events = FI_CNTR_EVENTS_COMP;
  for (int k = 0; k < 2; ++k) {
    ASSERT_EQ(
        fi_mr_reg(d.domain, mem.data() + k, kLen, FI_REMOTE_WRITE, 0, k + 1, 0, &mr[k], nullptr),
        0);
    ASSERT_EQ(fi_cntr_open(d.domain, &ca, &cn[k], nullptr), 0);
    ASSERT_EQ(fi_mr_bind(mr[k], &cn[k]->fid, FI_REMOTE_WRITE), 0);
    if (app) {
      EXPECT_EQ(fi_mr_key(mr[k]), static_cast<uint64_t>(k + 1));
    }
  }
  for (int k = 0; k < 2; ++k) {
    const auto data = pattern(20 + k, kLen);
    const uint64_t at = mode & FI_MR_VIRT_ADDR ? reinterpret_cast<uintptr_t>(mem.data() + k) : 0;
    fi_cq_data_entry c;
    ASSERT_EQ(fi_write(a->ep, data.data(), kLen, nullptr, b->addr, at, fi_mr_key(mr[k]), nullptr),
              0);
    fi_cq_err_entry e{};
    ASSERT_EQ(wait(a->cq, &c, &e), 0) << fi_strerror(e.err);
    EXPECT_TRUE(same_bytes(mem.data() + k, data.data(), kLen));
    EXPECT_EQ(fi_cntr_read(cn[k]), 1u);
  }
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(fi_close(&mr[k]->fid), 0);
    EXPECT_EQ(fi_close(&cn[k]->fid), 0);
  }
}

// ---- protection: each failure, its error at the initiator, nothing changed or reported at the
// target -------------------------------------------------------------------------------------

class Protection : public RmaRdm {
 protected:
  // Posts `post` (which must use `ctx`), expects the error `err` at the initiator, and checks that
  // nothing reached the target: its CQ and counters stay empty.
  void expect_refused(const std::function<ssize_t(void*)>& post, int err) {
    int ctx;
    ASSERT_EQ(post(&ctx), 0);
    fi_cq_data_entry c;
    fi_cq_err_entry e{};
    ASSERT_EQ(wait(a->cq, &c, &e), -FI_EAVAIL);
    EXPECT_EQ(e.op_context, &ctx);
    EXPECT_EQ(e.err, err) << fi_strerror(e.err);
    EXPECT_TRUE(stays_empty(b->cq, a->cq));
    EXPECT_EQ(fi_cntr_read(b->remote), 0u);
    EXPECT_EQ(fi_cntr_readerr(b->remote), 0u);
    EXPECT_GE(fi_cntr_readerr(a->ops), 1u);
  }
  std::vector<uint8_t> data = pattern(9, 20000);  // several segments
};

TEST_F(Protection, WrongKey) {
  Target t(d.domain, 20000, FI_REMOTE_READ | FI_REMOTE_WRITE);
  expect_refused(
      [&](void* ctx) {
        return fi_write(a->ep, data.data(), data.size(), nullptr, b->addr, t.addr(),
                        t.key() ^ (1ull << 40), ctx);
      },
      FI_EKEYREJECTED);
  expect_refused(
      [&](void* ctx) {
        return fi_read(a->ep, data.data(), 100, nullptr, b->addr, t.addr(), t.key() + 1, ctx);
      },
      FI_EKEYREJECTED);
  EXPECT_TRUE(t.untouched(0x5a));
}

TEST_F(Protection, ClosedRegion) {
  Target t(d.domain, 20000, FI_REMOTE_READ | FI_REMOTE_WRITE);
  const uint64_t key = t.key();
  ASSERT_EQ(fi_close(&t.mr->fid), 0);
  t.mr = nullptr;
  // A region registered later on the same bytes does not answer to the old key.
  Target later(d.domain, 20000, FI_REMOTE_READ | FI_REMOTE_WRITE);
  ASSERT_NE(later.key(), key);
  expect_refused(
      [&](void* ctx) {
        return fi_write(a->ep, data.data(), data.size(), nullptr, b->addr, later.addr(), key, ctx);
      },
      FI_EKEYREJECTED);
  EXPECT_TRUE(t.untouched(0x5a));
  EXPECT_TRUE(later.untouched(0x5a));
}

TEST_F(Protection, OutOfBounds) {
  Target t(d.domain, 20000, FI_REMOTE_READ | FI_REMOTE_WRITE);
  // Past the end (one byte too many), before the start, far away.
  for (uint64_t addr : {t.addr(1), t.addr() - 1, uint64_t{t.addr() + (1ull << 40)}}) {
    expect_refused(
        [&](void* ctx) {
          return fi_write(a->ep, data.data(), data.size(), nullptr, b->addr, addr, t.key(), ctx);
        },
        FI_EACCES);
  }
  std::vector<uint8_t> back(100, 0xee);
  expect_refused(
      [&](void* ctx) {
        return fi_read(a->ep, back.data(), back.size(), nullptr, b->addr, t.addr(19950), t.key(),
                       ctx);
      },
      FI_EACCES);
  EXPECT_TRUE(t.untouched(0x5a));
  EXPECT_TRUE(std::all_of(back.begin(), back.end(), [](uint8_t x) { return x == 0xee; }));
}

TEST_F(Protection, ReadOnlyRegion) {
  Target t(d.domain, 20000, FI_REMOTE_READ);
  expect_refused(
      [&](void* ctx) {
        return fi_write(a->ep, data.data(), data.size(), nullptr, b->addr, t.addr(), t.key(), ctx);
      },
      FI_EACCES);
  uint64_t one = 1;
  expect_refused(
      [&](void* ctx) {
        return fi_atomic(a->ep, &one, 1, nullptr, b->addr, t.addr(), t.key(), FI_UINT64, FI_SUM,
                         ctx);
      },
      FI_EACCES);
  EXPECT_TRUE(t.untouched(0x5a));
  // Reading it is fine.
  std::vector<uint8_t> back(100);
  fi_cq_data_entry c;
  ASSERT_EQ(fi_read(a->ep, back.data(), 100, nullptr, b->addr, t.addr(), t.key(), nullptr), 0);
  ASSERT_EQ(wait(a->cq, &c), 0);
}

TEST_F(Protection, AtomicOutOfBounds) {
  Target t(d.domain, 64, FI_REMOTE_READ | FI_REMOTE_WRITE);
  uint64_t ops[4] = {1, 1, 1, 1}, old[4] = {}, cmp[4] = {};
  expect_refused(
      [&](void* ctx) {
        return fi_atomic(a->ep, ops, 4, nullptr, b->addr, t.addr(40), t.key(), FI_UINT64, FI_SUM,
                         ctx);
      },
      FI_EACCES);
  expect_refused(
      [&](void* ctx) {
        return fi_fetch_atomic(a->ep, ops, 1, nullptr, old, nullptr, b->addr, t.addr(64), t.key(),
                               FI_UINT64, FI_SUM, ctx);
      },
      FI_EACCES);
  expect_refused(
      [&](void* ctx) {
        return fi_compare_atomic(a->ep, ops, 1, nullptr, cmp, nullptr, old, nullptr, b->addr,
                                 t.addr() - 8, t.key(), FI_UINT64, FI_CSWAP, ctx);
      },
      FI_EACCES);
  EXPECT_TRUE(t.untouched(0x5a));
}

// ---- atomics ---------------------------------------------------------------------------------

size_t dt_size(int dt) {
  switch (dt) {
    case FI_INT8:
    case FI_UINT8:
      return 1;
    case FI_INT16:
    case FI_UINT16:
      return 2;
    case FI_INT32:
    case FI_UINT32:
    case FI_FLOAT:
      return 4;
    case FI_INT64:
    case FI_UINT64:
    case FI_DOUBLE:
    case FI_FLOAT_COMPLEX:
      return 8;
    case FI_LONG_DOUBLE_COMPLEX:
      return 32;
    default:
      return 16;
  }
}

// Every op and datatype: the valid ones run (one element, the old value comes back where there is
// one), the others are -FI_EOPNOTSUPP; counts agree with fi_query_atomic.
TEST_F(RmaRdm, EveryAtomicTheProviderOffers) {
  Target t(d.domain, 64, FI_REMOTE_READ | FI_REMOTE_WRITE, 0);
  int ran = 0, refused = 0;
  for (int dt = FI_INT8; dt <= FI_UINT128; ++dt) {
    for (int op = FI_MIN; op < FI_ATOMIC_OP_LAST; ++op) {
      for (int kind = 0; kind < 3; ++kind) {
        const auto fdt = static_cast<fi_datatype>(dt);
        const auto fop = static_cast<fi_op>(op);
        size_t count = 0;
        const int v = kind == 0   ? fi_atomicvalid(a->ep, fdt, fop, &count)
                      : kind == 1 ? fi_fetch_atomicvalid(a->ep, fdt, fop, &count)
                                  : fi_compare_atomicvalid(a->ep, fdt, fop, &count);
        fi_atomic_attr attr{};
        const int q = fi_query_atomic(d.domain, fdt, fop, &attr,
                                      kind == 1   ? FI_FETCH_ATOMIC
                                      : kind == 2 ? FI_COMPARE_ATOMIC
                                                  : 0);
        ASSERT_EQ(v, q) << op << " " << dt << " " << kind;
        if (v == -FI_EOPNOTSUPP) {
          ++refused;
          continue;
        }
        ASSERT_EQ(v, 0);
        EXPECT_EQ(attr.size, dt_size(dt));
        EXPECT_EQ(attr.count, count);
        EXPECT_GE(count, 1u);
        EXPECT_LE(count * dt_size(dt) * (kind == 2 ? 2 : 1), 1376u);
        alignas(16) uint8_t opnd[32] = {1}, cmp[32] = {}, old[32];
        std::memset(t.data(), 0, 64);
        ssize_t rc;
        if (kind == 0)
          rc = fi_atomic(a->ep, opnd, 1, nullptr, b->addr, t.addr(), t.key(), fdt, fop, nullptr);
        else if (kind == 1)
          rc = fi_fetch_atomic(a->ep, opnd, 1, nullptr, old, nullptr, b->addr, t.addr(), t.key(),
                               fdt, fop, nullptr);
        else
          rc = fi_compare_atomic(a->ep, opnd, 1, nullptr, cmp, nullptr, old, nullptr, b->addr,
                                 t.addr(), t.key(), fdt, fop, nullptr);
        ASSERT_EQ(rc, 0) << op << " " << dt << " " << kind;
        fi_cq_data_entry c;
        ASSERT_EQ(wait(a->cq, &c), 0) << op << " " << dt << " " << kind;
        EXPECT_EQ(c.flags, FI_ATOMIC | (kind ? FI_READ : FI_WRITE));
        if (kind) {  // the element held 0
          EXPECT_TRUE(std::all_of(old, old + dt_size(dt), [](uint8_t x) { return x == 0; }))
              << op << " " << dt;
        }
        ++ran;
      }
    }
  }
  // 16 datatypes: write 152, fetch 168, compare 94 valid combinations (proto/atomic.h).
  EXPECT_EQ(ran, 152 + 168 + 94);
  EXPECT_EQ(ran + refused, 16 * FI_ATOMIC_OP_LAST * 3);
  // More elements than one operation takes: refused at once.
  size_t count = 0;
  ASSERT_EQ(fi_atomicvalid(a->ep, FI_UINT64, FI_SUM, &count), 0);
  std::vector<uint64_t> many(count + 1, 1);
  EXPECT_NE(fi_atomic(a->ep, many.data(), many.size(), nullptr, b->addr, t.addr(), t.key(),
                      FI_UINT64, FI_SUM, nullptr),
            0);
}

// Two threads, each with its own initiator endpoint, fetch-and-add on one target counter: every
// old value comes back once.
TEST_F(RmaRdm, AtomicsFromTwoThreadsOnOneCounter) {
  Ep* a2 = d.add();
  ASSERT_NE(a2, nullptr);
  Target t(d.domain, 64, FI_REMOTE_READ | FI_REMOTE_WRITE, 0);
  constexpr int kEach = 2000;
  std::vector<uint64_t> olds[2];
  std::thread ts[2];
  Ep* who[2] = {a, a2};
  for (int i = 0; i < 2; ++i)
    ts[i] = std::thread([&, i] {
      const uint64_t one = 1;
      for (int k = 0; k < kEach; ++k) {
        uint64_t old = ~0ull;
        ssize_t rc;
        while ((rc = fi_fetch_atomic(who[i]->ep, &one, 1, nullptr, &old, nullptr, b->addr,
                                     t.addr(16), t.key(), FI_UINT64, FI_SUM, nullptr)) ==
               -FI_EAGAIN) {
        }
        if (rc != 0) return;
        fi_cq_data_entry c;
        if (wait(who[i]->cq, &c) != 0) return;
        olds[i].push_back(old);
      }
    });
  for (auto& th : ts) th.join();
  ASSERT_EQ(olds[0].size() + olds[1].size(), 2u * kEach);
  std::vector<uint64_t> all(olds[0]);
  all.insert(all.end(), olds[1].begin(), olds[1].end());
  std::sort(all.begin(), all.end());
  for (size_t k = 0; k < all.size(); ++k) ASSERT_EQ(all[k], k);
  uint64_t v;
  std::memcpy(&v, t.data() + 16, 8);
  EXPECT_EQ(v, 2u * kEach);
}

// ---- FI_MR_ENDPOINT ---------------------------------------------------------------------------

// FI_DPDK_MR_ENDPOINT=on (integration-rma-ops-mr-endpoint): FI_MR_ENDPOINT is taken up.
bool mr_endpoint_on() {
  const char* v = std::getenv("FI_DPDK_MR_ENDPOINT");
  return v && std::string_view(v) == "on";
}

// Offered FI_MR_ENDPOINT, the provider takes it up only with FI_DPDK_MR_ENDPOINT=on. Then a
// region answers only through the endpoint it is bound to; by default (the bit left out, as tcp
// and shm leave it) through every endpoint of its domain, as fabtests 2.x's fi_multi_ep expects.
TEST(RmaEndpointRegions, ReachableThroughTheirEndpointOrTheirDomain) {
  Rdm d;
  ASSERT_EQ(d.open(kModes | FI_MR_ENDPOINT), 0);
  const bool scoped = mr_endpoint_on();
  ASSERT_EQ((d.e->domain_attr->mr_mode & FI_MR_ENDPOINT) != 0, scoped);
  Ep* a = d.add();
  Ep* b = d.add();
  Ep* c = d.add();
  ASSERT_TRUE(a && b && c);
  std::vector<uint8_t> mem(256, 0);
  fid_mr* mr = nullptr;
  ASSERT_EQ(fi_mr_reg(d.domain, mem.data(), mem.size(), FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 0, 0,
                      &mr, nullptr),
            0);
  if (scoped) {
    ASSERT_EQ(fi_mr_bind(mr, &b->ep->fid, 0), 0);
    ASSERT_EQ(fi_mr_enable(mr), 0);
  } else {
    EXPECT_EQ(fi_mr_bind(mr, &b->ep->fid, 0), -FI_EINVAL) << "nothing to bind without the bit";
  }
  uint64_t v = 7;
  fi_cq_data_entry cq;
  fi_cq_err_entry err{};
  ASSERT_EQ(fi_write(a->ep, &v, 8, nullptr, b->addr, reinterpret_cast<uintptr_t>(mem.data()),
                     fi_mr_key(mr), nullptr),
            0);
  ASSERT_EQ(wait(a->cq, &cq), 0);
  EXPECT_EQ(mem[0], 7);
  // Through endpoint c, which the region is not bound to: refused when scoped, else written.
  ASSERT_EQ(fi_write(a->ep, &v, 8, nullptr, c->addr, reinterpret_cast<uintptr_t>(mem.data()) + 8,
                     fi_mr_key(mr), nullptr),
            0);
  if (scoped) {
    ASSERT_EQ(wait(a->cq, &cq, &err), -FI_EAVAIL);
    EXPECT_EQ(err.err, FI_EKEYREJECTED);
    EXPECT_EQ(mem[8], 0);
  } else {
    ASSERT_EQ(wait(a->cq, &cq), 0);
    EXPECT_EQ(mem[8], 7);
  }
  EXPECT_EQ(fi_close(&mr->fid), 0);
}

// ---- offsets and requested keys (no mr_mode bits) -----------------------------------------

TEST(RmaScalableRegions, OffsetsAndRequestedKeys) {
  Rdm d;
  ASSERT_EQ(d.open(0), 0);
  ASSERT_EQ(d.e->domain_attr->mr_mode, 0);
  Ep* a = d.add();
  Ep* b = d.add();
  ASSERT_TRUE(a && b);
  std::vector<uint8_t> mem(1000, 0);
  fid_mr* mr = nullptr;
  ASSERT_EQ(
      fi_mr_reg(d.domain, mem.data(), mem.size(), FI_REMOTE_WRITE, 0, 0xbeef, 0, &mr, nullptr), 0);
  const auto data = pattern(5, 100);
  fi_cq_data_entry c;
  ASSERT_EQ(fi_write(a->ep, data.data(), 100, nullptr, b->addr, 900, 0xbeef, nullptr), 0);
  ASSERT_EQ(wait(a->cq, &c), 0);
  EXPECT_TRUE(same_bytes(mem.data() + 900, data.data(), 100));
  fi_cq_err_entry e{};
  ASSERT_EQ(fi_write(a->ep, data.data(), 100, nullptr, b->addr, 901, 0xbeef, nullptr), 0);
  EXPECT_EQ(wait(a->cq, &c, &e), -FI_EAVAIL);
  EXPECT_EQ(e.err, FI_EACCES);
  EXPECT_EQ(fi_close(&mr->fid), 0);
}

// ---- FI_TRIGGER and fi_ep_alias ----------------------------------------------------------------

// A write posted with FI_TRIGGER waits for its counter's threshold: nothing reaches the target
// before, and it completes with its triggered context after. The same through an alias whose op
// flags carry FI_TRIGGER (fabtests' fi_rdm_rma_trigger).
TEST_F(RmaRdm, TriggeredWritesWaitForTheirThreshold) {
  EXPECT_TRUE(d.e->caps & FI_TRIGGER);
  Target t(d.domain, 64, FI_REMOTE_WRITE, 0);
  fi_cntr_attr ca{};
  ca.events = FI_CNTR_EVENTS_COMP;
  fid_cntr* trig = nullptr;
  ASSERT_EQ(fi_cntr_open(d.domain, &ca, &trig, nullptr), 0);
  uint64_t v1 = 0x1111, v2 = 0x2222;
  fi_triggered_context tc1{}, tc2{};
  tc1.event_type = FI_TRIGGER_THRESHOLD;
  tc1.trigger.threshold = {trig, 1};
  tc2.event_type = FI_TRIGGER_THRESHOLD;
  tc2.trigger.threshold = {trig, 2};
  iovec one{&v1, 8};
  fi_rma_iov r1{t.addr(), 8, t.key()};
  fi_msg_rma m{&one, nullptr, 1, b->addr, &r1, 1, &tc1, 0};
  ASSERT_EQ(fi_writemsg(a->ep, &m, FI_TRIGGER), 0);
  fid_ep* alias = nullptr;
  ASSERT_EQ(fi_ep_alias(a->ep, &alias, FI_TRANSMIT | FI_TRIGGER), 0);
  ASSERT_EQ(fi_write(alias, &v2, 8, nullptr, b->addr, t.addr(8), t.key(), &tc2), 0);
  EXPECT_EQ(fi_close(&a->ep->fid), -FI_EBUSY) << "an alias is open";
  EXPECT_TRUE(stays_empty(a->cq, b->cq)) << "nothing before the threshold";
  EXPECT_TRUE(t.untouched(0));
  fi_cq_data_entry c;
  ASSERT_EQ(fi_cntr_add(trig, 1), 0);
  ASSERT_EQ(wait(a->cq, &c), 0);
  EXPECT_EQ(c.op_context, &tc1);
  EXPECT_TRUE(same_bytes(t.data(), &v1, 8));
  EXPECT_TRUE(stays_empty(a->cq, b->cq)) << "the second waits for 2";
  ASSERT_EQ(fi_cntr_add(trig, 1), 0);
  ASSERT_EQ(wait(a->cq, &c), 0);
  EXPECT_EQ(c.op_context, &tc2);
  EXPECT_TRUE(same_bytes(t.data() + 8, &v2, 8));
  EXPECT_EQ(fi_close(&alias->fid), 0);
  EXPECT_EQ(fi_close(&trig->fid), 0);
}

// ---- the path ---------------------------------------------------------------------------------

// This process's statistics (/dpfab/stats) through its own DPDK telemetry socket (EAL's runtime
// directory of the prefix the provider chose, dpfab-<pid>), or "".
std::string own_stats() {
  const std::string dir = "/dpfab-" + std::to_string(getpid()) + "/dpdk_telemetry.v2";
  std::vector<std::string> bases = {"/run/dpdk", "/tmp/dpdk"};
  if (const char* x = std::getenv("XDG_RUNTIME_DIR"))
    bases.insert(bases.begin(), std::string(x) + "/dpdk");
  for (const auto& b : bases)
    if (access((b + dir).c_str(), F_OK) == 0) return telemetry_query(b + dir, "/dpfab/stats");
  return "";
}
// A number in the flat statistics dict ("key":value), or -1.
int64_t stat_of(const std::string& stats, const std::string& key) {
  const size_t at = stats.find("\"" + key + "\":");
  if (at == std::string::npos) return -1;
  return std::strtoll(stats.c_str() + at + key.size() + 3, nullptr, 10);
}

// The endpoints of one process reach each other through their port (net_ring: a loopback) with the
// same-host path off, and through it (a link of the node to itself) with it on, as
// integration-shm-rma-ops runs these tests: the path's counters say which carried the RMA.
TEST_F(RmaRdm, ThePathTheConfigurationNames) {
  const char* shm = std::getenv("FI_DPDK_SHM");
  const bool on = shm && std::string_view(shm) == "on";
  const std::string before = own_stats();
  ASSERT_NE(before, "") << "no telemetry socket of this process";
  Target t(d.domain, 64 << 10, FI_REMOTE_READ | FI_REMOTE_WRITE);
  const auto data = pattern(7, 64 << 10);
  fi_cq_data_entry c;
  for (int i = 0; i < 16; ++i) {
    ASSERT_EQ(fi_write(a->ep, data.data(), data.size(), nullptr, b->addr, t.addr(), t.key(), &t),
              0);
    ASSERT_EQ(wait(a->cq, &c), 0);
  }
  EXPECT_TRUE(same_bytes(t.data(), data.data(), data.size()));
  const std::string after = own_stats();
  const int64_t records = stat_of(after, "port0_shm_rx_records");
  const int64_t records0 = std::max<int64_t>(0, stat_of(before, "port0_shm_rx_records"));
  if (on) {
    EXPECT_GE(records - records0, 16) << after;
    EXPECT_GE(stat_of(after, "port0_shm_links_up"), 1) << after;
  } else {
    EXPECT_LE(records, 0) << "the same-host path carried frames while off: " << after;
  }
}

// ---- bad input ----------------------------------------------------------------------------------

TEST_F(RmaRdm, BadInputIsRefused) {
  Target t(d.domain, 4096, FI_REMOTE_READ | FI_REMOTE_WRITE);
  std::vector<uint8_t> buf(4096);
  iovec one{buf.data(), 100};
  fi_rma_iov two[2] = {{t.addr(), 50, t.key()}, {t.addr(50), 50, t.key()}};
  fi_msg_rma m{&one, nullptr, 1, b->addr, two, 2, nullptr, 0};
  EXPECT_EQ(fi_writemsg(a->ep, &m, 0), -FI_EINVAL) << "rma_iov_limit 1";
  m.rma_iov_count = 1;
  EXPECT_EQ(fi_writemsg(a->ep, &m, 0), -FI_EINVAL) << "rma_iov len != local length";
  two[0].len = 100;
  EXPECT_EQ(fi_writemsg(a->ep, &m, FI_MULTI_RECV), -FI_EINVAL) << "not a write flag";
  EXPECT_EQ(fi_readmsg(a->ep, &m, FI_REMOTE_CQ_DATA), -FI_EINVAL) << "not a read flag";
  EXPECT_EQ(fi_write(a->ep, nullptr, 10, nullptr, b->addr, t.addr(), t.key(), nullptr), -FI_EINVAL);
  iovec five[5] = {one, one, one, one, one};
  EXPECT_EQ(fi_writev(a->ep, five, nullptr, 5, b->addr, t.addr(), t.key(), nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_inject_write(a->ep, buf.data(), 4096, b->addr, t.addr(), t.key()), -FI_EMSGSIZE);
  EXPECT_EQ(fi_write(a->ep, buf.data(), 8, nullptr, 99, t.addr(), t.key(), nullptr), -FI_EINVAL)
      << "not in the AV";
  uint64_t x = 1;
  EXPECT_EQ(
      fi_atomic(a->ep, &x, 1, nullptr, b->addr, t.addr(), t.key(), FI_DOUBLE, FI_BOR, nullptr),
      -FI_EOPNOTSUPP);
  EXPECT_EQ(fi_atomic(a->ep, &x, 1, nullptr, b->addr, t.addr(), t.key(), FI_UINT64, FI_ATOMIC_READ,
                      nullptr),
            -FI_EOPNOTSUPP)
      << "a read is a fetching atomic";
  // An endpoint without FI_RMA / FI_ATOMIC.
  Rdm m2;
  ASSERT_EQ(m2.open(kModes, FI_MSG), 0);
  Ep* plain = m2.add();
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(fi_write(plain->ep, buf.data(), 8, nullptr, plain->addr, t.addr(), t.key(), nullptr),
            -FI_EOPNOTSUPP);
  EXPECT_EQ(fi_atomic(plain->ep, &x, 1, nullptr, plain->addr, t.addr(), t.key(), FI_UINT64, FI_SUM,
                      nullptr),
            -FI_EOPNOTSUPP);
  size_t count;
  EXPECT_EQ(fi_atomicvalid(plain->ep, FI_UINT64, FI_SUM, &count), -FI_EOPNOTSUPP);
}

// ---- FI_EP_MSG ------------------------------------------------------------------------------

TEST(RmaMsg, WriteReadAndAtomicOverAConnection) {
  MsgSide side;
  InfoPtr hints = msg_hints(kCaps);
  hints->domain_attr->mr_mode = kModes;
  ASSERT_EQ(getinfo(hints.get(), &side.infos), 0);
  side.info = first_dpdk(side.infos.get());
  ASSERT_NE(side.info, nullptr);
  ASSERT_EQ(side.info->caps & kCaps, kCaps);
  ASSERT_EQ(fi_fabric(side.info->fabric_attr, &side.fabric, nullptr), 0);
  ASSERT_EQ(fi_domain(side.fabric, side.info, &side.domain, nullptr), 0);
  fi_eq_attr eq_attr{};
  eq_attr.wait_obj = FI_WAIT_UNSPEC;
  ASSERT_EQ(fi_eq_open(side.fabric, &eq_attr, &side.eq, nullptr), 0);
  Listener l;
  ASSERT_EQ(l.open(side), 0);
  Conn client, server;
  ASSERT_EQ(client.open(side, side.info), 0);
  ASSERT_EQ(fi_connect(client.ep, l.addr, nullptr, 0), 0);
  CmEvent req = read_cm(side.eq, kTimeoutMs);
  ASSERT_EQ(req.event, FI_CONNREQ);
  ASSERT_EQ(server.open(side, req.info), 0);
  ASSERT_EQ(fi_accept(server.ep, nullptr, 0), 0);
  fi_freeinfo(req.info);
  for (int k = 0; k < 2; ++k) EXPECT_EQ(read_cm(side.eq, kTimeoutMs).event, FI_CONNECTED);

  std::vector<uint8_t> mem(1 << 20, 0);
  fid_mr* mr = nullptr;
  ASSERT_EQ(fi_mr_reg(side.domain, mem.data(), mem.size(), FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0,
                      0, &mr, nullptr),
            0);
  const uint64_t base = reinterpret_cast<uintptr_t>(mem.data());
  const auto data = pattern(6, mem.size());
  fi_cq_tagged_entry c;
  fi_cq_err_entry e{};
  ASSERT_EQ(fi_write(client.ep, data.data(), data.size(), nullptr, 0, base, fi_mr_key(mr), nullptr),
            0);
  ASSERT_EQ(client.wait(&c, kTimeoutMs), 0);
  EXPECT_EQ(mem, data);
  std::vector<uint8_t> back(4096);
  ASSERT_EQ(
      fi_read(client.ep, back.data(), back.size(), nullptr, 0, base + 5000, fi_mr_key(mr), nullptr),
      0);
  ASSERT_EQ(client.wait(&c, kTimeoutMs), 0);
  EXPECT_TRUE(same_bytes(back.data(), data.data() + 5000, 4096));
  uint64_t one = 1, old = 0;
  std::memset(mem.data(), 0, 8);
  ASSERT_EQ(fi_fetch_atomic(client.ep, &one, 1, nullptr, &old, nullptr, 0, base, fi_mr_key(mr),
                            FI_UINT64, FI_SUM, nullptr),
            0);
  ASSERT_EQ(client.wait(&c, kTimeoutMs), 0);
  EXPECT_EQ(old, 0u);
  EXPECT_EQ(mem[0], 1);
  // The server side writes into the same region too (both ends are targets).
  ASSERT_EQ(fi_writedata(server.ep, &one, 8, nullptr, 99, 0, base + 8, fi_mr_key(mr), nullptr), 0);
  ASSERT_EQ(server.wait(&c, kTimeoutMs), 0);
  ASSERT_EQ(client.wait(&c, kTimeoutMs), 0);
  EXPECT_EQ(c.flags, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA);
  EXPECT_EQ(c.data, 99u);
  // Protection holds on connections too.
  ASSERT_EQ(fi_write(client.ep, data.data(), 100, nullptr, 0, base + mem.size() - 50, fi_mr_key(mr),
                     nullptr),
            0);
  EXPECT_EQ(client.wait(&c, kTimeoutMs, &e), -FI_EAVAIL);
  EXPECT_EQ(e.err, FI_EACCES);
  EXPECT_EQ(fi_close(&mr->fid), 0);
}

}  // namespace
