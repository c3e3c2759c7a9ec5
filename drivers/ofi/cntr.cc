// SPDX-License-Identifier: BSD-3-Clause
//
// fid_cntr: fi_cntr_open and the fi_ops_cntr table over event::Cntr (lib/event/cntr.h).
//
// Behaviour worth knowing (also in man/fi_dpdk.7.md):
//   - events: FI_CNTR_EVENTS_COMP only; flags must be 0.
//   - wait_obj: NONE (the default), UNSPEC (an eventfd, reported as FI_WAIT_FD), FD, POLLFD,
//     MUTEX_COND, YIELD, SET. FI_GETWAIT works on counters (FD: the fd; POLLFD: a pollfd array;
//     MUTEX_COND: the pair); libfabric's util counters answer -FI_ENOSYS there.
//   - fi_cntr_wait on a counter opened with FI_WAIT_NONE or FI_WAIT_SET (which the man page calls
//     invalid) busy-polls the progress step until the threshold, an error or the timeout, as
//     libfabric's util counters do, rather than failing.
#include "event/cntr.h"
#include "dpdk.h"

namespace dpfab::ofi {
namespace {

struct CntrFid {
  fid_cntr fid{};
  Domain* domain = nullptr;
  fi_wait_obj wait_obj = FI_WAIT_NONE;  ///< as resolved by make_signal (UNSPEC -> FD)
  fid_wait* wait_set = nullptr;         ///< FI_WAIT_SET: the set it joined
  std::unique_ptr<event::Cntr> cntr;
};

event::Cntr& of(fid_cntr* c) noexcept { return *container_of_fid<CntrFid>(&c->fid)->cntr; }

uint64_t cntr_read(fid_cntr* c) noexcept { return of(c).read(); }
uint64_t cntr_readerr(fid_cntr* c) noexcept { return of(c).readerr(); }
int cntr_add(fid_cntr* c, uint64_t value) noexcept { return of(c).app_add(value); }
int cntr_set(fid_cntr* c, uint64_t value) noexcept { return of(c).set(value); }
int cntr_adderr(fid_cntr* c, uint64_t value) noexcept { return of(c).app_adderr(value); }
int cntr_seterr(fid_cntr* c, uint64_t value) noexcept { return of(c).seterr(value); }
int cntr_wait(fid_cntr* c, uint64_t threshold, int timeout) noexcept {
  return of(c).wait(threshold, timeout);
}

int cntr_close(fid* f) noexcept {
  auto* c = container_of_fid<CntrFid>(f);
  // "If resources are still associated with the counter when attempting to close, the call will
  // return -FI_EBUSY."
  if (c->cntr->bindings() != 0) return -FI_EBUSY;
  if (c->wait_set) waitset_leave(c->wait_set, c->cntr.get());  // keeps the set's change_index
  c->cntr->leave_all_sets();  // poll sets: no scan may call into the counter after this
  c->domain->refs.fetch_sub(1, std::memory_order_release);
  delete c;
  return FI_SUCCESS;
}

int cntr_control(fid* f, int command, void* arg) noexcept {
  auto* c = container_of_fid<CntrFid>(f);
  // FI_GETWAIT / FI_GETWAITOBJ; FI_GETOPSFLAG / FI_SETOPSFLAG and the rest: -FI_ENOSYS.
  return control_wait(*c->cntr, c->wait_obj, command, arg);
}

fi_ops g_cntr_fi_ops = {
    .size = sizeof(fi_ops),
    .close = cntr_close,
    .bind = enosys<decltype(fi_ops::bind)>,
    .control = cntr_control,
    .ops_open = enosys<decltype(fi_ops::ops_open)>,
    .tostr = nullptr,
    .ops_set = enosys<decltype(fi_ops::ops_set)>,
};

fi_ops_cntr g_cntr_ops = {
    .size = sizeof(fi_ops_cntr),
    .read = cntr_read,
    .readerr = cntr_readerr,
    .add = cntr_add,
    .set = cntr_set,
    .wait = cntr_wait,
    .adderr = cntr_adderr,
    .seterr = cntr_seterr,
};

}  // namespace

int cntr_open(fid_domain* domain, fi_cntr_attr* attr, fid_cntr** cntr, void* context) noexcept {
  return guard("fi_cntr_open", [&]() -> int {
    if (!domain || !cntr) return -FI_EINVAL;
    fi_cntr_attr defaults{};  // FI_CNTR_EVENTS_COMP, FI_WAIT_NONE, no set, no flags
    if (!attr) attr = &defaults;
    if (attr->flags) {
      DPFAB_INFO(FI_LOG_CNTR, "fi_cntr_open: flags must be 0");
      return -FI_EINVAL;
    }
    if (app_enum(attr->events) != FI_CNTR_EVENTS_COMP) {
      DPFAB_INFO(FI_LOG_CNTR, "fi_cntr_open: only FI_CNTR_EVENTS_COMP is supported");
      return -FI_ENOSYS;
    }
    fi_wait_obj resolved;
    const std::optional<fi_wait_obj> wait_obj = app_wait_obj(attr->wait_obj);
    if (!wait_obj) return -FI_EINVAL;
    fid_wait* set = *wait_obj == FI_WAIT_SET ? attr->wait_set : nullptr;
    auto signal = make_signal(*wait_obj, set, &resolved);
    if (!signal) {
      DPFAB_INFO(FI_LOG_CNTR, "fi_cntr_open: %s", signal.error().message.c_str());
      return signal.code();
    }
    auto* c = new CntrFid();
    c->cntr = std::make_unique<event::Cntr>(std::move(signal.value()));
    c->domain = container_of_fid<Domain>(&domain->fid);
    c->wait_obj = resolved;
    c->fid.fid.fclass = FI_CLASS_CNTR;
    c->fid.fid.context = context;
    c->fid.fid.ops = &g_cntr_fi_ops;
    c->fid.ops = &g_cntr_ops;
    // Before joining a set: the set records its members' progress sources when they join.
    c->cntr->set_progress(&c->domain->progress);
    if (set) {
      if (int r = waitset_join(set, c->cntr.get(), context); r != FI_SUCCESS) {
        DPFAB_INFO(FI_LOG_CNTR, "fi_cntr_open: cannot join the wait set (%d)", r);
        delete c;
        return r;
      }
      c->wait_set = set;
    }
    c->domain->refs.fetch_add(1, std::memory_order_relaxed);
    *cntr = &c->fid;
    return FI_SUCCESS;
  });
}

int cntr_wait_info(fid* f, WaitInfo* out) noexcept {
  if (!f || !out || f->fclass != FI_CLASS_CNTR) return -FI_EINVAL;
  auto* c = container_of_fid<CntrFid>(f);
  out->waitable = c->cntr.get();
  out->wait_obj = c->wait_obj;
  out->wait_set = c->wait_set;
  return FI_SUCCESS;
}

}  // namespace dpfab::ofi
