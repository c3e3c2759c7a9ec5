// SPDX-License-Identifier: BSD-3-Clause
//
// The one set-up of the integration tests, through the real libfabric core (FI_PROVIDER_PATH
// points at the plugin in the build tree; meson sets it): fi_getinfo with hints naming dpdk, then
// fabric, domain, AV, CQ, counters and endpoint.
//   Domain       the fabric and domain of dpdk's first entry for some hints
//   Endpoint     an endpoint of a Domain with its own CQ (and counters), bound to an AV, enabled
//   EpNode       a Domain with a table AV and one Endpoint: one side of a test between processes
//   DomainTest   gtest fixture: a Domain opened in SetUp and closed (each fi_close expected to
//                succeed) in TearDown
//   EndpointTest DomainTest plus a table AV and one Endpoint whose own name is in the AV
// and the small pieces around them: dpdk_hints, getinfo, first_dpdk, Address (what fi_getname
// gives), close_fid. Every open() returns 0 or the -FI_E* value of the step that failed, and
// says which in `failed` ("fi_domain: -22 Invalid argument"): children of a fork return codes,
// tests assert. Objects close in the reverse order of opening, in close() or the destructor.
#pragma once

#include <gtest/gtest.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace dpfab::test {

struct InfoDeleter {
  void operator()(fi_info* i) const { fi_freeinfo(i); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

/// Hints naming dpdk (this is what makes the provider start EAL in getinfo), for one endpoint type
/// (most tests here are DGRAM tests; getinfo's own tests ask for FI_EP_UNSPEC to see every entry)
/// and, when not 0, these caps.
/// Poll fds a POLLFD wait object hands out besides its own: the same-host path's eventfd when
/// FI_DPDK_SHM=on (the port's wake fds; net_null has none of its own).
inline unsigned same_host_fds() {
  const char* s = std::getenv("FI_DPDK_SHM");
  return s && std::strcmp(s, "on") == 0 ? 1u : 0u;
}

inline InfoPtr dpdk_hints(fi_ep_type type = FI_EP_DGRAM, uint64_t caps = 0) {
  InfoPtr h(fi_allocinfo());
  h->fabric_attr->prov_name = strdup("dpdk");
  h->ep_attr->type = type;
  if (caps) h->caps = caps;
  return h;
}

inline int getinfo(const fi_info* hints, InfoPtr* out, const char* node = nullptr,
                   const char* service = nullptr, uint64_t flags = 0,
                   uint32_t version = FI_VERSION(1, 17)) {
  fi_info* info = nullptr;
  int ret = fi_getinfo(version, node, service, flags, hints, &info);
  out->reset(info);
  return ret;
}

/// The entries of the dpdk provider itself. With hints that name "dpdk" the core also returns
/// utility providers layered on us ("dpdk;ofi_rxd" RDM over our DGRAM); those are the core's.
inline std::vector<fi_info*> as_list(fi_info* head) {
  std::vector<fi_info*> v;
  for (; head; head = head->next)
    if (head->fabric_attr->prov_name && std::strcmp(head->fabric_attr->prov_name, "dpdk") == 0)
      v.push_back(head);
  return v;
}

/// The first entry of the dpdk provider itself (nullptr when none).
inline fi_info* first_dpdk(fi_info* head) {
  auto v = as_list(head);
  return v.empty() ? nullptr : v.front();
}

/// Whether any entry is the dpdk provider's own.
inline bool has_dpdk_entry(fi_info* head) { return !as_list(head).empty(); }

/// The port names the test environment configured (FI_DPDK_PORTS, else the default memif port).
inline std::vector<std::string> expected_ports() {
  const char* env = std::getenv("FI_DPDK_PORTS");
  std::string s = env ? env : "net_memif0";
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(';', start);
    if (end == std::string::npos) end = s.size();
    std::string piece = s.substr(start, end - start);
    piece = piece.substr(0, piece.find(','));
    if (!piece.empty()) names.push_back(piece);
    start = end + 1;
  }
  return names;
}

/// A dpdk address (lib/wire/address.h) as an application sees it: 16 opaque bytes
/// (FI_FORMAT_UNSPEC), what fi_getname gives and fi_av_insert takes.
struct Address {
  uint8_t version;
  uint8_t reserved;
  uint8_t mac[6];
  uint32_t ipv4_be;
  uint16_t udp_port_be;
  uint16_t ep_id_be;
};
static_assert(sizeof(Address) == 16);

/// fi_close of `*obj` when it is open; then *obj is null. 0 or fi_close's error.
template <typename Fid>
int close_fid(Fid** obj) {
  int r = *obj ? fi_close(&(*obj)->fid) : 0;
  *obj = nullptr;
  return r;
}

/// "step: -N text" for `failed` members.
inline std::string step_error(const char* step, int r) {
  return std::string(step) + ": " + std::to_string(r) + " " + fi_strerror(r < 0 ? -r : r);
}

/// The fabric and domain of dpdk's first entry for some hints.
struct Domain {
  InfoPtr infos;            ///< what fi_getinfo returned
  fi_info* info = nullptr;  ///< dpdk's first entry in it
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  std::string failed;  ///< the step that failed and its error ("" when none)

