// SPDX-License-Identifier: BSD-3-Clause
//
// The UCP-style worker extension (<rdma/fi_ext_dpdk.h>): fi_open_ops on a domain with
// FI_DPDK_WORKER_OPS hands out struct fi_dpdk_worker_ops; each routine maps onto
// dpfab::worker::Worker (lib/worker/worker.h). The worker is not a fid (libfabric has no class
// for it): an opaque struct with its own close routine.
#include <cstring>

#include "dpdk.h"
#include "worker/fi_ext_dpdk.h"
#include "worker/worker.h"

// The C header's opaque type. Global namespace: it is the same struct as in fi_ext_dpdk.h.
struct fi_dpdk_worker {
  dpfab::ofi::Domain* domain = nullptr;
  std::unique_ptr<dpfab::worker::Worker> engine;
};

namespace dpfab::ofi {
namespace {

using worker::Wake;

/// Whether `domain` is one of ours: a domain fid with our domain ops table (recognised by its
/// endpoint routine). Anything else is -FI_EINVAL, not a crash.
Domain* as_domain(fid_domain* domain) noexcept {
  if (!domain || domain->fid.fclass != FI_CLASS_DOMAIN || !domain->ops ||
      domain->ops->endpoint != endpoint_open)
    return nullptr;
  return container_of_fid<Domain>(&domain->fid);
}

int to_errno(Wake w) noexcept {
  switch (w) {
    case Wake::kEvent:
    case Wake::kSignal:
    case Wake::kMemory:
      return FI_SUCCESS;
    case Wake::kTimeout:
      return -FI_ETIMEDOUT;
    case Wake::kInterrupted:
      return -FI_EINTR;
  }
  return -FI_EOTHER;
}

int worker_open(fid_domain* domain, const fi_dpdk_worker_attr* attr,
                fi_dpdk_worker** out) noexcept {
  return guard("worker_open", [&]() -> int {
    Domain* dom = as_domain(domain);
    if (!dom || !out) return -FI_EINVAL;
    worker::Options opts;
    if (attr) {
      if (attr->flags) return -FI_EINVAL;
      opts.spin_ns = attr->spin_ns;
      opts.slice_min_ns = attr->slice_min_ns;
      opts.slice_max_ns = attr->slice_max_ns;
    }
    auto engine = worker::Worker::create(&dom->progress, opts);
    if (!engine) {
      DPFAB_INFO(FI_LOG_DOMAIN, "%s", engine.error().message.c_str());
      return engine.code();
    }
    auto* w = new fi_dpdk_worker();
    w->domain = dom;
    w->engine = std::move(engine.value());
    dom->refs.fetch_add(1, std::memory_order_relaxed);  // fi_close(domain): -FI_EBUSY until closed
    *out = w;
    return FI_SUCCESS;
  });
}

int worker_close(fi_dpdk_worker* w) noexcept {
  if (!w) return -FI_EINVAL;
  Domain* dom = w->domain;
  delete w;  // members leave the worker; the eventfd is closed
  // Release: our teardown happens-before a domain close that sees the count drop.
  dom->refs.fetch_sub(1, std::memory_order_release);
  return FI_SUCCESS;
}

wait::Waitable* member_of(fid* f) noexcept {
  WaitInfo wi;
  if (wait_info(f, &wi) != FI_SUCCESS) return nullptr;
  return wi.waitable;
}

int worker_add(fi_dpdk_worker* w, fid* f) noexcept {
  if (!w) return -FI_EINVAL;
  wait::Waitable* member = member_of(f);
  if (!member) return -FI_EINVAL;
  return w->engine->add_member(member);
}

int worker_remove(fi_dpdk_worker* w, fid* f) noexcept {
  if (!w) return -FI_EINVAL;
  wait::Waitable* member = member_of(f);
  if (!member) return -FI_EINVAL;
  return w->engine->remove_member(member);
}

int worker_get_efd(fi_dpdk_worker* w, int* fd) noexcept {
  if (!w || !fd) return -FI_EINVAL;
  *fd = w->engine->efd();
  return FI_SUCCESS;
}

int worker_arm(fi_dpdk_worker* w) noexcept {
  if (!w) return -FI_EINVAL;
  return w->engine->arm();
}

int worker_wait(fi_dpdk_worker* w, int timeout) noexcept {
  if (!w) return -FI_EINVAL;
  return to_errno(w->engine->wait(wait::Deadline::after_ms(timeout)));
}

int worker_wait_mem(fi_dpdk_worker* w, const volatile void* address, size_t size,
                    int timeout) noexcept {
  if (!w || !address || (size != 1 && size != 2 && size != 4 && size != 8)) return -FI_EINVAL;
  if (reinterpret_cast<uintptr_t>(address) % size != 0) return -FI_EINVAL;
  const auto d = wait::Deadline::after_ms(timeout);
  worker::Worker& e = *w->engine;
  switch (size) {
    case 1:
      return to_errno(e.wait_mem(static_cast<const volatile uint8_t*>(address), d));
    case 2:
      return to_errno(e.wait_mem(static_cast<const volatile uint16_t*>(address), d));
    case 4:
      return to_errno(e.wait_mem(static_cast<const volatile uint32_t*>(address), d));
    case 8:
      return to_errno(e.wait_mem(static_cast<const volatile uint64_t*>(address), d));
    default:
      return -FI_EINVAL;
  }
}

int worker_signal(fi_dpdk_worker* w) noexcept {
  if (!w) return -FI_EINVAL;
  w->engine->signal();
  return FI_SUCCESS;
}

ssize_t worker_progress(fi_dpdk_worker* w) noexcept {
  if (!w) return -FI_EINVAL;
  return static_cast<ssize_t>(w->engine->progress());
}

const fi_dpdk_worker_ops g_worker_ops = {
    .size = sizeof(fi_dpdk_worker_ops),
    .worker_open = worker_open,
    .worker_close = worker_close,
    .worker_add = worker_add,
    .worker_remove = worker_remove,
    .get_efd = worker_get_efd,
    .arm = worker_arm,
    .wait = worker_wait,
    .wait_mem = worker_wait_mem,
    .signal = worker_signal,
    .progress = worker_progress,
};

}  // namespace

/// fi_open_ops on a domain: FI_DPDK_WORKER_OPS gives the worker routines (a table that lives as
/// long as the process). -FI_EINVAL for a null name or ops; -FI_EBADFLAGS for flags; -FI_ENOSYS
/// for any other name.
int domain_ops_open(fid* f, const char* name, uint64_t flags, void** ops, void* context) noexcept {
  (void)context;
  if (!f || !name || !ops) return -FI_EINVAL;
  if (std::strcmp(name, FI_DPDK_WORKER_OPS) != 0) return -FI_ENOSYS;
  if (flags) return -FI_EBADFLAGS;
  // The table is const; the libfabric signature hands out void*. Callers only read it.
  *ops = const_cast<fi_dpdk_worker_ops*>(&g_worker_ops);
  return FI_SUCCESS;
}

}  // namespace dpfab::ofi
