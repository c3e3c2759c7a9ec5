// SPDX-License-Identifier: BSD-3-Clause
//
// The libfabric API versions the provider serves (lib/common/fi_api.h, fi_dpdk(7) "LIBFABRIC
// VERSIONS"): it reports the API version of the headers it is built against, and where behaviour
// changed after 1.17 it follows the version the application asked for. Each behaviour is asked
// for as a 1.17 application would and as a newer one would: through fi_getinfo up to the core's
// own version (a 1.17 core refuses more with -FI_ENOSYS), through fi_fabric's api_version (which
// no core checks), and through the provider's own getinfo (dlopen). Built against 1.17 headers
// the provider gives every application 1.17's behaviour; built against 2.x headers, the version
// asked for. The same file runs in both builds (scripts/compat.sh runs it against another
// libfabric).
//
// One net_ring loopback port (meson: FI_DPDK_PORTS=net_ring0): endpoints of one process talk.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_prov.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fixture.h"

using namespace dpfab::test;

namespace {

#define HEADERS_AT_LEAST(maj, min) \
  (FI_MAJOR_VERSION > (maj) || (FI_MAJOR_VERSION == (maj) && FI_MINOR_VERSION >= (min)))

constexpr uint32_t kHeaders = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
constexpr uint32_t k1_17 = FI_VERSION(1, 17);
constexpr uint32_t k1_20 = FI_VERSION(1, 20);
constexpr uint32_t k1_21 = FI_VERSION(1, 21);
constexpr uint32_t k1_22 = FI_VERSION(1, 22);
constexpr uint32_t k2_0 = FI_VERSION(2, 0);

// The bits 2.0 reused: for a 1.x application 1 << 45 and 1 << 46 are MR flags (FI_HMEM_HOST_ALLOC,
// FI_HMEM_DEVICE_ONLY) and 1 << 48 is FI_VARIABLE_MSG; for a 2.x one FI_TAGGED_DIRECTED_RECV,
// FI_TAGGED_MULTI_RECV and FI_EXACT_DIRECTED_RECV.
constexpr uint64_t kBit45 = 1ull << 45, kBit46 = 1ull << 46, kBit48 = 1ull << 48;
#if HEADERS_AT_LEAST(2, 0)
static_assert(FI_TAGGED_DIRECTED_RECV == kBit45 && FI_TAGGED_MULTI_RECV == kBit46 &&
              FI_EXACT_DIRECTED_RECV == kBit48);
#endif

// fi_getopt's option 1.22 calls FI_OPT_MAX_MSG_SIZE (three after FI_OPT_XPU_TRIGGER, which 1.17
// declares), for the 1.17 build, whose headers do not name it.
constexpr int kOptMaxMsgSize = FI_OPT_XPU_TRIGGER + 3;
#if HEADERS_AT_LEAST(1, 22)
static_assert(FI_OPT_MAX_MSG_SIZE == kOptMaxMsgSize);
#endif

uint32_t core_version() { return fi_version(); }

// The behaviour a provider built against these headers gives an application of `v`.
uint32_t followed(uint32_t v) { return std::min(v, kHeaders); }

std::string vstr(uint32_t v) {
  return std::to_string(FI_MAJOR(v)) + "." + std::to_string(FI_MINOR(v));
}

// fi_getinfo at `version`, hints naming dpdk.
int ask(uint32_t version, fi_info* hints, InfoPtr* out) {
  return getinfo(hints, out, nullptr, nullptr, 0, version);
}

// The provider's own fi_provider (the plugin the core loaded: dlopen of the same file).
fi_provider* provider() {
  static fi_provider* p = [] {
    InfoPtr warm;  // the core loads the plugin first, so that dlopen finds it loaded
    (void)ask(k1_17, dpdk_hints(FI_EP_RDM).get(), &warm);
    const char* dir = std::getenv("FI_PROVIDER_PATH");
    std::string path = std::string(dir ? dir : ".") + "/libdpdk-fi.so";
    void* h = dlopen(path.c_str(), RTLD_NOW);
    if (!h) return static_cast<fi_provider*>(nullptr);
    auto ini = reinterpret_cast<fi_provider* (*)()>(dlsym(h, "fi_prov_ini"));
    return ini ? ini() : nullptr;
  }();
  return p;
}

// ---- what the provider reports -------------------------------------------------------------

TEST(ApiVersion, ProviderReportsTheApiVersionOfItsHeaders) {
  fi_provider* p = provider();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->fi_version, kHeaders)
      << "reports " << vstr(p->fi_version) << ", headers " << vstr(kHeaders);
  EXPECT_STREQ(p->name, "dpdk");
}

