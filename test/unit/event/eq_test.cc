// SPDX-License-Identifier: BSD-3-Clause
//
// event::Eq without EAL or libfabric core: each test is named after the sentence of fi_eq(3)
// (or the rule of lib/event/eq.h) it checks. Every blocking call is bounded: waits have finite
// timeouts, and the few infinite sreads run under a watchdog that interrupts them with SIGUSR1.
#include "event/eq.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

using dpfab::test::fd_readable;
using dpfab::test::SignalWatchdog;

namespace dpfab::event {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::unique_ptr<wait::Signal> make(wait::SignalKind kind) {
  auto s = wait::Signal::create(kind);
  EXPECT_TRUE(s.ok());
  return s.ok() ? std::move(s.value()) : nullptr;
}

std::unique_ptr<Eq> make_eq(size_t size = 32, std::unique_ptr<wait::Signal> signal = nullptr,
                            uint32_t api = FI_VERSION(1, 17)) {
  Eq::Options o;
  o.size = size;
  o.api_version = api;
  return std::make_unique<Eq>(std::move(signal), o);
}

fi_eq_entry entry_with(uintptr_t context) {
  fi_eq_entry e{};
  e.fid = reinterpret_cast<fid_t>(0x1000);
  e.context = reinterpret_cast<void*>(context);
  e.data = context * 10;
  return e;
}

ssize_t write_entry(Eq& eq, uintptr_t context, uint32_t event = FI_NOTIFY) {
  fi_eq_entry e = entry_with(context);
  return eq.write(event, &e, sizeof(e), 0);
}

fi_eq_err_entry error_with(int err, uintptr_t context) {
  fi_eq_err_entry e{};
  e.fid = reinterpret_cast<fid_t>(0x2000);
  e.context = reinterpret_cast<void*>(context);
  e.err = err;
  e.prov_errno = err;
  return e;
}

long elapsed_ms(Clock::time_point since) {
  return static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count());
}

// ---- fi_eq_read -------------------------------------------------------------------------------

TEST(EqRead, ReturnsTheNumberOfBytesRead) {
  auto eq = make_eq();
  ASSERT_EQ(write_entry(*eq, 7), static_cast<ssize_t>(sizeof(fi_eq_entry)));
  fi_eq_entry out{};
  uint32_t event = 0;
  ASSERT_EQ(eq->read(&event, &out, sizeof(out), 0), static_cast<ssize_t>(sizeof(out)));
  EXPECT_EQ(event, static_cast<uint32_t>(FI_NOTIFY));
  EXPECT_EQ(out.context, reinterpret_cast<void*>(7));
  EXPECT_EQ(out.data, 70u);
  EXPECT_EQ(out.fid, reinterpret_cast<fid_t>(0x1000));
}

TEST(EqRead, AtMostOneEventIsReturnedPerReadOperation) {
  auto eq = make_eq();
  for (uintptr_t i = 0; i < 3; ++i) ASSERT_GT(write_entry(*eq, i), 0);
  fi_eq_entry out[3]{};
  uint32_t event;
  // A buffer with room for three events still receives one.
  ASSERT_EQ(eq->read(&event, out, sizeof(out), 0), static_cast<ssize_t>(sizeof(fi_eq_entry)));
  EXPECT_EQ(out[0].context, reinterpret_cast<void*>(0));
  EXPECT_EQ(out[1].context, nullptr);
  EXPECT_EQ(eq->size(), 2u);
}

TEST(EqRead, EventsAreReadInTheOrderTheyWereWritten) {
  auto eq = make_eq();
  for (uintptr_t i = 0; i < 10; ++i) ASSERT_GT(write_entry(*eq, i, FI_NOTIFY + (i % 3)), 0);
  for (uintptr_t i = 0; i < 10; ++i) {
    fi_eq_entry out{};
    uint32_t event;
    ASSERT_GT(eq->read(&event, &out, sizeof(out), 0), 0);
    EXPECT_EQ(out.context, reinterpret_cast<void*>(i));
    EXPECT_EQ(event, FI_NOTIFY + (i % 3));
  }
}

TEST(EqRead, IfNoDataIsAvailableEagainIsReturned) {
  auto eq = make_eq();
  fi_eq_entry out{};
  uint32_t event;
  EXPECT_EQ(eq->read(&event, &out, sizeof(out), 0), -FI_EAGAIN);
  ASSERT_GT(write_entry(*eq, 1), 0);
  ASSERT_GT(eq->read(&event, &out, sizeof(out), 0), 0);
  EXPECT_EQ(eq->read(&event, &out, sizeof(out), 0), -FI_EAGAIN);
  EXPECT_FALSE(eq->ready());
}

