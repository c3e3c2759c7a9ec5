// SPDX-License-Identifier: BSD-3-Clause
//
// Eq: the storage and semantics of a libfabric event queue (fi_eq(3)), without the fid tables
// (those are in drivers/ofi/eq.cc). EQs carry control events, not the data path: address vector
// and memory registration completions, connection management (FI_CONNREQ / FI_CONNECTED /
// FI_SHUTDOWN with connection data), multicast joins, asynchronous errors such as a CQ overrun.
// Events have variable sizes, so the queue is a mutex-protected, bounded FIFO of owned entries;
// nothing here is on the data path.
//
// Rules implemented here (each is a sentence of fi_eq(3); the unit tests are named after them):
//   - At most one event per read; read returns the number of bytes read; -FI_EAGAIN when empty.
//   - FI_PEEK reads an event without consuming it; a later read without FI_PEEK removes it.
//   - A buffer smaller than the event returns -FI_ETOOSMALL and the event stays queued. For
//     connection events (struct fi_eq_cm_entry) only the fixed header must fit: the connection
//     data beyond it "is limited to the buffer space provided by the application", and the
//     amount returned follows from the return value (sizeof(fi_eq_cm_entry) + data copied).
//   - Error entries keep their place in the order of events: a read returns the events written
//     before an error, then -FI_EAVAIL while the error is at the head; readerr returns it
//     (-FI_EAGAIN when no error is at the head).
//   - err_data: with API >= 1.5 and err_data_size > 0 on input, the error data is copied into the
//     caller's err_data buffer (at most err_data_size bytes) and err_data_size is set to the bytes
//     copied. With err_data_size == 0 on input, or API < 1.5, err_data points at a buffer owned by
//     the EQ, valid until the next read call against the EQ (err_data_size, when the caller's
//     struct has it, is set to that buffer's size). Below 1.5 the caller's struct ends at err_data
//     (the 1.0 layout), so err_data_size is neither read nor written and readerr returns the size
//     of that layout.
//   - Overrun (NOTES): the size attribute is the capacity. A write into a full EQ fails with
//     -FI_EOVERRUN and puts the EQ in the overrun state, in which every write fails with
//     -FI_EOVERRUN. Reads still return the events queued before the overrun; once they are gone
//     every read returns -FI_EAVAIL and every readerr returns an error entry with
//     err = FI_EOVERRUN (fid = the EQ's fid). The state is permanent: an overrun EQ is fatal.
//   - sread blocks until an event can be read, the timeout passes (-FI_EAGAIN), or the thread is
//     interrupted by a POSIX signal with nothing to read (-FI_EAGAIN). libfabric 1.17 has no
//     fi_eq_signal, so a POSIX signal is the "external source" of the man page.
//
// Threads: every member function may be called from any thread. Producers (write*) and
// consumers (read*, sread) serialise on one mutex; ready() takes no lock.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "common/spinlock.h"
#include "wait/waitable.h"

namespace dpfab::event {

class Eq final : public wait::Waitable {
 public:
  /// Capacity used when fi_eq_attr::size is 0.
  static constexpr size_t kDefaultSize = 1024;
  /// Largest event, connection data or error data accepted (a sanity bound, far above what the
  /// provider's control protocols produce).
  static constexpr size_t kMaxEventBytes = size_t{1} << 20;

  struct Options {
    size_t size = 0;                           ///< capacity in events; 0 = kDefaultSize
    uint32_t api_version = FI_VERSION(1, 17);  ///< the fabric's; decides the err_data rules
    fid_t fid = nullptr;                       ///< reported as the fid of the overrun error
  };

  /// `signal` is the wait object (null for FI_WAIT_NONE, and for FI_WAIT_SET unless the set
  /// needs members' own fds). Never fails; entries are allocated as they are written.
  Eq(std::unique_ptr<wait::Signal> signal, const Options& opts) noexcept;
  /// Frees the fi_info of connection events nobody read ("events which remain on the EQ when it
  /// is closed are lost").
  ~Eq() override;

  // ---- producer side (the provider: AV insertion, CM, multicast joins, async errors) ----

  /// Queues a copy of `len` bytes at `buf` as one event of type `event` (fi_eq_write). Events
  /// FI_CONNREQ / FI_CONNECTED / FI_SHUTDOWN of at least sizeof(fi_eq_cm_entry) bytes are
  /// connection events: readers may truncate the data after the fi_eq_cm_entry header. Wakes
  /// armed waiters and the wait/poll sets the EQ belongs to.
  /// @return `len` on success; -FI_EINVAL if `buf` is null, `len` is 0 or above kMaxEventBytes,
  ///         or `flags` is not 0 (1.17
  ///         defines no flags for fi_eq_write; error entries go through write_error);
  ///         -FI_EOVERRUN if the EQ is full (it is now overrun) or already overrun;
  ///         -FI_ENOMEM.
  ssize_t write(uint32_t event, const void* buf, size_t len, uint64_t flags) noexcept;

  /// Queues a connection event (FI_CONNREQ, FI_CONNECTED, FI_SHUTDOWN): a struct fi_eq_cm_entry
  /// {fid, info} followed by `len` bytes of connection data. On success the EQ owns `info` until
  /// a read consumes the event (then the application does, and frees it with fi_freeinfo); an
  /// event still queued when the EQ is destroyed has its info freed. On failure the caller keeps
  /// `info`.
  /// @return sizeof(fi_eq_cm_entry) + len; -FI_EINVAL if `data` is null with `len` > 0 or `len`
  ///         is above kMaxEventBytes;
  ///         -FI_EOVERRUN; -FI_ENOMEM.
  ssize_t write_cm(uint32_t event, fid_t fid, fi_info* info, const void* data, size_t len) noexcept;

