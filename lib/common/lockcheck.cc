// SPDX-License-Identifier: BSD-3-Clause
//
// lockcheck (lockcheck.h): syscall user dispatch while a data-path lock is held. Only in builds
// configured with -Dlockcheck=true.
#include "common/lockcheck.h"

#ifdef DPFAB_LOCKCHECK

#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#ifndef PR_SET_SYSCALL_USER_DISPATCH
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_OFF 0
#define PR_SYS_DISPATCH_ON 1
#endif
#ifndef SYSCALL_DISPATCH_FILTER_ALLOW
#define SYSCALL_DISPATCH_FILTER_ALLOW 0
#define SYSCALL_DISPATCH_FILTER_BLOCK 1
#endif

// The region syscall user dispatch always lets through: a syscall trampoline for the handler and
// the signal restorer (rt_sigreturn) of its own frame. The kernel checks the address after the
// syscall instruction, so the region ends one byte past the last one.
extern "C" long dpfab_lc_syscall6(long nr, long a, long b, long c, long d, long e, long f);
extern "C" void dpfab_lc_restorer();
extern "C" char dpfab_lc_begin[], dpfab_lc_end[];
asm(R"(
  .pushsection .text.dpfab_lockcheck,"ax",@progbits
  .hidden dpfab_lc_begin, dpfab_lc_end, dpfab_lc_syscall6, dpfab_lc_restorer
  .globl dpfab_lc_begin, dpfab_lc_end, dpfab_lc_syscall6, dpfab_lc_restorer
dpfab_lc_begin:
dpfab_lc_syscall6:
  mov %rdi, %rax
  mov %rsi, %rdi
  mov %rdx, %rsi
  mov %rcx, %rdx
  mov %r8, %r10
  mov %r9, %r8
  mov 8(%rsp), %r9
  syscall
  ret
dpfab_lc_restorer:
  mov $15, %rax
  syscall
  int3
dpfab_lc_end:
  .popsection
)");

