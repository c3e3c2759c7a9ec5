// SPDX-License-Identifier: BSD-3-Clause
//
// Memory registration (fi_mr(3)) over the domain's proto::MrTable (lib/proto/mr_table.h).
//
// A region with a remote right (FI_REMOTE_READ, FI_REMOTE_WRITE) enters the table and gets a key
// that peers use in RMA and atomic operations: a provider key with FI_MR_PROV_KEY, else the
// requested key (-FI_ENOKEY when another open region of the domain holds it). A region without
// remote rights is for local use only: local buffers never need registering here (frames are
// built by copying), so it takes no table entry and no key space, and its fi_mr_key (the
// requested key, or a provider key that names no region) opens nothing.
//
// The domain's mr_mode says how peers address a region (FI_MR_VIRT_ADDR: virtual addresses,
// else offsets from its start) and whether regions belong to an endpoint (FI_MR_ENDPOINT: bound
// with fi_mr_bind, usable once fi_mr_enable published them). fi_mr_bind of a counter with
// FI_REMOTE_WRITE and/or FI_REMOTE_READ counts the remote operations that write or read the
// region (FI_RMA_EVENT). fi_close of a region waits until no access is copying into or out of it
// (a segment at most); later accesses fail at their initiator. fi_mr_desc is a non-NULL
// descriptor that every data call accepts, and ignores.
#include <sys/random.h>

#include "dpdk.h"
#include "ep.h"
#include "event/cntr.h"
#include "proto/mr_table.h"