// The core skips a provider whose version is below the one asked for (src/fabric.c): dpdk must be
// listed, with its three endpoint types, at every version the core takes up to the headers'.
TEST(ApiVersion, CoreListsDpdkAtEveryVersionUpToTheHeaders) {
  const uint32_t versions[] = {
      FI_VERSION(1, 5), FI_VERSION(1, 9), k1_17, FI_VERSION(1, 18), k1_20, k1_21, k1_22, k2_0,
      kHeaders};
  for (uint32_t v : versions) {
    SCOPED_TRACE("asked " + vstr(v) + ", core " + vstr(core_version()));
    InfoPtr hints = dpdk_hints(FI_EP_UNSPEC);
    InfoPtr info;
    const int r = ask(v, hints.get(), &info);
    if (v > core_version()) {
      EXPECT_EQ(r, -FI_ENOSYS);  // "Requested version is newer than library"
      continue;
    }
    if (v > kHeaders) {  // a newer core than the headers: dpdk is skipped
      EXPECT_FALSE(r == 0 && has_dpdk_entry(info.get()));
      continue;
    }
    ASSERT_EQ(r, 0);
    bool rdm = false, dgram = false, msg = false;
    for (fi_info* e : as_list(info.get())) {
      rdm |= e->ep_attr->type == FI_EP_RDM;
      dgram |= e->ep_attr->type == FI_EP_DGRAM;
      msg |= e->ep_attr->type == FI_EP_MSG;
      EXPECT_EQ(e->fabric_attr->api_version, v);
    }
    EXPECT_TRUE(rdm && dgram && msg);
  }
}

// The provider's getinfo answers nothing above the version it reports (the core would not ask).
TEST(ApiVersion, ProviderGetinfoAboveItsVersionAnswersNothing) {
  fi_provider* p = provider();
  ASSERT_NE(p, nullptr);
  InfoPtr hints = dpdk_hints(FI_EP_RDM);
  fi_info* out = nullptr;
  EXPECT_EQ(p->getinfo(kHeaders + 1, nullptr, nullptr, 0, hints.get(), &out), -FI_ENODATA);
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(p->getinfo(FI_VERSION(FI_MAJOR_VERSION + 1, 0), nullptr, nullptr, 0, hints.get(), &out),
            -FI_ENODATA);
  ASSERT_EQ(p->getinfo(kHeaders, nullptr, nullptr, 0, hints.get(), &out), 0);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->ep_attr->type, FI_EP_RDM);
  fi_freeinfo(out);
}

// ---- capability bits 2.0 reused --------------------------------------------------------------

// Asks for FI_EP_RDM with `caps` at `version`, through the core when it takes that version, else
// through the provider's getinfo. Returns 0 and the first dpdk entry, or the error.
int rdm_entry(uint32_t version, uint64_t caps, InfoPtr* keep, fi_info** entry) {
  InfoPtr hints = dpdk_hints(FI_EP_RDM);
  hints->caps = caps;
  *entry = nullptr;
  if (version <= core_version()) {
    if (int r = ask(version, hints.get(), keep)) return r;
    *entry = first_dpdk(keep->get());
    return *entry ? 0 : -FI_ENODATA;
  }
  fi_info* out = nullptr;
  if (int r = provider()->getinfo(version, nullptr, nullptr, 0, hints.get(), &out)) return r;
  keep->reset(out);
  *entry = out;
  return 0;
}