namespace dpfab::lockcheck {
namespace {

struct ThreadState {
  volatile char selector = SYSCALL_DISPATCH_FILTER_ALLOW;  // read by the kernel on each syscall
  bool enabled = false;
  int depth = 0;
  const char* locks[8] = {};     // the locks entered, innermost last (the first 8)
  const char* exempt = nullptr;  // innermost exempt scope, or null
};
thread_local ThreadState t;

std::atomic<uint64_t> g_violations{0}, g_exempt{0}, g_sections{0}, g_heap{0}, g_sanitizer{0};
std::atomic<bool> g_active{false};
// The process is exiting (our exit handler ran): what other exit handlers do, perhaps on a thread
// that a signal handler calling exit() interrupted inside a lock, is not the data path.
std::atomic<bool> g_exiting{false};
bool g_abort = true;
std::once_flag g_once;

struct KernelSigaction {  // the kernel's struct sigaction (x86-64)
  void (*handler)(int, siginfo_t*, void*);
  unsigned long flags;
  void (*restorer)();
  uint64_t mask;
};
constexpr unsigned long kSaRestorer = 0x04000000;

void say(const char* text) noexcept { (void)!::write(2, text, std::strlen(text)); }

bool in_sanitizer_runtime(const void* pc) noexcept {
  Dl_info info;
  if (dladdr(pc, &info) == 0 || info.dli_fname == nullptr) return false;
  return std::strstr(info.dli_fname, "/libasan") || std::strstr(info.dli_fname, "/libubsan") ||
         std::strstr(info.dli_fname, "/libtsan");
}

// Whether a sanitizer's runtime made the call (UBSan's vptr check probes memory with pipe2 and
// write), directly or through its libc wrapper: instrumentation, not the data path.
bool made_by_sanitizer(const siginfo_t* si, void* const* frames, int nf) noexcept {
  if (in_sanitizer_runtime(si->si_call_addr)) return true;
  const auto call = reinterpret_cast<uintptr_t>(si->si_call_addr);
  for (int i = 0; i < nf; ++i) {
    const auto pc = reinterpret_cast<uintptr_t>(frames[i]);
    if (pc + 2 < call || pc > call + 2) continue;
    for (int j = i + 1; j < nf && j <= i + 3; ++j) {
      if (in_sanitizer_runtime(frames[j])) return true;
    }
    return false;
  }
  return false;
}

// rt_sigprocmask on the mask that the return from the signal handler restores (the kernel's mask
// is 64 bits: the first word of uc_sigmask). SIGKILL, SIGSTOP and SIGSYS are never blocked.
long sigprocmask_in_frame(ucontext_t* uc, int how, const void* set, void* old,
                          size_t size) noexcept {
  if (size != sizeof(uint64_t)) return -EINVAL;
  uint64_t mask;
  std::memcpy(&mask, &uc->uc_sigmask, sizeof(mask));
  const uint64_t before = mask;
  if (set != nullptr) {
    uint64_t bits;
    std::memcpy(&bits, set, sizeof(bits));
    switch (how) {
      case SIG_BLOCK:
        mask |= bits;
        break;
      case SIG_UNBLOCK:
        mask &= ~bits;
        break;
      case SIG_SETMASK:
        mask = bits;
        break;
      default:
        return -EINVAL;
    }
  }
  auto bit = [](int sig) { return uint64_t{1} << (sig - 1); };
  mask &= ~(bit(SIGKILL) | bit(SIGSTOP) | bit(SIGSYS));
  if (old != nullptr) std::memcpy(old, &before, sizeof(before));
  std::memcpy(&uc->uc_sigmask, &mask, sizeof(mask));
  return 0;
}

void on_sigsys(int, siginfo_t* si, void* ucv) {
  auto* uc = static_cast<ucontext_t*>(ucv);
  greg_t* g = uc->uc_mcontext.gregs;
  const int saved_errno = errno;
  t.selector = SYSCALL_DISPATCH_FILTER_ALLOW;
  const long nr = si->si_syscall;
  // Calls that cannot be made from this frame: the return of another signal handler that ran
  // while the lock was held (it restores the frame at the stack pointer), and calls that make a
  // new thread or process on the current stack. They run again, as they were, once we return:
  // the selector stays "allow" until the thread's next enter().
  const bool rerun = nr == SYS_rt_sigreturn || nr == SYS_clone || nr == SYS_clone3 ||
                     nr == SYS_fork || nr == SYS_vfork || nr == SYS_execve || nr == SYS_execveat;
  // The memory calls of an allocator growing its heap (an allocation under the lock: a new
  // peer's state on first contact) are counted apart (heap_growth()), as is DPDK's thread-local
  // storage, which a dlopened library allocates on a thread's first use.
  const bool heap = nr == SYS_brk || nr == SYS_mmap || nr == SYS_munmap || nr == SYS_mremap ||
                    nr == SYS_mprotect || nr == SYS_madvise;
  if (g_exiting.load(std::memory_order_relaxed)) {
    // Not counted.
  } else if (t.exempt) {
    g_exempt.fetch_add(1, std::memory_order_relaxed);
  } else if (heap) {
    g_heap.fetch_add(1, std::memory_order_relaxed);
  } else if (nr != SYS_rt_sigreturn) {
    void* frames[32];
    const int nf = backtrace(frames, 32);
    if (made_by_sanitizer(si, frames, nf)) {
      g_sanitizer.fetch_add(1, std::memory_order_relaxed);
    } else {
      const uint64_t n = g_violations.fetch_add(1, std::memory_order_relaxed);
      if (n < 20 || g_abort) {
        char line[256];
        std::snprintf(line, sizeof(line),
                      "dpfab lockcheck: syscall %ld made while holding %s (depth %d), at:\n", nr,
                      t.depth > 0 ? t.locks[(t.depth > 8 ? 8 : t.depth) - 1] : "?", t.depth);
        say(line);
        backtrace_symbols_fd(frames, nf, 2);
      }
      if (g_abort) {
        // Not abort(): other handlers of SIGABRT would run nested in this one, with SIGSYS blocked.
        say("dpfab lockcheck: exiting with status 134 (DPFAB_LOCKCHECK=count only counts)\n");
        _exit(134);
      }
    }
  }
  if (nr == SYS_rt_sigprocmask) {
    // Made here, the call would change the handler's mask, which the return from the handler
    // replaces with the saved one: it changes the saved mask instead. SIGSYS stays open, or the
    // next trapped call (glibc's pthread_create blocks every signal, then clones) would kill.
    g[REG_RAX] = sigprocmask_in_frame(
        uc, static_cast<int>(g[REG_RDI]), reinterpret_cast<const void*>(g[REG_RSI]),
        reinterpret_cast<void*>(g[REG_RDX]), static_cast<size_t>(g[REG_R10]));
    errno = saved_errno;
    t.selector = SYSCALL_DISPATCH_FILTER_BLOCK;
    return;
  }
  if (rerun) {
    g[REG_RIP] -= 2;  // the two-byte syscall instruction
    g[REG_RAX] = nr;
    errno = saved_errno;
    return;
  }
  g[REG_RAX] =
      dpfab_lc_syscall6(nr, g[REG_RDI], g[REG_RSI], g[REG_RDX], g[REG_R10], g[REG_R8], g[REG_R9]);
  errno = saved_errno;
  t.selector = SYSCALL_DISPATCH_FILTER_BLOCK;  // still inside the lock
}

void report_at_exit() {
  g_exiting.store(true, std::memory_order_relaxed);
  t.selector = SYSCALL_DISPATCH_FILTER_ALLOW;  // a thread that exits from inside a lock
  const uint64_t v = g_violations.load(), e = g_exempt.load(), s = g_sections.load(),
                 h = g_heap.load(), z = g_sanitizer.load();
  if (!g_active.load() || (v == 0 && !std::getenv("DPFAB_LOCKCHECK_VERBOSE"))) return;
  char line[256];
  std::snprintf(line, sizeof(line),
                "dpfab lockcheck: %lu lock sections, %lu syscalls under a lock, %lu exempt "
                "(port kicks, lock waits), %lu heap growth, %lu by a sanitizer's runtime\n",
                static_cast<unsigned long>(s), static_cast<unsigned long>(v),
                static_cast<unsigned long>(e), static_cast<unsigned long>(h),
                static_cast<unsigned long>(z));
  say(line);
}

void install_process() noexcept {
  const char* mode = std::getenv("DPFAB_LOCKCHECK");
  g_abort = !(mode && std::strcmp(mode, "count") == 0);
  // backtrace() loads libgcc and allocates on its first call: made now, so that the handler's
  // call neither allocates nor takes the loader's lock (the trapped call may hold malloc's).
  void* warm[2];
  (void)backtrace(warm, 2);
  KernelSigaction ksa{};
  ksa.handler = on_sigsys;
  ksa.flags = SA_SIGINFO | kSaRestorer;
  ksa.restorer = dpfab_lc_restorer;
  // Every asynchronous signal waits until the handler returns: one delivered between the handler
  // re-arming the selector and its return would run its handler with the selector armed and
  // SIGSYS blocked, and the first call it made (its own rt_sigreturn at the latest) would kill
  // the process. Faults stay open (blocked, they kill anyway).
  ksa.mask = ~uint64_t{0};
  for (const int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGKILL, SIGSTOP}) {
    ksa.mask &= ~(uint64_t{1} << (sig - 1));
  }
  if (::syscall(SYS_rt_sigaction, SIGSYS, &ksa, nullptr, sizeof(ksa.mask)) != 0) {
    say("dpfab lockcheck: cannot install the SIGSYS handler: nothing is checked\n");
    return;
  }
  g_active.store(true);
  std::atexit(report_at_exit);
}

void enable_thread() noexcept {
  t.enabled = true;
  std::call_once(g_once, install_process);
  if (!g_active.load(std::memory_order_relaxed)) return;
  // The kernel kills a thread that blocks SIGSYS when dispatch raises it.
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGSYS);
  pthread_sigmask(SIG_UNBLOCK, &s, nullptr);
  const auto begin = reinterpret_cast<uintptr_t>(dpfab_lc_begin);
  const auto end = reinterpret_cast<uintptr_t>(dpfab_lc_end);
  if (prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON, begin, end - begin, &t.selector) !=
      0) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      say("dpfab lockcheck: syscall user dispatch unavailable (Linux >= 5.11): nothing is "
          "checked\n");
    g_active.store(false);
  }
}

}  // namespace

