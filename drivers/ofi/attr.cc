// SPDX-License-Identifier: BSD-3-Clause
//
// fi_getinfo: the attributes dpdk offers and how hints narrow them. Only what is implemented is
// advertised. Per configured port (domain = port), in this order: an FI_EP_RDM entry (FI_MSG,
// FI_TAGGED, FI_RMA, FI_ATOMIC; ep_rdm.cc), an FI_EP_DGRAM entry (FI_MSG, FI_MULTICAST;
// ep_dgram.cc), then an FI_EP_MSG entry (connections with RDM's transfers and RMA; ep_msg.cc,
// pep.cc). Applications that take the first entry (fi_pingpong, fabtests, Open MPI) get the native
// RDM.
//
// The utility providers. libfabric 1.17 lists ofi_rxd and ofi_rxm before any DL provider and
// layers them over every provider that answers their probe: ofi_rxd asks for FI_EP_DGRAM with
// mode FI_LOCAL_MR | FI_MSG_PREFIX, which no application sets together with an API of 1.5 or
// later; ofi_rxm asks for FI_EP_MSG with libfabric's internal OFI_CORE_PROV_ONLY flag. We answer
// both probes with nothing, so neither "dpdk;ofi_rxd" nor "dpdk;ofi_rxm" exists and a plain
// fi_getinfo naming dpdk hands out our own RDM first; DGRAM and MSG applications are unaffected.
// libfabric 2.x probes the same way.
//
// API versions: the entries are the same for every version an application asks for up to the
// headers' (kApiVersion; above it, nothing); where libfabric changed what hints mean (capability
// bits 2.0 reused, deprecated threading models, removed fields), the version asked for decides:
// api_version.h.
//
// EAL starts here only when the application has chosen this provider (the hints name "dpdk") and
// asks for what it offers (could_match): libfabric asks every provider, and `fi_info -l`, an MPI
// job probing for tcp or a test asking dpdk for RMA must not start DPDK. Other callers get
// attributes from the configuration alone (MAC unknown until fi_fabric).
#include <arpa/inet.h>
#include <netdb.h>

#include <cstring>
#include <iterator>

#include "api_version.h"
#include "dpdk.h"
#include "wire/address.h"
#include "wire/format.h"
#include "wire/multicast.h"
#include "wire/rdm.h"

