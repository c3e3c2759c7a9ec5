// SPDX-License-Identifier: BSD-3-Clause
//
// fid_av: address vectors on a domain (fi_av_open). The storage and semantics are
// proto::AddressVector (lib/proto/av.h); this file validates the attributes, binds the EQ, and maps
// the fid ops onto it.
//
// What an application sees (fi_av(3), and where the man page leaves a choice):
//   - type: FI_AV_MAP and FI_AV_TABLE; FI_AV_UNSPEC becomes the domain's av_type when that is set,
//     else FI_AV_MAP for a 1.x application and FI_AV_TABLE for a 2.x one (2.0 deprecates
//     FI_AV_MAP: api::default_av_type), and is returned in attr->type. fi_addr values are indices
//     either way, so an explicit type other than the domain's is accepted too: ofi_rxd, layered on
//     us, opens its datagram AV as FI_AV_TABLE whatever av_type the application's hints carried
//     down.
//   - count and ep_per_node are hints; rx_ctx_bits must be 0 (no scalable endpoints); flags:
//     FI_EVENT, FI_SYMMETRIC (a hint), FI_READ (only with a name: -FI_EINVAL without), and for a
//     1.20 application FI_AV_USER_ID (user IDs set with fi_av_set_user_id); others -FI_EBADFLAGS.
//   - User IDs (FI_AV_USER_ID, proto::AddressVector): completions report, as their source, the ID
//     the application gave an address (through the insertion's fi_addr array with the
//     FI_AV_USER_ID flag, or fi_av_set_user_id on an AV opened with FI_AV_USER_ID).
//   - A name (FI_SHARED_AV) opens a shared AV (proto::SharedAvTable, lib/proto/av_shared.h):
//     without FI_READ the AV is created, in shared memory, with room for `count` addresses (1024
//     when 0; a shared AV does not grow); with FI_READ the existing one is opened read-only
//     (-FI_ENOENT when there is none), its insertions and removals are -FI_EOPNOTSUPP and its
//     fi_addr values are the creator's. Either way map_addr returns the address, in this process,
//     of the table's fi_addr_t array: entry i is the fi_addr of the i-th address inserted
//     (FI_ADDR_NOTAVAIL while there is none). The map_addr passed in is not used: fi_addr values
//     are the same in every process whatever it is.
//   - fi_av_bind: an EQ, flags 0, only on an AV opened with FI_EVENT, once. The EQ stays busy
//     (fi_close on it returns -FI_EBUSY) until the AV is closed.
//   - Insertions: see proto::AddressVector::insert. Addresses without a MAC are resolved through
//     the domain's Resolver; synchronous calls wait at most 3 s (FI_EHOSTUNREACH). With FI_EVENT
//     they complete through the EQ: a thread reading the EQ with fi_eq_sread runs the pending
//     insertions (each wait round), as does the progress step of the endpoints bound to the AV.
//   - fi_close: -FI_EBUSY while endpoints are bound (av_bind_ref); insertions still pending are
//     cancelled (FI_ECANCELED error entries, then their completions).
//   - fi_av_av_set, fi_control, fi_av_insert_auth_key, fi_av_lookup_auth_key: -FI_ENOSYS.
#include "api_version.h"
#include "dpdk.h"

#include <arpa/inet.h>

#include <cstring>
#include <mutex>
#include <vector>

namespace dpfab::ofi {
namespace {

// Runs the pending insertions of the asynchronous AVs bound to one EQ when a thread waits on that
// EQ (manual control progress: event::Eq::sread runs its progress source each wait round).
//
// Hubs are never freed, only recycled: a thread in fi_eq_sread may have loaded the hub pointer just
// before the last AV left and the EQ's progress source was cleared, and may still call progress()
// afterwards. Such a late call runs whatever AVs the (possibly recycled) hub serves then, which is
// harmless: progress_pending is safe from any thread and the hub's AVs are alive while listed.
// The number of hubs is the largest number of EQs with asynchronous AVs bound at one time.
class EqHub final : public wait::ProgressSource {
 public:
  size_t progress() noexcept override {
    std::unique_lock lock(mutex, std::try_to_lock);
    if (!lock) return 0;  // another waiter is running them
    size_t n = 0;
    for (proto::AddressVector* av : avs) {
      if (!av->has_pending()) continue;
      if (proto::Resolver* r = av->resolver()) r->poll();
      n += av->progress_pending();
    }
    return n;
  }
  /// While an insertion waits for ARP, a thread blocked on the EQ wakes every millisecond to poll
  /// the port for the reply (manual progress: nothing else may be polling it). Otherwise it
  /// sleeps until an event is written.
  int64_t poll_interval_ns() const noexcept override {
    std::unique_lock lock(mutex, std::try_to_lock);
    if (!lock) return kResolvePollNs;  // busy: assume there is work
    for (proto::AddressVector* av : avs)
      if (av->has_pending()) return kResolvePollNs;
    return -1;
  }
  static constexpr int64_t kResolvePollNs = 1'000'000;

