// SPDX-License-Identifier: BSD-3-Clause
//
// lockcheck (lib/common/lockcheck.h), in a -Dlockcheck=true build: a syscall made while a SpinLock
// is held is counted (or aborts), still made, and its result returned; exempt scopes and code
// outside locks are not counted.
#include "common/lockcheck.h"

#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <mutex>

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