  /// fi_getinfo(`hints`, node, service, flags), dpdk's first entry (of the hints' endpoint type
  /// when they name one), fi_fabric.
  int open_fabric(const fi_info* hints, const char* node = nullptr, const char* service = nullptr,
                  uint64_t flags = 0) {
    if (int r = getinfo(hints, &infos, node, service, flags)) return fail("fi_getinfo", r);
    info = first_dpdk(infos.get());
    if (!info) return fail("no dpdk entry", -FI_ENODATA);
    const fi_ep_type want = hints && hints->ep_attr ? hints->ep_attr->type : FI_EP_UNSPEC;
    if (want != FI_EP_UNSPEC && info->ep_attr->type != want)
      return fail("dpdk's entry of the endpoint type", -FI_ENODATA);
    if (int r = fi_fabric(info->fabric_attr, &fabric, nullptr)) return fail("fi_fabric", r);
    return 0;
  }
  /// fi_domain on the fabric, for `info`.
  int open_domain() {
    if (int r = fi_domain(fabric, info, &domain, nullptr)) return fail("fi_domain", r);
    return 0;
  }
  /// open_fabric, then open_domain.
  int open(const fi_info* hints, const char* node = nullptr, const char* service = nullptr,
           uint64_t flags = 0) {
    if (int r = open_fabric(hints, node, service, flags)) return r;
    return open_domain();
  }
  int open(fi_ep_type type = FI_EP_DGRAM, uint64_t caps = 0) {
    return open(dpdk_hints(type, caps).get());
  }

  /// An AV of `type` on the domain (with `count` as its size hint).
  int open_av(fid_av** av, fi_av_type type = FI_AV_TABLE, size_t count = 0) {
    fi_av_attr attr{};
    attr.type = type;
    attr.count = count;
    if (int r = fi_av_open(domain, &attr, av, nullptr)) return fail("fi_av_open", r);
    return 0;
  }
  /// An EQ on the fabric, waiting with `wait_obj`.
  int open_eq(fid_eq** eq, fi_wait_obj wait_obj = FI_WAIT_NONE) {
    fi_eq_attr attr{};
    attr.wait_obj = wait_obj;
    if (int r = fi_eq_open(fabric, &attr, eq, nullptr)) return fail("fi_eq_open", r);
    return 0;
  }

  /// Closes the domain, then the fabric: 0, or the first error (in `failed` too).
  int close() {
    int r = close_fid(&domain);
    if (r) fail("fi_close(domain)", r);
    if (int f = close_fid(&fabric); f && !r) r = fail("fi_close(fabric)", f);
    return r;
  }