  event::Eq* eq = nullptr;   // under g_hubs_mutex: the EQ served, nullptr when free
  mutable std::mutex mutex;  // guards avs; held while their progress runs
  std::vector<proto::AddressVector*> avs;
};

std::mutex g_hubs_mutex;
// Never freed (nor destroyed at exit, when another thread may still be waiting on an EQ).
std::vector<std::unique_ptr<EqHub>>* g_hubs = new std::vector<std::unique_ptr<EqHub>>();

// Adds `av` to the hub of `eq` (made or recycled on first use) and has the EQ (`fid`) run the hub
// in its reads and waits (eq_attach_progress).
int hub_attach(fid_eq* fid, event::Eq* eq, proto::AddressVector* av) noexcept {
  try {
    std::lock_guard lock(g_hubs_mutex);
    EqHub* hub = nullptr;
    EqHub* free_hub = nullptr;
    for (auto& h : *g_hubs) {
      if (h->eq == eq) hub = h.get();
      if (!h->eq && !free_hub) free_hub = h.get();
    }
    if (!hub) {
      if (!free_hub) {
        g_hubs->push_back(std::make_unique<EqHub>());
        free_hub = g_hubs->back().get();
      }
      hub = free_hub;
      hub->eq = eq;
    }
    {
      std::lock_guard hub_lock(hub->mutex);
      hub->avs.push_back(av);
    }
    if (hub->avs.size() == 1 && !eq_attach_progress(fid, hub))
      DPFAB_INFO(FI_LOG_AV,
                 "the EQ has another progress source: FI_EVENT insertions progress "
                 "with the endpoints' progress only");
    return FI_SUCCESS;
  } catch (const std::bad_alloc&) {
    return -FI_ENOMEM;
  }
}

// Removes `av` from its EQ's hub; when the hub is left empty the EQ stops running it and it
// becomes free. On return no hub is running `av`'s progress.
void hub_detach(fid_eq* fid, event::Eq* eq, proto::AddressVector* av) noexcept {
  std::lock_guard lock(g_hubs_mutex);
  for (auto& h : *g_hubs) {
    if (h->eq != eq) continue;
    std::lock_guard hub_lock(h->mutex);  // waits for a progress() that is running av
    std::erase(h->avs, av);
    if (h->avs.empty()) {
      eq_detach_progress(fid, h.get());
      h->eq = nullptr;
    }
    return;
  }
}

struct AvFid {
  fid_av fid{};
  Domain* domain = nullptr;
  std::unique_ptr<proto::AddressVector> av;
  fid_eq* eq = nullptr;           ///< bound EQ (FI_EVENT)
  event::Eq* eq_impl = nullptr;   ///< its queue
  std::atomic<int> bind_refs{0};  ///< endpoints bound (close is EBUSY while > 0)
};

extern fi_ops g_av_fi_ops;

AvFid* as_av(fid* f) noexcept {
  if (!f || f->fclass != FI_CLASS_AV || f->ops != &g_av_fi_ops) return nullptr;
  return container_of_fid<AvFid>(f);
}

AvFid* as_av(fid_av* f) noexcept { return f ? as_av(&f->fid) : nullptr; }

int av_close(fid* f) noexcept {
  AvFid* a = as_av(f);
  if (!a) return -FI_EINVAL;
  // Acquire: pairs with the release decrement in av_bind_ref: the endpoint's last use is done.
  if (a->bind_refs.load(std::memory_order_acquire) != 0) return -FI_EBUSY;
  if (a->eq_impl) hub_detach(a->eq, a->eq_impl, a->av.get());
  a->av.reset();  // cancels pending insertions: their entries go to the EQ, still bound
  if (a->eq) (void)eq_bind_ref(a->eq, -1);
  a->domain->refs.fetch_sub(1, std::memory_order_release);
  delete a;
  return FI_SUCCESS;
}

int av_bind(fid* f, fid* bfid, uint64_t flags) noexcept {
  AvFid* a = as_av(f);
  if (!a) return -FI_EINVAL;
  // "Flags are reserved for future use and must be 0."
  if (flags || !bfid || bfid->fclass != FI_CLASS_EQ) return -FI_EINVAL;
  if (!a->av->async()) {
    DPFAB_INFO(FI_LOG_AV, "fi_av_bind: the AV was not opened with FI_EVENT");
    return -FI_EINVAL;
  }
  if (a->eq) return -FI_EINVAL;  // one EQ per AV
  auto* eq = container_of_fid<fid_eq>(bfid);
  event::Eq* impl = eq_of(eq);
  if (!impl) return -FI_EINVAL;
  if (int r = eq_bind_ref(eq, +1); r < 0) return r;
  if (int r = a->av->bind_eq(impl); r != FI_SUCCESS) {
    (void)eq_bind_ref(eq, -1);
    return r;
  }
  if (int r = hub_attach(eq, impl, a->av.get()); r != FI_SUCCESS)
    DPFAB_WARN(FI_LOG_AV, "fi_av_bind: %s; FI_EVENT insertions progress with the endpoints only",
               fi_strerror(-r));
  a->eq = eq;
  a->eq_impl = impl;
  return FI_SUCCESS;
}

int av_insert(fid_av* f, const void* addr, size_t count, fi_addr_t* fi_addr, uint64_t flags,
              void* context) noexcept {
  AvFid* a = as_av(f);
  if (!a) return -FI_EINVAL;
  return a->av->insert(addr, count, fi_addr, flags, context);
}

int av_insertsvc(fid_av* f, const char* node, const char* service, fi_addr_t* fi_addr,
                 uint64_t flags, void* context) noexcept {
  AvFid* a = as_av(f);
  if (!a) return -FI_EINVAL;
  return a->av->insert_svc(node, service, fi_addr, flags, context);
}

int av_insertsym(fid_av* f, const char* node, size_t nodecnt, const char* service, size_t svccnt,
                 fi_addr_t* fi_addr, uint64_t flags, void* context) noexcept {
  AvFid* a = as_av(f);
  if (!a) return -FI_EINVAL;
  return a->av->insert_sym(node, nodecnt, service, svccnt, fi_addr, flags, context);
}

int av_remove(fid_av* f, fi_addr_t* fi_addr, size_t count, uint64_t flags) noexcept {
  AvFid* a = as_av(f);
  if (!a) return -FI_EINVAL;
  return a->av->remove(fi_addr, count, flags);
}

int av_lookup(fid_av* f, fi_addr_t fi_addr, void* addr, size_t* addrlen) noexcept {
  AvFid* a = as_av(f);
  if (!a) return -FI_EINVAL;
  return a->av->lookup_address(fi_addr, addr, addrlen);
}

const char* av_straddr(fid_av*, const void* addr, char* buf, size_t* len) noexcept {
  return proto::AddressVector::straddr(addr, buf, len);
}

#if DPFAB_FI_HEADERS_AT_LEAST(1, 20)
int av_set_user_id(fid_av* f, fi_addr_t fi_addr, fi_addr_t user_id, uint64_t flags) noexcept {
  AvFid* a = as_av(f);
  if (!a) return -FI_EINVAL;
  return a->av->set_user_id(fi_addr, user_id, flags);
}
#endif

fi_ops g_av_fi_ops = {
    .size = sizeof(fi_ops),
    .close = av_close,
    .bind = av_bind,
    .control = enosys<decltype(fi_ops::control)>,
    .ops_open = enosys<decltype(fi_ops::ops_open)>,
    .tostr = nullptr,
    .ops_set = enosys<decltype(fi_ops::ops_set)>,
};

fi_ops_av g_av_ops = {
    .size = sizeof(fi_ops_av),
    .insert = av_insert,
    .insertsvc = av_insertsvc,
    .insertsym = av_insertsym,
    .remove = av_remove,
    .lookup = av_lookup,
    .straddr = av_straddr,
    .av_set = enosys<decltype(fi_ops_av::av_set)>,
#if DPFAB_FI_HEADERS_AT_LEAST(1, 20)
    // Authorization keys are not offered.
    .insert_auth_key = enosys<decltype(fi_ops_av::insert_auth_key)>,
    .lookup_auth_key = enosys<decltype(fi_ops_av::lookup_auth_key)>,
    .set_user_id = av_set_user_id,
#endif
};

}  // namespace

namespace {

// Peers' MACs by ARP on the domain's port (progress::PortEngine): requests go out from the poll
// step, with bounded retries; poll() runs that step while a synchronous insertion waits.
class ArpResolver final : public proto::Resolver {
 public:
  explicit ArpResolver(progress::PortEngine* e) : engine_(e) {}
  std::optional<rte_ether_addr> resolve(uint32_t ipv4_be) noexcept override {
    return engine_->resolve(ipv4_be);
  }
  void poll() noexcept override { engine_->progress(); }
  bool failed(uint32_t ipv4_be) noexcept override { return engine_->resolve_failed(ipv4_be); }

