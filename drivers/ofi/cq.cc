// SPDX-License-Identifier: BSD-3-Clause
//
// fid_cq: completion queues (fi_cq(3)). The storage, the error ordering and the blocking read live
// in lib/event/cq.h; this file validates attributes, wires the wait object (make_signal, wait
// sets), and maps the fid ops tables onto event::Cq.
#include "event/cq.h"
#include "event/eq.h"

#include <cstdio>
#include <cstring>

#include "dpdk.h"

namespace dpfab::ofi {
namespace {

struct CqFid {
  fid_cq fid{};
  Domain* domain = nullptr;
  std::unique_ptr<event::Cq> cq;
  fi_wait_obj wait_obj = FI_WAIT_NONE;  ///< FI_WAIT_UNSPEC resolved
  fid_wait* wait_set = nullptr;         ///< with FI_WAIT_SET
  fi_cq_wait_cond wait_cond = FI_CQ_COND_NONE;
  std::atomic<fid_eq*> overrun_eq{nullptr};  ///< set by a bound endpoint's EQ (RM disabled)
};

CqFid* as_cq(fid* f) noexcept {
  if (!f || f->fclass != FI_CLASS_CQ) return nullptr;
  return container_of_fid<CqFid>(f);
}
CqFid* as_cq(fid_cq* c) noexcept { return c ? as_cq(&c->fid) : nullptr; }

// RM disabled: the CQ overran. fi_eq(3): "CQ errors can result when resource management has been
// disabled, and the provider has detected a queue overrun" -- reported as an asynchronous error
// event (err FI_EOVERRUN, fid = the CQ) on the EQ of an endpoint bound to the CQ, and logged.
// Runs on the producer's thread, once per CQ (rare and fatal: the EQ's lock is acceptable here).
void on_overrun(void* ctx, event::Cq&, const event::Cq::Overrun& what) noexcept {
  auto* c = static_cast<CqFid*>(ctx);
  DPFAB_WARN(FI_LOG_CQ, "CQ %p (context %p) overrun: %zu completion(s)%s dropped; it is unusable",
             static_cast<void*>(c), c->fid.fid.context, what.count,
             what.error ? " and an error" : "");
  if (fid_eq* eq = c->overrun_eq.load(std::memory_order_acquire)) {
    fi_eq_err_entry err{};
    err.fid = &c->fid.fid;
    err.context = c->fid.fid.context;
    err.err = FI_EOVERRUN;
    err.prov_errno = -FI_EOVERRUN;
    if (event::Eq* q = eq_of(eq)) q->write_error(err, nullptr, 0);
  }
}

}  // namespace

void cq_report_overrun_to(fid* cq, fid_eq* eq) noexcept {
  if (CqFid* c = as_cq(cq)) c->overrun_eq.store(eq, std::memory_order_release);
}

namespace {

int cq_close(fid* f) noexcept {
  auto* c = container_of_fid<CqFid>(f);
  if (c->cq->bindings() != 0) return -FI_EBUSY;  // endpoints still bound (fi_cq(3) fi_close)
  if (c->wait_obj == FI_WAIT_SET) waitset_leave(c->wait_set, c->cq.get());
  c->cq->leave_all_sets();  // poll sets; wait() and ready() scans stop touching it
  c->domain->refs.fetch_sub(1, std::memory_order_release);
  delete c;
  return FI_SUCCESS;
}

int cq_control(fid* f, int command, void* arg) noexcept {
  auto* c = container_of_fid<CqFid>(f);
  return control_wait(*c->cq, c->wait_obj, command, arg);
}

ssize_t cq_readfrom(fid_cq* cq, void* buf, size_t count, fi_addr_t* src_addr) noexcept {
  auto* c = as_cq(cq);
  if (!c) return -FI_EINVAL;
  return c->cq->progress_and_read(buf, count, src_addr);  // manual progress: one poll step per read
}

ssize_t cq_read(fid_cq* cq, void* buf, size_t count) noexcept {
  return cq_readfrom(cq, buf, count, nullptr);
}

ssize_t cq_readerr(fid_cq* cq, fi_cq_err_entry* buf, uint64_t /*flags*/) noexcept {
  auto* c = as_cq(cq);
  if (!c) return -FI_EINVAL;
  return c->cq->readerr(buf);
}

ssize_t cq_sreadfrom(fid_cq* cq, void* buf, size_t count, fi_addr_t* src_addr, const void* cond,
                     int timeout) noexcept {
  auto* c = as_cq(cq);
  if (!c) return -FI_EINVAL;
  // fi_cq(3): invalid with FI_WAIT_NONE or FI_WAIT_SET.
  if (c->wait_obj == FI_WAIT_NONE || c->wait_obj == FI_WAIT_SET) return -FI_EINVAL;
  size_t threshold = 1;
  if (c->wait_cond == FI_CQ_COND_THRESHOLD && cond) threshold = *static_cast<const size_t*>(cond);
  return c->cq->sread(buf, count, src_addr, threshold, wait::Deadline::after_ms(timeout));
}

ssize_t cq_sread(fid_cq* cq, void* buf, size_t count, const void* cond, int timeout) noexcept {
  return cq_sreadfrom(cq, buf, count, nullptr, cond, timeout);
}

int cq_signal(fid_cq* cq) noexcept {
  auto* c = as_cq(cq);
  if (!c) return -FI_EINVAL;
  if (c->wait_obj == FI_WAIT_NONE) return -FI_EINVAL;  // only with a wait object (fi_cq(3))
  c->cq->interrupt_sread();
  return FI_SUCCESS;
}

const char* cq_strerror(fid_cq* cq, int prov_errno, const void* err_data, char* buf,
                        size_t len) noexcept {
  auto* c = as_cq(cq);
  if (!c) {
    const char* s = fi_strerror(prov_errno < 0 ? -prov_errno : prov_errno);
    if (buf && len) {
      snprintf(buf, len, "%s", s);
      return buf;
    }
    return s;
  }
  return c->cq->strerror(prov_errno, err_data, buf, len);
}

fi_ops g_cq_fi_ops = {
    .size = sizeof(fi_ops),
    .close = cq_close,
    .bind = enosys<decltype(fi_ops::bind)>,
    .control = cq_control,
    .ops_open = enosys<decltype(fi_ops::ops_open)>,
    .tostr = nullptr,
    .ops_set = enosys<decltype(fi_ops::ops_set)>,
};

fi_ops_cq g_cq_ops = {
    .size = sizeof(fi_ops_cq),
    .read = cq_read,
    .readfrom = cq_readfrom,
    .readerr = cq_readerr,
    .sread = cq_sread,
    .sreadfrom = cq_sreadfrom,
    .signal = cq_signal,
    .strerror = cq_strerror,
};

// Validates what cq_open does not pass on to event::Cq::create.
int check_attr(const fi_cq_attr& a) noexcept {
  if (a.flags & FI_PEER) return -FI_ENOSYS;  // peer CQs (imported from another provider)
  if (a.flags & ~uint64_t{FI_AFFINITY}) return -FI_EINVAL;
  // format and size: event::Cq::create checks them (-FI_EINVAL).
  // wait_cond "is ignored if wait_obj is set to FI_WAIT_NONE". Both read as integers: an
  // application's value may lie outside the enumeration.
  const std::optional<fi_wait_obj> w = app_wait_obj(a.wait_obj);
  if (!w) return -FI_EINVAL;
  int cond;
  static_assert(sizeof(cond) == sizeof(a.wait_cond));
  std::memcpy(&cond, &a.wait_cond, sizeof(cond));
  if (*w != FI_WAIT_NONE && cond != FI_CQ_COND_NONE && cond != FI_CQ_COND_THRESHOLD)
    return -FI_EINVAL;
  return FI_SUCCESS;
}

}  // namespace

int cq_open(fid_domain* domain, fi_cq_attr* attr, fid_cq** cq, void* context) noexcept {
  return guard("fi_cq_open", [&]() -> int {
    if (!domain || !attr || !cq || domain->fid.fclass != FI_CLASS_DOMAIN) return -FI_EINVAL;
    if (int r = check_attr(*attr); r != FI_SUCCESS) return r;
    auto* dom = container_of_fid<Domain>(&domain->fid);
    if (attr->flags & FI_AFFINITY)
      DPFAB_DBG(FI_LOG_CQ, "FI_AFFINITY hint (signaling_vector %d) ignored",
                attr->signaling_vector);

    const std::optional<fi_wait_obj> wait_obj = app_wait_obj(attr->wait_obj);
    if (!wait_obj) return -FI_EINVAL;
    fid_wait* wait_set = *wait_obj == FI_WAIT_SET ? attr->wait_set : nullptr;
    fi_wait_obj resolved = FI_WAIT_NONE;
    auto signal = make_signal(*wait_obj, wait_set, &resolved);
    if (!signal) {
      DPFAB_INFO(FI_LOG_CQ, "%s", signal.error().message.c_str());
      return signal.code();
    }

    event::CqConfig cfg;
    cfg.size = attr->size;
    // Copied as bytes: an application's format may lie outside the enumeration (Cq::create
    // refuses it), and loading such a value as fi_cq_format is undefined behaviour.
    std::memcpy(&cfg.format, &attr->format, sizeof(cfg.format));
    cfg.rm_enabled = !(dom->info && dom->info->domain_attr &&
                       dom->info->domain_attr->resource_mgmt == FI_RM_DISABLED);
    cfg.api_version = api_version(dom->fabric);
    auto made = event::Cq::create(cfg, std::move(signal.value()));
    if (!made) {
      DPFAB_INFO(FI_LOG_CQ, "%s", made.error().message.c_str());
      return made.code();
    }

    auto c = std::make_unique<CqFid>();
    c->domain = dom;
    c->cq = std::move(made.value());
    c->wait_obj = resolved;
    c->wait_set = wait_set;
    c->wait_cond = *wait_obj == FI_WAIT_NONE ? FI_CQ_COND_NONE : attr->wait_cond;
    c->fid.fid.fclass = FI_CLASS_CQ;
    c->fid.fid.context = context;
    c->fid.fid.ops = &g_cq_fi_ops;
    c->fid.ops = &g_cq_ops;
    c->cq->set_overrun_handler(on_overrun, c.get());
    // Before joining a set: the set records its members' progress sources when they join.
    c->cq->set_progress(&dom->progress);
    if (resolved == FI_WAIT_SET)
      if (int r = waitset_join(wait_set, c->cq.get(), context); r != FI_SUCCESS) return r;
    dom->refs.fetch_add(1, std::memory_order_relaxed);
    *cq = &c.release()->fid;
    return FI_SUCCESS;
  });
}

int cq_wait_info(fid* f, WaitInfo* out) noexcept {
  auto* c = as_cq(f);
  if (!c || !out) return -FI_EINVAL;
  out->waitable = c->cq.get();
  out->wait_obj = c->wait_obj;
  out->wait_set = c->wait_set;
  return FI_SUCCESS;
}

}  // namespace dpfab::ofi
