// SPDX-License-Identifier: BSD-3-Clause
//
// fid_pep: FI_EP_MSG passive endpoints (fi_passive_ep on the fabric; fi_pep_bind to an EQ,
// fi_listen, fi_getname/fi_setname, fi_reject, fi_getopt FI_OPT_CM_DATA_SIZE) over
// proto::PassiveEndpoint, and the connection requests (fid class FI_CLASS_CONNREQ) that its
// FI_CONNREQ events hand out.
//
// The passive endpoint lives on the port its info names (domain_attr->name, else the first), on
// its own UDP port: info->src_addr's or fi_setname's, else an ephemeral one bound at fi_listen.
// A request is reported as FI_CONNREQ with a copy of the passive endpoint's info whose handle is
// the request, dest_addr the connector's address, src_addr ours and the connector's data after the
// fi_eq_cm_entry. The endpoint that accepts it shares our UDP port (SharedPort, ep.h) under an
// endpoint id of its own, as an accepted TCP socket has its listener's port. The request
// lives until fi_accept (on the endpoint opened with that info), fi_reject, or the passive
// endpoint's fi_close; requests are tracked in a process-wide registry so that a handle that is
// gone is refused (-FI_EINVAL) rather than used.
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "dpdk.h"
#include "ep.h"
#include "proto/msg_passive.h"
#include "wire/cm.h"
#include "wire/multicast.h"

namespace dpfab::ofi {

struct Pep;

// A connection request (info->handle of FI_CONNREQ).
struct ConnReq {
  ::fid fid{};
  Pep* pep = nullptr;  // the passive endpoint (its requests go when it closes)
  wire::Address from;
  uint32_t conn_id = 0;
};

struct Pep final : proto::PassiveEndpoint::Sink {
  fid_pep fid{};
  Fabric* fabric = nullptr;
  fi_info* info = nullptr;
  progress::PortEngine* engine = nullptr;
  std::unique_ptr<proto::PassiveEndpoint> passive;
  std::shared_ptr<SharedPort> port;  // from fi_listen: ours and our accepted endpoints'
  fid_eq* eq = nullptr;
  uint16_t udp_port_be = 0;
  wire::AddrFormat format = wire::AddrFormat::kNative;
  bool listening = false;
  std::mutex mu;  // bind, setname, listen, close
  // fi_accept calls in passive->accepted() on this passive endpoint (msg_accepted_connreq);
  // fi_close waits for them. Taken under the registry's lock.
  std::atomic<int> users{0};