TEST(ApiVersion, ReusedCapabilityBitsMeanWhatTheVersionAskedForSays) {
  InfoPtr keep;
  fi_info* e = nullptr;
  // 1.x: not capabilities dpdk offers (FI_VARIABLE_MSG; MR flags).
  for (uint64_t bit : {kBit45, kBit46, kBit48})
    EXPECT_EQ(rdm_entry(k1_17, FI_MSG | FI_TAGGED | bit, &keep, &e), -FI_ENODATA) << bit;
  // Never in an entry unasked, whatever the version.
  for (uint32_t v : {k1_17, kHeaders}) {
    ASSERT_EQ(rdm_entry(v, 0, &keep, &e), 0);
    EXPECT_EQ(e->caps & (kBit45 | kBit46 | kBit48), 0u) << vstr(v);
    EXPECT_EQ(e->rx_attr->caps & (kBit45 | kBit46 | kBit48), 0u) << vstr(v);
  }
  if (kHeaders < k2_0) {
    // A provider built against 1.x headers reports 1.x: a 2.x application never gets to it.
    EXPECT_EQ(rdm_entry(k2_0, FI_MSG | FI_TAGGED | kBit45, &keep, &e), -FI_ENODATA);
    return;
  }
  // 2.x: the directed-receive capabilities are granted on RDM; tagged multi-receive is not offered.
  for (uint64_t bit : {kBit45, kBit48, kBit45 | kBit48}) {
    ASSERT_EQ(rdm_entry(k2_0, FI_MSG | FI_TAGGED | bit, &keep, &e), 0) << bit;
    EXPECT_EQ(e->caps & bit, bit);
    EXPECT_EQ(e->rx_attr->caps & bit, bit);
    EXPECT_EQ(e->tx_attr->caps & (kBit45 | kBit48), 0u);
  }
  EXPECT_EQ(rdm_entry(k2_0, FI_MSG | FI_TAGGED | kBit46, &keep, &e), -FI_ENODATA);
  // Not on DGRAM (no directed receives there).
  InfoPtr hints = dpdk_hints(FI_EP_DGRAM);
  hints->caps = FI_MSG | kBit45;
  InfoPtr info;
  fi_info* out = nullptr;
  EXPECT_EQ(provider()->getinfo(k2_0, nullptr, nullptr, 0, hints.get(), &out), -FI_ENODATA);
}

// FI_AV_USER_ID, a domain capability, where there is an AV.
TEST(ApiVersion, AvUserIdIsGrantedWhenAskedFor) {
  for (uint32_t v : {k1_17, kHeaders}) {
    InfoPtr keep;
    fi_info* e = nullptr;
    ASSERT_EQ(rdm_entry(v, FI_MSG | FI_AV_USER_ID, &keep, &e), 0);
    EXPECT_TRUE(e->caps & FI_AV_USER_ID);
    EXPECT_TRUE(e->domain_attr->caps & FI_AV_USER_ID);
    EXPECT_FALSE(e->rx_attr->caps & FI_AV_USER_ID);
    ASSERT_EQ(rdm_entry(v, FI_MSG, &keep, &e), 0);
    EXPECT_FALSE(e->caps & FI_AV_USER_ID);  // primary: only when asked
  }
  InfoPtr hints = dpdk_hints(FI_EP_MSG);
  hints->caps = FI_MSG | FI_AV_USER_ID;
  InfoPtr info;
  EXPECT_EQ(ask(k1_17, hints.get(), &info), -FI_ENODATA);  // MSG endpoints have no AV
}

// ---- domain attributes ---------------------------------------------------------------------

// getinfo at `v` (the core's or the provider's) for RDM with domain/rx hints set by `set`.
template <typename F>
int rdm_with(uint32_t v, F&& set, InfoPtr* keep, fi_info** e) {
  InfoPtr hints = dpdk_hints(FI_EP_RDM);
  set(hints.get());
  *e = nullptr;
  fi_info* out = nullptr;
  int r = v <= core_version() ? ask(v, hints.get(), keep)
                              : provider()->getinfo(v, nullptr, nullptr, 0, hints.get(), &out);
  if (r) return r;
  if (out) keep->reset(out);
  *e = v <= core_version() ? first_dpdk(keep->get()) : out;
  return *e ? 0 : -FI_ENODATA;
}

// 2.0 deprecated FI_THREAD_FID and FI_THREAD_ENDPOINT: a 2.x application asking for one gets
// FI_THREAD_SAFE (which gives all they promise); a 1.x one gets what it asked for.
TEST(ApiVersion, DeprecatedThreadingModels) {
  for (fi_threading t : {FI_THREAD_FID, FI_THREAD_ENDPOINT, FI_THREAD_DOMAIN}) {
    for (uint32_t v : {k1_17, k2_0}) {
      if (v > kHeaders) continue;  // nothing to ask the provider: above its version
      InfoPtr keep;
      fi_info* e = nullptr;
      ASSERT_EQ(rdm_with(
                    v, [t](fi_info* h) { h->domain_attr->threading = t; }, &keep, &e),
                0);
      const bool deprecated = t != FI_THREAD_DOMAIN && followed(v) >= k2_0;
      EXPECT_EQ(e->domain_attr->threading, deprecated ? FI_THREAD_SAFE : t) << vstr(v) << " " << t;
    }
  }
}

