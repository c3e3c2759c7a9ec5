// SPDX-License-Identifier: BSD-3-Clause
//
// fid_domain: one per configured port; the domain name is the port's ethdev name.
#include <cstring>

#include "dpdk.h"
#include "ep_rma.h"

namespace dpfab::ofi {
namespace {

int domain_close(fid* f) noexcept {
  auto* dom = container_of_fid<Domain>(f);
  if (dom->refs.load(std::memory_order_acquire) != 0) return -FI_EBUSY;
  dom->fabric->refs.fetch_sub(1, std::memory_order_release);
  fi_freeinfo(dom->info);
  delete dom;
  return FI_SUCCESS;
}

fi_ops g_domain_fi_ops = {
    .size = sizeof(fi_ops),
    .close = domain_close,
    .bind = enosys<decltype(fi_ops::bind)>,
    .control = domain_control,
    .ops_open = domain_ops_open,
    .tostr = nullptr,
    .ops_set = enosys<decltype(fi_ops::ops_set)>,
};

// fi_query_atomic: what one atomic of the domain's endpoints takes (ep_rma.h), for endpoints
// opened with the domain's own inject_size.
int query_atomic(fid_domain* domain, fi_datatype datatype, fi_op op, fi_atomic_attr* attr,
                 uint64_t flags) noexcept {
  auto* dom = container_of_fid<Domain>(&domain->fid);
  if (flags & ~(FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC | FI_TAGGED)) return -FI_EBADFLAGS;
  if ((flags & FI_FETCH_ATOMIC) && (flags & FI_COMPARE_ATOMIC)) return -FI_EBADFLAGS;
  if (flags & FI_TAGGED) return -FI_EOPNOTSUPP;  // no tagged atomics
  const auto kind = flags & FI_FETCH_ATOMIC     ? proto::atomic::Kind::kFetch
                    : flags & FI_COMPARE_ATOMIC ? proto::atomic::Kind::kCompare
                                                : proto::atomic::Kind::kWrite;
  const int dt = app_enum(datatype);
  size_t count = 0;
  const int r =
      rma_data::atomic_count(app_enum(op), dt, kind, rma_data::domain_atomic_max(dom), &count);
  if (r == 0 && attr) {
    attr->size = proto::atomic::datatype_size(dt);
    attr->count = count;
  }
  return r;
}

fi_ops_domain g_domain_ops = {
    .size = sizeof(fi_ops_domain),
    .av_open = av_open,
    .cq_open = cq_open,
    .endpoint = endpoint_open,
    .scalable_ep = enosys<decltype(fi_ops_domain::scalable_ep)>,
    .cntr_open = cntr_open,
    .poll_open = poll_open,
    .stx_ctx = enosys<decltype(fi_ops_domain::stx_ctx)>,
    .srx_ctx = enosys<decltype(fi_ops_domain::srx_ctx)>,
    .query_atomic = query_atomic,
    .query_collective = enosys<decltype(fi_ops_domain::query_collective)>,
    .endpoint2 = enosys<decltype(fi_ops_domain::endpoint2)>,
};

fi_ops_mr g_mr_ops = {
    .size = sizeof(fi_ops_mr),
    .reg = mr_reg,
    .regv = mr_regv,
    .regattr = mr_regattr,
};

}  // namespace

int domain_open(fid_fabric* fabric, fi_info* info, fid_domain** domain, void* context) noexcept {
  return guard("fi_domain", [&]() -> int {
    if (!fabric || !info || !domain) return -FI_EINVAL;
    auto* fab = container_of_fid<Fabric>(&fabric->fid);
    const char* want = info->domain_attr ? info->domain_attr->name : nullptr;
    port::Port* found = find_domain_port(want);
    if (!found) {
      DPFAB_WARN(FI_LOG_DOMAIN, "no port named '%s' (domains are the configured ports)",
                 want ? want : "(null)");
      return -FI_ENODEV;
    }
    auto resolver = make_default_resolver(*found);  // may throw: before anything is allocated
    auto* dom = new Domain();
    dom->info = fi_dupinfo(info);
    if (!dom->info) {
      delete dom;
      return -FI_ENOMEM;
    }
    dom->fabric = fab;
    dom->port = found;
    if (auto engine = progress::PortEngine::of(found)) {
      dom->engine = *engine;
      dom->progress.attach(*engine,
                           progress::SpinConfig{fab->cfg->spin_auto, fab->cfg->spin_us * 1000,
                                                fab->cfg->spin_max_us * 1000});
    } else {
      DPFAB_INFO(FI_LOG_DOMAIN, "%s", engine.error().message.c_str());
    }
    dom->resolver = std::move(resolver);
    dom->mrs = std::make_unique<proto::MrTable>(
        mr_table_config(info->domain_attr ? info->domain_attr->mr_mode : 0));
    dom->fid.fid.fclass = FI_CLASS_DOMAIN;
    dom->fid.fid.context = context;
    dom->fid.fid.ops = &g_domain_fi_ops;
    dom->fid.ops = &g_domain_ops;
    dom->fid.mr = &g_mr_ops;
    fab->refs.fetch_add(1, std::memory_order_relaxed);
    *domain = &dom->fid;
    return FI_SUCCESS;
  });
}

}  // namespace dpfab::ofi