TEST(EqRead, PeekReadsEventDataWithoutConsumingIt) {
  auto eq = make_eq();
  ASSERT_GT(write_entry(*eq, 1), 0);
  ASSERT_GT(write_entry(*eq, 2), 0);
  for (int i = 0; i < 3; ++i) {
    fi_eq_entry out{};
    uint32_t event = 0;
    ASSERT_EQ(eq->read(&event, &out, sizeof(out), FI_PEEK), static_cast<ssize_t>(sizeof(out)));
    EXPECT_EQ(out.context, reinterpret_cast<void*>(1));
    EXPECT_EQ(event, static_cast<uint32_t>(FI_NOTIFY));
  }
  EXPECT_EQ(eq->size(), 2u);
}

TEST(EqRead, ASubsequentReadWithoutPeekRemovesTheEvent) {
  auto eq = make_eq();
  ASSERT_GT(write_entry(*eq, 1), 0);
  ASSERT_GT(write_entry(*eq, 2), 0);
  fi_eq_entry out{};
  uint32_t event;
  ASSERT_GT(eq->read(&event, &out, sizeof(out), FI_PEEK), 0);
  ASSERT_GT(eq->read(&event, &out, sizeof(out), 0), 0);
  EXPECT_EQ(out.context, reinterpret_cast<void*>(1));
  ASSERT_GT(eq->read(&event, &out, sizeof(out), 0), 0);
  EXPECT_EQ(out.context, reinterpret_cast<void*>(2));
  EXPECT_EQ(eq->read(&event, &out, sizeof(out), 0), -FI_EAGAIN);
}

TEST(EqRead, BufferTooSmallReturnsEtoosmallAndKeepsTheEvent) {
  auto eq = make_eq();
  ASSERT_GT(write_entry(*eq, 5), 0);
  char small[sizeof(fi_eq_entry) - 1];
  uint32_t event = 0xdead;
  EXPECT_EQ(eq->read(&event, small, sizeof(small), 0), -FI_ETOOSMALL);
  EXPECT_EQ(event, 0xdeadu);
  EXPECT_EQ(eq->read(&event, nullptr, 0, 0), -FI_ETOOSMALL);
  EXPECT_EQ(eq->size(), 1u);
  fi_eq_entry out{};
  ASSERT_EQ(eq->read(&event, &out, sizeof(out), 0), static_cast<ssize_t>(sizeof(out)));
  EXPECT_EQ(out.context, reinterpret_cast<void*>(5));
}

TEST(EqRead, EventOutputIsOptional) {
  auto eq = make_eq();
  ASSERT_GT(write_entry(*eq, 5), 0);
  fi_eq_entry out{};
  EXPECT_EQ(eq->read(nullptr, &out, sizeof(out), 0), static_cast<ssize_t>(sizeof(out)));
}

TEST(EqRead, FlagsOtherThanPeekAreInvalid) {
  auto eq = make_eq();
  ASSERT_GT(write_entry(*eq, 5), 0);
  fi_eq_entry out{};
  uint32_t event;
  EXPECT_EQ(eq->read(&event, &out, sizeof(out), FI_SEND), -FI_EINVAL);
  fi_eq_err_entry err{};
  EXPECT_EQ(eq->readerr(&err, FI_SEND), -FI_EINVAL);
  EXPECT_EQ(eq->size(), 1u);
}

// ---- fi_eq_write ------------------------------------------------------------------------------

TEST(EqWrite, ReturnsTheNumberOfBytesWritten) {
  auto eq = make_eq();
  char blob[40];
  std::memset(blob, 0x5a, sizeof(blob));
  EXPECT_EQ(eq->write(FI_NOTIFY, blob, sizeof(blob), 0), static_cast<ssize_t>(sizeof(blob)));
  char out[64];
  uint32_t event;
  ASSERT_EQ(eq->read(&event, out, sizeof(out), 0), static_cast<ssize_t>(sizeof(blob)));
  EXPECT_EQ(std::memcmp(out, blob, sizeof(blob)), 0);
}

TEST(EqWrite, InvalidArgumentsAreRefused) {
  auto eq = make_eq();
  fi_eq_entry e = entry_with(1);
  EXPECT_EQ(eq->write(FI_NOTIFY, nullptr, sizeof(e), 0), -FI_EINVAL);
  EXPECT_EQ(eq->write(FI_NOTIFY, &e, 0, 0), -FI_EINVAL);
  // 1.17 defines no flag for fi_eq_write (no public way to write an error entry).
  EXPECT_EQ(eq->write(FI_NOTIFY, &e, sizeof(e), FI_PEEK), -FI_EINVAL);
  EXPECT_EQ(eq->write(FI_NOTIFY, &e, Eq::kMaxEventBytes + 1, 0), -FI_EINVAL);
  fi_eq_err_entry no_err = error_with(0, 1);
  EXPECT_EQ(eq->write_error(no_err, nullptr, 0), -FI_EINVAL);
  fi_eq_err_entry err = error_with(FI_EIO, 1);
  EXPECT_EQ(eq->write_error(err, nullptr, 4), -FI_EINVAL);
  EXPECT_EQ(eq->write_cm(FI_CONNREQ, nullptr, nullptr, nullptr, 4), -FI_EINVAL);
  EXPECT_EQ(eq->size(), 0u);
  EXPECT_FALSE(eq->ready());
}