// 2.0 removed buffered receives: total_buffered_recv is ignored for 2.x, refused for 1.x.
TEST(ApiVersion, TotalBufferedRecvIsIgnoredFrom2) {
  auto set = [](fi_info* h) { h->rx_attr->total_buffered_recv = 4096; };
  InfoPtr keep;
  fi_info* e = nullptr;
  EXPECT_EQ(rdm_with(k1_17, set, &keep, &e), -FI_ENODATA);
  if (kHeaders >= k2_0) {
    ASSERT_EQ(rdm_with(k2_0, set, &keep, &e), 0);
    EXPECT_EQ(e->rx_attr->total_buffered_recv, 0u);
  }
}

// 1.21 defined FI_PROGRESS_CONTROL_UNIFIED (manual progress, the application serialising): echoed
// to 1.21 applications; the same value from a 1.17 application is no progress model.
TEST(ApiVersion, ProgressControlUnifiedFrom1_21) {
  const fi_progress unified = static_cast<fi_progress>(FI_PROGRESS_MANUAL + 1);
#if HEADERS_AT_LEAST(1, 21)
  static_assert(FI_PROGRESS_CONTROL_UNIFIED == FI_PROGRESS_MANUAL + 1);
#endif
  for (int field = 0; field < 2; ++field) {
    auto set = [&](fi_info* h) {
      (field ? h->domain_attr->data_progress : h->domain_attr->control_progress) = unified;
    };
    InfoPtr keep;
    fi_info* e = nullptr;
    EXPECT_EQ(rdm_with(k1_17, set, &keep, &e), -FI_ENODATA) << field;
    if (kHeaders < k1_21) continue;
    ASSERT_EQ(rdm_with(k1_21, set, &keep, &e), 0) << field;
    EXPECT_EQ(field ? e->domain_attr->data_progress : e->domain_attr->control_progress, unified);
  }
}

// The domain attributes headers newer than 1.17 added: filled in, and read from hints only when
// the application's version has them.
TEST(ApiVersion, DomainAttributesOfNewerHeaders) {
  InfoPtr keep;
  fi_info* e = nullptr;
  ASSERT_EQ(rdm_with(
                kHeaders, [](fi_info*) {}, &keep, &e),
            0);
#if HEADERS_AT_LEAST(2, 5)
  EXPECT_EQ(e->domain_attr->max_cntr_value, UINT64_MAX);
  EXPECT_EQ(e->domain_attr->max_err_cntr_value, UINT64_MAX);
#endif
#if HEADERS_AT_LEAST(1, 20)
  EXPECT_EQ(e->domain_attr->max_ep_auth_key, 0u);
  auto auth = [](fi_info* h) { h->domain_attr->max_ep_auth_key = 1; };
  EXPECT_EQ(rdm_with(k1_17, auth, &keep, &e), 0);            // not a field of 1.17: not read
  EXPECT_EQ(rdm_with(k1_20, auth, &keep, &e), -FI_ENODATA);  // no authorization keys
#endif
#if HEADERS_AT_LEAST(2, 0)
  auto group = [](fi_info* h) { h->domain_attr->max_group_id = 1; };
  EXPECT_EQ(rdm_with(k1_22, group, &keep, &e), 0);
  EXPECT_EQ(rdm_with(k2_0, group, &keep, &e), -FI_ENODATA);  // no peer groups
#endif
}

// ---- behaviour that follows the fabric's API version ------------------------------------------

// A fabric, domain, CQ and AV of one endpoint type, the fabric opened with api_version `v` (the
// getinfo before it asks for at most what the core takes; fi_fabric takes any api_version).
struct Fab {
  InfoPtr info;
  fi_info* e = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  std::vector<fid_ep*> eps;

