// SPDX-License-Identifier: BSD-3-Clause
//
// Memory registration through the libfabric core (drivers/ofi/mr.cc, fi_mr(3)): the mr_mode bits
// getinfo takes up, provider keys, requested keys, FI_MR_ENDPOINT, counter bindings, fi_mr_regv,
// raw keys, and bad input. One process on a net_null port (no traffic).
#include <gtest/gtest.h>
#include <rdma/fi_rma.h>

#include <cstdlib>
#include <set>
#include <string_view>

#include "fixture.h"

using namespace dpfab::test;

namespace {

// A domain (and an RDM endpoint when asked) opened with the hints' mr_mode.
struct Dom {
  InfoPtr info;
  fi_info* e = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  explicit Dom(uint64_t mr_mode, uint64_t caps = FI_MSG) {
    InfoPtr h = dpdk_hints(FI_EP_RDM);
    h->caps = caps;
    h->domain_attr->mr_mode = static_cast<int>(mr_mode);
    EXPECT_EQ(getinfo(h.get(), &info), 0);
    e = first_dpdk(info.get());
    EXPECT_NE(e, nullptr);
    if (!e) return;
    EXPECT_EQ(fi_fabric(e->fabric_attr, &fabric, nullptr), 0);
    EXPECT_EQ(fi_domain(fabric, e, &domain, nullptr), 0);
  }
  ~Dom() {
    if (domain) {
      EXPECT_EQ(fi_close(&domain->fid), 0);
    }
    if (fabric) {
      EXPECT_EQ(fi_close(&fabric->fid), 0);
    }
  }
};

constexpr uint64_t kBtlOfiModes = FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
constexpr uint64_t kFabtestsModes =
    FI_MR_LOCAL | FI_MR_ENDPOINT | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;

// FI_DPDK_MR_KEYS=application (integration-rma-mr-app-keys): neither provider keys nor virtual
// addresses are taken up.
bool application_keys() {
  const char* v = std::getenv("FI_DPDK_MR_KEYS");
  return v && std::string_view(v) == "application";
}

// FI_DPDK_MR_ENDPOINT=on (integration-rma-mr-endpoint): FI_MR_ENDPOINT is taken up where offered.
bool mr_endpoint_on() {
  const char* v = std::getenv("FI_DPDK_MR_ENDPOINT");
  return v && std::string_view(v) == "on" && !application_keys();
}

TEST(Mr, GetinfoTakesUpTheModesThatChooseHowRegionsWork) {
  const uint64_t prov = application_keys() ? 0 : FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
  // Open MPI's btl ofi: its validation accepts only VIRT_ADDR | ALLOCATED | PROV_KEY.
  Dom btl(kBtlOfiModes);
  ASSERT_NE(btl.e, nullptr);
  EXPECT_EQ(btl.e->domain_attr->mr_mode, prov);
  EXPECT_EQ(btl.e->domain_attr->mr_key_size, 8u);
  EXPECT_GE(btl.e->domain_attr->mr_cnt, 65536u);
  EXPECT_EQ(btl.e->domain_attr->mr_iov_limit, 4u);
  // fabtests' default: FI_MR_LOCAL is not needed, FI_MR_ENDPOINT only with FI_DPDK_MR_ENDPOINT=on.
  Dom ft(kFabtestsModes);
  ASSERT_NE(ft.e, nullptr);
  EXPECT_EQ(ft.e->domain_attr->mr_mode, (mr_endpoint_on() ? FI_MR_ENDPOINT : 0) | prov);
  Dom none(0);
  ASSERT_NE(none.e, nullptr);
  EXPECT_EQ(none.e->domain_attr->mr_mode, 0);
  Dom basic(FI_MR_BASIC);
  ASSERT_NE(basic.e, nullptr);
  EXPECT_EQ(basic.e->domain_attr->mr_mode, FI_MR_BASIC);
}

TEST(Mr, ProviderKeysAreDistinctAndHoldTheDomain) {
  Dom d(kBtlOfiModes);
  ASSERT_NE(d.domain, nullptr);
  std::vector<char> buf(4096);
  std::set<uint64_t> keys;
  std::vector<fid_mr*> mrs;
  for (int i = 0; i < 100; ++i) {
    fid_mr* mr = nullptr;
    // requested_key is ignored with FI_MR_PROV_KEY: the same one every time is fine. With
    // application keys, each is its own.
    const uint64_t requested = application_keys() ? 100 + i : 1;
    ASSERT_EQ(fi_mr_reg(d.domain, buf.data(), buf.size(), FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
                        requested, 0, &mr, nullptr),
              0);
    EXPECT_NE(fi_mr_key(mr), FI_KEY_NOTAVAIL);
    if (application_keys()) {
      EXPECT_EQ(fi_mr_key(mr), requested);
    }
    EXPECT_TRUE(keys.insert(fi_mr_key(mr)).second);
    mrs.push_back(mr);
  }
  EXPECT_EQ(fi_close(&d.domain->fid), -FI_EBUSY);
  for (fid_mr* mr : mrs) EXPECT_EQ(fi_close(&mr->fid), 0);
}

TEST(Mr, RequestedKeysAreTheApplicationsAndUnique) {
  Dom d(0);
  ASSERT_NE(d.domain, nullptr);
  char buf[256];
  fid_mr *a = nullptr, *b = nullptr, *c = nullptr, *local = nullptr;
  ASSERT_EQ(fi_mr_reg(d.domain, buf, 128, FI_REMOTE_WRITE, 0, 0xc0de, 0, &a, nullptr), 0);
  EXPECT_EQ(fi_mr_key(a), 0xc0deu);
  EXPECT_EQ(fi_mr_reg(d.domain, buf + 128, 128, FI_REMOTE_READ, 0, 0xc0de, 0, &b, nullptr),
            -FI_ENOKEY);
  // Regions for local use only take no key: any key, as often as wanted.
  ASSERT_EQ(fi_mr_reg(d.domain, buf, 128, FI_SEND | FI_RECV, 0, 0xc0de, 0, &local, nullptr), 0);
  EXPECT_EQ(fi_close(&a->fid), 0);
  // Closed: the key may be registered again.
  ASSERT_EQ(fi_mr_reg(d.domain, buf + 128, 128, FI_REMOTE_READ, 0, 0xc0de, 0, &c, nullptr), 0);
  EXPECT_EQ(fi_close(&c->fid), 0);
  EXPECT_EQ(fi_close(&local->fid), 0);
}

TEST(Mr, EndpointRegionsAreBoundThenEnabled) {
  // Offered by the application (fabtests' modes), FI_MR_ENDPOINT is taken up only with
  // FI_DPDK_MR_ENDPOINT=on; never with application keys, nor where it is not offered.
  Dom d(kFabtestsModes);
  ASSERT_NE(d.domain, nullptr);
  Dom plain(kBtlOfiModes);
  ASSERT_NE(plain.domain, nullptr);
  EXPECT_EQ(plain.e->domain_attr->mr_mode & FI_MR_ENDPOINT, 0);
  EXPECT_EQ((d.e->domain_attr->mr_mode & FI_MR_ENDPOINT) != 0, mr_endpoint_on());
  char buf[128];
  fid_mr* mr = nullptr;
  if (mr_endpoint_on()) {
    fid_av* av = nullptr;
    fi_av_attr av_attr{};
    ASSERT_EQ(fi_av_open(d.domain, &av_attr, &av, nullptr), 0);
    fid_ep* ep = nullptr;
    ASSERT_EQ(fi_endpoint(d.domain, d.e, &ep, nullptr), 0);
    ASSERT_EQ(fi_mr_reg(d.domain, buf, sizeof(buf), FI_REMOTE_WRITE, 0, 0, 0, &mr, nullptr), 0);
    EXPECT_EQ(fi_mr_enable(mr), -FI_EOPBADSTATE) << "not bound to an endpoint yet";
    EXPECT_EQ(fi_mr_bind(mr, &ep->fid, FI_REMOTE_WRITE), -FI_EBADFLAGS);
    EXPECT_EQ(fi_mr_bind(mr, &ep->fid, 0), 0);
    EXPECT_EQ(fi_mr_bind(mr, &ep->fid, 0), -FI_EINVAL) << "one endpoint";
    EXPECT_EQ(fi_mr_enable(mr), 0);
    EXPECT_EQ(fi_mr_enable(mr), 0);
    EXPECT_EQ(fi_close(&mr->fid), 0);
    EXPECT_EQ(fi_close(&ep->fid), 0);
    EXPECT_EQ(fi_close(&av->fid), 0);
  }
  // Without FI_MR_ENDPOINT regions are enabled at once, and binding one to an endpoint is refused.
  Dom& open = mr_endpoint_on() ? plain : d;
  fid_av* av = nullptr;
  fi_av_attr av_attr{};
  ASSERT_EQ(fi_av_open(open.domain, &av_attr, &av, nullptr), 0);
  fid_ep* ep = nullptr;
  ASSERT_EQ(fi_endpoint(open.domain, open.e, &ep, nullptr), 0);
  ASSERT_EQ(fi_mr_reg(open.domain, buf, sizeof(buf), FI_REMOTE_WRITE, 0, 0, 0, &mr, nullptr), 0);
  EXPECT_EQ(fi_mr_enable(mr), 0);
  EXPECT_EQ(fi_mr_bind(mr, &ep->fid, 0), -FI_EINVAL);
  EXPECT_EQ(fi_close(&mr->fid), 0);
  EXPECT_EQ(fi_close(&ep->fid), 0);
  EXPECT_EQ(fi_close(&av->fid), 0);
}

TEST(Mr, CountersBindForRemoteEvents) {
  Dom d(kBtlOfiModes);
  ASSERT_NE(d.domain, nullptr);
  fi_cntr_attr ca{};
  ca.events = FI_CNTR_EVENTS_COMP;
  fid_cntr* cntr = nullptr;
  ASSERT_EQ(fi_cntr_open(d.domain, &ca, &cntr, nullptr), 0);
  char buf[128];
  fid_mr* mr = nullptr;
  ASSERT_EQ(fi_mr_reg(d.domain, buf, sizeof(buf), FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 0,
                      FI_RMA_EVENT, &mr, nullptr),
            0);
  EXPECT_EQ(fi_mr_bind(mr, &cntr->fid, FI_SEND), -FI_EBADFLAGS);
  EXPECT_EQ(fi_mr_bind(mr, &cntr->fid, FI_REMOTE_WRITE), 0);
  EXPECT_EQ(fi_mr_bind(mr, &cntr->fid, FI_REMOTE_WRITE), -FI_EINVAL);
  EXPECT_EQ(fi_mr_bind(mr, &cntr->fid, FI_REMOTE_READ), 0);
  EXPECT_EQ(fi_close(&cntr->fid), -FI_EBUSY) << "the region holds the counter";
  EXPECT_EQ(fi_close(&mr->fid), 0);
  EXPECT_EQ(fi_close(&cntr->fid), 0);
}

TEST(Mr, VectoredRegionsAndRawKeys) {
  Dom d(kBtlOfiModes);
  ASSERT_NE(d.domain, nullptr);
  char a[64], b[64], c[64], e[64], f[64];
  iovec iov[5] = {{a, 64}, {b, 64}, {c, 64}, {e, 64}, {f, 64}};
  fid_mr* mr = nullptr;
  EXPECT_EQ(fi_mr_regv(d.domain, iov, 5, FI_REMOTE_WRITE, 0, 0, 0, &mr, nullptr), -FI_EINVAL);
  ASSERT_EQ(fi_mr_regv(d.domain, iov, 4, FI_REMOTE_WRITE, 0, 0, 0, &mr, nullptr), 0);
  uint8_t raw[16];
  size_t raw_size = 4;
  uint64_t base = 1;
  EXPECT_EQ(fi_mr_raw_attr(mr, &base, raw, &raw_size, 0), -FI_ETOOSMALL);
  EXPECT_EQ(raw_size, 8u);
  raw_size = sizeof(raw);
  ASSERT_EQ(fi_mr_raw_attr(mr, &base, raw, &raw_size, 0), 0);
  uint64_t mapped = 0;
  ASSERT_EQ(fi_mr_map_raw(d.domain, base, raw, raw_size, &mapped, 0), 0);
  EXPECT_EQ(mapped, fi_mr_key(mr));
  EXPECT_EQ(fi_mr_unmap_key(d.domain, mapped), 0);
  EXPECT_EQ(fi_close(&mr->fid), 0);
}

TEST(Mr, BadRegistrationsAreRefused) {
  Dom d(kBtlOfiModes);
  ASSERT_NE(d.domain, nullptr);
  char buf[64];
  fid_mr* mr = nullptr;
  EXPECT_EQ(fi_mr_reg(d.domain, buf, 0, FI_REMOTE_WRITE, 0, 0, 0, &mr, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_mr_reg(d.domain, nullptr, 64, FI_REMOTE_WRITE, 0, 0, 0, &mr, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_mr_reg(d.domain, buf, 64, FI_REMOTE_WRITE, 0, 0, FI_MORE, &mr, nullptr),
            -FI_EBADFLAGS);
  EXPECT_EQ(fi_mr_reg(d.domain, buf, 64, FI_COLLECTIVE, 0, 0, 0, &mr, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_mr_regv(d.domain, nullptr, 1, FI_REMOTE_WRITE, 0, 0, 0, &mr, nullptr), -FI_EINVAL);
}

}  // namespace
