// SPDX-License-Identifier: BSD-3-Clause
//
// Cq: the storage and the consumer logic of a libfabric completion queue (fid_cq), without the fid
// tables (drivers/ofi/cq.cc maps those onto this class).
//
// ---- Storage ---------------------------------------------------------------------------------
//
// One rte_ring_elem ring of fixed-size 64-byte entries (CqEntry: everything of the largest
// format, fi_cq_tagged_entry, plus the source fi_addr for fi_cq_readfrom). The ring lives in
// memory the Cq allocates itself (rte_ring_get_memsize_elem + rte_ring_init): no EAL, no hugepages.
//   - Producers: multi-producer enqueue in RTS mode (relaxed tail sync, RING_F_MP_RTS_ENQ, with
//     the head-tail distance set to the capacity), so that a preempted application thread in the
//     middle of an enqueue never makes a progress lcore spin waiting for it (the default MP mode
//     would). The price: while producers overlap without pause, entries become visible only when
//     the last of them finishes (bounded by the ring filling up). A producer never allocates,
//     locks or makes a syscall, except for one signal raise when a consumer is armed
//     (Waitable::notify).
//   - Consumer: single-consumer (RING_F_SC_DEQ), serialised by consumer_mutex_ (a SpinLock: one
//     locked instruction per read that finds entries), which only application threads inside
//     read/readerr/sread/strerror take, for bounded work. Reads peek the ring zero-copy
//     (rte_ring_dequeue_zc_burst_elem_start), convert entries straight from ring memory into the
//     caller's format and then consume exactly what they converted.
//
// ---- Errors ----------------------------------------------------------------------------------
//
// fi_cq_read must return the completions written before an error, then -FI_EAVAIL until
// fi_cq_readerr takes the error, then the completions written after it. write_error therefore
// enqueues an *error marker* entry in the same ring, in order with the completions; the marker
// points to a heap-allocated ErrorRecord (the fi_cq_err_entry and a copy of its err_data). That is
// the side error queue: its order is the ring's order, so concurrent producers need no lock.
// Errors are rare; that path allocates. Their number is bounded (CqConfig::max_errors).
//
// ---- Resource management and overrun ---------------------------------------------------------
//
// FI_RM_ENABLED (the domain default): the provider must not start work whose completion the CQ
// could not take. The progress engine checks would_fit(n) before it posts or accepts an operation
// that will write n completions to this CQ (send, receive, error), and refuses it (-FI_EAGAIN to
// the application) otherwise. would_fit is exact when the caller is the CQ's only producer (the
// progress lcore that owns the endpoints bound to it); several producers of one CQ must share the
// headroom between them. A write that does not fit returns fewer than asked and changes nothing.
//
// FI_RM_DISABLED: a write that does not fit puts the CQ into the overrun state (fi_cq(3) NOTES):
// it keeps what it holds, reads return the valid completions, then -FI_EAVAIL, and fi_cq_readerr
// returns an FI_EOVERRUN error entry from then on; the CQ accepts nothing more. The overrun
// handler (set by the ofi layer, which reports the asynchronous error on the EQ) is called once,
// on the producer thread, with what was dropped.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "common/result.h"
#include "common/ring.h"
#include "common/spinlock.h"
#include "wait/waitable.h"

