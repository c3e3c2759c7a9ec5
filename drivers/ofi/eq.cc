// SPDX-License-Identifier: BSD-3-Clause
//
// fid_eq: event queues on the fabric (fi_eq_open). The queue itself is event::Eq (lib/event/eq.h);
// this file validates the attributes, makes the wait object, and maps the fid ops onto it.
//
// What an application sees (fi_eq(3), and where the man page leaves a choice):
//   - attr->size is the capacity (0: event::Eq::kDefaultSize); a full EQ is overrun (fatal).
//   - attr->flags may hold FI_WRITE and FI_AFFINITY (signaling_vector is a hint, ignored: EQ
//     events are raised by application threads, not interrupts); any other flag is -FI_EINVAL.
//   - wait_obj: NONE, UNSPEC (= FD), FD, POLLFD, MUTEX_COND, YIELD, SET (joins attr->wait_set).
//   - fi_eq_write without FI_WRITE at open: -FI_EINVAL (as verbs does); fi_eq_write takes no
//     flags (1.17 has no public flag for writing error entries).
//   - fi_eq_sread with FI_WAIT_NONE or FI_WAIT_SET: -FI_EINVAL.
//   - fi_close: -FI_EBUSY while endpoints, AVs or passive endpoints are bound (eq_bind_ref).
//   - fi_control: FI_GETWAIT (FD: int*, POLLFD: fi_wait_pollfd*, MUTEX_COND: fi_mutex_cond*,
//     SET: the wait set's object, others -FI_ENODATA), FI_GETWAITOBJ.
#include "event/eq.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <span>

#include "dpdk.h"

namespace dpfab::ofi {
namespace {

// What an EQ's reads and waits progress (its wait::ProgressSource, set at open): a port
// (connection events arrive as its frames: the process's first port, until the first passive or
// MSG endpoint bound to the EQ names its own) and the pending insertions of the asynchronous AVs
// bound to it (av.cc's hub). Sleeping follows the port (its wake fds, its watch by the wakeup
// thread); while an insertion waits for ARP on a port without wake fds, a sleeper wakes every
// millisecond to run it.
class EqProgress final : public wait::ProgressSource {
 public:
  std::atomic<progress::PortConsumer*> port{nullptr};
  std::atomic<wait::ProgressSource*> extra{nullptr};

