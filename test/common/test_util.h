// SPDX-License-Identifier: BSD-3-Clause
//
// Small helpers shared by the unit and integration tests: fd readiness, a delayed call on another
// thread, a watchdog that interrupts a blocked thread (so that no test can hang), and the bytes
// the heap holds (memory footprints measured, not computed).
#pragma once

#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

// Under AddressSanitizer or ThreadSanitizer malloc is the sanitizer's own (mallinfo2 sees none
// of it).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DPFAB_TEST_SANITIZER_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define DPFAB_TEST_SANITIZER_MALLOC 1
#endif
#endif
#if DPFAB_TEST_SANITIZER_MALLOC
// The sanitizer runtime's allocator statistics (sanitizer/allocator_interface.h, which GCC does
// not install).
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

namespace dpfab::test {

/// Bytes of heap in use now, in every malloc arena: small and medium blocks (uordblks, malloc's
/// headers included) plus the blocks malloc mmap()ed (hblkhd). Exact for what new/malloc hold,
/// unlike RSS, which moves by pages, counts pages other code touches meanwhile, and keeps what
/// was freed but not returned; it does not see memory mapped outside malloc (DPDK's heap and
/// mempools), which per-peer and AV state does not use.
/// Under a sanitizer malloc is the sanitizer's, which mallinfo2 does not see: its count of the
/// bytes allocated and not freed is used instead.
inline size_t heap_bytes() {
#if DPFAB_TEST_SANITIZER_MALLOC
  return __sanitizer_get_current_allocated_bytes();
#else
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
#endif
}

/// Whether `fd` is readable now, or becomes readable within `timeout_ms`.
inline bool fd_readable(int fd, int timeout_ms = 0) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

/// Runs `fn` on another thread after `delay`; joined when it goes out of scope.
class After {
 public:
  template <typename Fn>
  After(std::chrono::microseconds delay, Fn fn)
      : t_([delay, fn = std::move(fn)] {
          std::this_thread::sleep_for(delay);
          fn();
        }) {}
  ~After() { t_.join(); }
  After(const After&) = delete;
  After& operator=(const After&) = delete;

 private:
  std::thread t_;
};

/// After `after`, sends SIGUSR1 to `target` every 50 ms until stopped: a blocking call there
/// returns with EINTR instead of hanging the test. Installs a no-op SIGUSR1 handler.
class SignalWatchdog {
 public:
  SignalWatchdog(pthread_t target, std::chrono::milliseconds after) {
    struct sigaction sa {};
    sa.sa_handler = [](int) {};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, nullptr);
    thread_ = std::thread([this, target, after] {
      std::unique_lock lock(m_);
      if (cv_.wait_for(lock, after, [this] { return stop_; })) return;
      while (!stop_) {
        fired_ = true;
        pthread_kill(target, SIGUSR1);
        cv_.wait_for(lock, std::chrono::milliseconds(50), [this] { return stop_; });
      }
    });
  }
  ~SignalWatchdog() { stop(); }
  SignalWatchdog(const SignalWatchdog&) = delete;
  SignalWatchdog& operator=(const SignalWatchdog&) = delete;
  void stop() {
    {
      std::lock_guard lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  bool fired() const {
    std::lock_guard lock(m_);
    return fired_;
  }

 private:
  mutable std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool fired_ = false;
  std::thread thread_;
};

}  // namespace dpfab::test