namespace dpfab::event {

/// One completion as producers write it and the ring stores it: every field of the largest format
/// (fi_cq_tagged_entry) plus the source address. 64 bytes: one cache line, a multiple of 4 as
/// rte_ring_elem requires.
struct CqEntry {
  void* op_context = nullptr;
  uint64_t flags = 0;
  size_t len = 0;
  void* buf = nullptr;
  uint64_t data = 0;
  uint64_t tag = 0;
  fi_addr_t src_addr = FI_ADDR_NOTAVAIL;  ///< fi_cq_readfrom's source address
  uint64_t reserved = 0;                  ///< owned by the Cq (error markers): producers leave 0
};
static_assert(sizeof(CqEntry) == 64 && sizeof(CqEntry) % 4 == 0);

struct CqConfig {
  /// Minimum number of entries (completions and errors) the CQ holds; 0 = kDefaultSize.
  size_t size = 0;
  /// FI_CQ_FORMAT_UNSPEC is stored as FI_CQ_FORMAT_CONTEXT.
  fi_cq_format format = FI_CQ_FORMAT_CONTEXT;
  /// FI_RM_ENABLED (true) or FI_RM_DISABLED (false) of the domain; see the file comment.
  bool rm_enabled = true;
  /// The fabric's API version (fid_fabric.api_version): fi_cq_readerr's err_data rules and the
  /// size of the entry it writes depend on it.
  uint32_t api_version = FI_VERSION(1, 17);
  /// Error entries that may wait in the CQ at once; 0 = the ring capacity.
  size_t max_errors = 0;
};

class Cq final : public wait::Waitable {
 public:
  using Entry = CqEntry;
  static constexpr size_t kDefaultSize = 1024;
  static constexpr size_t kMaxSize = size_t{1} << 20;  // 64 MiB of entries

  /// What a write that did not fit dropped (RM disabled), passed to the overrun handler.
  struct Overrun {
    const Entry* entries = nullptr;  ///< completions that were not stored (from write_burst)
    size_t count = 0;
    const fi_cq_err_entry* error = nullptr;  ///< the error that was not stored (from write_error)
  };
  /// Called on the producer's thread, once, when the CQ enters the overrun state. Must not block
  /// or call back into this Cq's consumer side.
  using OverrunHandler = void (*)(void* ctx, Cq& cq, const Overrun& what) noexcept;

  /// Makes a CQ holding at least cfg.size entries. `signal` may be null (FI_WAIT_NONE, wait sets).
  /// @return -FI_EINVAL for a size above kMaxSize or an unknown format; -FI_ENOMEM.
  static Result<std::unique_ptr<Cq>> create(const CqConfig& cfg,
                                            std::unique_ptr<wait::Signal> signal);
  ~Cq() override;

  /// How many entries fit in the ring (>= the size asked for). Error markers take one each.
  size_t capacity() const noexcept { return capacity_; }
  fi_cq_format format() const noexcept { return format_; }
  bool rm_enabled() const noexcept { return rm_enabled_; }

  // ---- producer side: any thread (progress lcores, application threads) ----------------------

  /// Stores up to `n` completions in order and wakes an armed consumer once.
  /// @return how many were stored (a prefix of `e`); fewer than `n` when the CQ is full, and 0
  ///         once it is overrun. With RM disabled, a short write enters the overrun state and
  ///         calls the overrun handler with the rest. No allocation, lock, or syscall unless a
  ///         consumer is armed.
  ///         A completion made inside this thread's progress_and_read of this CQ while the
  ///         ring is empty goes straight to that reader (counted as stored).
  size_t write_burst(const Entry* e, size_t n) noexcept {
    if (n == 0) return 0;
    if (DirectRead* d = t_direct_read; d != nullptr && d->cq == this && !d->full)
      return write_direct(*d, e, n);
    return write_ring(e, n);
  }
  /// write_burst of one entry. @return false when it did not fit.
  bool write(const Entry& e) noexcept { return write_burst(&e, 1) == 1; }
  bool write(void* op_context, uint64_t flags, size_t len = 0, void* buf = nullptr,
             uint64_t data = 0, uint64_t tag = 0, fi_addr_t src = FI_ADDR_NOTAVAIL) noexcept {
    Entry e{op_context, flags, len, buf, data, tag, src, 0};
    return write(e);
  }

  /// Stores an error completion (err.err a positive FI_E* code) after the completions written
  /// before it, with a copy of `len` bytes of `err_data` (err.err_data/err_data_size are ignored).
  /// Rare path: allocates.
  /// @return FI_SUCCESS; -FI_ENOMEM; -FI_EAGAIN when the ring is full or max_errors errors are
  ///         waiting (RM enabled); -FI_EOVERRUN when that happened with RM disabled (the CQ is
  ///         now overrun) or the CQ was overrun already.
  int write_error(const fi_cq_err_entry& err, const void* err_data, size_t len) noexcept;