// ---- size attribute and overrun (NOTES) -------------------------------------------------------

TEST(EqSize, SizeSpecifiesTheMinimumSizeOfAnEventQueue) {
  auto eq = make_eq(32);
  EXPECT_EQ(eq->capacity(), 32u);
  for (uintptr_t i = 0; i < 32; ++i) ASSERT_EQ(write_entry(*eq, i), 24) << i;
  EXPECT_EQ(eq->size(), 32u);
  EXPECT_FALSE(eq->overrun());
}

TEST(EqSize, SizeZeroSelectsTheDefault) {
  auto eq = make_eq(0);
  EXPECT_EQ(eq->capacity(), Eq::kDefaultSize);
  for (uintptr_t i = 0; i < Eq::kDefaultSize; ++i) ASSERT_GT(write_entry(*eq, i), 0) << i;
  EXPECT_EQ(write_entry(*eq, 9999), -FI_EOVERRUN);
}

TEST(EqOverrun, TheOverrunSequenceOfTheNotesSection) {
  auto eq = make_eq(4);
  int self = 0;
  eq->set_fid(reinterpret_cast<fid_t>(&self));
  for (uintptr_t i = 0; i < 4; ++i) ASSERT_GT(write_entry(*eq, i), 0);
  // "If an event queue has been overrun, it will be placed into an 'overrun' state."
  EXPECT_EQ(write_entry(*eq, 4), -FI_EOVERRUN);
  EXPECT_TRUE(eq->overrun());
  // "Write operations against an overrun EQ will fail with -FI_EOVERRUN."
  EXPECT_EQ(write_entry(*eq, 5), -FI_EOVERRUN);
  fi_eq_err_entry err = error_with(FI_EIO, 6);
  EXPECT_EQ(eq->write_error(err, nullptr, 0), -FI_EOVERRUN);
  fi_info* info = fi_allocinfo();
  EXPECT_EQ(eq->write_cm(FI_CONNREQ, nullptr, info, nullptr, 0), -FI_EOVERRUN);
  fi_freeinfo(info);  // refused: the caller kept it
  EXPECT_EQ(eq->refused(), 4u);
  // "Read operations will continue to return any valid, non-corrupted events, if available."
  uint32_t event;
  fi_eq_entry out{};
  for (uintptr_t i = 0; i < 4; ++i) {
    ASSERT_EQ(eq->read(&event, &out, sizeof(out), 0), 24) << i;
    EXPECT_EQ(out.context, reinterpret_cast<void*>(i));
  }
  // "After all valid events have been retrieved, any attempt to read the EQ will result in it
  // returning an FI_EOVERRUN error event."
  EXPECT_EQ(eq->read(&event, &out, sizeof(out), 0), -FI_EAVAIL);
  EXPECT_TRUE(eq->ready());
  for (int round = 0; round < 2; ++round) {
    fi_eq_err_entry e{};
    ASSERT_EQ(eq->readerr(&e, 0), static_cast<ssize_t>(sizeof(e)));
    EXPECT_EQ(e.err, FI_EOVERRUN);
    EXPECT_EQ(e.fid, reinterpret_cast<fid_t>(&self));
    EXPECT_EQ(e.context, nullptr);
    EXPECT_EQ(e.err_data_size, 0u);
    // "Overrun event queues are considered fatal and may not be used to report additional events
    // once the overrun occurs."
    EXPECT_EQ(eq->read(&event, &out, sizeof(out), 0), -FI_EAVAIL);
    EXPECT_EQ(write_entry(*eq, 7), -FI_EOVERRUN);
  }
}

TEST(EqOverrun, ErrorEntriesCountAgainstTheSize) {
  auto eq = make_eq(2);
  fi_eq_err_entry err = error_with(FI_EIO, 1);
  ASSERT_EQ(eq->write_error(err, nullptr, 0), static_cast<ssize_t>(sizeof(fi_eq_err_entry)));
  ASSERT_GT(write_entry(*eq, 2), 0);
  EXPECT_EQ(eq->write_error(err, nullptr, 0), -FI_EOVERRUN);
  // The queued error still comes first, then the event, then the overrun error.
  fi_eq_err_entry e{};
  ASSERT_GT(eq->readerr(&e, 0), 0);
  EXPECT_EQ(e.err, FI_EIO);
  fi_eq_entry out{};
  uint32_t event;
  ASSERT_GT(eq->read(&event, &out, sizeof(out), 0), 0);
  EXPECT_EQ(eq->read(&event, &out, sizeof(out), 0), -FI_EAVAIL);
  ASSERT_GT(eq->readerr(&e, 0), 0);
  EXPECT_EQ(e.err, FI_EOVERRUN);
}

// ---- errors: fi_eq_readerr --------------------------------------------------------------------

