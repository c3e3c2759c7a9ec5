// SPDX-License-Identifier: BSD-3-Clause
#include "rma.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "oob.h"

namespace dpfab::bench {

namespace {

// The sequence number an rma-write message carries in its last 8 bytes (both sides poll it).
inline uint64_t load_seq(const char* p) {
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_ACQUIRE);
}

// Waits for `n` completions on the endpoint's CQ (reading it progresses the provider), until
// deadline. 0, -FI_ETIMEDOUT, or the error completion's -err (with *error set).
int wait_completions(Endpoint& ep, uint64_t n, int64_t deadline_ns, std::string* error) {
  fi_cq_msg_entry e[16];
  uint64_t got = 0;
  uint32_t spins = 0;
  while (got < n) {
    const ssize_t r = fi_cq_read(ep.cq(), e, std::min<uint64_t>(16, n - got));
    if (r > 0) {
      got += static_cast<uint64_t>(r);
      continue;
    }
    if (r == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      fi_cq_readerr(ep.cq(), &err, 0);
      *error = std::string("RMA error completion: ") + fi_strerror(err.err);
      return -err.err;
    }
    if (r != -FI_EAGAIN) {
      *error = fi_error("fi_cq_read", static_cast<int>(r));
      return static_cast<int>(r);
    }
    if ((++spins & 1023) == 0 && now_ns() > deadline_ns) return -FI_ETIMEDOUT;
  }
  return 0;
}

// Posts one operation, retrying -FI_EAGAIN while reading the CQ (completions then are counted
// in *early).
template <class Post>
int post(Endpoint& ep, Post&& post_op, int64_t deadline_ns, uint64_t* early) {
  uint32_t spins = 0;
  for (;;) {
    const ssize_t r = post_op();
    if (r != -FI_EAGAIN) return static_cast<int>(r);
    fi_cq_msg_entry e[16];
    const ssize_t n = fi_cq_read(ep.cq(), e, 16);
    if (n > 0) *early += static_cast<uint64_t>(n);
    if ((++spins & 1023) == 0 && now_ns() > deadline_ns) return -FI_ETIMEDOUT;
  }
}

}  // namespace

bool is_rma(Workload w) {
  return w == Workload::kRmaWrite || w == Workload::kRmaRead || w == Workload::kRmaBw ||
         w == Workload::kAtomic;
}

RmaRegion::~RmaRegion() {
  if (mr_) fi_close(&mr_->fid);
  std::free(buf_);
}

std::string RmaRegion::open(fid_domain* domain, const fi_info* info, size_t len) {
  len_ = (std::max<size_t>(len, 64) + 4095) / 4096 * 4096;
  buf_ = static_cast<char*>(std::aligned_alloc(4096, len_));
  if (!buf_) return "out of memory for the RMA region";
  std::memset(buf_, 0, len_);
  const uint64_t access = FI_REMOTE_READ | FI_REMOTE_WRITE | FI_READ | FI_WRITE;
  const int ret = fi_mr_reg(domain, buf_, len_, access, 0, 0x5eed, 0, &mr_, nullptr);
  if (ret) return fi_error("fi_mr_reg", ret);
  const uint64_t mode = info->domain_attr->mr_mode;
  if (mode & FI_MR_ENDPOINT) return "the provider binds regions to endpoints (FI_MR_ENDPOINT)";
  key_ = fi_mr_key(mr_);
  addr_ = (mode == FI_MR_BASIC || (mode & FI_MR_VIRT_ADDR)) ? reinterpret_cast<uintptr_t>(buf_) : 0;
  desc_ = fi_mr_desc(mr_);
  return "";
}

