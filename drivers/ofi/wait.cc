// SPDX-License-Identifier: BSD-3-Clause
//
// Wait sets (fid_wait), the wait objects of CQs/EQs/counters (make_signal, FI_GETWAIT), and
// fi_trywait. The protocol itself lives in lib/wait.
#include <poll.h>

#include "dpdk.h"
#include "wait/wait_set.h"

namespace dpfab::ofi {
namespace {

struct WaitSetFid {
  fid_wait fid{};
  Fabric* fabric = nullptr;
  std::unique_ptr<wait::WaitSet> set;
};

WaitSetFid* as_waitset(fid_wait* ws) noexcept {
  if (!ws || ws->fid.fclass != FI_CLASS_WAIT) return nullptr;
  return container_of_fid<WaitSetFid>(&ws->fid);
}

int waitset_close(fid* f) noexcept {
  auto* ws = container_of_fid<WaitSetFid>(f);
  if (ws->set->size() != 0) return -FI_EBUSY;  // objects opened with this set are still open
  ws->fabric->refs.fetch_sub(1, std::memory_order_release);
  delete ws;
  return FI_SUCCESS;
}

int waitset_control(fid* f, int command, void* arg) noexcept {
  auto* ws = container_of_fid<WaitSetFid>(f);
  switch (command) {
    case FI_GETWAIT:
      return ws->set->get_wait(arg);
    case FI_GETWAITOBJ:
      if (!arg) return -FI_EINVAL;
      *static_cast<fi_wait_obj*>(arg) = ws->set->kind();
      return FI_SUCCESS;
    default:
      return -FI_ENOSYS;
  }
}

int waitset_wait(fid_wait* waitset, int timeout) noexcept {
  auto* ws = as_waitset(waitset);
  if (!ws) return -FI_EINVAL;
  return ws->set->wait(wait::Deadline::after_ms(timeout));
}

fi_ops g_waitset_fi_ops = {
    .size = sizeof(fi_ops),
    .close = waitset_close,
    .bind = enosys<decltype(fi_ops::bind)>,
    .control = waitset_control,
    .ops_open = enosys<decltype(fi_ops::ops_open)>,
    .tostr = nullptr,
    .ops_set = enosys<decltype(fi_ops::ops_set)>,
};

fi_ops_wait g_waitset_ops = {
    .size = sizeof(fi_ops_wait),
    .wait = waitset_wait,
};

}  // namespace

int wait_open(fid_fabric* fabric, fi_wait_attr* attr, fid_wait** waitset) noexcept {
  return guard("fi_wait_open", [&]() -> int {
    if (!fabric || !attr || !waitset || attr->flags) return -FI_EINVAL;
    const std::optional<fi_wait_obj> wait_obj = app_wait_obj(attr->wait_obj);
    if (!wait_obj) return -FI_EINVAL;
    auto set = wait::WaitSet::create(*wait_obj);
    if (!set) {
      DPFAB_INFO(FI_LOG_CORE, "%s", set.error().message.c_str());
      return set.code();
    }
    auto* ws = new WaitSetFid();
    ws->fabric = container_of_fid<Fabric>(&fabric->fid);
    ws->set = std::move(set.value());
    ws->fid.fid.fclass = FI_CLASS_WAIT;
    ws->fid.fid.ops = &g_waitset_fi_ops;
    ws->fid.ops = &g_waitset_ops;
    ws->fabric->refs.fetch_add(1, std::memory_order_relaxed);
    *waitset = &ws->fid;
    return FI_SUCCESS;
  });
}

int waitset_join(fid_wait* waitset, wait::Waitable* member, void* context) noexcept {
  auto* ws = as_waitset(waitset);
  if (!ws || !member) return -FI_EINVAL;
  return ws->set->add_member(member, context);
}

int waitset_leave(fid_wait* waitset, wait::Waitable* member) noexcept {
  auto* ws = as_waitset(waitset);
  if (!ws || !member) return -FI_EINVAL;
  return ws->set->remove_member(member);
}

bool waitset_members_need_fd(fid_wait* waitset) noexcept {
  auto* ws = as_waitset(waitset);
  return ws && ws->set->members_need_own_fd();
}

Result<std::unique_ptr<wait::Signal>> make_signal(fi_wait_obj wait_obj, fid_wait* wait_set,
                                                  fi_wait_obj* resolved) {
  using wait::SignalKind;
  auto make = [](SignalKind k) -> Result<std::unique_ptr<wait::Signal>> {
    auto s = wait::Signal::create(k);
    if (!s) return s.error();
    return std::move(s.value());
  };
  *resolved = wait_obj;
  switch (wait_obj) {
    case FI_WAIT_NONE:
      return std::unique_ptr<wait::Signal>();
    case FI_WAIT_UNSPEC:
      *resolved = FI_WAIT_FD;  // the fastest thing we have that sread and FI_GETWAIT both serve
      return make(SignalKind::kEventFd);
    case FI_WAIT_FD:
    case FI_WAIT_POLLFD:
      return make(SignalKind::kEventFd);
    case FI_WAIT_MUTEX_COND:
      return make(SignalKind::kMutexCond);
    case FI_WAIT_YIELD:
      return make(SignalKind::kYield);
    case FI_WAIT_SET:
      if (!as_waitset(wait_set))
        return make_error(-FI_EINVAL, "FI_WAIT_SET without a valid wait_set");
      if (waitset_members_need_fd(wait_set)) return make(SignalKind::kEventFd);
      return std::unique_ptr<wait::Signal>();
    default:
      return make_error(-FI_EINVAL, "unknown wait_obj " + std::to_string(wait_obj));
  }
}

int control_wait(wait::Waitable& w, fi_wait_obj wait_obj, int command, void* arg) noexcept {
  if (command == FI_GETWAITOBJ) {
    if (!arg) return -FI_EINVAL;
    *static_cast<fi_wait_obj*>(arg) = wait_obj;
    return FI_SUCCESS;
  }
  if (command != FI_GETWAIT) return -FI_ENOSYS;
  if (!arg) return -FI_EINVAL;
  wait::Signal* s = w.signal();
  switch (wait_obj) {
    case FI_WAIT_FD: {
      // The object's eventfd, or an epoll fd over it and the port's wake sources (doc/design.md,
      // "Sleeping on the port"): readable when a completion is signalled or a frame arrives.
      int fd = w.export_wait_fd();
      if (fd < 0) return fd;
      *static_cast<int*>(arg) = fd;
      return FI_SUCCESS;
    }
    case FI_WAIT_POLLFD: {
      // The object's eventfd, then the port's wake sources. The list is fixed for the object's
      // life: change_index stays 1.
      auto* pf = static_cast<fi_wait_pollfd*>(arg);
      int fds[wait::Signal::kMaxWaitFds + 1];
      const size_t n = w.export_poll_fds(fds, wait::Signal::kMaxWaitFds + 1);
      pf->change_index = 1;
      if (pf->nfds < n) {
        pf->nfds = n;
        return -FI_ETOOSMALL;
      }
      if (!pf->fd) return -FI_EINVAL;
      for (size_t i = 0; i < n; ++i) pf->fd[i] = pollfd{fds[i], POLLIN, 0};
      pf->nfds = n;
      return FI_SUCCESS;
    }
    case FI_WAIT_MUTEX_COND:
      *static_cast<fi_mutex_cond*>(arg) = *s->mutex_cond();
      return FI_SUCCESS;
    default:
      return -FI_ENODATA;  // NONE, YIELD, SET (use the set's object): nothing native to hand out
  }
}

int wait_info(fid* f, WaitInfo* out) noexcept {
  if (!f || !out) return -FI_EINVAL;
  switch (f->fclass) {
    case FI_CLASS_CQ:
      return cq_wait_info(f, out);
    case FI_CLASS_EQ:
      return eq_wait_info(f, out);
    case FI_CLASS_CNTR:
      return cntr_wait_info(f, out);
    default:
      return -FI_EINVAL;
  }
}

int trywait(fid_fabric* fabric, fid** fids, int count) noexcept {
  if (!fabric || !fids || count <= 0) return -FI_EINVAL;
  // Every descriptor must use the same kind of wait object; members of a wait set stand for
  // their set (the man page asks for the set itself, but passing a member is harmless).
  struct Target {
    wait::Waitable* w = nullptr;
    wait::WaitSet* set = nullptr;
  };
  constexpr int kOnStack = 16;
  Target stack_targets[kOnStack];
  std::unique_ptr<Target[]> heap_targets;
  Target* targets = stack_targets;
  if (count > kOnStack) {
    heap_targets.reset(new (std::nothrow) Target[count]);
    if (!heap_targets) return -FI_ENOMEM;
    targets = heap_targets.get();
  }
  fi_wait_obj kind = FI_WAIT_NONE;
  for (int i = 0; i < count; ++i) {
    if (!fids[i]) return -FI_EINVAL;
    fi_wait_obj k;
    if (fids[i]->fclass == FI_CLASS_WAIT) {
      // fid is the first member of fid_wait.
      targets[i].set = as_waitset(reinterpret_cast<fid_wait*>(fids[i]))->set.get();
      k = targets[i].set->kind();
    } else {
      WaitInfo wi;
      if (int r = wait_info(fids[i], &wi); r != FI_SUCCESS) return r;
      if (wi.wait_obj == FI_WAIT_SET) {
        targets[i].set = as_waitset(wi.wait_set)->set.get();
        k = targets[i].set->kind();
      } else {
        targets[i].w = wi.waitable;
        k = wi.wait_obj;
      }
    }
    if (k == FI_WAIT_NONE) return -FI_EINVAL;  // nothing to block on
    if (i > 0 && k != kind) return -FI_EINVAL;
    kind = k;
  }
  for (int i = 0; i < count; ++i) {
    int r;
    // What the application sleeps on after this: the FD epoll set and the POLLFD array include
    // the port's wake fds (armed and polled once more here); the MUTEX_COND pair does not (the
    // wakeup thread then watches the port for it).
    if (targets[i].set) {
      r = targets[i].set->try_arm(targets[i].set->app_sleeps_on_fds());  // progresses itself
    } else {
      targets[i].w->progress_once();  // manual progress: one poll step
      r = targets[i].w->try_arm(kind == FI_WAIT_FD || kind == FI_WAIT_POLLFD);
    }
    if (r != FI_SUCCESS) {
      for (int j = 0; j < i; ++j) {  // not going to block after all: undo the arms
        if (targets[j].set)
          targets[j].set->disarm();
        else
          targets[j].w->disarm();
      }
      return r;
    }
  }
  return FI_SUCCESS;
}

}  // namespace dpfab::ofi