TEST(EqError, ReadingWhileAnErrorIsQueuedReturnsEavail) {
  auto eq = make_eq();
  fi_eq_err_entry err = error_with(FI_ECONNREFUSED, 3);
  ASSERT_GT(eq->write_error(err, nullptr, 0), 0);
  fi_eq_entry out{};
  uint32_t event;
  EXPECT_EQ(eq->read(&event, &out, sizeof(out), 0), -FI_EAVAIL);
  EXPECT_EQ(eq->read(&event, &out, sizeof(out), FI_PEEK), -FI_EAVAIL);
  EXPECT_TRUE(eq->ready());
}

TEST(EqError, EventsWrittenBeforeAnErrorAreReadFirst) {
  auto eq = make_eq();
  ASSERT_GT(write_entry(*eq, 1), 0);
  fi_eq_err_entry err = error_with(FI_EIO, 2);
  ASSERT_GT(eq->write_error(err, nullptr, 0), 0);
  ASSERT_GT(write_entry(*eq, 3), 0);
  fi_eq_entry out{};
  uint32_t event;
  fi_eq_err_entry e{};
  // The error is not at the head yet: readerr has nothing, read has the first event.
  EXPECT_EQ(eq->readerr(&e, 0), -FI_EAGAIN);
  ASSERT_GT(eq->read(&event, &out, sizeof(out), 0), 0);
  EXPECT_EQ(out.context, reinterpret_cast<void*>(1));
  EXPECT_EQ(eq->read(&event, &out, sizeof(out), 0), -FI_EAVAIL);
  ASSERT_EQ(eq->readerr(&e, 0), static_cast<ssize_t>(sizeof(e)));
  EXPECT_EQ(e.err, FI_EIO);
  EXPECT_EQ(e.context, reinterpret_cast<void*>(2));
  EXPECT_EQ(e.fid, reinterpret_cast<fid_t>(0x2000));
  ASSERT_GT(eq->read(&event, &out, sizeof(out), 0), 0);
  EXPECT_EQ(out.context, reinterpret_cast<void*>(3));
  EXPECT_EQ(eq->read(&event, &out, sizeof(out), 0), -FI_EAGAIN);
}

TEST(EqError, ReaderrReturnsImmediatelyWhetherAnErrorWasFoundOrNot) {
  auto eq = make_eq();
  fi_eq_err_entry e{};
  auto t0 = Clock::now();
  EXPECT_EQ(eq->readerr(&e, 0), -FI_EAGAIN);
  EXPECT_LT(elapsed_ms(t0), 100);
  EXPECT_EQ(eq->readerr(nullptr, 0), -FI_EINVAL);
}

TEST(EqError, ReaderrReturnsTheEntryAndItsFields) {
  auto eq = make_eq();
  fi_eq_err_entry err = error_with(FI_ETIMEDOUT, 9);
  err.data = 1234;
  err.prov_errno = -FI_ETIMEDOUT;
  ASSERT_GT(eq->write_error(err, nullptr, 0), 0);
  fi_eq_err_entry e{};
  ASSERT_EQ(eq->readerr(&e, 0), static_cast<ssize_t>(sizeof(fi_eq_err_entry)));
  EXPECT_EQ(e.fid, err.fid);
  EXPECT_EQ(e.context, err.context);
  EXPECT_EQ(e.data, 1234u);
  EXPECT_EQ(e.err, FI_ETIMEDOUT);
  EXPECT_EQ(e.prov_errno, -FI_ETIMEDOUT);
  EXPECT_EQ(eq->readerr(&e, 0), -FI_EAGAIN);
  EXPECT_FALSE(eq->ready());
}

TEST(EqError, ReaderrWithPeekLeavesTheError) {
  auto eq = make_eq();
  const char data[] = "details";
  fi_eq_err_entry err = error_with(FI_EIO, 4);
  ASSERT_GT(eq->write_error(err, data, sizeof(data)), 0);
  for (int i = 0; i < 2; ++i) {
    fi_eq_err_entry e{};
    ASSERT_GT(eq->readerr(&e, FI_PEEK), 0);
    EXPECT_EQ(e.err, FI_EIO);
    ASSERT_EQ(e.err_data_size, sizeof(data));
    EXPECT_STREQ(static_cast<const char*>(e.err_data), data);
  }
  fi_eq_err_entry e{};
  ASSERT_GT(eq->readerr(&e, 0), 0);
  EXPECT_STREQ(static_cast<const char*>(e.err_data), data);
  EXPECT_EQ(eq->readerr(&e, 0), -FI_EAGAIN);
}