RmaMeasured run_rma_client(const Options& o, Endpoint& ep, RmaRegion& region, uint64_t rkey,
                           uint64_t raddr, Workload w, size_t size, uint32_t window) {
  RmaMeasured m;
  const int64_t timeout = int64_t{o.timeout_ms} * 1'000'000;
  const int64_t dur = static_cast<int64_t>(o.duration_s * 1e9);
  char* mine = region.data();
  char* src = mine + region.size() / 2;  // what we write: the second half of our region
  const size_t seq_at = size >= 8 ? size - 8 : 0;
  uint64_t seq = 0;
  uint64_t early = 0;
  uint64_t fetch_result[64];
  const uint32_t win = std::clamp<uint32_t>(window, 1, 64);
  uint64_t writes_posted = 0, writes_done = 0;  // rma-write: our writes and their completions
  std::memset(mine, 0, region.size() / 2);
  {  // Completions left by the previous case (rma-write does not wait for each of its writes).
    fi_cq_msg_entry e[16];
    const int64_t quiet = now_ns() + 1'000'000;
    while (now_ns() < quiet) fi_cq_read(ep.cq(), e, 16);
  }

  // One timed iteration; returns its latency in us, or a negative value on error.
  auto once = [&](bool) -> double {
    const int64_t t0 = now_ns();
    const int64_t deadline = t0 + timeout;
    int r = 0;
    switch (w) {
      case Workload::kRmaWrite: {
        ++seq;
        std::memcpy(src + seq_at, &seq, 8);
        r = post(
            ep,
            [&] {
              return fi_write(ep.ep(), src, size, region.desc(), ep.peer(), raddr, rkey, nullptr);
            },
            deadline, &early);
        if (r) break;
        ++writes_posted;
        writes_done += std::exchange(early, 0);
        // The server's answer lands in our region: its last 8 bytes are our sequence number.
        uint32_t spins = 0;
        fi_cq_msg_entry e[8];
        while (load_seq(mine + seq_at) != seq) {
          const ssize_t n = fi_cq_read(ep.cq(), e, 8);
          if (n > 0) writes_done += static_cast<uint64_t>(n);
          if (n == -FI_EAVAIL) {
            r = wait_completions(ep, 1, deadline, &m.error);
            if (r) break;
          }
          if ((++spins & 1023) == 0 && now_ns() > deadline) {
            r = -FI_ETIMEDOUT;
            break;
          }
        }
        // Our write's completion (read above or still to come) is not waited for.
        const int64_t t1 = now_ns();
        if (r) break;
        return static_cast<double>(t1 - t0) * 0.5e-3;
      }
      case Workload::kRmaRead:
        r = post(
            ep,
            [&] {
              return fi_read(ep.ep(), mine, size, region.desc(), ep.peer(), raddr, rkey, nullptr);
            },
            deadline, &early);
        if (!r) r = wait_completions(ep, 1, deadline, &m.error);
        break;
      case Workload::kRmaBw:
        for (uint32_t k = 0; k < win && !r; ++k)
          r = post(
              ep,
              [&] {
                return fi_write(ep.ep(), src, size, region.desc(), ep.peer(), raddr, rkey, nullptr);
              },
              deadline, &early);
        if (!r) r = wait_completions(ep, win - std::min<uint64_t>(early, win), deadline, &m.error);
        early = 0;
        break;
      case Workload::kAtomic: {
        const uint64_t one = 1;
        for (uint32_t k = 0; k < win && !r; ++k)
          r = post(
              ep,
              [&] {
                return fi_fetch_atomic(ep.ep(), &one, 1, region.desc(), &fetch_result[k],
                                       region.desc(), ep.peer(), raddr, rkey, FI_UINT64, FI_SUM,
                                       nullptr);
              },
              deadline, &early);
        if (!r) r = wait_completions(ep, win - std::min<uint64_t>(early, win), deadline, &m.error);
        early = 0;
        break;
      }
      default:
        r = -FI_EINVAL;
    }
    const int64_t t1 = now_ns();
    if (r) {
      if (m.error.empty()) m.error = fi_error("RMA", r);
      return -1;
    }
    return static_cast<double>(t1 - t0) * 1e-3;
  };

  const uint64_t per = (w == Workload::kRmaBw || w == Workload::kAtomic) ? win : 1;
  const int64_t warm_end = now_ns() + dur / 4;
  for (uint64_t i = 0; i < std::max<uint64_t>(1, o.warmup / per) && now_ns() < warm_end; ++i)
    if (once(false) < 0) return m;
  const Usage u0 = Usage::now();
  const int64_t t_start = now_ns();
  m.samples_us.reserve(std::min<uint64_t>(o.iterations, 1'000'000));
  while (m.ops < o.iterations && (now_ns() - t_start < dur || m.samples_us.empty())) {
    const double us = once(true);
    if (us < 0) return m;
    m.samples_us.push_back(us);
    m.ops += per;
    ++m.iterations;
  }
  m.duration_s = static_cast<double>(now_ns() - t_start) * 1e-9;
  m.usage = Usage::now() - u0;
  if (w == Workload::kRmaWrite && writes_posted > writes_done) {  // every write completes
    const int r = wait_completions(ep, writes_posted - writes_done, now_ns() + timeout, &m.error);
    if (r && m.error.empty()) m.error = fi_error("waiting for the writes' completions", r);
  }
  if (w == Workload::kAtomic) {
    // Check: the word holds every fetch-and-add made (warm-up ones included), each of which got
    // a distinct old value.
    uint64_t v = 0;
    const int64_t deadline = now_ns() + timeout;
    int r = post(
        ep,
        [&] { return fi_read(ep.ep(), mine, 8, region.desc(), ep.peer(), raddr, rkey, nullptr); },
        deadline, &early);
    if (!r) r = wait_completions(ep, 1, deadline, &m.error);
    if (!r) std::memcpy(&v, mine, 8);
    if (r || v == 0 || v < m.ops)
      m.error = "atomic: the target word holds " + std::to_string(v) + " after " +
                std::to_string(m.ops) + " timed adds";
  }
  return m;
}