  int open(uint32_t v, fi_ep_type type, uint64_t caps, uint64_t av_flags = 0) {
    InfoPtr hints = dpdk_hints(type);
    hints->caps = caps;
    if (int r = ask(std::min(v, std::min(core_version(), kHeaders)), hints.get(), &info)) return r;
    e = first_dpdk(info.get());
    if (!e) return -FI_ENODATA;
    e->fabric_attr->api_version = v;
    if (int r = fi_fabric(e->fabric_attr, &fabric, nullptr)) return r;
    if (int r = fi_domain(fabric, e, &domain, nullptr)) return r;
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_TAGGED;
    cq_attr.size = 256;
    if (int r = fi_cq_open(domain, &cq_attr, &cq, nullptr)) return r;
    fi_av_attr av_attr{};
    av_attr.flags = av_flags;
    return fi_av_open(domain, &av_attr, &av, nullptr);
  }
  // A new enabled endpoint on the CQ and AV; its name in `name`.
  int add_ep(fid_ep** ep, std::vector<uint8_t>* name = nullptr) {
    if (int r = fi_endpoint(domain, e, ep, nullptr)) return r;
    eps.push_back(*ep);
    if (int r = fi_ep_bind(*ep, &cq->fid, FI_TRANSMIT | FI_RECV)) return r;
    if (int r = fi_ep_bind(*ep, &av->fid, 0)) return r;
    if (int r = fi_enable(*ep)) return r;
    if (name) {
      name->resize(64);
      size_t len = name->size();
      if (int r = fi_getname(&(*ep)->fid, name->data(), &len)) return r;
      name->resize(len);
    }
    return 0;
  }
  ~Fab() {
    for (fid_ep* ep : eps) fi_close(&ep->fid);
    if (av) fi_close(&av->fid);
    if (cq) fi_close(&cq->fid);
    if (domain) fi_close(&domain->fid);
    if (fabric) fi_close(&fabric->fid);
  }
};

class ByFabricVersion : public ::testing::TestWithParam<uint32_t> {};

std::string version_name(const ::testing::TestParamInfo<uint32_t>& p) {
  return "v" + std::to_string(FI_MAJOR(p.param)) + "_" + std::to_string(FI_MINOR(p.param));
}

INSTANTIATE_TEST_SUITE_P(Versions, ByFabricVersion,
                         ::testing::Values(k1_17, FI_VERSION(1, 18), k1_20, k1_22, k2_0,
                                           FI_VERSION(2, 6)),
                         version_name);

// 1.20 added fi_cq_err_entry.src_addr (FI_ADDR_NOTAVAIL unless authorization keys are used). An
// older application's entry ends before it: nothing may be written there. The error is a
// cancelled receive; readerr is called through the ops table (2.x headers' fi_cq_readerr sets
// src_addr itself before calling the provider).
TEST_P(ByFabricVersion, CqErrorEntryEndsWhereTheVersionsEntryEnds) {
  const uint32_t v = GetParam();
  Fab f;
  ASSERT_EQ(f.open(v, FI_EP_RDM, FI_MSG | FI_TAGGED), 0);
  fid_ep* ep = nullptr;
  ASSERT_EQ(f.add_ep(&ep), 0);
  char buf[64];
  int ctx = 0;
  ASSERT_EQ(fi_recv(ep, buf, sizeof(buf), nullptr, FI_ADDR_UNSPEC, &ctx), 0);
  ASSERT_EQ(fi_cancel(&ep->fid, &ctx), 0);
  fi_cq_tagged_entry entry;
  ASSERT_EQ(fi_cq_read(f.cq, &entry, 1), -FI_EAVAIL);

#if HEADERS_AT_LEAST(1, 20)
  const size_t k15 = offsetof(fi_cq_err_entry, src_addr);
#else
  const size_t k15 = sizeof(fi_cq_err_entry);
#endif
  constexpr uint8_t kCanary = 0xa5;
  alignas(fi_cq_err_entry) uint8_t raw[sizeof(fi_cq_err_entry) + 32];
  std::memset(raw, kCanary, sizeof(raw));
  auto* err = reinterpret_cast<fi_cq_err_entry*>(raw);
  err->err_data = nullptr;
  err->err_data_size = 0;
  ASSERT_EQ(f.cq->ops->readerr(f.cq, err, 0), 1);
  EXPECT_EQ(err->err, FI_ECANCELED);
  EXPECT_EQ(err->op_context, &ctx);
  const size_t end = followed(v) >= k1_20 ? sizeof(fi_cq_err_entry) : k15;
  for (size_t i = end; i < sizeof(raw); ++i)
    ASSERT_EQ(raw[i], kCanary) << "byte " << i << " written (entry of " << vstr(v) << " ends at "
                               << end << ")";
#if HEADERS_AT_LEAST(1, 20)
  if (followed(v) >= k1_20) {
    EXPECT_EQ(err->src_addr, FI_ADDR_NOTAVAIL);
  }
#endif
}