TEST(EqErrData, OnInputErrDataSizeIsTheBufferSizeOnOutputTheBytesCopied) {
  auto eq = make_eq();
  const char data[] = "0123456789";  // 11 bytes with the NUL
  fi_eq_err_entry err = error_with(FI_EIO, 1);
  ASSERT_GT(eq->write_error(err, data, sizeof(data)), 0);
  ASSERT_GT(eq->write_error(err, data, sizeof(data)), 0);
  char small[4] = {};
  fi_eq_err_entry e{};
  e.err_data = small;
  e.err_data_size = sizeof(small);
  ASSERT_EQ(eq->readerr(&e, 0), static_cast<ssize_t>(sizeof(e)));
  EXPECT_EQ(e.err_data, small);
  EXPECT_EQ(e.err_data_size, sizeof(small));
  EXPECT_EQ(std::memcmp(small, "0123", 4), 0);
  char big[64] = {};
  fi_eq_err_entry f{};
  f.err_data = big;
  f.err_data_size = sizeof(big);
  ASSERT_GT(eq->readerr(&f, 0), 0);
  EXPECT_EQ(f.err_data, big);
  EXPECT_EQ(f.err_data_size, sizeof(data));
  EXPECT_STREQ(big, data);
}

TEST(EqErrData, NoErrDataCopiesNothing) {
  auto eq = make_eq();
  fi_eq_err_entry err = error_with(FI_EIO, 1);
  ASSERT_GT(eq->write_error(err, nullptr, 0), 0);
  char buf[8] = {'x'};
  fi_eq_err_entry e{};
  e.err_data = buf;
  e.err_data_size = sizeof(buf);
  ASSERT_GT(eq->readerr(&e, 0), 0);
  EXPECT_EQ(e.err_data_size, 0u);
  EXPECT_EQ(buf[0], 'x');
}

TEST(EqErrData, ErrDataSizeZeroGivesABufferOwnedByTheProviderValidUntilTheNextRead) {
  auto eq = make_eq();
  const char first[] = "first error";
  const char second[] = "second";
  fi_eq_err_entry err = error_with(FI_EIO, 1);
  ASSERT_GT(eq->write_error(err, first, sizeof(first)), 0);
  ASSERT_GT(eq->write_error(err, second, sizeof(second)), 0);
  fi_eq_err_entry e{};
  ASSERT_GT(eq->readerr(&e, 0), 0);
  ASSERT_NE(e.err_data, nullptr);
  EXPECT_EQ(e.err_data_size, sizeof(first));
  EXPECT_STREQ(static_cast<const char*>(e.err_data), first);
  // Still valid while no other read call ran against the EQ.
  EXPECT_TRUE(eq->ready());
  EXPECT_STREQ(static_cast<const char*>(e.err_data), first);
  fi_eq_err_entry f{};
  ASSERT_GT(eq->readerr(&f, 0), 0);
  EXPECT_STREQ(static_cast<const char*>(f.err_data), second);
}

TEST(EqErrData, ReleaseBelow15GivesAProviderBufferAndThe10Layout) {
  auto eq = make_eq(32, nullptr, FI_VERSION(1, 4));
  const char data[] = "legacy";
  fi_eq_err_entry err = error_with(FI_EIO, 1);
  ASSERT_GT(eq->write_error(err, data, sizeof(data)), 0);
  char mine[64] = {};
  fi_eq_err_entry e{};
  e.err_data = mine;
  e.err_data_size = 12345;  // not a field of the 1.0 struct: neither read nor written
  ASSERT_EQ(eq->readerr(&e, 0), static_cast<ssize_t>(offsetof(fi_eq_err_entry, err_data_size)));
  EXPECT_EQ(e.err, FI_EIO);
  EXPECT_NE(e.err_data, mine);
  ASSERT_NE(e.err_data, nullptr);
  EXPECT_STREQ(static_cast<const char*>(e.err_data), data);
  EXPECT_EQ(e.err_data_size, 12345u);
  EXPECT_EQ(mine[0], 0);
}

// ---- connection events (fi_eq_cm_entry) -------------------------------------------------------

TEST(EqCm, AmountOfReturnedDataIsCalculatedFromTheReturnValue) {
  auto eq = make_eq();
  fi_info* info = fi_allocinfo();
  ASSERT_NE(info, nullptr);
  const uint8_t data[5] = {1, 2, 3, 4, 5};
  fid_t pep = reinterpret_cast<fid_t>(0x3000);
  ASSERT_EQ(eq->write_cm(FI_CONNREQ, pep, info, data, sizeof(data)),
            static_cast<ssize_t>(sizeof(fi_eq_cm_entry) + sizeof(data)));
  alignas(fi_eq_cm_entry) uint8_t buf[sizeof(fi_eq_cm_entry) + 64] = {};
  uint32_t event = 0;
  ssize_t n = eq->read(&event, buf, sizeof(buf), 0);
  ASSERT_EQ(n, static_cast<ssize_t>(sizeof(fi_eq_cm_entry) + sizeof(data)));
  auto* cm = reinterpret_cast<fi_eq_cm_entry*>(buf);
  EXPECT_EQ(event, static_cast<uint32_t>(FI_CONNREQ));
  EXPECT_EQ(cm->fid, pep);
  EXPECT_EQ(cm->info, info);
  EXPECT_EQ(std::memcmp(cm->data, data, n - sizeof(fi_eq_cm_entry)), 0);
  // "The application is responsible for freeing this structure by calling fi_freeinfo."
  fi_freeinfo(cm->info);
}