  wire::Address address() const noexcept {
    wire::Address a;
    std::memcpy(a.mac, engine->mac().addr_bytes, 6);
    a.ipv4_be = engine->ipv4_be();
    a.udp_port_be = udp_port_be;
    engine->set_host_part(a);  // connectors of this host reach us through shared memory
    return a;
  }
  // PassiveEndpoint::Sink: FI_CONNREQ (RX owner, under the passive endpoint's lock).
  void connreq(const wire::Address& from, uint32_t conn_id,
               std::span<const uint8_t> data) noexcept override;
};

namespace {

// Live connection requests and passive endpoints: a handle an application passes in (an info's
// handle, fi_reject's) is looked up here by its value before anything reads through it, so that
// one that is gone (accepted, rejected, its passive endpoint closed) is refused, not used.
struct Registry {
  std::mutex mutex;
  std::unordered_set<ConnReq*> live;
  std::unordered_set<const ::fid*> peps;
};
Registry& registry() {
  static Registry* r = new Registry();  // process lifetime (libfabric cleans up from a destructor)
  return *r;
}

Pep* pep_of(fid* f) noexcept { return container_of_fid<Pep>(f); }

int pep_close(fid* f) noexcept {
  Pep* p = pep_of(f);
  // No request comes in once this returns (the port's receive side is not delivering to us)...
  if (p->port) {
    p->port->remove(0);  // requests are refused from now on; accepted endpoints keep the port
    p->port.reset();
  }
  // ...so the requests still open are all here: the infos naming them are refused from now on.
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    r.peps.erase(&p->fid.fid);
    std::erase_if(r.live, [p](ConnReq* c) {
      if (c->pep != p) return false;
      delete c;
      return true;
    });
  }
  // Acquire: pairs with the release decrement of an fi_accept that was telling us.
  while (p->users.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  if (p->eq) eq_bind_ref(p->eq, -1);
  p->fabric->refs.fetch_sub(1, std::memory_order_release);
  fi_freeinfo(p->info);
  delete p;
  return FI_SUCCESS;
}

int pep_bind(fid* f, fid* bfid, uint64_t flags) noexcept {
  Pep* p = pep_of(f);
  if (!bfid) return -FI_EINVAL;
  if (bfid->fclass != FI_CLASS_EQ) return -FI_EINVAL;
  if (flags) return -FI_EBADFLAGS;
  std::lock_guard lock(p->mu);
  if (p->eq) return -FI_EINVAL;  // one EQ
  auto* eq = container_of_fid<fid_eq>(bfid);
  if (eq_bind_ref(eq, +1) < 0) return -FI_EINVAL;
  p->eq = eq;
  eq_progress_port(eq, p->engine);
  return FI_SUCCESS;
}

int pep_listen(fid_pep* pep) noexcept {
  Pep* p = pep_of(&pep->fid);
  std::lock_guard lock(p->mu);
  if (p->listening) return -FI_EALREADY;
  if (!p->eq) return -FI_ENOEQ;
  // Our UDP port, shared with the endpoints that accept our requests (SharedPort).
  std::shared_ptr<SharedPort> shared;
  if (uint16_t port = p->udp_port_be) {
    shared = std::make_shared<SharedPort>(p->engine, port, p->passive.get());
    p->passive->set_address(port, 0, &shared->share);
    if (int rc = p->engine->bind(port, &shared->share); rc != FI_SUCCESS) {
      shared->udp_port_be = 0;  // not ours to unbind
      return rc;
    }
  } else {
    shared = std::make_shared<SharedPort>(p->engine, 0, p->passive.get());
    const uint16_t eph = p->engine->bind_ephemeral(&shared->share);
    if (!eph) return -FI_EADDRINUSE;
    shared->udp_port_be = eph;
    p->passive->set_address(eph, 0, &shared->share);
    p->udp_port_be = eph;
  }
  p->port = std::move(shared);
  p->listening = true;
  return FI_SUCCESS;
}

int pep_getname(fid* f, void* addr, size_t* addrlen) noexcept {
  Pep* p = pep_of(f);
  if (!addrlen) return -FI_EINVAL;
  wire::Address a;
  {
    std::lock_guard lock(p->mu);
    a = p->address();
  }
  const size_t have = *addrlen;
  *addrlen = wire::address_len(a, p->format);
  if (!addr || have < *addrlen) return -FI_ETOOSMALL;
  wire::write_address(a, p->format, addr, have);
  return FI_SUCCESS;
}

int pep_setname(fid* f, void* addr, size_t addrlen) noexcept {
  Pep* p = pep_of(f);
  auto a = wire::read_address(addr, addrlen);
  if (!a) return -FI_EINVAL;
  // Ours: this port's address, a loopback address (this host), or none.
  if (a->ipv4_be && a->ipv4_be != p->engine->ipv4_be() && !wire::is_loopback_ipv4(a->ipv4_be))
    return -FI_EINVAL;
  std::lock_guard lock(p->mu);
  if (p->listening) return -FI_EOPBADSTATE;
  p->udp_port_be = a->udp_port_be;
  return FI_SUCCESS;
}

int pep_reject(fid_pep* pep, fid_t handle, const void* param, size_t paramlen) noexcept {
  Pep* p = pep_of(&pep->fid);
  if (!handle || paramlen > wire::kCmMaxData || (paramlen && !param)) return -FI_EINVAL;
  wire::Address from;
  uint32_t conn_id;
  {
    // Not held while rejecting: the RX path takes the passive endpoint's lock, then this one.
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    auto* c = reinterpret_cast<ConnReq*>(handle);  // its first member; looked up, not read
    if (!r.live.count(c) || c->pep != p) return -FI_EINVAL;  // not ours, or answered already
    from = c->from;
    conn_id = c->conn_id;
    r.live.erase(c);
    delete c;
  }
  const int rc = p->passive->reject(from, conn_id, {static_cast<const uint8_t*>(param), paramlen});
  // A reject the port did not take goes with the connector's next repeat (the table has it).
  return rc == -FI_EAGAIN ? FI_SUCCESS : rc;
}

int pep_getopt(fid* f, int level, int name, void* val, size_t* len) noexcept {
  (void)f;
  if (level != FI_OPT_ENDPOINT) return -FI_ENOPROTOOPT;
  if (name != FI_OPT_CM_DATA_SIZE) return -FI_ENOPROTOOPT;
  return msg_cm_data_size_opt(val, len);
}

int pep_setopt(fid*, int, int, const void*, size_t) noexcept { return -FI_ENOPROTOOPT; }

fi_ops g_pep_fi_ops = {
    .size = sizeof(fi_ops),
    .close = pep_close,
    .bind = pep_bind,
    .control = enosys<decltype(fi_ops::control)>,
    .ops_open = enosys<decltype(fi_ops::ops_open)>,
    .tostr = nullptr,
    .ops_set = enosys<decltype(fi_ops::ops_set)>,
};

fi_ops_ep g_pep_ep_ops = {
    .size = sizeof(fi_ops_ep),
    .cancel = enosys<decltype(fi_ops_ep::cancel)>,
    .getopt = pep_getopt,
    .setopt = pep_setopt,
    .tx_ctx = enosys<decltype(fi_ops_ep::tx_ctx)>,
    .rx_ctx = enosys<decltype(fi_ops_ep::rx_ctx)>,
    .rx_size_left = enosys<decltype(fi_ops_ep::rx_size_left)>,
    .tx_size_left = enosys<decltype(fi_ops_ep::tx_size_left)>,
};

// fi_connect, fi_accept, fi_shutdown and fi_join on a passive endpoint: not what it is for.
fi_ops_cm g_pep_cm_ops = {
    .size = sizeof(fi_ops_cm),
    .setname = pep_setname,
    .getname = pep_getname,
    .getpeer = [](fid_ep*, void*, size_t*) noexcept -> int { return -FI_ENOTCONN; },
    .connect = [](fid_ep*, const void*, const void*, size_t) noexcept -> int {
      return -FI_EOPNOTSUPP;
    },
    .listen = pep_listen,
    .accept = [](fid_ep*, const void*, size_t) noexcept -> int { return -FI_EOPNOTSUPP; },
    .reject = pep_reject,
    .shutdown = [](fid_ep*, uint64_t) noexcept -> int { return -FI_EOPNOTSUPP; },
    .join = [](fid_ep*, const void*, uint64_t, fid_mc**, void*) noexcept -> int {
      return -FI_EOPNOTSUPP;
    },
};

}  // namespace

void Pep::connreq(const wire::Address& from, uint32_t conn_id,
                  std::span<const uint8_t> data) noexcept {
  event::Eq* q = eq ? eq_of(eq) : nullptr;
  if (!q) return;
  auto c = std::unique_ptr<ConnReq>(new (std::nothrow) ConnReq());
  fi_info* ci = fi_dupinfo(info);
  if (!c || !ci) {
    fi_freeinfo(ci);
    DPFAB_WARN(FI_LOG_EP_CTRL, "pep: out of memory: a connection request is dropped");
    return;  // the connector repeats it, and the table reports it again after its linger
  }
  c->fid.fclass = FI_CLASS_CONNREQ;
  c->fid.context = fid.fid.context;
  c->pep = this;
  c->from = from;
  c->conn_id = conn_id;
  ci->handle = &c->fid;
  std::free(ci->src_addr);
  std::free(ci->dest_addr);
  ci->src_addr = ci->dest_addr = nullptr;
  ci->src_addrlen = ci->dest_addrlen = 0;
  const wire::Address self = address();  // the accepting endpoint shares our UDP port
  if ((ci->src_addr = std::malloc(sizeof(wire::Address))))
    ci->src_addrlen = wire::write_address(self, format, ci->src_addr, sizeof(wire::Address));
  if ((ci->dest_addr = std::malloc(sizeof(wire::Address))))
    ci->dest_addrlen = wire::write_address(from, format, ci->dest_addr, sizeof(wire::Address));
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    try {
      r.live.insert(c.get());
    } catch (...) {
      fi_freeinfo(ci);
      return;
    }
  }
  ConnReq* raw = c.release();
  if (q->write_cm(FI_CONNREQ, &fid.fid, ci, data.data(), data.size()) < 0) {
    DPFAB_WARN(FI_LOG_EP_CTRL, "pep: FI_CONNREQ could not be written to the EQ (overrun)");
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    r.live.erase(raw);
    delete raw;
    fi_freeinfo(ci);
  }
}