  /// Free entries right now (a lower bound while other producers write). Inline: the RM check
  /// of every send and receive post (would_fit).
  size_t free_space() const noexcept { return capacity_ - ring_count_acquire(ring_.get()); }
  /// Whether `n` more entries fit right now. The progress engine checks this before starting work
  /// that will write `n` completions (FI_RM_ENABLED); see the file comment.
  bool would_fit(size_t n) const noexcept { return n <= free_space(); }

  /// The overrun handler (RM disabled). Control path: set it before producers run.
  void set_overrun_handler(OverrunHandler fn, void* ctx) noexcept {
    overrun_fn_ = fn;
    overrun_ctx_ = ctx;
  }
  bool overrun() const noexcept { return overrun_.load(std::memory_order_acquire); }

  // ---- consumer side: application threads (serialised by the consumer lock) ------------------

  /// fi_cq_read / fi_cq_readfrom: up to `count` completions into `buf` in the CQ's format, and
  /// their source addresses into `src` (when not null). Stops before an error entry.
  /// count == 0 consumes nothing and reports what a read would see (0 when completions wait).
  /// @return the number read; -FI_EAGAIN when empty; -FI_EAVAIL when an error entry (or the
  ///         overrun) is at the head; -FI_EINVAL when `buf` is null and count > 0.
  ssize_t read(void* buf, size_t count, fi_addr_t* src) noexcept;

  /// fi_cq_read with manual progress: one poll step of the progress source, then read(). When
  /// that step, on this thread, completes an operation for this CQ while the ring is empty, the
  /// completion goes straight into `buf`: no enqueue, no wakeup check (its reader is here), no
  /// dequeue -- the busy-polling reader's receive-to-reply path. Completions after it, and any
  /// that other threads made, go through the ring and follow it, so the order holds.
  ssize_t progress_and_read(void* buf, size_t count, fi_addr_t* src) noexcept;

  /// fi_cq_readerr: takes the error entry at the head of the CQ. err_data: with api_version >= 1.5
  /// and buf->err_data_size > 0, copied into buf->err_data (at most err_data_size bytes) and
  /// err_data_size set to the bytes copied; otherwise buf->err_data points to a provider buffer
  /// valid until the next readerr on this CQ (err_data_size, which does not exist before 1.5, is
  /// set to its size with api_version >= 1.5 and left alone below). Only the part of
  /// fi_cq_err_entry the API version has is written: the 1.0 part below 1.5, the 1.5 part below
  /// 1.20, and from 1.20 (headers that declare it) src_addr too, FI_ADDR_NOTAVAIL. An overrun CQ
  /// returns an FI_EOVERRUN entry once it is drained.
  /// @return 1; -FI_EAGAIN when no error is at the head; -FI_EINVAL when `buf` is null.
  ssize_t readerr(fi_cq_err_entry* buf) noexcept;

  /// fi_cq_sread / fi_cq_sreadfrom: waits (running the progress source) until `threshold`
  /// entries (1 = any; clamped to the capacity) or an error are queued, `d` passes, or
  /// interrupt_sread() is called, then reads as read() does.
  /// @return the number read; -FI_EAVAIL as read(); -FI_EAGAIN on timeout or interrupt with
  ///         nothing to read; -FI_EINVAL without a signal of its own (FI_WAIT_NONE / FI_WAIT_SET)
  ///         or a null `buf`.
  ssize_t sread(void* buf, size_t count, fi_addr_t* src, size_t threshold,
                const wait::Deadline& d) noexcept;

  /// fi_cq_signal: makes every sread blocked now return -FI_EAGAIN (when nothing is readable),
  /// or, when none is blocked, the next sread on this CQ. Any thread.
  void interrupt_sread() noexcept {
    // A generation, not a flag: every sread that entered before this call compares against the
    // acknowledged generation it saw on entry, so all of them return -- a flag taken by the
    // first woken reader left the others asleep until their timeout. Bumped before interrupt()
    // raises the signal, so a waiter whose predicate misses it is woken by the raise.
    sread_signals_.fetch_add(1, std::memory_order_acq_rel);
    interrupt();
  }