// 1.22's endpoint options FI_OPT_MAX_*_SIZE / FI_OPT_INJECT_*_SIZE: -FI_ENOPROTOOPT for older
// applications; for 1.22 ones they give the info's limits and lower them.
TEST_P(ByFabricVersion, SizeOptionsFrom1_22) {
  const uint32_t v = GetParam();
  Fab f;
  ASSERT_EQ(f.open(v, FI_EP_RDM, FI_MSG | FI_TAGGED), 0);
  fid_ep* ep = nullptr;
  std::vector<uint8_t> name;
  ASSERT_EQ(f.add_ep(&ep, &name), 0);
  size_t val = 0, len = sizeof(val);
  if (followed(v) < k1_22) {
    EXPECT_EQ(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, kOptMaxMsgSize, &val, &len), -FI_ENOPROTOOPT);
    EXPECT_EQ(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, kOptMaxMsgSize, &val, sizeof(val)),
              -FI_ENOPROTOOPT);
    return;
  }
#if HEADERS_AT_LEAST(1, 22)
  fi_addr_t self;
  ASSERT_EQ(fi_av_insert(f.av, name.data(), 1, &self, 0, nullptr), 1);
  auto get = [&](int opt) {
    size_t x = 0, l = sizeof(x);
    EXPECT_EQ(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, opt, &x, &l), 0) << opt;
    EXPECT_EQ(l, sizeof(size_t));
    return x;
  };
  EXPECT_EQ(get(FI_OPT_MAX_MSG_SIZE), f.e->ep_attr->max_msg_size);
  EXPECT_EQ(get(FI_OPT_MAX_TAGGED_SIZE), f.e->ep_attr->max_msg_size);
  EXPECT_EQ(get(FI_OPT_INJECT_MSG_SIZE), f.e->tx_attr->inject_size);
  EXPECT_EQ(get(FI_OPT_INJECT_TAGGED_SIZE), f.e->tx_attr->inject_size);
  for (int opt : {FI_OPT_MAX_RMA_SIZE, FI_OPT_MAX_ATOMIC_SIZE, FI_OPT_INJECT_RMA_SIZE,
                  FI_OPT_INJECT_ATOMIC_SIZE})
    EXPECT_EQ(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, opt, &val, &len), -FI_ENOPROTOOPT) << opt;
  len = 1;
  EXPECT_EQ(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MAX_MSG_SIZE, &val, &len), -FI_ETOOSMALL);
  EXPECT_EQ(len, sizeof(size_t));
  // Above the info's limit: refused. Lower: later sends above it are -FI_EMSGSIZE.
  size_t big = f.e->ep_attr->max_msg_size + 1;
  EXPECT_EQ(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MAX_MSG_SIZE, &big, sizeof(big)),
            -FI_EINVAL);
  size_t small = 100, tiny = 10;
  EXPECT_EQ(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MAX_MSG_SIZE, &small, 4), -FI_EINVAL);
  ASSERT_EQ(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MAX_MSG_SIZE, &small, sizeof(small)), 0);
  ASSERT_EQ(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_INJECT_TAGGED_SIZE, &tiny, sizeof(tiny)),
            0);
  EXPECT_EQ(get(FI_OPT_MAX_MSG_SIZE), small);
  EXPECT_EQ(get(FI_OPT_MAX_TAGGED_SIZE), f.e->ep_attr->max_msg_size);
  char buf[200] = {};
  EXPECT_EQ(fi_send(ep, buf, 101, nullptr, self, nullptr), -FI_EMSGSIZE);
  EXPECT_EQ(fi_inject(ep, buf, 101, self), -FI_EMSGSIZE);
  EXPECT_EQ(fi_tinject(ep, buf, 11, self, 1), -FI_EMSGSIZE);
  EXPECT_EQ(fi_tinject(ep, buf, 10, self, 1), 0);
  EXPECT_EQ(fi_tsend(ep, buf, 101, nullptr, self, 1, nullptr), 0);  // tagged: not lowered
  EXPECT_EQ(fi_inject(ep, buf, 100, self), 0);
  // DGRAM: no tagged sizes.
  Fab d;
  ASSERT_EQ(d.open(v, FI_EP_DGRAM, FI_MSG), 0);
  fid_ep* dep = nullptr;
  ASSERT_EQ(d.add_ep(&dep), 0);
  EXPECT_EQ(fi_getopt(&dep->fid, FI_OPT_ENDPOINT, FI_OPT_MAX_TAGGED_SIZE, &val, &len),
            -FI_ENOPROTOOPT);
  len = sizeof(val);
  EXPECT_EQ(fi_getopt(&dep->fid, FI_OPT_ENDPOINT, FI_OPT_MAX_MSG_SIZE, &val, &len), 0);
  EXPECT_EQ(val, d.e->ep_attr->max_msg_size);