int msg_take_connreq(fid_t handle, wire::Address* from, uint32_t* conn_id,
                     std::shared_ptr<SharedPort>* port) noexcept {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto* c = reinterpret_cast<ConnReq*>(handle);  // looked up before it is read
  if (!handle || !r.live.count(c)) return -FI_EINVAL;
  *from = c->from;
  *conn_id = c->conn_id;
  *port = c->pep->port;  // set at fi_listen, before any request could come
  return FI_SUCCESS;
}

int msg_accepted_connreq(fid_t handle) noexcept {
  Pep* p;
  wire::Address from;
  uint32_t conn_id;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    auto* c = reinterpret_cast<ConnReq*>(handle);        // looked up before it is read
    if (!handle || !r.live.count(c)) return -FI_EINVAL;  // rejected, accepted, or its pep closed
    p = c->pep;
    from = c->from;
    conn_id = c->conn_id;
    p->users.fetch_add(1, std::memory_order_relaxed);  // fi_close of the pep waits for us
    r.live.erase(c);
    delete c;
  }
  // Without the registry's lock (the RX path takes the passive endpoint's lock, then that one).
  p->passive->accepted(from, conn_id);
  p->users.fetch_sub(1, std::memory_order_release);
  return FI_SUCCESS;
}

int msg_pep_port(fid_t handle) noexcept {
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    if (!handle || !r.peps.count(handle)) return -FI_EINVAL;
  }
  Pep* p = pep_of(handle);  // open: the application holds it while it passes it in
  std::lock_guard lock(p->mu);
  return p->udp_port_be;
}