TEST(EqCm, ConnectionDataIsLimitedToTheBufferSpaceProvided) {
  auto eq = make_eq();
  const uint8_t data[16] = {9, 8, 7, 6, 5, 4, 3, 2, 1};
  ASSERT_GT(eq->write_cm(FI_CONNECTED, nullptr, nullptr, data, sizeof(data)), 0);
  alignas(fi_eq_cm_entry) uint8_t buf[sizeof(fi_eq_cm_entry) + 3] = {};
  uint32_t event;
  ASSERT_EQ(eq->read(&event, buf, sizeof(buf), 0), static_cast<ssize_t>(sizeof(buf)));
  EXPECT_EQ(event, static_cast<uint32_t>(FI_CONNECTED));
  EXPECT_EQ(std::memcmp(buf + sizeof(fi_eq_cm_entry), data, 3), 0);
  EXPECT_EQ(eq->size(), 0u);
}

TEST(EqCm, BufferSmallerThanTheCmEntryReturnsEtoosmallAndKeepsTheEvent) {
  auto eq = make_eq();
  fi_info* info = fi_allocinfo();
  const uint8_t data[4] = {1, 2, 3, 4};
  ASSERT_GT(eq->write_cm(FI_CONNREQ, nullptr, info, data, sizeof(data)), 0);
  uint8_t small[sizeof(fi_eq_cm_entry) - 1];
  uint32_t event;
  EXPECT_EQ(eq->read(&event, small, sizeof(small), 0), -FI_ETOOSMALL);
  alignas(fi_eq_cm_entry) uint8_t buf[sizeof(fi_eq_cm_entry) + 4];
  // FI_PEEK returns the same info; only the consuming read hands it over.
  ASSERT_EQ(eq->read(&event, buf, sizeof(buf), FI_PEEK), static_cast<ssize_t>(sizeof(buf)));
  ASSERT_EQ(eq->read(&event, buf, sizeof(buf), 0), static_cast<ssize_t>(sizeof(buf)));
  EXPECT_EQ(reinterpret_cast<fi_eq_cm_entry*>(buf)->info, info);
  fi_freeinfo(info);
}

TEST(EqCm, ShutdownWithoutDataIsJustTheCmEntry) {
  auto eq = make_eq();
  fid_t ep = reinterpret_cast<fid_t>(0x4000);
  ASSERT_EQ(eq->write_cm(FI_SHUTDOWN, ep, nullptr, nullptr, 0),
            static_cast<ssize_t>(sizeof(fi_eq_cm_entry)));
  fi_eq_cm_entry cm{};
  uint32_t event;
  ASSERT_EQ(eq->read(&event, &cm, sizeof(cm), 0), static_cast<ssize_t>(sizeof(cm)));
  EXPECT_EQ(event, static_cast<uint32_t>(FI_SHUTDOWN));
  EXPECT_EQ(cm.fid, ep);
  EXPECT_EQ(cm.info, nullptr);
}

TEST(EqCm, ApplicationWrittenConnectionEventsFollowTheSameRule) {
  auto eq = make_eq();
  alignas(fi_eq_cm_entry) uint8_t in[sizeof(fi_eq_cm_entry) + 8] = {};
  std::memset(in + sizeof(fi_eq_cm_entry), 0x77, 8);
  ASSERT_EQ(eq->write(FI_CONNREQ, in, sizeof(in), 0), static_cast<ssize_t>(sizeof(in)));
  fi_eq_cm_entry cm{};
  uint32_t event;
  EXPECT_EQ(eq->read(&event, &cm, sizeof(cm), 0), static_cast<ssize_t>(sizeof(cm)));
}

TEST(EqCm, EventsWhichRemainOnTheEqWhenItIsClosedAreLost) {
  // The unread CONNREQ's info belongs to the EQ, which frees it (leak checkers see none).
  auto eq = make_eq();
  ASSERT_GT(eq->write_cm(FI_CONNREQ, nullptr, fi_allocinfo(), nullptr, 0), 0);
  ASSERT_GT(write_entry(*eq, 1), 0);
  EXPECT_EQ(eq->size(), 2u);
  eq.reset();
  EXPECT_EQ(eq, nullptr);
}

// ---- wait objects: arm/trywait and sread ------------------------------------------------------

TEST(EqWait, FdIsReadableAfterAWriteToAnArmedEqAndOnlyThen) {
  auto eq = make_eq(32, make(wait::SignalKind::kEventFd));
  const int fd = eq->signal()->export_fd();  // what FI_GETWAIT hands out
  ASSERT_GE(fd, 0);
  // Not armed: a write costs no syscall and leaves the fd quiet.
  ASSERT_GT(write_entry(*eq, 1), 0);
  EXPECT_FALSE(fd_readable(fd));
  // Armed with an event queued: trywait says read first.
  EXPECT_EQ(eq->try_arm(), -FI_EAGAIN);
  EXPECT_FALSE(eq->armed());
  fi_eq_entry out{};
  uint32_t event;
  ASSERT_GT(eq->read(&event, &out, sizeof(out), 0), 0);
  ASSERT_EQ(eq->try_arm(), FI_SUCCESS);
  EXPECT_FALSE(fd_readable(fd));
  ASSERT_GT(write_entry(*eq, 2), 0);
  EXPECT_TRUE(fd_readable(fd));
  EXPECT_FALSE(eq->armed());
}