  Domain() = default;
  Domain(const Domain&) = delete;
  Domain& operator=(const Domain&) = delete;
  ~Domain() { close(); }

  int fail(const char* step, int r) {
    failed = step_error(step, r);
    return r;
  }
};

/// How an Endpoint is opened.
struct EpOptions {
  fi_cq_format cq_format = FI_CQ_FORMAT_DATA;
  size_t cq_size = 64;
  fi_wait_obj cq_wait = FI_WAIT_NONE;
  /// Completion counters: none; one for both directions (`cntr`); or one each (`cntr` for
  /// sends, `rx_cntr` for receives).
  enum class Cntrs { kNone, kShared, kSplit } cntrs = Cntrs::kNone;
  fid_av* av = nullptr;  ///< bound when given
  fid_eq* eq = nullptr;  ///< bound when given
  bool enable = true;    ///< fi_enable, then fi_getname into `addr`
};

/// An endpoint with its own CQ for both directions (and its counters), bound to the AV and EQ of
/// its options (which it does not own).
struct Endpoint {
  fid_cq* cq = nullptr;
  fid_cntr* cntr = nullptr;
  fid_cntr* rx_cntr = nullptr;
  fid_ep* ep = nullptr;
  uint8_t addr[64] = {};  ///< its name (once enabled)
  size_t addr_len = 0;
  std::string failed;  ///< the step that failed and its error ("" when none)

  /// Opens it on `d`, for `info` (default: d.info), as `o` says.
  int open(const Domain& d, const EpOptions& o = {}, const fi_info* info = nullptr) {
    fi_cq_attr cq_attr{};
    cq_attr.format = o.cq_format;
    cq_attr.size = o.cq_size;
    cq_attr.wait_obj = o.cq_wait;
    if (int r = fi_cq_open(d.domain, &cq_attr, &cq, nullptr)) return fail("fi_cq_open", r);
    if (o.cntrs != EpOptions::Cntrs::kNone) {
      fi_cntr_attr ct{};
      ct.events = FI_CNTR_EVENTS_COMP;
      if (int r = fi_cntr_open(d.domain, &ct, &cntr, nullptr)) return fail("fi_cntr_open", r);
      if (o.cntrs == EpOptions::Cntrs::kSplit)
        if (int r = fi_cntr_open(d.domain, &ct, &rx_cntr, nullptr)) return fail("fi_cntr_open", r);
    }
    if (int r = fi_endpoint(d.domain, const_cast<fi_info*>(info ? info : d.info), &ep, nullptr))
      return fail("fi_endpoint", r);
    if (int r = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV)) return fail("bind cq", r);
    if (cntr) {
      if (int r = fi_ep_bind(ep, &cntr->fid, rx_cntr ? FI_SEND : FI_SEND | FI_RECV))
        return fail("bind cntr", r);
    }
    if (rx_cntr) {
      if (int r = fi_ep_bind(ep, &rx_cntr->fid, FI_RECV)) return fail("bind rx cntr", r);
    }
    if (o.av) {
      if (int r = fi_ep_bind(ep, &o.av->fid, 0)) return fail("bind av", r);
    }
    if (o.eq) {
      if (int r = fi_ep_bind(ep, &o.eq->fid, 0)) return fail("bind eq", r);
    }
    if (!o.enable) return 0;
    if (int r = fi_enable(ep)) return fail("fi_enable", r);
    addr_len = sizeof(addr);
    if (int r = fi_getname(&ep->fid, addr, &addr_len)) return fail("fi_getname", r);
    return 0;
  }

  /// Inserts its own name into `av`; `*out` is its address there. 0 or an error.
  int insert_into(fid_av* av, fi_addr_t* out) {
    int n = fi_av_insert(av, addr, 1, out, 0, nullptr);
    return n == 1 ? 0 : fail("fi_av_insert", n < 0 ? n : -FI_EINVAL);
  }