#endif
}

// 2.0 deprecated FI_AV_MAP: an FI_AV_UNSPEC AV is a table for 2.x applications.
TEST_P(ByFabricVersion, UnspecAvTypeFollowsTheVersion) {
  const uint32_t v = GetParam();
  Fab f;
  ASSERT_EQ(f.open(v, FI_EP_RDM, FI_MSG), 0);
  fi_av_attr attr{};
  fid_av* av = nullptr;
  ASSERT_EQ(fi_av_open(f.domain, &attr, &av, nullptr), 0);
  EXPECT_EQ(attr.type, followed(v) >= k2_0 ? FI_AV_TABLE : FI_AV_MAP);
  fi_close(&av->fid);
  attr = {};
  attr.type = FI_AV_MAP;  // deprecated, still served
  ASSERT_EQ(fi_av_open(f.domain, &attr, &av, nullptr), 0);
  EXPECT_EQ(attr.type, FI_AV_MAP);
  fi_close(&av->fid);
}

// Receives `n` completions on `cq` (bounded), with their sources.
int read_n(fid_cq* cq, size_t n, std::vector<fi_cq_tagged_entry>* got,
           std::vector<fi_addr_t>* src) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (got->size() < n && std::chrono::steady_clock::now() < deadline) {
    fi_cq_tagged_entry e;
    fi_addr_t a = FI_ADDR_NOTAVAIL;
    ssize_t r = fi_cq_readfrom(cq, &e, 1, &a);
    if (r == 1) {
      got->push_back(e);
      src->push_back(a);
    } else if (r != -FI_EAGAIN) {
      return static_cast<int>(r);
    }
  }
  return got->size() == n ? 0 : -FI_ETIMEDOUT;
}

// FI_AV_USER_ID: completions report the ID given with the address (insertion flag, every
// version) or, on an AV opened with FI_AV_USER_ID (1.20), set with fi_av_set_user_id.
TEST_P(ByFabricVersion, CompletionsReportUserIds) {
  const uint32_t v = GetParam();
  for (int open_flag = 0; open_flag < 2; ++open_flag) {
    SCOPED_TRACE(open_flag ? "AV opened with FI_AV_USER_ID" : "insertion flag");
    Fab f;
    const bool attr_ok = followed(v) >= k1_20;
    const int r =
        f.open(v, FI_EP_RDM, FI_MSG | FI_SOURCE | FI_AV_USER_ID, open_flag ? FI_AV_USER_ID : 0);
    if (open_flag && !attr_ok) {
      EXPECT_EQ(r, -FI_EBADFLAGS);  // not an AV flag before 1.20
      continue;
    }
    ASSERT_EQ(r, 0);
    ASSERT_TRUE(f.e->caps & FI_SOURCE);
    fid_ep *a = nullptr, *b = nullptr;
    std::vector<uint8_t> name_a, name_b;
    ASSERT_EQ(f.add_ep(&a, &name_a), 0);
    ASSERT_EQ(f.add_ep(&b, &name_b), 0);
    fi_addr_t to_a = 0, from_b = 0xb0b;
    ASSERT_EQ(fi_av_insert(f.av, name_a.data(), 1, &to_a, 0, nullptr), 1);
    if (!open_flag) {
      ASSERT_EQ(fi_av_insert(f.av, name_b.data(), 1, &from_b, FI_AV_USER_ID, nullptr), 1);
      EXPECT_NE(from_b, 0xb0bu);  // the array now holds the fi_addr
    } else {
      ASSERT_EQ(fi_av_insert(f.av, name_b.data(), 1, &from_b, 0, nullptr), 1);
#if HEADERS_AT_LEAST(1, 20)
      ASSERT_EQ(fi_av_set_user_id(f.av, from_b, 0xb0b, 0), 0);
#endif
    }
    char rbuf[8] = {}, sbuf[8] = "hello";
    ASSERT_EQ(fi_recv(a, rbuf, sizeof(rbuf), nullptr, FI_ADDR_UNSPEC, rbuf), 0);
    ASSERT_EQ(fi_send(b, sbuf, 6, nullptr, to_a, sbuf), 0);
    std::vector<fi_cq_tagged_entry> got;
    std::vector<fi_addr_t> src;
    ASSERT_EQ(read_n(f.cq, 2, &got, &src), 0);
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i].flags & FI_RECV) {
        EXPECT_EQ(src[i], 0xb0bu);
      }
    EXPECT_STREQ(rbuf, "hello");
  }
}