TEST(EqWait, AnErrorEntryWakesAnArmedEq) {
  auto eq = make_eq(32, make(wait::SignalKind::kEventFd));
  const int fd = eq->signal()->export_fd();  // what FI_GETWAIT hands out
  ASSERT_EQ(eq->try_arm(), FI_SUCCESS);
  fi_eq_err_entry err = error_with(FI_EIO, 1);
  ASSERT_GT(eq->write_error(err, nullptr, 0), 0);
  EXPECT_TRUE(fd_readable(fd));
}

TEST(EqSread, InvalidWithoutAWaitObject) {
  auto eq = make_eq();  // FI_WAIT_NONE (and FI_WAIT_SET): no signal of its own
  ASSERT_GT(write_entry(*eq, 1), 0);
  fi_eq_entry out{};
  uint32_t event;
  EXPECT_EQ(eq->sread(&event, &out, sizeof(out), 0, 0), -FI_EINVAL);
  EXPECT_EQ(eq->size(), 1u);
}

TEST(EqSread, ReturnsImmediatelyWhenAnEventIsQueued) {
  auto eq = make_eq(32, make(wait::SignalKind::kEventFd));
  ASSERT_GT(write_entry(*eq, 1), 0);
  fi_eq_entry out{};
  uint32_t event;
  auto t0 = Clock::now();
  ASSERT_EQ(eq->sread(&event, &out, sizeof(out), 2000, 0), static_cast<ssize_t>(sizeof(out)));
  EXPECT_LT(elapsed_ms(t0), 100);
  EXPECT_EQ(out.context, reinterpret_cast<void*>(1));
}

TEST(EqSread, IfTheTimeoutExpiresEagainIsReturned) {
  for (auto kind :
       {wait::SignalKind::kEventFd, wait::SignalKind::kMutexCond, wait::SignalKind::kYield}) {
    auto eq = make_eq(32, make(kind));
    fi_eq_entry out{};
    uint32_t event;
    auto t0 = Clock::now();
    EXPECT_EQ(eq->sread(&event, &out, sizeof(out), 100, 0), -FI_EAGAIN);
    long ms = elapsed_ms(t0);
    EXPECT_GE(ms, 95) << static_cast<int>(kind);
    EXPECT_LT(ms, 1000) << static_cast<int>(kind);
    t0 = Clock::now();
    EXPECT_EQ(eq->sread(&event, &out, sizeof(out), 0, 0), -FI_EAGAIN);
    EXPECT_LT(elapsed_ms(t0), 50);
  }
}

TEST(EqSread, PeekLeavesTheEventForTheNextRead) {
  auto eq = make_eq(32, make(wait::SignalKind::kEventFd));
  ASSERT_GT(write_entry(*eq, 1), 0);
  fi_eq_entry out{};
  uint32_t event;
  ASSERT_GT(eq->sread(&event, &out, sizeof(out), 1000, FI_PEEK), 0);
  ASSERT_GT(eq->sread(&event, &out, sizeof(out), 1000, 0), 0);
  EXPECT_EQ(eq->sread(&event, &out, sizeof(out), 0, 0), -FI_EAGAIN);
}

TEST(EqSread, ABlockedSreadReturnsWhenAnotherThreadWrites) {
  for (auto kind :
       {wait::SignalKind::kEventFd, wait::SignalKind::kMutexCond, wait::SignalKind::kYield}) {
    auto eq = make_eq(32, make(kind));
    std::thread writer([&] {
      std::this_thread::sleep_for(50ms);
      ASSERT_GT(write_entry(*eq, 42), 0);
    });
    fi_eq_entry out{};
    uint32_t event = 0;
    auto t0 = Clock::now();
    // A finite but long timeout: a lost wakeup shows as a 5 s wait, not a hang.
    ssize_t r = eq->sread(&event, &out, sizeof(out), 5000, 0);
    long ms = elapsed_ms(t0);
    writer.join();
    ASSERT_EQ(r, static_cast<ssize_t>(sizeof(out))) << static_cast<int>(kind);
    EXPECT_EQ(out.context, reinterpret_cast<void*>(42));
    EXPECT_LT(ms, 2000) << static_cast<int>(kind);
  }
}

TEST(EqSread, AnInfiniteSreadReturnsWhenAnotherThreadWrites) {
  auto eq = make_eq(32, make(wait::SignalKind::kEventFd));
  SignalWatchdog dog(pthread_self(), 5000ms);
  std::thread writer([&] {
    std::this_thread::sleep_for(50ms);
    ASSERT_GT(write_entry(*eq, 42), 0);
  });
  fi_eq_entry out{};
  uint32_t event = 0;
  ssize_t r = eq->sread(&event, &out, sizeof(out), -1, 0);
  dog.stop();
  writer.join();
  EXPECT_FALSE(dog.fired());
  ASSERT_EQ(r, static_cast<ssize_t>(sizeof(out)));
  EXPECT_EQ(out.context, reinterpret_cast<void*>(42));
}