std::string serve_rma(Endpoint& ep, Oob& oob, RmaRegion& region, uint64_t rkey, uint64_t raddr,
                      Workload w, size_t size, int, Usage* usage) {
  const Usage u0 = Usage::now();
  char* mine = region.data();
  char* src = mine + region.size() / 2;
  const size_t seq_at = size >= 8 ? size - 8 : 0;
  std::memset(mine, 0, region.size() / 2);
  uint64_t answered = 0;
  uint64_t outstanding = 0;
  std::string error;
  fi_cq_msg_entry e[16];
  for (uint32_t spins = 1;; ++spins) {
    const ssize_t n = fi_cq_read(ep.cq(), e, 16);
    if (n > 0) outstanding -= std::min<uint64_t>(outstanding, static_cast<uint64_t>(n));
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      fi_cq_readerr(ep.cq(), &err, 0);
      error = std::string("RMA error completion: ") + fi_strerror(err.err);
      break;
    }
    if (w == Workload::kRmaWrite) {
      const uint64_t s = load_seq(mine + seq_at);
      if (s != answered && s != 0) {
        answered = s;
        std::memcpy(src + seq_at, &s, 8);
        ssize_t r;
        while ((r = fi_write(ep.ep(), src, size, region.desc(), ep.peer(), raddr, rkey, nullptr)) ==
               -FI_EAGAIN) {
          const ssize_t k = fi_cq_read(ep.cq(), e, 16);
          if (k > 0) outstanding -= std::min<uint64_t>(outstanding, static_cast<uint64_t>(k));
        }
        if (r) {
          error = fi_error("fi_write", static_cast<int>(r));
          break;
        }
        ++outstanding;
      }
    }
    // The client's word on the out-of-band socket ends the case (a poll() every 4096 turns).
    if ((spins & 4095) == 0 && oob.readable()) break;
  }
  *usage = Usage::now() - u0;
  return error;
}

}  // namespace dpfab::bench
