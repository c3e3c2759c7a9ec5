// SPDX-License-Identifier: BSD-3-Clause
//
// Poll sets (fid_poll): fi_poll_add/del of CQs, EQs and counters, fi_poll. A CQ or EQ is reported
// while it is not empty; a counter when its value or error value changed since the last fi_poll
// reported it, by a completion or by fi_cntr_add/set/adderr/seterr. False positives are possible,
// misses are not, and the cost follows the number of members with events (lib/wait/aggregator.h).
#include "dpdk.h"
#include "wait/wait_set.h"

namespace dpfab::ofi {
namespace {

struct PollSetFid {
  fid_poll fid{};
  Domain* domain = nullptr;
  wait::PollSet set;
};

PollSetFid* as_pollset(fid_poll* p) noexcept {
  if (!p || p->fid.fclass != FI_CLASS_POLL) return nullptr;
  return container_of_fid<PollSetFid>(&p->fid);
}

int pollset_close(fid* f) noexcept {
  auto* ps = container_of_fid<PollSetFid>(f);
  if (ps->set.size() != 0) return -FI_EBUSY;
  ps->domain->refs.fetch_sub(1, std::memory_order_release);
  delete ps;
  return FI_SUCCESS;
}

int pollset_poll(fid_poll* pollset, void** context, int count) noexcept {
  auto* ps = as_pollset(pollset);
  if (!ps) return -FI_EINVAL;
  return ps->set.poll(context, count);
}

int pollset_add(fid_poll* pollset, fid* event_fid, uint64_t flags) noexcept {
  auto* ps = as_pollset(pollset);
  WaitInfo wi;
  if (!ps || flags) return -FI_EINVAL;
  if (int r = wait_info(event_fid, &wi); r != FI_SUCCESS) return r;
  return ps->set.add(wi.waitable, event_fid->context);
}

int pollset_del(fid_poll* pollset, fid* event_fid, uint64_t flags) noexcept {
  auto* ps = as_pollset(pollset);
  WaitInfo wi;
  if (!ps || flags) return -FI_EINVAL;
  if (int r = wait_info(event_fid, &wi); r != FI_SUCCESS) return r;
  return ps->set.remove(wi.waitable);
}

fi_ops g_pollset_fi_ops = {
    .size = sizeof(fi_ops),
    .close = pollset_close,
    .bind = enosys<decltype(fi_ops::bind)>,
    .control = enosys<decltype(fi_ops::control)>,
    .ops_open = enosys<decltype(fi_ops::ops_open)>,
    .tostr = nullptr,
    .ops_set = enosys<decltype(fi_ops::ops_set)>,
};

fi_ops_poll g_pollset_ops = {
    .size = sizeof(fi_ops_poll),
    .poll = pollset_poll,
    .poll_add = pollset_add,
    .poll_del = pollset_del,
};

}  // namespace

int poll_open(fid_domain* domain, fi_poll_attr* attr, fid_poll** pollset) noexcept {
  return guard("fi_poll_open", [&]() -> int {
    if (!domain || !pollset || (attr && attr->flags)) return -FI_EINVAL;
    auto* ps = new PollSetFid();
    ps->domain = container_of_fid<Domain>(&domain->fid);
    ps->fid.fid.fclass = FI_CLASS_POLL;
    ps->fid.fid.ops = &g_pollset_fi_ops;
    ps->fid.ops = &g_pollset_ops;
    ps->domain->refs.fetch_add(1, std::memory_order_relaxed);
    *pollset = &ps->fid;
    return FI_SUCCESS;
  });
}

}  // namespace dpfab::ofi