void enter(const char* what) noexcept {
  if (!t.enabled) [[unlikely]]
    enable_thread();
  if (t.depth < 8) t.locks[t.depth] = what;
  ++t.depth;
  g_sections.fetch_add(1, std::memory_order_relaxed);
  // Compiler barrier: the selector is written before any syscall the critical section makes.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t.selector = SYSCALL_DISPATCH_FILTER_BLOCK;
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

void leave() noexcept {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (--t.depth <= 0) {
    t.depth = 0;
    t.selector = SYSCALL_DISPATCH_FILTER_ALLOW;
  } else {
    // The outer lock still holds (a re-run call may have left the selector open).
    t.selector = SYSCALL_DISPATCH_FILTER_BLOCK;
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

uint64_t violations() noexcept { return g_violations.load(std::memory_order_relaxed); }
uint64_t exempt() noexcept { return g_exempt.load(std::memory_order_relaxed); }
uint64_t heap_growth() noexcept { return g_heap.load(std::memory_order_relaxed); }
bool active() noexcept { return g_active.load(std::memory_order_relaxed); }
void set_abort_on_violation(bool abort_on_violation) noexcept {
  std::call_once(g_once, install_process);
  g_abort = abort_on_violation;
}

Exempt::Exempt(const char* what) noexcept : prev_(t.exempt) { t.exempt = what; }
Exempt::~Exempt() { t.exempt = prev_; }

}  // namespace dpfab::lockcheck

#endif  // DPFAB_LOCKCHECK