TEST(EqSread, ASignaledThreadReturnsEagainEvenWithAnInfiniteTimeout) {
  // "Threads blocking in this function will return to the caller if they are signaled by some
  // external source. This is true even if the timeout has not occurred or was specified as
  // infinite." 1.17 has no fi_eq_signal: the external source is a POSIX signal.
  auto eq = make_eq(32, make(wait::SignalKind::kEventFd));
  SignalWatchdog dog(pthread_self(), 100ms);
  fi_eq_entry out{};
  uint32_t event;
  auto t0 = Clock::now();
  ssize_t r = eq->sread(&event, &out, sizeof(out), -1, 0);
  long ms = elapsed_ms(t0);
  dog.stop();
  EXPECT_TRUE(dog.fired());
  EXPECT_EQ(r, -FI_EAGAIN);
  EXPECT_LT(ms, 5000);
}

TEST(EqSread, ReturnsEavailWhenAnErrorArrives) {
  auto eq = make_eq(32, make(wait::SignalKind::kEventFd));
  std::thread writer([&] {
    std::this_thread::sleep_for(30ms);
    fi_eq_err_entry err = error_with(FI_EIO, 1);
    ASSERT_GT(eq->write_error(err, nullptr, 0), 0);
  });
  fi_eq_entry out{};
  uint32_t event;
  ssize_t r = eq->sread(&event, &out, sizeof(out), 5000, 0);
  writer.join();
  EXPECT_EQ(r, -FI_EAVAIL);
  fi_eq_err_entry e{};
  ASSERT_GT(eq->readerr(&e, 0), 0);
  EXPECT_EQ(e.err, FI_EIO);
}

TEST(EqSread, BufferTooSmallReturnsEtoosmallAndKeepsTheEvent) {
  auto eq = make_eq(32, make(wait::SignalKind::kEventFd));
  ASSERT_GT(write_entry(*eq, 1), 0);
  char small[8];
  uint32_t event;
  EXPECT_EQ(eq->sread(&event, small, sizeof(small), 1000, 0), -FI_ETOOSMALL);
  EXPECT_EQ(eq->size(), 1u);
}

TEST(EqConcurrency, ProducersAndABlockingReaderLoseAndReorderNothing) {
  constexpr int kProducers = 4;
  constexpr uintptr_t kEach = 5000;
  auto eq = make_eq(kProducers * kEach, make(wait::SignalKind::kEventFd));
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p)
    producers.emplace_back([&, p] {
      for (uintptr_t i = 0; i < kEach; ++i) {
        fi_eq_entry e{};
        e.data = (static_cast<uint64_t>(p) << 32) | i;
        ASSERT_EQ(eq->write(FI_NOTIFY, &e, sizeof(e), 0), 24);
      }
    });
  std::vector<uint64_t> next(kProducers, 0);
  size_t got = 0;
  while (got < kProducers * kEach) {
    fi_eq_entry out{};
    uint32_t event;
    ssize_t r = eq->sread(&event, &out, sizeof(out), 5000, 0);
    ASSERT_EQ(r, 24) << "after " << got << " events";
    const auto p = static_cast<size_t>(out.data >> 32);
    ASSERT_LT(p, static_cast<size_t>(kProducers));
    ASSERT_EQ(out.data & 0xffffffffu, next[p]) << "producer " << p;
    ++next[p];
    ++got;
  }
  for (auto& t : producers) t.join();
  EXPECT_FALSE(eq->ready());
}

// ---- fi_eq_strerror ---------------------------------------------------------------------------

TEST(EqStrerror, ConvertsProviderErrorInformationIntoAPrintableString) {
  char buf[128];
  const char* s = Eq::strerror(FI_EOVERRUN, nullptr, buf, sizeof(buf));
  EXPECT_EQ(s, buf);
  EXPECT_STREQ(buf, fi_strerror(FI_EOVERRUN));
  EXPECT_STREQ(Eq::strerror(-FI_EOVERRUN, nullptr, nullptr, 0), fi_strerror(FI_EOVERRUN));
  EXPECT_STREQ(Eq::strerror(ECONNREFUSED, nullptr, nullptr, 0), fi_strerror(ECONNREFUSED));
}

TEST(EqStrerror, TheOptionalBufferIsAlwaysTerminated) {
  char buf[4];
  std::memset(buf, 'x', sizeof(buf));
  EXPECT_EQ(Eq::strerror(FI_EIO, nullptr, buf, sizeof(buf)), buf);
  EXPECT_EQ(std::strlen(buf), 3u);
  EXPECT_EQ(std::string(buf), std::string(fi_strerror(FI_EIO)).substr(0, 3));
}

}  // namespace
}  // namespace dpfab::event