namespace dpfab::ofi {
namespace {

struct Mr {
  fid_mr fid{};
  Domain* domain = nullptr;
  uint32_t slot = proto::MrTable::kNoSlot;  // kNoSlot: local use only
  event::Cntr* cntr_write = nullptr;        // fi_mr_bind references to drop at close
  event::Cntr* cntr_read = nullptr;
  bool bound_ep = false;
};

Mr* mr_of(fid* f) noexcept { return container_of_fid<Mr>(f); }

constexpr uint64_t kRemote = FI_REMOTE_READ | FI_REMOTE_WRITE;
constexpr uint64_t kAccess = FI_SEND | FI_RECV | FI_READ | FI_WRITE | kRemote;

int mr_close(fid* f) noexcept {
  Mr* mr = mr_of(f);
  if (mr->slot != proto::MrTable::kNoSlot) {
    void *w = nullptr, *r = nullptr;
    mr->domain->mrs->remove(mr->slot, &w, &r);  // waits out the accesses in flight
  }
  if (mr->cntr_write) mr->cntr_write->bind_unref();
  if (mr->cntr_read) mr->cntr_read->bind_unref();
  mr->domain->refs.fetch_sub(1, std::memory_order_release);
  delete mr;
  return FI_SUCCESS;
}

int mr_bind(fid* f, fid* bfid, uint64_t flags) noexcept {
  Mr* mr = mr_of(f);
  if (!bfid) return -FI_EINVAL;
  proto::MrTable& table = *mr->domain->mrs;
  switch (bfid->fclass) {
    case FI_CLASS_EP: {
      // FI_MR_ENDPOINT: the endpoint peers reach the region through. Flags must be 0.
      if (flags) return -FI_EBADFLAGS;
      if (!table.config().endpoint) return -FI_EINVAL;
      EpBase* e = ep_base_of(bfid);
      if (e->domain != mr->domain) return -FI_EINVAL;
      if (mr->slot == proto::MrTable::kNoSlot) {  // local use only: nothing to bind
        if (mr->bound_ep) return -FI_EINVAL;
        mr->bound_ep = true;
        return FI_SUCCESS;
      }
      return table.bind_endpoint(mr->slot, e->token);
    }
    case FI_CLASS_CNTR: {
      if (!flags || (flags & ~kRemote)) return -FI_EBADFLAGS;
      if (mr->slot == proto::MrTable::kNoSlot) return -FI_EINVAL;  // no remote access to count
      WaitInfo wi;
      if (cntr_wait_info(bfid, &wi) != FI_SUCCESS) return -FI_EINVAL;
      auto* c = static_cast<event::Cntr*>(wi.waitable);
      if (((flags & FI_REMOTE_WRITE) && mr->cntr_write) ||
          ((flags & FI_REMOTE_READ) && mr->cntr_read))
        return -FI_EINVAL;
      if (int r = table.bind_counter(mr->slot, c, flags); r != 0) return r;
      if (flags & FI_REMOTE_WRITE) {
        c->bind_ref();
        mr->cntr_write = c;
      }
      if (flags & FI_REMOTE_READ) {
        c->bind_ref();
        mr->cntr_read = c;
      }
      return FI_SUCCESS;
    }
    default:
      return -FI_EINVAL;
  }
}

int mr_control(fid* f, int command, void* arg) noexcept {
  Mr* mr = mr_of(f);
  switch (command) {
    case FI_ENABLE:
      if (mr->slot == proto::MrTable::kNoSlot) return FI_SUCCESS;
      return mr->domain->mrs->enable(mr->slot);
    case FI_GET_RAW_MR: {
      // The raw key is the 8-byte key itself (fi_mr_raw_attr works on every region).
      auto* a = static_cast<struct fi_mr_raw_attr*>(arg);
      if (!a || !a->key_size) return -FI_EINVAL;
      const size_t have = *a->key_size;
      *a->key_size = sizeof(uint64_t);
      if (have < sizeof(uint64_t) || !a->raw_key) return -FI_ETOOSMALL;
      const uint64_t key = mr->fid.key;
      std::memcpy(a->raw_key, &key, sizeof(key));
      if (a->base_addr) *a->base_addr = 0;
      return FI_SUCCESS;
    }
    default:
      return -FI_ENOSYS;
  }
}

fi_ops g_mr_fi_ops = {
    .size = sizeof(fi_ops),
    .close = mr_close,
    .bind = mr_bind,
    .control = mr_control,
    .ops_open = enosys<decltype(fi_ops::ops_open)>,
    .tostr = nullptr,
    .ops_set = enosys<decltype(fi_ops::ops_set)>,
};

// A provider key that names no region (local-only registrations): index 0 is never used.
uint64_t unusable_key() noexcept {
  uint32_t r = 0;
  if (getrandom(&r, sizeof(r), 0) != sizeof(r)) r = 0x5eed;
  return uint64_t{r} << 32;
}

}  // namespace

proto::MrTable::Config mr_table_config(uint64_t mr_mode) noexcept {
  // FI_MR_BASIC (alone, and the pre-1.5 enum value 1) stands for VIRT_ADDR | ALLOCATED |
  // PROV_KEY; FI_MR_SCALABLE (value 2) for none of them.
  const bool basic = mr_mode == fi_api::kMrBasic;
  proto::MrTable::Config c;
  c.prov_key = basic || (mr_mode & FI_MR_PROV_KEY);
  c.virt_addr = basic || (mr_mode & FI_MR_VIRT_ADDR);
  c.endpoint = !basic && (mr_mode & FI_MR_ENDPOINT);
  return c;
}

int domain_control(fid* f, int command, void* arg) noexcept {
  switch (command) {
    case FI_MAP_RAW_MR: {
      // A raw key is the key itself.
      auto* m = static_cast<struct fi_mr_map_raw*>(arg);
      if (!m || !m->raw_key || !m->key || m->key_size != sizeof(uint64_t)) return -FI_EINVAL;
      std::memcpy(m->key, m->raw_key, sizeof(uint64_t));
      return FI_SUCCESS;
    }
    case FI_UNMAP_KEY:
      return arg ? FI_SUCCESS : -FI_EINVAL;  // nothing was allocated by the mapping
    default:
      (void)f;
      return -FI_ENOSYS;
  }
}

int mr_regattr(fid* fid, const fi_mr_attr* attr, uint64_t flags, fid_mr** mr_out) noexcept {
  return guard("fi_mr_regattr", [&]() -> int {
    if (!fid || fid->fclass != FI_CLASS_DOMAIN || !attr || !mr_out) return -FI_EINVAL;
    // FI_RMA_EVENT: counters will be bound (allowed at any time here).
    if (flags & ~FI_RMA_EVENT) return -FI_EBADFLAGS;
    if (attr->access & ~kAccess) return -FI_EINVAL;
    if (attr->iface != FI_HMEM_SYSTEM) return -FI_ENOSYS;
    Domain* dom = container_of_fid<Domain>(fid);
    auto mr = std::make_unique<Mr>();
    mr->domain = dom;
    if (attr->access & kRemote) {
      proto::MrTable::Spec s;
      s.iov = attr->mr_iov;
      s.count = attr->iov_count;
      s.access = attr->access;
      s.requested_key = attr->requested_key;
      auto slot = dom->mrs->add(s);
      if (!slot) return slot.code();
      mr->slot = slot.value();
      mr->fid.key = dom->mrs->key(mr->slot);
    } else {
      // Local use only: still a valid registration of valid buffers.
      if (!attr->mr_iov || attr->iov_count == 0 || attr->iov_count > proto::MrTable::kMaxIov)
        return -FI_EINVAL;
      for (size_t k = 0; k < attr->iov_count; ++k)
        if (!attr->mr_iov[k].iov_base && attr->mr_iov[k].iov_len) return -FI_EINVAL;
      mr->fid.key = dom->mrs->config().prov_key ? unusable_key() : attr->requested_key;
    }
    mr->fid.fid.fclass = FI_CLASS_MR;
    mr->fid.fid.context = attr->context;
    mr->fid.fid.ops = &g_mr_fi_ops;
    mr->fid.mem_desc = mr.get();  // any non-NULL value: local buffers need no descriptor
    dom->refs.fetch_add(1, std::memory_order_relaxed);
    *mr_out = &mr.release()->fid;
    return FI_SUCCESS;
  });
}

int mr_regv(fid* fid, const iovec* iov, size_t count, uint64_t access, uint64_t offset,
            uint64_t requested_key, uint64_t flags, fid_mr** mr, void* context) noexcept {
  fi_mr_attr attr{};
  attr.mr_iov = iov;
  attr.iov_count = count;
  attr.access = access;
  attr.offset = offset;
  attr.requested_key = requested_key;
  attr.context = context;
  attr.iface = FI_HMEM_SYSTEM;
  return mr_regattr(fid, &attr, flags, mr);
}

int mr_reg(fid* fid, const void* buf, size_t len, uint64_t access, uint64_t offset,
           uint64_t requested_key, uint64_t flags, fid_mr** mr, void* context) noexcept {
  iovec iov{const_cast<void*>(buf), len};
  return mr_regv(fid, &iov, 1, access, offset, requested_key, flags, mr, context);
}

}  // namespace dpfab::ofi