  /// Closes the endpoint, then its counters and CQ: 0, or the first error (in `failed` too).
  int close() {
    int r = close_fid(&ep);
    if (r) fail("fi_close(ep)", r);
    if (int c = close_fid(&cntr); c && !r) r = fail("fi_close(cntr)", c);
    if (int c = close_fid(&rx_cntr); c && !r) r = fail("fi_close(rx_cntr)", c);
    if (int c = close_fid(&cq); c && !r) r = fail("fi_close(cq)", c);
    return r;
  }

  Endpoint() = default;
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;
  ~Endpoint() { close(); }

  int fail(const char* step, int r) {
    failed = step_error(step, r);
    return r;
  }
};

/// One dpdk endpoint of `type` with its CQ (`format`, 4096 entries, FI_WAIT_UNSPEC) and a table
/// AV, through libfabric, enabled; `addr` is its name. One side of a test between processes.
struct EpNode : Domain, Endpoint {
  fid_av* av = nullptr;

  int open(fi_ep_type type = FI_EP_DGRAM, uint64_t caps = 0,
           fi_cq_format format = FI_CQ_FORMAT_MSG) {
    if (int r = Domain::open(type, caps)) return r;
    if (int r = open_av(&av)) return r;
    EpOptions o;
    o.cq_format = format;
    o.cq_size = 4096;
    o.cq_wait = FI_WAIT_UNSPEC;
    o.av = av;
    return Endpoint::open(*this, o);
  }
  /// What failed, of the domain's steps or the endpoint's.
  const std::string& error() const {
    return Endpoint::failed.empty() ? Domain::failed : Endpoint::failed;
  }
  int close() {
    int r = Endpoint::close();
    if (int c = close_fid(&av); c && !r) r = c;
    if (int c = Domain::close(); c && !r) r = c;
    return r;
  }
  ~EpNode() { close(); }
};

/// A gtest fixture holding a Domain `d_`: SetUp opens it with hints() (fabric only when
/// opens_domain() says no); TearDown closes it, expecting success. A fixture that opens more on
/// the domain closes that in its own TearDown, then calls DomainTest::TearDown().
class DomainTest : public testing::Test {
 protected:
  virtual InfoPtr hints() const { return dpdk_hints(); }
  virtual bool opens_domain() const { return true; }

  void SetUp() override {
    InfoPtr h = hints();
    ASSERT_EQ(d_.open_fabric(h.get()), 0) << d_.failed;
    if (opens_domain()) {
      ASSERT_EQ(d_.open_domain(), 0) << d_.failed;
    }
  }
  void TearDown() override { EXPECT_EQ(d_.close(), 0) << d_.failed; }

  Domain d_;
};

/// DomainTest plus a table AV `av_` and one endpoint `e_` (ep_options(), bound to av_) whose own
/// name is in the AV as `self_` (unless inserts_self() says no): an endpoint that sends to itself.
class EndpointTest : public DomainTest {
 protected:
  virtual EpOptions ep_options() const { return {}; }
  virtual bool inserts_self() const { return true; }

  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(DomainTest::SetUp());
    ASSERT_EQ(d_.open_av(&av_), 0) << d_.failed;
    EpOptions o = ep_options();
    o.av = av_;
    ASSERT_EQ(e_.open(d_, o), 0) << e_.failed;
    if (inserts_self()) {
      ASSERT_EQ(e_.insert_into(av_, &self_), 0) << e_.failed;
    }
  }
  void TearDown() override {
    EXPECT_EQ(e_.close(), 0) << e_.failed;
    EXPECT_EQ(close_fid(&av_), 0);
    DomainTest::TearDown();
  }

  fid_av* av_ = nullptr;
  Endpoint e_;
  fi_addr_t self_ = FI_ADDR_NOTAVAIL;
};

}  // namespace dpfab::test