 private:
  progress::PortEngine* engine_;
};

}  // namespace

std::unique_ptr<proto::Resolver> make_default_resolver(const port::Port& port) {
  // A port dpfab drives resolves by ARP; a port the application owns knows only itself.
  if (auto engine = progress::PortEngine::of(const_cast<port::Port*>(&port)))
    return std::make_unique<ArpResolver>(*engine);
  auto r = std::make_unique<proto::StaticResolver>();
  rte_ether_addr mac = port.info().mac;
  r->add(htonl(port.info().ipv4), mac);
  return r;
}

int av_open(fid_domain* domain, fi_av_attr* attr, fid_av** av, void* context) noexcept {
  return guard("fi_av_open", [&]() -> int {
    if (!domain || !attr || !av) return -FI_EINVAL;
    auto* dom = container_of_fid<Domain>(&domain->fid);
    // 1.20 defined FI_AV_USER_ID as an open flag (fi_av_set_user_id).
    const bool user_ids_ok = api_at_least(dom->fabric, fi_api::kAvUserIdAttr);
    const uint64_t kFlags = FI_EVENT | FI_SYMMETRIC | FI_READ | (user_ids_ok ? FI_AV_USER_ID : 0);
    if (attr->flags & ~kFlags) {
      DPFAB_INFO(FI_LOG_AV, "unsupported AV flags 0x%llx",
                 static_cast<unsigned long long>(attr->flags & ~kFlags));
      return -FI_EBADFLAGS;
    }
    // "An AV opened for read-only access must be named": without a name there is nothing to open.
    if ((attr->flags & FI_READ) && !attr->name) return -FI_EINVAL;
    if (attr->rx_ctx_bits != 0) {
      DPFAB_INFO(FI_LOG_AV, "rx_ctx_bits %d: no scalable endpoints", attr->rx_ctx_bits);
      return -FI_EINVAL;
    }
    const fi_av_type dom_type =
        dom->info && dom->info->domain_attr ? dom->info->domain_attr->av_type : FI_AV_UNSPEC;
    const int t = app_enum(attr->type);
    if (t != FI_AV_UNSPEC && t != FI_AV_MAP && t != FI_AV_TABLE) return -FI_EINVAL;
    fi_av_type type = static_cast<fi_av_type>(t);
    if (type == FI_AV_UNSPEC)
      type = dom_type != FI_AV_UNSPEC ? dom_type : api::default_av_type(api_version(dom->fabric));

    auto a = std::make_unique<AvFid>();
    a->domain = dom;
    a->fid.fid.fclass = FI_CLASS_AV;
    a->fid.fid.context = context;
    a->fid.fid.ops = &g_av_fi_ops;
    a->fid.ops = &g_av_ops;
    std::unique_ptr<proto::SharedAvTable> shared;
    if (attr->name) {
      // Read-only: "the AV must exist".
      auto t = (attr->flags & FI_READ) ? proto::SharedAvTable::open(attr->name)
                                       : proto::SharedAvTable::create(attr->name, attr->count);
      if (!t) {
        DPFAB_WARN(FI_LOG_AV, "shared AV: %s", t.error().message.c_str());
        return t.code();
      }
      shared = std::move(t.value());
    }
    proto::AddressVector::Options opts;
    opts.type = type == FI_AV_TABLE ? proto::AvType::kTable : proto::AvType::kMap;
    opts.count = attr->count;
    opts.async = attr->flags & FI_EVENT;
    opts.resolver = dom->resolver.get();
    opts.fid = &a->fid.fid;
    opts.format = addr_format_of(dom->info ? dom->info->addr_format : uint32_t{FI_FORMAT_UNSPEC});
    opts.link = dom->engine;
    opts.user_ids = attr->flags & FI_AV_USER_ID;
    void* map_addr = shared ? const_cast<fi_addr_t*>(shared->map()) : nullptr;
    a->av = std::make_unique<proto::AddressVector>(opts, std::move(shared));
    // "If name is non-NULL and map_addr is 0, then the map_addr used by the provider will be
    // returned through the attribute structure."
    if (map_addr) attr->map_addr = map_addr;
    attr->type = type;  // "The AV type used will be returned through the type field"
    dom->refs.fetch_add(1, std::memory_order_relaxed);
    *av = &a.release()->fid;
    return FI_SUCCESS;
  });
}

int av_bind_ref(fid_av* av, int delta) noexcept {
  AvFid* a = as_av(av);
  if (!a) return -FI_EINVAL;
  int cur = a->bind_refs.load(std::memory_order_relaxed);
  do {
    if (cur + delta < 0) return -FI_EINVAL;  // more unbinds than binds
    // acq_rel: a decrement releases the unbinding endpoint's last use; av_close acquires it.
  } while (!a->bind_refs.compare_exchange_weak(cur, cur + delta, std::memory_order_acq_rel,
                                               std::memory_order_relaxed));
  return cur + delta;
}

proto::AddressVector* av_of(fid_av* av) noexcept {
  AvFid* a = as_av(av);
  return a ? a->av.get() : nullptr;
}

}  // namespace dpfab::ofi