namespace dpfab::ofi {
namespace {

// FI_MULTICAST: fi_join on DGRAM endpoints (ep_dgram.cc), paired with FI_SEND and/or FI_RECV.
// Peers on the same box (memif, ring) and on other hosts (NICs, veth) alike.
constexpr uint64_t kCommCaps = FI_LOCAL_COMM | FI_REMOTE_COMM;
// Named AVs shared by the processes of a node (av.cc, lib/proto/av_shared.h).
constexpr uint64_t kDomainCaps = kCommCaps | FI_SHARED_AV;
constexpr uint64_t kDgramCaps = FI_MSG | FI_MULTICAST | FI_SEND | FI_RECV | FI_SOURCE | kDomainCaps;
// RMA and atomics (ep_rma.h) as initiator (FI_READ, FI_WRITE) and target (FI_REMOTE_READ,
// FI_REMOTE_WRITE, FI_RMA_EVENT counters), with FI_FENCE and triggered transmits (FI_TRIGGER,
// counter thresholds).
constexpr uint64_t kRmaCaps = FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ |
                              FI_REMOTE_WRITE | FI_RMA_EVENT | FI_FENCE | FI_TRIGGER;
constexpr uint64_t kRmaTxCaps = FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_FENCE | FI_TRIGGER;
constexpr uint64_t kRmaRxCaps =
    FI_RMA | FI_ATOMIC | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_EVENT;
constexpr uint64_t kRdmCaps = FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_DIRECTED_RECV |
                              FI_MULTI_RECV | FI_SOURCE | FI_SOURCE_ERR | kRmaCaps | kDomainCaps;
// FI_EP_MSG: RDM's data transfer to the one connected peer (ep_msg.cc); no AV, so neither
// FI_SOURCE nor FI_DIRECTED_RECV mean anything.
constexpr uint64_t kMsgCaps =
    FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_MULTI_RECV | kRmaCaps | kDomainCaps;
// Granted only when asked for: they cost a lookup per received message.
constexpr uint64_t kAskedCaps = FI_SOURCE | FI_SOURCE_ERR;
// The orderings that hold on RDM and MSG endpoints (rdm_core.h, "Ordering"): messages in order,
// RMA and atomics processed at the target in the order posted, a write or message posted after a
// read never changing what the read returns. Not WAS or RAS: a rendezvous message's data lands
// after RMA posted later.
constexpr uint64_t kRdmOrder =
    FI_ORDER_SAS | FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_WAR | FI_ORDER_WAW | FI_ORDER_SAR |
    FI_ORDER_SAW | FI_ORDER_RMA_RAR | FI_ORDER_RMA_RAW | FI_ORDER_RMA_WAR | FI_ORDER_RMA_WAW |
    FI_ORDER_ATOMIC_RAR | FI_ORDER_ATOMIC_RAW | FI_ORDER_ATOMIC_WAR | FI_ORDER_ATOMIC_WAW;
constexpr uint64_t kRdmMaxMsg = uint64_t{1} << 30;
// The mr_mode bits dpdk takes up when the application offers them (narrow()), and the one it
// takes up besides only with mr_endpoint = on (FI_DPDK_MR_ENDPOINT).
constexpr uint64_t kMrModes = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY;
constexpr uint64_t kMrEndpointMode = FI_MR_ENDPOINT;
constexpr size_t kDefaultMtu = 1500;

bool names_us(const fi_info* hints) {
  return hints && hints->fabric_attr && hints->fabric_attr->prov_name &&
         std::strstr(hints->fabric_attr->prov_name, g_provider.name) != nullptr;
}

bool too_big(size_t want, size_t have) { return want != 0 && want > have; }

uint64_t caps_of(fi_ep_type type) {
  return type == FI_EP_RDM ? kRdmCaps : type == FI_EP_MSG ? kMsgCaps : kDgramCaps;
}

// The entries of one port, in this order (see the file comment).
constexpr fi_ep_type kTypes[] = {FI_EP_RDM, FI_EP_DGRAM, FI_EP_MSG};

// Fills `out` (from fi_allocinfo) with our attributes for one port and endpoint type.
void fill(fi_info* out, const config::Config& cfg, const std::string& domain_name, size_t mtu,
          fi_ep_type type) {
  const bool rdm = type == FI_EP_RDM || type == FI_EP_MSG;  // MSG transfers data as RDM does
  const uint64_t caps = caps_of(type);
  const size_t payload = wire::max_payload(static_cast<uint32_t>(mtu));
  out->caps = caps & ~kAskedCaps;
  out->mode = 0;
  out->addr_format = FI_FORMAT_UNSPEC;

  out->tx_attr->caps = caps & ~FI_RECV & ~FI_DIRECTED_RECV & ~FI_MULTI_RECV & ~kAskedCaps &
                       ~kDomainCaps & ~(kRmaRxCaps & ~kRmaTxCaps);
  out->tx_attr->op_flags = 0;
  // RDM: messages to one peer are sent and matched in order (rdm_core.h), RMA and atomics too; a
  // rendezvous receive may complete after later eager ones.
  out->tx_attr->msg_order = rdm ? kRdmOrder : 0;
  out->tx_attr->comp_order = fi_api::kOrderNone;
  // RDM: one frame's data (fi_inject copies it; the protocol keeps the copy until acked, in
  // tx_attr->size slots of this size), at most a standard frame's on a jumbo port.
  out->tx_attr->inject_size =
      rdm ? std::min(payload, wire::max_payload(kDefaultMtu)) - wire::kRdmHeaderLen : payload;
  out->tx_attr->size = cfg.tx_depth;
  out->tx_attr->iov_limit = 4;
  out->tx_attr->rma_iov_limit = rdm ? 1 : 0;  // one remote range per RMA or atomic

  // FI_MULTICAST is a transmit capability (fi_getinfo(3)); receiving group traffic needs FI_RECV.
  out->rx_attr->caps =
      caps & ~FI_SEND & ~FI_MULTICAST & ~kAskedCaps & ~kDomainCaps & ~(kRmaTxCaps & ~kRmaRxCaps);
  out->rx_attr->op_flags = 0;
  out->rx_attr->msg_order = rdm ? kRdmOrder : 0;
  out->rx_attr->comp_order = fi_api::kOrderNone;
  out->rx_attr->total_buffered_recv = 0;
  out->rx_attr->size = cfg.rx_depth;
  out->rx_attr->iov_limit = 4;

  out->ep_attr->type = type;
  out->ep_attr->protocol = FI_PROTO_UNSPEC;
  out->ep_attr->protocol_version = 1;
  out->ep_attr->max_msg_size = rdm ? kRdmMaxMsg : payload;
  // RMA and atomic orderings hold at every size.
  out->ep_attr->max_order_raw_size = out->ep_attr->max_order_war_size =
      out->ep_attr->max_order_waw_size = rdm ? kRdmMaxMsg : 0;
  out->ep_attr->mem_tag_format = rdm ? 0xaaaaaaaaaaaaaaaaull : 0;  // FI_TAG_GENERIC: all 64 bits
  out->ep_attr->msg_prefix_size = 0;
  out->ep_attr->tx_ctx_cnt = 1;
  out->ep_attr->rx_ctx_cnt = 1;

  auto* d = out->domain_attr;
  d->name = strdup(domain_name.c_str());
  d->caps = kDomainCaps;
  d->threading = FI_THREAD_SAFE;
  d->control_progress = FI_PROGRESS_MANUAL;
  d->data_progress = cfg.lcores.empty() ? FI_PROGRESS_MANUAL : FI_PROGRESS_AUTO;
  d->resource_mgmt = FI_RM_ENABLED;
  d->av_type = FI_AV_UNSPEC;
  // Registration is needed only for the targets of RMA and atomics (mr.cc): no mode bit is
  // required unless the application offers one (narrow()).
  d->mr_mode = 0;
  d->mr_key_size = sizeof(uint64_t);
  d->cq_data_size = 8;  // fi_senddata: the dpfab header carries 64 bits
  d->cq_cnt = 256;
  d->ep_cnt = 256;
  d->tx_ctx_cnt = 256;
  d->rx_ctx_cnt = 256;
  d->max_ep_tx_ctx = 1;
  d->max_ep_rx_ctx = 1;
  d->cntr_cnt = 256;
  d->mr_iov_limit = proto::MrTable::kMaxIov;
  d->mr_cnt = proto::MrTable::kMaxRegions;
  api::fill_domain(d);  // what headers newer than 1.17 added

  out->fabric_attr->name = strdup(kFabricName);
  out->fabric_attr->prov_version = kProviderVersion;
  out->fabric_attr->api_version = kApiVersion;
}

// Applies the hints to a filled entry: returns false when they cannot be met.
bool narrow(fi_info* out, const fi_info* hints, uint32_t version, const config::Config& cfg) {
  if (!hints) return true;
  // FI_EP_MSG: a passive endpoint named here lends its address to the endpoint opened with the
  // info (fi_endpoint(3)); fabtests fi_msg_sockets does so. As libfabric's util providers do.
  out->handle = hints->handle;
  // Granted only when asked for, by version (api_version.h); some of them receive capabilities.
  const uint64_t asked_only = api::asked_caps(out->ep_attr->type, version);
  const uint64_t asked_rx = asked_only & ~api::kDomainAskedCaps;
  const uint64_t caps = caps_of(out->ep_attr->type) | asked_only;
  if (hints->caps & ~caps) return false;
  if (hints->caps) {
    out->caps = hints->caps;
    if (!(hints->caps & (FI_SEND | FI_RECV))) out->caps |= FI_SEND | FI_RECV;
    // FI_SOURCE is a secondary capability: only when asked for (it costs a lookup per frame).
    // Neither FI_LOCAL_COMM nor FI_REMOTE_COMM asked for: both (fi_getinfo(3)). FI_SHARED_AV
    // costs nothing unless an AV is named: granted too.
    if (!(hints->caps & kCommCaps)) out->caps |= kCommCaps;
    out->caps |= FI_SHARED_AV;
    // Secondary capabilities of RDM that cost nothing unless used.
    // FI_MULTI_RECV is secondary: offered even when not asked for (it costs nothing unused).
    out->caps |= caps & FI_MULTI_RECV;
    // FI_RMA or FI_ATOMIC asked for without the finer bits: all of them (fi_getinfo(3)); with
    // some of them, those. FI_RMA_EVENT and FI_FENCE (secondary) come with RMA and atomics.
    if (hints->caps & (FI_RMA | FI_ATOMIC)) {
      constexpr uint64_t kFine = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
      if (!(hints->caps & kFine)) out->caps |= caps & kFine;
      out->caps |= caps & FI_RMA_EVENT;
    }
    // FI_TRIGGER and FI_FENCE are secondary: granted unasked (they cost nothing unused).
    out->caps |= caps & (FI_TRIGGER | FI_FENCE);
  }
  // We require no mode bits; any the application offers are fine.
  // Our native 16-byte address, or struct sockaddr_in (IPv4 + UDP port name an endpoint; the MAC
  // comes from ARP). FI_SOCKADDR (and 2.3's FI_SOCKADDR_IP) is narrowed to FI_SOCKADDR_IN, as the
  // udp provider does.
  switch (hints->addr_format) {
    case FI_FORMAT_UNSPEC:
      break;
    case FI_SOCKADDR:
    case FI_SOCKADDR_IN:
#if DPFAB_FI_HEADERS_AT_LEAST(2, 3)
    case FI_SOCKADDR_IP:  // 2.3: "FI_SOCKADDR_IN and FI_SOCKADDR_IN6"
#endif
      out->addr_format = FI_SOCKADDR_IN;
      break;
    default:
      return false;
  }
  if (const auto* e = hints->ep_attr) {
    if (e->type != FI_EP_UNSPEC && e->type != out->ep_attr->type) return false;
    if (e->protocol != FI_PROTO_UNSPEC) return false;
    if (too_big(e->max_msg_size, out->ep_attr->max_msg_size)) return false;
    if (e->tx_ctx_cnt > 1 || e->rx_ctx_cnt > 1) return false;
    if (e->msg_prefix_size) return false;
  }
  if (const auto* t = hints->tx_attr) {
    if (t->caps & ~out->tx_attr->caps & ~FI_MSG) return false;
    if (too_big(t->size, out->tx_attr->size) || too_big(t->iov_limit, out->tx_attr->iov_limit) ||
        too_big(t->rma_iov_limit, out->tx_attr->rma_iov_limit) ||
        too_big(t->inject_size, out->tx_attr->inject_size))
      return false;
    if (t->msg_order & ~out->tx_attr->msg_order) return false;
    out->tx_attr->op_flags = t->op_flags;
    out->caps |= t->caps;  // what the tx attributes ask for is granted
  }
  if (const auto* r = hints->rx_attr) {
    if (r->caps & ~(out->rx_attr->caps | kAskedCaps | asked_rx) & ~FI_MSG) return false;
    out->caps |= r->caps;  // what the rx attributes ask for is granted (FI_SOURCE included)
    if (too_big(r->size, out->rx_attr->size) || too_big(r->iov_limit, out->rx_attr->iov_limit))
      return false;
    if (r->msg_order & ~out->rx_attr->msg_order) return false;
    // 1.x: no buffered receives (FI_BUFFERED_RECV). 2.0 removed them: the field is ignored.
    if (r->total_buffered_recv && !fi_api::at_least(version, fi_api::kV2)) return false;
    out->rx_attr->op_flags = r->op_flags;
  }
  if (const auto* d = hints->domain_attr) {
    if (d->name && std::strcmp(d->name, out->domain_attr->name) != 0) return false;
    if (const int t = app_enum(d->threading); t != FI_THREAD_UNSPEC)
      out->domain_attr->threading = api::threading(t, version);
    // Control progress is manual. 1.21: FI_PROGRESS_CONTROL_UNIFIED (manual too) is echoed.
    if (const int c = app_enum(d->control_progress); c != FI_PROGRESS_UNSPEC) {
      if (!api::manual_progress(c, version)) return false;
      out->domain_attr->control_progress = d->control_progress;
    }
    const int p = app_enum(d->data_progress);  // 2.0 calls it `progress` (the same field)
    if (p != FI_PROGRESS_UNSPEC && p != out->domain_attr->data_progress) {
      // Manual progress is always possible (the application's calls drive the port); automatic
      // progress needs worker lcores (FI_DPDK_LCORES).
      if (!api::manual_progress(p, version)) return false;
      out->domain_attr->data_progress = d->data_progress;
    }
    if (d->resource_mgmt != FI_RM_UNSPEC) out->domain_attr->resource_mgmt = d->resource_mgmt;
    if (d->av_type != FI_AV_UNSPEC) out->domain_attr->av_type = d->av_type;
    if (FI_VERSION_LT(version, FI_VERSION(1, 5))) {
      // Before 1.5 mr_mode is an enum: basic (provider keys, virtual addresses) or scalable
      // (requested keys, offsets); both are supported.
      out->domain_attr->mr_mode =
          d->mr_mode == fi_api::kMrBasic ? fi_api::kMrBasic : fi_api::kMrScalable;
    } else if (d->mr_mode == fi_api::kMrBasic || d->mr_mode == fi_api::kMrScalable) {
      out->domain_attr->mr_mode = d->mr_mode;  // the deprecated values, kept as asked (fi_mr(3))
    } else {
      // Of the bits the application supports, those that choose how regions work: virtual
      // addresses, provider keys, and with mr_endpoint = on regions bound to endpoints (mr.cc).
      // The others (FI_MR_LOCAL, FI_MR_ALLOCATED, FI_MR_RAW, FI_MR_MMU_NOTIFY, FI_MR_RMA_EVENT,
      // FI_MR_HMEM) are not needed. FI_MR_ENDPOINT is left out by default: nothing here needs it,
      // and taking it up scopes a region to one endpoint, which applications that offer it do not
      // all expect (fabtests 2.x's fi_multi_ep binds every region to its first endpoint and writes
      // through the others). With mr_keys = application (FI_DPDK_MR_KEYS), none of them:
      // requested keys, offsets and regions every endpoint of the domain answers for, whatever
      // the application offers.
      const uint64_t taken =
          cfg.mr_application_keys ? 0 : kMrModes | (cfg.mr_endpoint ? kMrEndpointMode : 0);
      out->domain_attr->mr_mode = d->mr_mode & taken;
    }
    if (too_big(d->mr_iov_limit, out->domain_attr->mr_iov_limit) ||
        too_big(d->mr_cnt, out->domain_attr->mr_cnt) ||
        too_big(d->mr_key_size, out->domain_attr->mr_key_size))
      return false;
    if (d->cq_data_size > out->domain_attr->cq_data_size) return false;
    if (d->caps & ~(kDomainCaps | (asked_only & api::kDomainAskedCaps))) return false;
    out->caps |= d->caps & asked_only;  // FI_AV_USER_ID asked for as a domain capability
    if (!api::domain_hints_ok(*d, version)) return false;
  } else if (FI_VERSION_LT(version, FI_VERSION(1, 5))) {
    out->domain_attr->mr_mode = fi_api::kMrScalable;
  }
  if (const auto* f = hints->fabric_attr) {
    if (f->name && std::strcmp(f->name, kFabricName) != 0) return false;
    if (f->api_version && FI_VERSION_LT(kApiVersion, f->api_version)) return false;
  }
  // The tx/rx attributes carry the capabilities granted, no more (FI_SOURCE only when asked).
  out->rx_attr->caps |= out->caps & (kAskedCaps | asked_rx);
  out->domain_attr->caps |= out->caps & asked_only & api::kDomainAskedCaps;
  out->tx_attr->caps &= out->caps;
  out->rx_attr->caps &= out->caps;
  return true;
}

// ofi_rxd's probe for a DGRAM provider to layer over (prov/rxd/src/rxd_init.c, rxd_info_to_core
// in 1.17: caps FI_MSG, mode FI_LOCAL_MR | FI_CONTEXT | FI_MSG_PREFIX, exactly): see the file
// comment. Exact values: an application that offers every mode bit (fabtests fi_av_test sets mode
// ~0) accepts FI_LOCAL_MR | FI_MSG_PREFIX too, and is answered.
bool rxd_probe(const fi_info* hints) {
  constexpr uint64_t kRxdMode = fi_api::kModeLocalMr | FI_CONTEXT | FI_MSG_PREFIX;
  return hints && hints->mode == kRxdMode && hints->caps == FI_MSG && hints->ep_attr &&
         hints->ep_attr->type == FI_EP_DGRAM;
}

// Whether an entry could match `hints` at all, judged by what no port changes: the endpoint type
// and the primary capabilities. Hints that ask for what dpdk never offers (RMA or atomics on
// FI_EP_DGRAM, say) are answered before EAL starts: a process that only asked would otherwise bring
// up DPDK and its ports for nothing, and on a role=auto memif socket take the place of the peer a
// later process needs (runfabtests' MSG tests did so to the RDM test after them).
bool could_match(const fi_info* hints, uint32_t version) {
  if (!hints) return true;
  const fi_ep_type want = hints->ep_attr ? hints->ep_attr->type : FI_EP_UNSPEC;
  for (fi_ep_type type : kTypes)
    if ((want == FI_EP_UNSPEC || want == type) &&
        !(hints->caps & ~(caps_of(type) | api::asked_caps(type, version))))
      return true;
  return false;
}

// ofi_rxm's probe for an FI_EP_MSG provider to layer over (prov/rxm/src/rxm_init.c,
// rxm_info_to_core in 1.17). A utility provider calls fi_getinfo with libfabric's internal flag
// OFI_CORE_PROV_ONLY (include/ofi.h: bit 59), which reaches the providers' getinfo; an
// application never sets it. We answer that probe with nothing: "dpdk;ofi_rxm" would be listed
// before dpdk's own RDM (libfabric lists utility providers first) and layer rxm's protocol over
// ours for nothing (fi_dpdk(7), LIMITATIONS).
constexpr uint64_t kOfiCoreProvOnly = 1ull << 59;
bool rxm_probe(uint64_t flags, const fi_info* hints) {
  return (flags & kOfiCoreProvOnly) && hints && hints->ep_attr && hints->ep_attr->type == FI_EP_MSG;
}

// Resolves node/service to an IPv4 address (network order) and UDP port (network order).
Result<std::pair<uint32_t, uint16_t>> resolve(const char* node, const char* service) {
  uint32_t ip = 0;
  uint16_t port = 0;
  if (service) {
    char* end = nullptr;
    unsigned long p = std::strtoul(service, &end, 10);
    if (!*service || *end || p > 0xffff)
      return make_error(-FI_EINVAL, std::string("service '") + service + "' is not a UDP port");
    port = htons(static_cast<uint16_t>(p));
  }
  if (node) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    if (getaddrinfo(node, nullptr, &hints, &res) != 0 || !res)
      return make_error(-FI_ENODATA, std::string("node '") + node + "' has no IPv4 address");
    ip = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr.s_addr;
    freeaddrinfo(res);
  }
  return std::make_pair(ip, port);
}

// A malloc'ed copy of `a` in the entry's addr_format (fi_freeinfo frees it).
void* copy_addr(const wire::Address& a, const fi_info* out, size_t* len) {
  void* p = std::malloc(sizeof(a));
  if (p) *len = wire::write_address(a, addr_format_of(out->addr_format), p, sizeof(a));
  return p;
}

}  // namespace