  /// fi_cq_strerror: a readable text for `prov_errno` (and for `err_data` when it is the buffer
  /// the last readerr returned) into `buf` (when `buf` and `len`), else into a thread-local
  /// buffer. @return the text.
  const char* strerror(int prov_errno, const void* err_data, char* buf, size_t len) noexcept;

  /// Entries queued (completions and error markers), for FI_CQ_COND_THRESHOLD. Any thread.
  size_t count() const noexcept;
  /// Error entries written and not yet taken by readerr. Any thread.
  size_t errors() const noexcept { return errors_.load(std::memory_order_acquire); }
  /// Non-empty (an error entry counts) or overrun: a read would not return -FI_EAGAIN.
  bool ready() const noexcept override;

  // ---- bindings (control path) ----

  /// Endpoints bound to this CQ; fi_close refuses with -FI_EBUSY while there are any.
  void add_binding() noexcept { bindings_.fetch_add(1, std::memory_order_relaxed); }
  void remove_binding() noexcept { bindings_.fetch_sub(1, std::memory_order_release); }
  int bindings() const noexcept { return bindings_.load(std::memory_order_acquire); }

 private:
  struct ErrorRecord;
  struct RingFree {
    void operator()(rte_ring* r) const noexcept { std::free(r); }
  };

  // The completion slot of a progress_and_read on this thread (on its stack), which producers on
  // the same thread fill instead of the ring. Initial-exec: one %fs-relative load per write.
  struct DirectRead {
    const Cq* cq = nullptr;
    bool full = false;
    Entry entry;
  };
  static constinit thread_local DirectRead* t_direct_read [[gnu::tls_model("initial-exec")]];

  Cq(const CqConfig& cfg, std::unique_ptr<wait::Signal> signal) noexcept;
  size_t write_direct(DirectRead& d, const Entry* e, size_t n) noexcept;
  size_t write_ring(const Entry* e, size_t n) noexcept {
    size_t done = enqueue(e, n);
    if (done != 0) notify();
    if (done != n) [[unlikely]]
      short_write(e + done, n - done);
    return done;
  }
  template <typename Out>
  ssize_t read_after_direct(Out* out, size_t count, fi_addr_t* src, const Entry& first) noexcept;
  size_t enqueue(const Entry* e, size_t n) noexcept;
  void short_write(const Entry* dropped, size_t n) noexcept;
  int error_overflow(const fi_cq_err_entry& err) noexcept;
  void enter_overrun(const Overrun& what) noexcept;
  template <typename Out>
  ssize_t read_as(Out* out, size_t count, fi_addr_t* src) noexcept;
  ssize_t peek_state() noexcept;

  // Immutable after create().
  std::unique_ptr<rte_ring, RingFree> ring_;
  size_t capacity_ = 0;
  fi_cq_format format_;
  bool rm_enabled_;
  uint32_t api_version_;
  size_t max_errors_ = 0;
  OverrunHandler overrun_fn_ = nullptr;
  void* overrun_ctx_ = nullptr;

  // Producer-written, rare: errors and overrun.
  alignas(64) std::atomic<size_t> errors_{0};  // error markers in the ring (write_error, readerr)
  std::atomic<bool> overrun_{false};
  std::atomic<uint64_t> sread_signals_{0};  // fi_cq_signal calls
  std::atomic<uint64_t> sread_acked_{0};    // signals already answered by a returning sread
  std::atomic<int> bindings_{0};

  // Consumer side.
  alignas(64) SpinLock consumer_mutex_{"CQ consumer"};
  std::unique_ptr<uint8_t[]> err_data_;  // the last readerr's err_data (provider-owned buffer)
  size_t err_data_size_ = 0;
  const void* err_data_out_ = nullptr;  // where that readerr pointed the caller's err_data
};

}  // namespace dpfab::event