  /// Queues an error entry (fid, context, data, err, prov_errno of `entry`; its err_data and
  /// err_data_size are ignored) with a copy of `len` bytes of error data at `err_data`. The error
  /// data is opaque (fi_reject's connection data travels here, for one).
  /// @return sizeof(fi_eq_err_entry); -FI_EINVAL if entry.err <= 0, `err_data` is null with
  ///         `len` > 0, or `len` is above kMaxEventBytes; -FI_EOVERRUN; -FI_ENOMEM.
  ssize_t write_error(const fi_eq_err_entry& entry, const void* err_data, size_t len) noexcept;

  // ---- consumer side ----

  /// fi_eq_read: copies the event at the head into `buf` and its type into `*event` (if
  /// `event` is not null), consuming it unless `flags` has FI_PEEK.
  /// @return bytes copied; -FI_EAGAIN when empty; -FI_EAVAIL when an error entry is at the head
  ///         or the EQ is overrun and drained; -FI_ETOOSMALL when `len` cannot hold the event
  ///         (the event stays queued); -FI_EINVAL for flags other than FI_PEEK.
  ssize_t read(uint32_t* event, void* buf, size_t len, uint64_t flags) noexcept;

  /// fi_eq_readerr: copies the error entry at the head into `*buf` following the err_data rules
  /// above, consuming it unless `flags` has FI_PEEK (the overrun error is never consumed).
  /// @return sizeof(fi_eq_err_entry) (the 1.0 layout's size below API 1.5); -FI_EAGAIN when no
  ///         error is at the head; -FI_EINVAL if `buf` is null or for flags other than FI_PEEK;
  ///         -FI_ENOMEM.
  ssize_t readerr(fi_eq_err_entry* buf, uint64_t flags) noexcept;

  /// fi_eq_sread: read() that blocks until an event (or error) can be read. `timeout_ms` < 0
  /// waits forever.
  /// @return as read(); -FI_EAGAIN when the timeout passes or a POSIX signal interrupts the wait
  ///         with nothing to read; -FI_EINVAL when the EQ has no signal of its own
  ///         (FI_WAIT_NONE, FI_WAIT_SET) or for flags other than FI_PEEK.
  ssize_t sread(uint32_t* event, void* buf, size_t len, int timeout_ms, uint64_t flags) noexcept;

  /// fi_eq_strerror: text for a prov_errno of this provider (a positive or negative fabric or
  /// system errno). err_data is not interpreted: it may be binary data (fi_reject's) of a size
  /// this call is not given. Writes the text into `buf` when `buf` and `len` are given (always
  /// NUL-terminated, truncated to `len`) and returns `buf`; otherwise returns a static string.
  static const char* strerror(int prov_errno, const void* err_data, char* buf, size_t len) noexcept;

  // ---- state ----

  /// Something to read: an event, an error entry, or the overrun error. Lock-free.
  bool ready() const noexcept override {
    // seq_cst: the C3 re-check of the arm protocol; pairs with the seq_cst fence in notify()
    // that follows every store to count_ / overrun_.
    return count_.load(std::memory_order_seq_cst) != 0 || overrun_.load(std::memory_order_seq_cst);
  }
  size_t capacity() const noexcept { return capacity_; }
  /// Events and error entries queued (not counting the overrun error).
  size_t size() const noexcept { return count_.load(std::memory_order_relaxed); }
  bool overrun() const noexcept { return overrun_.load(std::memory_order_relaxed); }
  /// How many writes were refused because the EQ was full or overrun.
  uint64_t refused() const noexcept;

  /// The fid reported by the overrun error (the EQ's own fid_eq); set before first use.
  void set_fid(fid_t fid) noexcept { fid_ = fid; }

 private:
  struct InfoFree {
    void operator()(fi_info* info) const noexcept;
  };
  struct Entry {
    uint32_t event = 0;
    bool error = false;
    size_t fixed = 0;            ///< bytes a reader's buffer must hold (else -FI_ETOOSMALL)
    std::vector<uint8_t> bytes;  ///< the event as read; for an error entry, its err_data
    fi_eq_err_entry err{};       ///< error entries (err_data, err_data_size unused)
    std::unique_ptr<fi_info, InfoFree> info;  ///< write_cm's info until a read consumes it
  };

  /// Appends `e` (overrun rules) and notifies. Returns 0 or -FI_EOVERRUN / -FI_ENOMEM.
  int push(Entry&& e) noexcept;
  /// Pops the head. Mutex held.
  void pop_locked() noexcept;

  const size_t capacity_;
  const bool legacy_err_data_;  // API < 1.5: fi_eq_err_entry 1.0 layout, provider-owned err_data
  fid_t fid_;

  // A data-path lock (common/lockcheck.h): a poll step writes connection events here. Nothing
  // under it makes a syscall but the allocator's (the queue's entries).
  mutable SpinLock mutex_{"EQ"};
  std::deque<Entry> queue_;             // under mutex_
  std::vector<uint8_t> held_err_data_;  // under mutex_: the provider-owned err_data handed out
  uint64_t refused_ = 0;                // under mutex_
  // Written under mutex_, read lock-free by ready(); stored seq_cst before notify()'s fence.
  std::atomic<size_t> count_{0};
  std::atomic<bool> overrun_{false};
};

}  // namespace dpfab::event