int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
            const fi_info* hints, fi_info** info) noexcept {
  return guard("getinfo", [&]() -> int {
    *info = nullptr;
    if (FI_VERSION_LT(kApiVersion, version)) return -FI_ENODATA;

    // The configuration in force: the running one, or (before EAL) what would be used.
    const config::Config* cfg = runtime_config();
    config::Config loaded;
    if (!could_match(hints, version) || rxd_probe(hints) || rxm_probe(flags, hints))
      return -FI_ENODATA;
    if (!cfg && names_us(hints)) {
      auto started = start_runtime();
      if (!started) return -FI_ENODATA;
      cfg = *started;
    }
    if (!cfg) {
      auto l = load_config();
      if (!l) return -FI_ENODATA;
      loaded = std::move(l.value());
      cfg = &loaded;
    }

    auto where = resolve(node, service);
    if (!where) {
      DPFAB_INFO(FI_LOG_CORE, "%s", where.error().message.c_str());
      return where.code();
    }
    std::optional<wire::Address> hint_src, hint_dest;
    if (hints && hints->src_addr &&
        !(hint_src = wire::read_address(hints->src_addr, hints->src_addrlen)))
      return -FI_ENODATA;
    if (hints && hints->dest_addr &&
        !(hint_dest = wire::read_address(hints->dest_addr, hints->dest_addrlen)))
      return -FI_ENODATA;

    fi_info* head = nullptr;
    fi_info** tail = &head;
    // The domains: the ports opened (once the runtime runs: a memif port two other processes
    // hold is not among them, and a process without a port has the placeholder "shm"), else the
    // configured ones (and "shm" when none is configured and the same-host path is on).
    struct Dom {
      std::string name;
      const port::Port* port;
      std::optional<config::Ipv4Prefix> ipv4;
    };
    std::vector<Dom> doms;
    if (const auto& open_ports = port::ports(); !open_ports.empty()) {
      for (const auto& p : open_ports) doms.push_back({p->info().name, p.get(), std::nullopt});
    } else {
      for (size_t i = 0; i < cfg->ports.size(); ++i)
        doms.push_back({cfg->ports[i].substr(0, cfg->ports[i].find(',')), nullptr, cfg->ipv4[i]});
      if (doms.empty() && cfg->shm) doms.push_back({"shm", nullptr, std::nullopt});
    }
    constexpr size_t kPerPort = std::size(kTypes);
    for (size_t k = 0; k < kPerPort * doms.size(); ++k) {
      const size_t i = k / kPerPort;
      const fi_ep_type type = kTypes[k % kPerPort];
      // A loopback node names this host (fi_dpdk(7), "Loopback addresses"): as a source, the
      // port itself; as a destination, the process at the other end of a memif link, which
      // answers ARP for it. Only a connect can use that (the peer answers from its own
      // address); RDM and DGRAM peers are named by their own addresses.
      const bool loopback_ok = type == FI_EP_MSG;
      if (node && !loopback_ok && wire::is_loopback_ipv4(where->first)) continue;
      const port::Port* p = doms[i].port;
      const std::string& domain_name = doms[i].name;
      size_t mtu = p && p->info().mtu ? p->info().mtu : kDefaultMtu;

      fi_info* out = fi_allocinfo();
      if (!out) {
        fi_freeinfo(head);
        return -FI_ENOMEM;
      }
      fill(out, *cfg, domain_name, mtu, type);
      if (!narrow(out, hints, version, *cfg)) {
        fi_freeinfo(out);
        continue;
      }

      // Our own address on this port: the source, unless the hints or FI_SOURCE say otherwise.
      wire::Address self;
      if (p) {
        std::memcpy(self.mac, p->info().mac.addr_bytes, 6);
        self.ipv4_be = htonl(p->info().ipv4);
        // With the same-host path, names carry the host part: src_addrlen is the size
        // fi_getname gives (32 bytes; 16 without).
        if (auto e = progress::PortEngine::of(const_cast<port::Port*>(p)))
          (*e)->set_host_part(self);
      } else if (doms[i].ipv4) {
        self.ipv4_be = htonl(doms[i].ipv4->addr);
      }
      if (hint_src) {
        if (p && hint_src->ipv4_be && hint_src->ipv4_be != self.ipv4_be &&
            !(loopback_ok && wire::is_loopback_ipv4(hint_src->ipv4_be))) {
          fi_freeinfo(out);
          continue;
        }
        out->src_addr = copy_addr(*hint_src, out, &out->src_addrlen);
      } else if (flags & FI_SOURCE) {
        // FI_SOURCE names a local address.
        if (node && p && where->first != self.ipv4_be &&
            !(loopback_ok && wire::is_loopback_ipv4(where->first))) {
          fi_freeinfo(out);
          continue;
        }
        self.udp_port_be = where->second;
        out->src_addr = copy_addr(self, out, &out->src_addrlen);
      } else {
        out->src_addr = copy_addr(self, out, &out->src_addrlen);
      }
      if (hint_dest) {
        out->dest_addr = copy_addr(*hint_dest, out, &out->dest_addrlen);
      } else if (!(flags & FI_SOURCE) && (node || service)) {
        // The peer's MAC is learned by ARP when the address is inserted into an AV.
        wire::Address peer;
        peer.ipv4_be = where->first;
        peer.udp_port_be = where->second;
        out->dest_addr = copy_addr(peer, out, &out->dest_addrlen);
      }
      *tail = out;
      tail = &out->next;
    }
    *info = head;
    return head ? FI_SUCCESS : -FI_ENODATA;
  });
}

}  // namespace dpfab::ofi
