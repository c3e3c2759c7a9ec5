// SPDX-License-Identifier: BSD-3-Clause
#include "event/cq.h"

#include <rte_common.h>
#include <rte_ring_elem.h>
#include <rte_ring_peek_zc.h>
#include <rte_ring_rts.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "common/fi_api.h"
#include "common/ring.h"

namespace dpfab::event {

namespace {

// An error marker's `reserved` value; its op_context is the ErrorRecord.
constexpr uint64_t kErrorMarker = 0x4450464142455252ull;  // "DPFABERR"

constexpr unsigned kEsize = sizeof(CqEntry);

bool is_marker(const CqEntry& e) noexcept { return e.reserved == kErrorMarker; }

// The entry at index i of a zero-copy dequeue window.
const CqEntry& at(const rte_ring_zc_data& z, unsigned i) noexcept {
  return i < z.n1 ? static_cast<const CqEntry*>(z.ptr1)[i]
                  : static_cast<const CqEntry*>(z.ptr2)[i - z.n1];
}

// Called by the consumer after a dequeue start, before it reads the entries. The RTS producers
// publish with a release CAS on the 8-byte rts_prod.tail; the dequeue reads its 4-byte pos half.
// On every CPU that load orders the entry reads, but in the C++ model (and for ThreadSanitizer)
// only an acquire of the same object synchronises with the CAS -- and, the CASes forming a
// release sequence, with every producer that published before. Costs a load of a cache line the
// dequeue just read.
inline void acquire_producers(const rte_ring* r) noexcept {
  (void)__atomic_load_n(&r->rts_prod.tail.raw, __ATOMIC_ACQUIRE);
}

// Conversion of a stored entry into each format (chosen at compile time per read).
inline void put(fi_cq_entry* o, const CqEntry& e) noexcept { o->op_context = e.op_context; }
inline void put(fi_cq_msg_entry* o, const CqEntry& e) noexcept {
  o->op_context = e.op_context;
  o->flags = e.flags;
  o->len = e.len;
}
inline void put(fi_cq_data_entry* o, const CqEntry& e) noexcept {
  o->op_context = e.op_context;
  o->flags = e.flags;
  o->len = e.len;
  o->buf = e.buf;
  o->data = e.data;
}
inline void put(fi_cq_tagged_entry* o, const CqEntry& e) noexcept {
  o->op_context = e.op_context;
  o->flags = e.flags;
  o->len = e.len;
  o->buf = e.buf;
  o->data = e.data;
  o->tag = e.tag;
}

// The 1.0 layout of fi_cq_err_entry (before err_data_size was added in 1.5).
constexpr size_t kErrEntry10Size = offsetof(fi_cq_err_entry, err_data_size);
// The 1.5 layout (ABI 1.1), before src_addr was added in 1.20. Against headers older than 1.20 it
// is the whole structure.
#if DPFAB_FI_HEADERS_AT_LEAST(1, 20)
constexpr size_t kErrEntry15Size = offsetof(fi_cq_err_entry, src_addr);
#else
constexpr size_t kErrEntry15Size = sizeof(fi_cq_err_entry);
#endif

// How many bytes of fi_cq_err_entry an application of API `api` has: it may hold an older, smaller
// structure than the headers this is built with (2.x headers, a 1.17 application).
size_t err_entry_size(uint32_t api) noexcept {
  if (api < FI_VERSION(1, 5)) return kErrEntry10Size;
  if (!fi_api::at_least(api, fi_api::kCqErrSrcAddr)) return kErrEntry15Size;
  return sizeof(fi_cq_err_entry);
}

}  // namespace

struct Cq::ErrorRecord {
  fi_cq_err_entry err{};
  std::unique_ptr<uint8_t[]> data;
  size_t size = 0;
};

Cq::Cq(const CqConfig& cfg, std::unique_ptr<wait::Signal> signal) noexcept
    : Waitable(std::move(signal)),
      format_(cfg.format == FI_CQ_FORMAT_UNSPEC ? FI_CQ_FORMAT_CONTEXT : cfg.format),
      rm_enabled_(cfg.rm_enabled),
      api_version_(cfg.api_version) {}

Result<std::unique_ptr<Cq>> Cq::create(const CqConfig& cfg, std::unique_ptr<wait::Signal> signal) {
  // An application may put any integer in the format: read it as one (loading a value outside
  // the enumeration as fi_cq_format is undefined behaviour, which UBSan reports).
  int format;
  static_assert(sizeof(format) == sizeof(cfg.format));
  std::memcpy(&format, &cfg.format, sizeof(format));
  switch (format) {
    case FI_CQ_FORMAT_UNSPEC:
    case FI_CQ_FORMAT_CONTEXT:
    case FI_CQ_FORMAT_MSG:
    case FI_CQ_FORMAT_DATA:
    case FI_CQ_FORMAT_TAGGED:
      break;
    default:
      return make_error(-FI_EINVAL, "unknown CQ format " + std::to_string(format));
  }
  size_t size = cfg.size ? cfg.size : kDefaultSize;
  if (size > kMaxSize)
    return make_error(-FI_EINVAL, "CQ size " + std::to_string(size) + " above the maximum " +
                                      std::to_string(kMaxSize));
  // A ring of 2^k slots holds 2^k - 1 entries: the smallest 2^k > size.
  const unsigned slots = rte_align32pow2(static_cast<uint32_t>(size) + 1);
  ssize_t bytes = rte_ring_get_memsize_elem(kEsize, slots);
  if (bytes < 0) return make_error(-FI_EINVAL, "rte_ring_get_memsize_elem failed");
  void* mem = std::aligned_alloc(RTE_CACHE_LINE_SIZE,
                                 RTE_ALIGN_CEIL(static_cast<size_t>(bytes), RTE_CACHE_LINE_SIZE));
  if (!mem) return make_error(-FI_ENOMEM, "no memory for a CQ ring");
  std::unique_ptr<rte_ring, RingFree> ring(static_cast<rte_ring*>(mem));
  if (int r = rte_ring_init(ring.get(), "dpfab_cq", slots, RING_F_MP_RTS_ENQ | RING_F_SC_DEQ);
      r != 0)
    return make_error(-FI_EINVAL, "rte_ring_init failed: " + std::to_string(r));
  // RTS producers wait only when their head runs more than htd_max ahead of the published tail
  // (default capacity / 8, 0 for tiny rings): a producer preempted mid-enqueue would then make the
  // others spin. With the whole capacity they never wait; a full ring returns a short write.
  if (int r = rte_ring_set_prod_htd_max(ring.get(), rte_ring_get_capacity(ring.get())); r != 0)
    return make_error(-FI_EINVAL, "rte_ring_set_prod_htd_max failed: " + std::to_string(r));

  std::unique_ptr<Cq> cq(new (std::nothrow) Cq(cfg, std::move(signal)));
  if (!cq) return make_error(-FI_ENOMEM, "no memory for a CQ");
  cq->capacity_ = rte_ring_get_capacity(ring.get());
  cq->max_errors_ = cfg.max_errors ? std::min(cfg.max_errors, cq->capacity_) : cq->capacity_;
  cq->ring_ = std::move(ring);
  return cq;
}

Cq::~Cq() {
  // A wait/poll set scan on another thread may call ready() until we have left every set.
  leave_all_sets();
  // Free the error records still referenced by markers.
  Entry e;
  acquire_producers(ring_.get());
  while (rte_ring_dequeue_elem(ring_.get(), &e, kEsize) == 0)
    if (is_marker(e)) delete static_cast<ErrorRecord*>(e.op_context);
}

// ---- producer side -----------------------------------------------------------------------------

size_t Cq::enqueue(const Entry* e, size_t n) noexcept {
  if (overrun_.load(std::memory_order_relaxed)) [[unlikely]]
    return 0;  // fatal: an overrun CQ reports no further completions
  // The ring's tail update (release) publishes the entries: pairs with the consumer's acquire
  // of the producer tail in the dequeue.
  return rte_ring_enqueue_burst_elem(
      ring_.get(), e, kEsize, static_cast<unsigned>(std::min<size_t>(n, capacity_)), nullptr);
}

constinit thread_local Cq::DirectRead* Cq::t_direct_read = nullptr;

size_t Cq::write_direct(DirectRead& d, const Entry* e, size_t n) noexcept {
  // Only while the ring is empty (error markers are in it too) and the CQ is not overrun: the
  // entry is then the oldest its reader can see, and whatever follows it goes in the ring.
  if (overrun_.load(std::memory_order_relaxed) || !ring_empty_acquire(ring_.get()))
    return write_ring(e, n);
  d.entry = e[0];
  d.full = true;
  return n == 1 ? 1 : 1 + write_ring(e + 1, n - 1);
}

void Cq::short_write(const Entry* dropped, size_t n) noexcept {
  if (rm_enabled_) return;  // the caller checked would_fit, or owns the consequences
  enter_overrun(Overrun{dropped, n, nullptr});
}

void Cq::enter_overrun(const Overrun& what) noexcept {
  // Only the first producer to see the overrun reports it. acq_rel: the flag's release makes the
  // entries stored before it visible to a reader that sees it (its acquire in ready()/read()).
  if (overrun_.exchange(true, std::memory_order_acq_rel)) return;
  if (overrun_fn_) overrun_fn_(overrun_ctx_, *this, what);
  notify();  // a sleeping reader must see -FI_EAVAIL
}

int Cq::error_overflow(const fi_cq_err_entry& err) noexcept {
  if (rm_enabled_) return -FI_EAGAIN;
  enter_overrun(Overrun{nullptr, 0, &err});
  return -FI_EOVERRUN;
}

int Cq::write_error(const fi_cq_err_entry& err, const void* err_data, size_t len) noexcept {
  if (overrun_.load(std::memory_order_acquire)) return -FI_EOVERRUN;
  std::unique_ptr<ErrorRecord> rec(new (std::nothrow) ErrorRecord());
  if (!rec) return -FI_ENOMEM;
  rec->err = err;
  rec->err.err_data = nullptr;
  rec->err.err_data_size = 0;
  if (err_data && len) {
    rec->data.reset(new (std::nothrow) uint8_t[len]);
    if (!rec->data) return -FI_ENOMEM;
    std::memcpy(rec->data.get(), err_data, len);
    rec->size = len;
  }
  // Reserve an error slot first, so that max_errors is never exceeded by racing producers.
  if (errors_.fetch_add(1, std::memory_order_acq_rel) >= max_errors_) {
    errors_.fetch_sub(1, std::memory_order_acq_rel);
    return error_overflow(err);
  }
  Entry marker{};
  marker.op_context = rec.get();
  marker.reserved = kErrorMarker;
  if (enqueue(&marker, 1) != 1) {
    errors_.fetch_sub(1, std::memory_order_acq_rel);
    return error_overflow(err);
  }
  rec.release();  // owned by the marker now; readerr or ~Cq frees it
  notify();
  return FI_SUCCESS;
}

// These run on any thread: ring_count_acquire reads both tails with acquire loads (rte_ring_count
// uses plain loads, a data race in the C++ model).
size_t Cq::count() const noexcept { return ring_count_acquire(ring_.get()); }

bool Cq::ready() const noexcept {
  return !ring_empty_acquire(ring_.get()) || overrun_.load(std::memory_order_acquire);
}

// ---- consumer side -----------------------------------------------------------------------------

template <typename Out>
ssize_t Cq::read_as(Out* out, size_t count, fi_addr_t* src) noexcept {
  rte_ring_zc_data z;
  unsigned want = static_cast<unsigned>(std::min(count, capacity_));
  unsigned n = rte_ring_dequeue_zc_burst_elem_start(ring_.get(), kEsize, want, &z, nullptr);
  acquire_producers(ring_.get());
  unsigned done = 0;
  for (; done < n; ++done) {
    const Entry& e = at(z, done);
    if (is_marker(e)) break;  // the error stays at the head for readerr
    put(out + done, e);
    if (src) src[done] = e.src_addr;
  }
  rte_ring_dequeue_zc_elem_finish(ring_.get(), done);
  if (done) return done;
  if (n) return -FI_EAVAIL;  // an error entry is at the head
  return overrun_.load(std::memory_order_acquire) ? -FI_EAVAIL : -FI_EAGAIN;
}

ssize_t Cq::peek_state() noexcept {
  rte_ring_zc_data z;
  unsigned n = rte_ring_dequeue_zc_burst_elem_start(ring_.get(), kEsize, 1, &z, nullptr);
  acquire_producers(ring_.get());
  bool marker = n && is_marker(at(z, 0));
  rte_ring_dequeue_zc_elem_finish(ring_.get(), 0);
  if (marker) return -FI_EAVAIL;
  if (n) return 0;
  return overrun_.load(std::memory_order_acquire) ? -FI_EAVAIL : -FI_EAGAIN;
}

ssize_t Cq::read(void* buf, size_t count, fi_addr_t* src) noexcept {
  if (count && !buf) return -FI_EINVAL;
  // Empty (the common case of a busy-polling reader): nothing to take, so no lock. Error entries
  // are in the ring too, so an empty ring has none. An empty observation is as good as one made
  // under the lock: it is what a reader serialised just before a producer's enqueue sees.
  if (ring_count_acquire(ring_.get()) == 0)
    return overrun_.load(std::memory_order_acquire) ? -FI_EAVAIL : -FI_EAGAIN;
  std::lock_guard lock(consumer_mutex_);
  if (count == 0) return peek_state();
  switch (format_) {
    case FI_CQ_FORMAT_MSG:
      return read_as(static_cast<fi_cq_msg_entry*>(buf), count, src);
    case FI_CQ_FORMAT_DATA:
      return read_as(static_cast<fi_cq_data_entry*>(buf), count, src);
    case FI_CQ_FORMAT_TAGGED:
      return read_as(static_cast<fi_cq_tagged_entry*>(buf), count, src);
    default:
      return read_as(static_cast<fi_cq_entry*>(buf), count, src);
  }
}

ssize_t Cq::progress_and_read(void* buf, size_t count, fi_addr_t* src) noexcept {
  if (count == 0 || !buf) {
    progress_once();
    return read(buf, count, src);
  }
  DirectRead d;
  d.cq = this;
  DirectRead* const outer = t_direct_read;
  t_direct_read = &d;
  progress_once();
  t_direct_read = outer;
  if (!d.full) return read(buf, count, src);
  switch (format_) {
    case FI_CQ_FORMAT_MSG:
      return read_after_direct(static_cast<fi_cq_msg_entry*>(buf), count, src, d.entry);
    case FI_CQ_FORMAT_DATA:
      return read_after_direct(static_cast<fi_cq_data_entry*>(buf), count, src, d.entry);
    case FI_CQ_FORMAT_TAGGED:
      return read_after_direct(static_cast<fi_cq_tagged_entry*>(buf), count, src, d.entry);
    default:
      return read_after_direct(static_cast<fi_cq_entry*>(buf), count, src, d.entry);
  }
}

template <typename Out>
ssize_t Cq::read_after_direct(Out* out, size_t count, fi_addr_t* src, const Entry& first) noexcept {
  put(out, first);
  if (src) src[0] = first.src_addr;
  if (count == 1 || ring_empty_acquire(ring_.get())) return 1;
  // Completions stored after it (an error among them stays at the head for the next read).
  std::lock_guard lock(consumer_mutex_);
  const ssize_t more = read_as(out + 1, count - 1, src ? src + 1 : nullptr);
  return 1 + std::max<ssize_t>(more, 0);
}

ssize_t Cq::readerr(fi_cq_err_entry* buf) noexcept {
  if (!buf) return -FI_EINVAL;
  const bool v15 = api_version_ >= FI_VERSION(1, 5);
  const bool into_user = v15 && buf->err_data_size > 0;
  if (into_user && !buf->err_data) return -FI_EINVAL;
  std::lock_guard lock(consumer_mutex_);
  fi_cq_err_entry out{};
  std::unique_ptr<ErrorRecord> rec;
  rte_ring_zc_data z;
  unsigned n = rte_ring_dequeue_zc_burst_elem_start(ring_.get(), kEsize, 1, &z, nullptr);
  acquire_producers(ring_.get());
  if (n && is_marker(at(z, 0))) {
    rec.reset(static_cast<ErrorRecord*>(at(z, 0).op_context));
    rte_ring_dequeue_zc_elem_finish(ring_.get(), 1);
    errors_.fetch_sub(1, std::memory_order_acq_rel);
    out = rec->err;
  } else {
    rte_ring_dequeue_zc_elem_finish(ring_.get(), 0);
    if (n || !overrun_.load(std::memory_order_acquire)) return -FI_EAGAIN;
    out.err = FI_EOVERRUN;  // drained overrun CQ: this is all it reports from now on
  }

  err_data_ = rec ? std::move(rec->data) : nullptr;
  err_data_size_ = rec ? rec->size : 0;
  if (into_user) {
    size_t copy = std::min(buf->err_data_size, err_data_size_);
    if (copy) std::memcpy(buf->err_data, err_data_.get(), copy);
    out.err_data = buf->err_data;
    out.err_data_size = copy;
  } else {
    out.err_data = err_data_size_ ? err_data_.get() : nullptr;
    if (v15) out.err_data_size = err_data_size_;  // the 1.0 struct has no err_data_size
  }
#if DPFAB_FI_HEADERS_AT_LEAST(1, 20)
  // 1.20: the source of the failed transfer as an authorization key handle or user ID with
  // FI_AV_AUTH_KEY (not offered), "otherwise FI_ADDR_NOTAVAIL" (fi_cq(3)).
  out.src_addr = FI_ADDR_NOTAVAIL;
#endif
  // Only the part of the entry the application's API version has: the rest of its buffer may be
  // another object.
  std::memcpy(buf, &out, err_entry_size(api_version_));
  err_data_out_ = out.err_data;
  return 1;
}

ssize_t Cq::sread(void* buf, size_t count, fi_addr_t* src, size_t threshold,
                  const wait::Deadline& d) noexcept {
  if (!signal()) return -FI_EINVAL;
  if (count && !buf) return -FI_EINVAL;
  threshold = std::clamp<size_t>(threshold, 1, capacity_);
  // fi_cq_signal: signals not yet answered when this sread started end it (one that came while
  // nobody was blocked ends the next sread, once: fabtests cq_signal).
  const uint64_t base = sread_acked_.load(std::memory_order_acquire);
  auto signalled = [this, base] { return sread_signals_.load(std::memory_order_acquire) != base; };
  auto pred = [this, threshold, &signalled] {
    return this->count() >= threshold || errors() != 0 || overrun() || signalled();
  };
  for (;;) {
    wait::WaitStatus st = wait(pred, d);
    const uint64_t seen = sread_signals_.load(std::memory_order_acquire);
    const bool interrupted = seen != base;
    if (interrupted) {  // answered: later sreads start from here
      uint64_t acked = sread_acked_.load(std::memory_order_relaxed);
      while (acked < seen &&
             !sread_acked_.compare_exchange_weak(acked, seen, std::memory_order_acq_rel)) {
      }
    }
    ssize_t r = read(buf, count, src);
    if (r != -FI_EAGAIN) return r;
    if (interrupted || st != wait::WaitStatus::kReady) return -FI_EAGAIN;
    // Another consumer took what woke us: wait again.
  }
}

const char* Cq::strerror(int prov_errno, const void* err_data, char* buf, size_t len) noexcept {
  thread_local char local[256];
  if (!buf || !len) {
    buf = local;
    len = sizeof(local);
  }
  int errnum = prov_errno < 0 ? -prov_errno : prov_errno;
  int w = std::snprintf(buf, len, "dpdk: %s (prov_errno %d)", fi_strerror(errnum), prov_errno);
  size_t used = w < 0 ? 0 : std::min(static_cast<size_t>(w), len - 1);
  std::lock_guard lock(consumer_mutex_);
  // err_data is only read from our own copy of what the last readerr handed out: a pointer we
  // did not hand out may be anything.
  if (err_data && err_data == err_data_out_ && err_data_ && err_data_size_ && used + 1 < len) {
    const auto* p = err_data_.get();
    size_t n = err_data_size_;
    while (n && p[n - 1] == '\0') --n;
    bool text = std::all_of(p, p + n, [](uint8_t c) { return c >= 0x20 && c < 0x7f; });
    if (text) {
      std::snprintf(buf + used, len - used, ": %.*s", static_cast<int>(n), p);
    } else {
      int k = std::snprintf(buf + used, len - used, ": err_data");
      for (size_t i = 0; i < n && k >= 0 && used + k + 3 < len; ++i)
        k += std::snprintf(buf + used + k, len - used - k, " %02x", p[i]);
    }
  }
  return buf;
}

}  // namespace dpfab::event
