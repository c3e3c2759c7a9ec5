// SPDX-License-Identifier: BSD-3-Clause
//
// lockcheck (lib/common/lockcheck.h), in a -Dlockcheck=true build: a syscall made while a SpinLock
// is held is counted (or aborts), still made, and its result returned; exempt scopes and code
// outside locks are not counted.
#include "common/lockcheck.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "common/spinlock.h"

namespace dpfab {
namespace {

static_assert(lockcheck::kEnabled, "built only with -Dlockcheck=true");

class Lockcheck : public ::testing::Test {
 protected:
  void SetUp() override { lockcheck::set_abort_on_violation(false); }
  void TearDown() override { lockcheck::set_abort_on_violation(true); }
};

TEST_F(Lockcheck, ASyscallUnderASpinLockIsCountedAndStillMade) {
  SpinLock lock("test lock");
  const long expected = ::syscall(SYS_getppid);
  const uint64_t before = lockcheck::violations();
  long got;
  {
    std::lock_guard g(lock);
    got = ::syscall(SYS_getppid);
  }
  ASSERT_TRUE(lockcheck::active()) << "syscall user dispatch is needed (Linux >= 5.11)";
  EXPECT_EQ(lockcheck::violations(), before + 1);
  EXPECT_EQ(got, expected) << "the trapped syscall's result reaches the caller";
}

TEST_F(Lockcheck, AnEventfdWriteUnderTheLockTakesEffect) {
  const int fd = eventfd(0, EFD_NONBLOCK);
  ASSERT_GE(fd, 0);
  SpinLock lock;
  const uint64_t before = lockcheck::violations();
  {
    std::lock_guard g(lock);
    EXPECT_EQ(eventfd_write(fd, 5), 0);
  }
  eventfd_t v = 0;
  EXPECT_EQ(eventfd_read(fd, &v), 0);
  EXPECT_EQ(v, 5u);
  EXPECT_EQ(lockcheck::violations(), before + 1);
  // errno survives the handler: a failing call under the lock reports its own error.
  {
    std::lock_guard g(lock);
    EXPECT_EQ(eventfd_read(fd, &v), -1);
    EXPECT_EQ(errno, EAGAIN);
  }
  close(fd);
}

TEST_F(Lockcheck, NothingIsCountedOutsideLocksOrInsideExemptScopes) {
  SpinLock outer, inner;
  const uint64_t v0 = lockcheck::violations(), e0 = lockcheck::exempt();
  (void)::syscall(SYS_getppid);
  {
    std::lock_guard g(outer);
    lockcheck::Exempt pmd("the port's own kick");
    (void)::syscall(SYS_getppid);
  }
  EXPECT_EQ(lockcheck::violations(), v0);
  EXPECT_EQ(lockcheck::exempt(), e0 + 1);
  // Nested: leaving the inner lock keeps the outer one checked.
  {
    std::lock_guard a(outer);
    { std::lock_guard b(inner); }
    (void)::syscall(SYS_getppid);
  }
  EXPECT_EQ(lockcheck::violations(), v0 + 1);
  (void)::syscall(SYS_getppid);
  EXPECT_EQ(lockcheck::violations(), v0 + 1);
}

TEST_F(Lockcheck, TryLockIsCheckedToo) {
  SpinLock lock;
  const uint64_t before = lockcheck::violations();
  ASSERT_TRUE(lock.try_lock());
  (void)::syscall(SYS_getppid);
  lock.unlock();
  EXPECT_EQ(lockcheck::violations(), before + 1);
}

// A signal mask changed under the lock is the thread's mask after it (the handler changes the mask
// that its return restores), and SIGSYS stays open: glibc's pthread_create blocks every signal and
// then clones, which would otherwise end the process with "Bad system call".
TEST_F(Lockcheck, SignalMasksAndNewThreadsUnderTheLockWork) {
  SpinLock lock;
  sigset_t usr1, before, inside, after;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, nullptr, &before), 0);
  ASSERT_FALSE(sigismember(&before, SIGUSR1));
  std::atomic<bool> ran{false};
  {
    std::lock_guard g(lock);
    lockcheck::Exempt start("a port's start, which may make a thread");
    ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &usr1, nullptr), 0);
    ASSERT_EQ(pthread_sigmask(SIG_SETMASK, nullptr, &inside), 0);
    std::thread th([&] { ran = true; });
    th.join();
  }
  EXPECT_TRUE(sigismember(&inside, SIGUSR1)) << "the change is seen inside the section";
  EXPECT_TRUE(ran.load());
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, nullptr, &after), 0);
  EXPECT_TRUE(sigismember(&after, SIGUSR1)) << "and after it";
  EXPECT_FALSE(sigismember(&after, SIGSYS));
  ASSERT_EQ(pthread_sigmask(SIG_UNBLOCK, &usr1, nullptr), 0);
}

TEST_F(Lockcheck, AbortModeStopsTheProcessAtTheFirstViolation) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        lockcheck::set_abort_on_violation(true);
        SpinLock lock("endpoint core");
        std::lock_guard g(lock);
        (void)::syscall(SYS_getppid);
      },
      ::testing::ExitedWithCode(134), "syscall 110 made while holding endpoint core");
}

}  // namespace
}  // namespace dpfab
