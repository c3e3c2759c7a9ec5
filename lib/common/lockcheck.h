// SPDX-License-Identifier: BSD-3-Clause
//
// lockcheck: proof that the data path makes no syscall while it holds a data-path lock.
//
// The rule (STYLE.md, spinlock.h): a thread that holds a lock other threads spin on -- a SpinLock
// (an endpoint's core lock, a CQ's consumer lock, a port's TX lock) or a port's receive side --
// makes no syscall: an eventfd write or a futex wake inside the lock stalls every thread that
// waits for it by the syscall's length (0.1-45 us on a VM). Wake-ups decided under a lock are
// made after it is released (wait/wake_batch.h).
//
// In a build configured with -Dlockcheck=true (DPFAB_LOCKCHECK), every such lock calls enter()
// once taken and leave() before it is released, and the first enter() on a thread turns Linux's
// syscall user dispatch on for that thread (prctl PR_SET_SYSCALL_USER_DISPATCH, Linux 5.11):
// while the thread holds any lock, its selector byte says "block", and any syscall it makes --
// from our code, from libc, from DPDK -- raises SIGSYS instead of entering the kernel. The
// handler records it (the syscall number, the innermost lock, a backtrace on stderr), makes the
// syscall on the thread's behalf from a small trampoline the dispatch lets through, and returns
// its result, so the program goes on as it would have. With DPFAB_LOCKCHECK=abort (the default)
// the first violation ends the process instead (exit status 134), so that a test run over the
// build fails;
// DPFAB_LOCKCHECK=count only counts (lockcheck::violations(), and a line at exit).
//
// Memory-management calls (brk, mmap, munmap, mremap, mprotect, madvise) are counted apart as heap
// growth: the allocator's, for an allocation made under a lock. The data path allocates nothing
// per message; what does allocate under the endpoint core lock is the state of a peer on first
// contact (once per peer), which takes a syscall only when the heap must grow. Calls a sanitizer's
// runtime makes (UBSan's vptr check probes memory with pipe2/write) are counted apart too: the
// trapped call or its libc wrapper's caller lies in libasan, libubsan or libtsan.
//
// Limit of the check: another library's signal handler that blocks SIGSYS (sa_mask) and runs
// while a lock is held cannot have its syscalls trapped, and the kernel ends the process with
// "Bad system call" instead. The handler here blocks asynchronous signals while it runs, and
// keeps SIGSYS out of masks set under a lock, so that dpfab's own code never meets that limit.
//
// Exempt scopes mark syscalls that belong to the port itself rather than to dpfab: a PMD's own
// kernel kick inside rte_eth_tx_burst/rte_eth_rx_burst (af_packet and af_xdp send a sendto, tap
// writes to its fd) happens under the TX lock because DPDK's queues are not thread-safe; and a
// SpinLock waiter that yields its CPU to a preempted holder while it holds another lock. They are
// trapped and counted apart (exempt()), never reported as violations.
//
// Without DPFAB_LOCKCHECK every call here is an empty inline function.
#pragma once

#include <cstdint>

namespace dpfab::lockcheck {

#ifdef DPFAB_LOCKCHECK
inline constexpr bool kEnabled = true;
/// The calling thread took the lock named `what` (a string literal).
void enter(const char* what) noexcept;
/// The calling thread is about to release the innermost lock it entered.
void leave() noexcept;
/// Syscalls a thread holding a lock made outside exempt scopes, since the process started.
uint64_t violations() noexcept;
/// Syscalls made under a lock inside exempt scopes (the PMD's own kicks, lock waits).
uint64_t exempt() noexcept;
/// Memory-management syscalls (brk, mmap, munmap, mremap, mprotect, madvise) made under a lock
/// outside exempt scopes: an allocator growing its heap for an allocation made under the lock.
/// Counted apart from violations() (see the file comment).
uint64_t heap_growth() noexcept;
/// Whether syscall user dispatch could be turned on (false: the kernel lacks it; nothing is
/// checked, and the first enter() says so on stderr).
bool active() noexcept;
/// Whether a violation aborts the process (DPFAB_LOCKCHECK, read at the first enter(); tests
/// switch it).
void set_abort_on_violation(bool abort_on_violation) noexcept;

/// Syscalls made while this lives are the port's or the lock's own (see the file comment).
class Exempt {
 public:
  explicit Exempt(const char* what) noexcept;
  ~Exempt();
  Exempt(const Exempt&) = delete;
  Exempt& operator=(const Exempt&) = delete;

 private:
  const char* prev_;
};
#else
inline constexpr bool kEnabled = false;
inline void enter(const char*) noexcept {}
inline void leave() noexcept {}
inline uint64_t violations() noexcept { return 0; }
inline uint64_t exempt() noexcept { return 0; }
inline uint64_t heap_growth() noexcept { return 0; }
inline bool active() noexcept { return false; }
class Exempt {
 public:
  explicit Exempt(const char*) noexcept {}
};
#endif

}  // namespace dpfab::lockcheck