int msg_cm_data_size_opt(void* val, size_t* len) noexcept {
  if (!val || !len) return -FI_EINVAL;
  if (*len < sizeof(size_t)) {
    *len = sizeof(size_t);
    return -FI_ETOOSMALL;
  }
  *static_cast<size_t*>(val) = wire::kCmMaxData;
  *len = sizeof(size_t);
  return FI_SUCCESS;
}

int passive_ep_open(fid_fabric* fabric, fi_info* info, fid_pep** pep, void* context) noexcept {
  return guard("fi_passive_ep", [&]() -> int {
    if (!fabric || !info || !pep) return -FI_EINVAL;
    if (!info->ep_attr || info->ep_attr->type != FI_EP_MSG) return -FI_EINVAL;
    auto* fab = container_of_fid<Fabric>(&fabric->fid);
    const char* want = info->domain_attr ? info->domain_attr->name : nullptr;
    port::Port* found = find_domain_port(want);
    if (!found) return -FI_ENODEV;
    auto engine = progress::PortEngine::of(found);
    if (!engine) return -FI_ENODEV;  // a port the application owns: no data path
    auto p = std::make_unique<Pep>();
    p->fabric = fab;
    p->engine = *engine;
    p->info = fi_dupinfo(info);
    if (!p->info) return -FI_ENOMEM;
    p->format = addr_format_of(info->addr_format);
    if (auto a = wire::read_address(info->src_addr, info->src_addrlen))
      p->udp_port_be = a->udp_port_be;
    p->passive =
        std::make_unique<proto::PassiveEndpoint>(p->engine, &p->engine->msg_stats(), p.get());
    p->fid.fid.fclass = FI_CLASS_PEP;
    p->fid.fid.context = context;
    p->fid.fid.ops = &g_pep_fi_ops;
    p->fid.ops = &g_pep_ep_ops;
    p->fid.cm = &g_pep_cm_ops;
    {
      Registry& r = registry();
      std::lock_guard lock(r.mutex);
      r.peps.insert(&p->fid.fid);
    }
    fab->refs.fetch_add(1, std::memory_order_relaxed);
    *pep = &p.release()->fid;
    return FI_SUCCESS;
  });
}

}  // namespace dpfab::ofi
