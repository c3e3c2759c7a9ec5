// SPDX-License-Identifier: BSD-3-Clause
#include "event/eq.h"

#include "wait/wake_batch.h"

#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "common/log.h"

namespace dpfab::event {
namespace {

bool is_cm_event(uint32_t event) noexcept {
  return event == FI_CONNREQ || event == FI_CONNECTED || event == FI_SHUTDOWN;
}

// The fi_eq_err_entry of libfabric 1.0-1.4 ended with err_data.
constexpr size_t kErrEntry10Size = offsetof(fi_eq_err_entry, err_data) + sizeof(void*);

}  // namespace

void Eq::InfoFree::operator()(fi_info* info) const noexcept { fi_freeinfo(info); }

Eq::Eq(std::unique_ptr<wait::Signal> signal, const Options& opts) noexcept
    : Waitable(std::move(signal)),
      capacity_(opts.size ? opts.size : kDefaultSize),
      legacy_err_data_(FI_VERSION_LT(opts.api_version, FI_VERSION(1, 5))),
      fid_(opts.fid) {}

Eq::~Eq() {
  // Leave the sets before the queue goes: a set scan may call ready() until this returns.
  leave_all_sets();
}

uint64_t Eq::refused() const noexcept {
  std::lock_guard lock(mutex_);
  return refused_;
}

int Eq::push(Entry&& e) noexcept {
  bool overran = false;
  {
    std::lock_guard lock(mutex_);
    if (overrun_.load(std::memory_order_relaxed)) {
      ++refused_;
      return -FI_EOVERRUN;
    }
    if (queue_.size() >= capacity_) {
      // Overrun: fatal. The readers drain what is queued, then see the FI_EOVERRUN error. No
      // notify needed: the queue is full, so ready() was true already.
      overrun_.store(true, std::memory_order_seq_cst);
      ++refused_;
      overran = true;
    } else {
      try {
        queue_.push_back(std::move(e));
      } catch (const std::bad_alloc&) {
        return -FI_ENOMEM;
      }
      // P1 of the arm protocol: publish before notify()'s fence.
      count_.store(queue_.size(), std::memory_order_seq_cst);
    }
  }
  if (overran) {
    // Said once the caller's locks are released too (a log line is a syscall; a poll step writes
    // connection events here).
    wait::WakeBatch::defer(
        [](void*, uint64_t n) noexcept {
          DPFAB_WARN(FI_LOG_EQ, "event queue overrun (%lu events): the EQ is now unusable",
                     static_cast<unsigned long>(n));
        },
        nullptr, capacity_);
    return -FI_EOVERRUN;
  }
  notify();
  return FI_SUCCESS;
}

void Eq::pop_locked() noexcept {
  queue_.pop_front();
  count_.store(queue_.size(), std::memory_order_seq_cst);
}

ssize_t Eq::write(uint32_t event, const void* buf, size_t len, uint64_t flags) noexcept {
  if (!buf || len == 0 || len > kMaxEventBytes || flags != 0) return -FI_EINVAL;
  Entry e;
  e.event = event;
  e.fixed = is_cm_event(event) && len >= sizeof(fi_eq_cm_entry) ? sizeof(fi_eq_cm_entry) : len;
  try {
    const auto* p = static_cast<const uint8_t*>(buf);
    e.bytes.assign(p, p + len);
  } catch (const std::bad_alloc&) {
    return -FI_ENOMEM;
  }
  int r = push(std::move(e));
  return r < 0 ? r : static_cast<ssize_t>(len);
}

ssize_t Eq::write_cm(uint32_t event, fid_t fid, fi_info* info, const void* data,
                     size_t len) noexcept {
  if ((!data && len > 0) || len > kMaxEventBytes) return -FI_EINVAL;
  Entry e;
  e.event = event;
  e.fixed = sizeof(fi_eq_cm_entry);
  try {
    e.bytes.resize(sizeof(fi_eq_cm_entry) + len);
  } catch (const std::bad_alloc&) {
    return -FI_ENOMEM;
  }
  fi_eq_cm_entry head{};
  head.fid = fid;
  head.info = info;
  std::memcpy(e.bytes.data(), &head, sizeof(head));
  if (len) std::memcpy(e.bytes.data() + sizeof(head), data, len);
  e.info.reset(info);
  int r = push(std::move(e));
  if (r < 0) {
    (void)e.info.release();  // not queued (push moves only on success): the caller keeps it
    return r;
  }
  return static_cast<ssize_t>(sizeof(fi_eq_cm_entry) + len);
}

ssize_t Eq::write_error(const fi_eq_err_entry& entry, const void* err_data, size_t len) noexcept {
  if (entry.err <= 0 || (!err_data && len > 0) || len > kMaxEventBytes) return -FI_EINVAL;
  Entry e;
  e.error = true;
  e.err = entry;
  e.err.err_data = nullptr;
  e.err.err_data_size = 0;
  try {
    if (len) {
      const auto* p = static_cast<const uint8_t*>(err_data);
      e.bytes.assign(p, p + len);
    }
  } catch (const std::bad_alloc&) {
    return -FI_ENOMEM;
  }
  int r = push(std::move(e));
  return r < 0 ? r : static_cast<ssize_t>(sizeof(fi_eq_err_entry));
}

ssize_t Eq::read(uint32_t* event, void* buf, size_t len, uint64_t flags) noexcept {
  if (flags & ~FI_PEEK) return -FI_EINVAL;
  std::lock_guard lock(mutex_);
  if (queue_.empty()) return overrun_.load(std::memory_order_relaxed) ? -FI_EAVAIL : -FI_EAGAIN;
  Entry& e = queue_.front();
  if (e.error) return -FI_EAVAIL;
  if (len < e.fixed || !buf) return -FI_ETOOSMALL;
  const size_t n = std::min(len, e.bytes.size());
  std::memcpy(buf, e.bytes.data(), n);
  if (event) *event = e.event;
  if (!(flags & FI_PEEK)) {
    (void)e.info.release();  // the application owns the fi_info of a consumed CM event now
    pop_locked();
  }
  return static_cast<ssize_t>(n);
}

ssize_t Eq::readerr(fi_eq_err_entry* buf, uint64_t flags) noexcept {
  if (!buf || (flags & ~FI_PEEK)) return -FI_EINVAL;
  std::lock_guard lock(mutex_);
  fi_eq_err_entry src{};
  std::vector<uint8_t>* data = nullptr;  // null: the overrun error, which has no err_data
  const bool from_queue = !queue_.empty();
  if (from_queue) {
    if (!queue_.front().error) return -FI_EAGAIN;
    src = queue_.front().err;
    data = &queue_.front().bytes;
  } else if (overrun_.load(std::memory_order_relaxed)) {
    src.fid = fid_;
    src.err = FI_EOVERRUN;
    src.prov_errno = FI_EOVERRUN;
  } else {
    return -FI_EAGAIN;
  }
  const bool consume = from_queue && !(flags & FI_PEEK);
  const size_t data_size = data ? data->size() : 0;

  if (!legacy_err_data_ && buf->err_data_size > 0 && buf->err_data) {
    // The caller's buffer: copy what fits, report how much.
    const size_t n = std::min(buf->err_data_size, data_size);
    if (n) std::memcpy(buf->err_data, data->data(), n);
    src.err_data = buf->err_data;
    src.err_data_size = n;
  } else {
    // A buffer owned by the EQ, valid until the next read call (which may replace it).
    try {
      if (data_size == 0)
        held_err_data_.clear();
      else if (consume)
        held_err_data_ = std::move(*data);
      else
        held_err_data_.assign(data->begin(), data->end());
    } catch (const std::bad_alloc&) {
      return -FI_ENOMEM;
    }
    src.err_data = held_err_data_.empty() ? nullptr : held_err_data_.data();
    src.err_data_size = held_err_data_.size();
  }

  ssize_t ret;
  if (legacy_err_data_) {
    std::memcpy(buf, &src, kErrEntry10Size);  // the 1.0 struct has no err_data_size
    ret = static_cast<ssize_t>(kErrEntry10Size);
  } else {
    *buf = src;
    ret = static_cast<ssize_t>(sizeof(fi_eq_err_entry));
  }
  if (consume) pop_locked();
  return ret;
}

ssize_t Eq::sread(uint32_t* event, void* buf, size_t len, int timeout_ms, uint64_t flags) noexcept {
  if (!signal() || (flags & ~FI_PEEK)) return -FI_EINVAL;
  const wait::Deadline deadline = wait::Deadline::after_ms(timeout_ms);
  for (;;) {
    ssize_t r = read(event, buf, len, flags);
    if (r != -FI_EAGAIN) return r;
    // Another reader may take the event between wait() and read(): then wait again, against the
    // same deadline.
    if (wait([this] { return ready(); }, deadline) != wait::WaitStatus::kReady) return -FI_EAGAIN;
  }
}

const char* Eq::strerror(int prov_errno, const void* /*err_data*/, char* buf, size_t len) noexcept {
  const char* text = fi_strerror(std::abs(prov_errno));
  if (!buf || len == 0) return text;
  std::snprintf(buf, len, "%s", text);
  return buf;
}

}  // namespace dpfab::event
