// SPDX-License-Identifier: BSD-3-Clause
//
// The memif burst guard (port/burst_guard.h) without EAL: a guarded "burst" that touches memory
// unmapped under it comes back as a fault, again and again (the signal is not left blocked); a
// fault outside a guard reaches the handler that was there before the guard's.
#include "port/burst_guard.h"

#include <gtest/gtest.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace {

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer's signal handling cannot jump out of a handler: the guard refuses to install,
// and memif's bursts run as plain bursts (burst_guard.h).
TEST(BurstGuard, NotInstalledUnderThreadSanitizer) {
  EXPECT_FALSE(dpfab::port::install_burst_guard());
}
#else
using dpfab::port::detail::run_guarded;

// Port 0 is no port here (no EAL): its link reads as down, as a disconnected memif's does.
constexpr uint16_t kNoPort = 0;

sigjmp_buf g_previous_env;
volatile sig_atomic_t g_previous_calls = 0;

// The application's own handler, installed before the guard's.
void previous_handler(int) {
  g_previous_calls = g_previous_calls + 1;
  siglongjmp(g_previous_env, 1);
}

volatile uint8_t* unmapped_page() {
  const long page = sysconf(_SC_PAGESIZE);
  void* p = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  munmap(p, page);  // what memif_disconnect does to the rings while a burst reads them
  return static_cast<volatile uint8_t*>(p);
}

void read_byte(void* arg) { (void)*static_cast<volatile uint8_t*>(arg); }
void read_nothing(void*) {}

TEST(BurstGuard, FaultsInsideComeBackAndOthersReachThePreviousHandler) {
  struct sigaction app {};
  app.sa_handler = previous_handler;
  app.sa_flags = SA_NODEFER;
  sigemptyset(&app.sa_mask);
  struct sigaction saved[2];
  ASSERT_EQ(sigaction(SIGSEGV, &app, &saved[0]), 0);
  ASSERT_EQ(sigaction(SIGBUS, &app, &saved[1]), 0);
  ASSERT_TRUE(dpfab::port::install_burst_guard());
  ASSERT_TRUE(dpfab::port::install_burst_guard());  // once per process

  volatile uint8_t* gone = unmapped_page();
  ASSERT_NE(gone, nullptr);
  // A burst that does not fault returns as it is.
  EXPECT_FALSE(run_guarded(kNoPort, read_nothing, nullptr));
  // Three bursts whose memory went away: each comes back, the process lives.
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(run_guarded(kNoPort, read_byte, const_cast<uint8_t*>(gone))) << i;
  EXPECT_EQ(g_previous_calls, 0);

  // Outside a guard the fault is not ours: the application's handler gets it.
  if (sigsetjmp(g_previous_env, 1) == 0) read_byte(const_cast<uint8_t*>(gone));
  EXPECT_EQ(g_previous_calls, 1);
  // And a guard still works after that.
  EXPECT_TRUE(run_guarded(kNoPort, read_byte, const_cast<uint8_t*>(gone)));
  EXPECT_EQ(g_previous_calls, 1);
}
#endif

}  // namespace