  size_t progress() noexcept override {
    size_t n = 0;
    if (auto* p = port.load(std::memory_order_acquire)) n += p->progress();
    if (auto* x = extra.load(std::memory_order_acquire)) n += x->progress();
    return n;
  }
  int64_t spin_ns() noexcept override {
    auto* p = port.load(std::memory_order_acquire);
    return p ? p->spin_ns() : 0;
  }
  void waited(int64_t ns, bool ready, bool slept) noexcept override {
    if (auto* p = port.load(std::memory_order_acquire)) p->waited(ns, ready, slept);
  }
  void woke(int64_t slept_at_ns) noexcept override {
    if (auto* p = port.load(std::memory_order_acquire)) p->woke(slept_at_ns);
  }
  int64_t poll_interval_ns() const noexcept override {
    auto* p = port.load(std::memory_order_acquire);
    auto* x = extra.load(std::memory_order_acquire);
    const int64_t a = p ? p->poll_interval_ns() : -1, b = x ? x->poll_interval_ns() : -1;
    return a < 0 ? b : b < 0 ? a : std::min(a, b);
  }
  std::span<const int> sleep_fds() const noexcept override {
    auto* p = port.load(std::memory_order_acquire);
    return p ? p->sleep_fds() : std::span<const int>();
  }
  bool prepare_sleep() noexcept override {
    auto* p = port.load(std::memory_order_acquire);
    return p ? p->prepare_sleep() : true;
  }
  void arm_deadline() noexcept override {
    if (auto* p = port.load(std::memory_order_acquire)) p->arm_deadline();
  }
  uint8_t arm_kind(bool on_fds) const noexcept override {
    auto* p = port.load(std::memory_order_acquire);
    return p ? p->arm_kind(on_fds) : 0;
  }
  void armed(uint8_t kind) noexcept override {
    if (auto* p = port.load(std::memory_order_acquire)) p->armed(kind);
  }
  void disarmed(uint8_t kind) noexcept override {
    if (auto* p = port.load(std::memory_order_acquire)) p->disarmed(kind);
  }
  void interrupted() noexcept override {
    if (auto* p = port.load(std::memory_order_acquire)) p->interrupted();
  }
};

struct EqFid {
  fid_eq fid{};
  Fabric* fabric = nullptr;
  EqProgress progress;
  std::atomic<bool> port_chosen{false};  ///< a passive or MSG endpoint named the port
  std::unique_ptr<event::Eq> eq;
  fi_wait_obj wait_obj = FI_WAIT_NONE;  ///< as opened, FI_WAIT_UNSPEC resolved
  fid_wait* wait_set = nullptr;         ///< FI_WAIT_SET: the set joined
  uint64_t flags = 0;                   ///< fi_eq_attr::flags
  std::atomic<int> bind_refs{0};        ///< objects bound to this EQ (close is EBUSY while > 0)
};

EqFid* as_eq(fid_eq* f) noexcept {
  if (!f || f->fid.fclass != FI_CLASS_EQ) return nullptr;
  return container_of_fid<EqFid>(&f->fid);
}

EqFid* as_eq(fid* f) noexcept {
  if (!f || f->fclass != FI_CLASS_EQ) return nullptr;
  return container_of_fid<EqFid>(f);
}

int eq_close(fid* f) noexcept {
  EqFid* e = as_eq(f);
  if (!e) return -FI_EINVAL;
  // Acquire: pairs with the release decrement in eq_bind_ref, so an unbind is complete.
  if (e->bind_refs.load(std::memory_order_acquire) != 0) return -FI_EBUSY;
  if (e->wait_obj == FI_WAIT_SET) (void)waitset_leave(e->wait_set, e->eq.get());
  e->eq->leave_all_sets();  // poll sets: no scan calls ready() once this returns
  e->fabric->refs.fetch_sub(1, std::memory_order_release);
  delete e;  // events still queued are lost (fi_eq(3)); unread CM infos are freed
  return FI_SUCCESS;
}

int eq_control(fid* f, int command, void* arg) noexcept {
  EqFid* e = as_eq(f);
  if (!e) return -FI_EINVAL;
  if (command == FI_GETWAIT && e->wait_obj == FI_WAIT_SET) {
    // The EQ waits through its set: hand out the set's wait object.
    return e->wait_set->fid.ops->control(&e->wait_set->fid, FI_GETWAIT, arg);
  }
  return control_wait(*e->eq, e->wait_obj, command, arg);
}

ssize_t eq_read(fid_eq* f, uint32_t* event, void* buf, size_t len, uint64_t flags) noexcept {
  EqFid* e = as_eq(f);
  if (!e) return -FI_EINVAL;
  // Control progress is FI_PROGRESS_MANUAL: an application that only reads its EQ (no sread, no
  // CQ or counter of the port) makes connections through these reads (fi_domain(3)). A poll step
  // of the port the EQ follows; it returns at once while another thread runs one.
  e->eq->progress_once();
  return e->eq->read(event, buf, len, flags);
}

ssize_t eq_readerr(fid_eq* f, fi_eq_err_entry* buf, uint64_t flags) noexcept {
  EqFid* e = as_eq(f);
  if (!e) return -FI_EINVAL;
  return e->eq->readerr(buf, flags);
}

ssize_t eq_write(fid_eq* f, uint32_t event, const void* buf, size_t len, uint64_t flags) noexcept {
  EqFid* e = as_eq(f);
  if (!e) return -FI_EINVAL;
  // "If the FI_WRITE flag is not set, then the application may not invoke fi_eq_write."
  if (!(e->flags & FI_WRITE)) return -FI_EINVAL;
  return e->eq->write(event, buf, len, flags);
}

ssize_t eq_sread(fid_eq* f, uint32_t* event, void* buf, size_t len, int timeout,
                 uint64_t flags) noexcept {
  EqFid* e = as_eq(f);
  if (!e) return -FI_EINVAL;
  // "It is invalid for applications to call this function if the EQ has been configured with a
  // wait object of FI_WAIT_NONE or FI_WAIT_SET."
  if (e->wait_obj == FI_WAIT_NONE || e->wait_obj == FI_WAIT_SET) return -FI_EINVAL;
  return e->eq->sread(event, buf, len, timeout, flags);
}

const char* eq_strerror(fid_eq*, int prov_errno, const void* err_data, char* buf,
                        size_t len) noexcept {
  return event::Eq::strerror(prov_errno, err_data, buf, len);
}

fi_ops g_eq_fi_ops = {
    .size = sizeof(fi_ops),
    .close = eq_close,
    .bind = enosys<decltype(fi_ops::bind)>,
    .control = eq_control,
    .ops_open = enosys<decltype(fi_ops::ops_open)>,
    .tostr = nullptr,
    .ops_set = enosys<decltype(fi_ops::ops_set)>,
};

fi_ops_eq g_eq_ops = {
    .size = sizeof(fi_ops_eq),
    .read = eq_read,
    .readerr = eq_readerr,
    .write = eq_write,
    .sread = eq_sread,
    .strerror = eq_strerror,
};

// One consumer per port for the EQs of the process: they live as long as the process (an EQ's
// waits may be on one while an endpoint closes), made when a port's first EQ needs one.
progress::PortConsumer* eq_consumer(progress::PortEngine* engine, const config::Config* cfg) {
  static std::mutex mutex;
  static auto* consumers = new std::map<uint16_t, std::unique_ptr<progress::PortConsumer>>();
  std::lock_guard lock(mutex);
  auto& c = (*consumers)[engine->port()->info().port_id];
  if (!c) c = std::make_unique<progress::PortConsumer>();
  if (c->engine() != engine)  // first use, or a port opened again after a provider cleanup
    c->attach(engine,
              progress::SpinConfig{cfg ? cfg->spin_auto : true, cfg ? cfg->spin_us * 1000 : 0,
                                   cfg ? cfg->spin_max_us * 1000 : 100'000});
  return c.get();
}

}  // namespace

void eq_progress_port(fid_eq* eq, progress::PortEngine* engine) noexcept {
  EqFid* e = as_eq(eq);
  if (!e || !engine) return;
  if (e->port_chosen.exchange(true, std::memory_order_acq_rel)) return;
  try {
    // Release: the consumer is made before a waiter can load it.
    e->progress.port.store(eq_consumer(engine, e->fabric->cfg), std::memory_order_release);
  } catch (...) {  // out of memory: the EQ keeps the port it had
  }
}

bool eq_attach_progress(fid_eq* eq, wait::ProgressSource* extra) noexcept {
  EqFid* e = as_eq(eq);
  wait::ProgressSource* none = nullptr;
  // Release: the source is ready before a waiter can load it.
  return e && e->progress.extra.compare_exchange_strong(none, extra, std::memory_order_release);
}

void eq_detach_progress(fid_eq* eq, wait::ProgressSource* extra) noexcept {
  if (EqFid* e = as_eq(eq)) {
    wait::ProgressSource* cur = extra;
    e->progress.extra.compare_exchange_strong(cur, nullptr, std::memory_order_acq_rel);
  }
}

int eq_open(fid_fabric* fabric, fi_eq_attr* attr, fid_eq** eq, void* context) noexcept {
  return guard("fi_eq_open", [&]() -> int {
    if (!fabric || !attr || !eq) return -FI_EINVAL;
    if (attr->flags & ~(FI_WRITE | FI_AFFINITY)) {
      DPFAB_INFO(FI_LOG_EQ, "unsupported EQ flags 0x%llx",
                 static_cast<unsigned long long>(attr->flags & ~(FI_WRITE | FI_AFFINITY)));
      return -FI_EINVAL;
    }
    if (attr->flags & FI_AFFINITY)
      DPFAB_DBG(FI_LOG_EQ, "signaling_vector %d is a hint; EQ events raise no interrupts",
                attr->signaling_vector);
    // "This field is ignored if wait_obj is not FI_WAIT_SET."
    const std::optional<fi_wait_obj> wait_obj = app_wait_obj(attr->wait_obj);
    if (!wait_obj) return -FI_EINVAL;
    fid_wait* wait_set = *wait_obj == FI_WAIT_SET ? attr->wait_set : nullptr;
    fi_wait_obj resolved = *wait_obj;
    auto signal = make_signal(*wait_obj, wait_set, &resolved);
    if (!signal) {
      DPFAB_INFO(FI_LOG_EQ, "%s", signal.error().message.c_str());
      return signal.code();
    }
    auto* fab = container_of_fid<Fabric>(&fabric->fid);
    auto e = std::make_unique<EqFid>();
    e->fabric = fab;
    e->wait_obj = resolved;
    e->wait_set = wait_set;
    e->flags = attr->flags;
    e->fid.fid.fclass = FI_CLASS_EQ;
    e->fid.fid.context = context;
    e->fid.fid.ops = &g_eq_fi_ops;
    e->fid.ops = &g_eq_ops;
    event::Eq::Options opts;
    opts.size = attr->size;
    opts.api_version = api_version(fab);
    opts.fid = &e->fid.fid;
    e->eq = std::make_unique<event::Eq>(std::move(signal.value()), opts);
    // Connection events arrive on a port: the EQ progresses the process's first one until a
    // passive or MSG endpoint bound to it names its own. Set before joining a wait set, which
    // records its members' progress sources.
    for (const auto& p : port::ports())
      if (auto engine = progress::PortEngine::of(p.get())) {
        e->progress.port.store(eq_consumer(*engine, fab->cfg), std::memory_order_relaxed);
        break;
      }
    e->eq->set_progress(&e->progress);
    if (wait_set) {
      if (int r = waitset_join(wait_set, e->eq.get(), context); r != FI_SUCCESS) return r;
    }
    fab->refs.fetch_add(1, std::memory_order_relaxed);
    *eq = &e.release()->fid;
    return FI_SUCCESS;
  });
}

int eq_wait_info(fid* f, WaitInfo* out) noexcept {
  EqFid* e = as_eq(f);
  if (!e || !out) return -FI_EINVAL;
  out->waitable = e->eq.get();
  out->wait_obj = e->wait_obj;
  out->wait_set = e->wait_set;
  return FI_SUCCESS;
}

event::Eq* eq_of(fid_eq* eq) noexcept {
  EqFid* e = as_eq(eq);
  return e ? e->eq.get() : nullptr;
}

int eq_bind_ref(fid_eq* eq, int delta) noexcept {
  EqFid* e = as_eq(eq);
  if (!e) return -FI_EINVAL;
  int cur = e->bind_refs.load(std::memory_order_relaxed);
  do {
    if (cur + delta < 0) return -FI_EINVAL;  // more unbinds than binds
    // acq_rel: a decrement releases the unbinding object's last use; eq_close acquires it.
  } while (!e->bind_refs.compare_exchange_weak(cur, cur + delta, std::memory_order_acq_rel,
                                               std::memory_order_relaxed));
  return cur + delta;
}

}  // namespace dpfab::ofi