// 2.0's FI_TAGGED_DIRECTED_RECV without FI_DIRECTED_RECV: tagged receives take the source into
// account, untagged ones ignore it (with FI_DIRECTED_RECV both would).
TEST(ApiVersion2, TaggedDirectedReceiveDirectsTaggedReceivesOnly) {
#if HEADERS_AT_LEAST(2, 0)
  Fab f;
  ASSERT_EQ(f.open(k2_0, FI_EP_RDM, FI_MSG | FI_TAGGED | FI_TAGGED_DIRECTED_RECV), 0);
  ASSERT_FALSE(f.e->caps & FI_DIRECTED_RECV);
  fid_ep *a = nullptr, *b = nullptr, *c = nullptr;
  std::vector<uint8_t> na, nb, nc;
  ASSERT_EQ(f.add_ep(&a, &na), 0);
  ASSERT_EQ(f.add_ep(&b, &nb), 0);
  ASSERT_EQ(f.add_ep(&c, &nc), 0);
  fi_addr_t to_a, fb, fc;
  ASSERT_EQ(fi_av_insert(f.av, na.data(), 1, &to_a, 0, nullptr), 1);
  ASSERT_EQ(fi_av_insert(f.av, nb.data(), 1, &fb, 0, nullptr), 1);
  ASSERT_EQ(fi_av_insert(f.av, nc.data(), 1, &fc, 0, nullptr), 1);
  char tbuf[8] = {}, mbuf[8] = {};
  // Both receives name b; c sends one of each first, then b a tagged one.
  ASSERT_EQ(fi_trecv(a, tbuf, sizeof(tbuf), nullptr, fb, 7, 0, tbuf), 0);
  ASSERT_EQ(fi_recv(a, mbuf, sizeof(mbuf), nullptr, fb, mbuf), 0);
  char from_c_t[] = "c-tag", from_c_m[] = "c-msg", from_b_t[] = "b-tag";
  ASSERT_EQ(fi_tsend(c, from_c_t, sizeof(from_c_t), nullptr, to_a, 7, nullptr), 0);
  ASSERT_EQ(fi_send(c, from_c_m, sizeof(from_c_m), nullptr, to_a, nullptr), 0);
  std::vector<fi_cq_tagged_entry> got;
  std::vector<fi_addr_t> src;
  // c's two sends and the untagged receive: c's tagged message waits (unexpected).
  ASSERT_EQ(read_n(f.cq, 3, &got, &src), 0);
  EXPECT_STREQ(mbuf, "c-msg");
  EXPECT_STREQ(tbuf, "");
  ASSERT_EQ(fi_tsend(b, from_b_t, sizeof(from_b_t), nullptr, to_a, 7, nullptr), 0);
  got.clear();
  src.clear();
  ASSERT_EQ(read_n(f.cq, 2, &got, &src), 0);
  EXPECT_STREQ(tbuf, "b-tag");
#else
  GTEST_SKIP() << "headers " << vstr(kHeaders) << " have no FI_TAGGED_DIRECTED_RECV";
#endif
}

}  // namespace
