// SPDX-License-Identifier: BSD-3-Clause
//
// event::Cq without EAL: the ring lives in plain memory. Tests are named after the fi_cq(3)
// sentence (or the design rule of lib/event/cq.h) they check.
#include "event/cq.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "count_new.h"
#include "test_util.h"

using dpfab::test::fd_readable;

using dpfab::event::Cq;
using dpfab::event::CqConfig;
using dpfab::event::CqEntry;
using dpfab::wait::Deadline;
using dpfab::wait::Signal;
using dpfab::wait::SignalKind;

namespace {

using Clock = std::chrono::steady_clock;

int64_t ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

std::unique_ptr<Cq> make_cq(CqConfig cfg = {}, std::optional<SignalKind> kind = std::nullopt) {
  std::unique_ptr<Signal> sig;
  if (kind) {
    auto s = Signal::create(*kind);
    EXPECT_TRUE(s.ok());
    sig = std::move(s.value());
  }
  auto cq = Cq::create(cfg, std::move(sig));
  EXPECT_TRUE(cq.ok()) << (cq.ok() ? "" : cq.error().message);
  return std::move(cq.value());
}

// DPFAB_STRESS_EVENTS scales the concurrent tests down (the ThreadSanitizer run sets it).
uint64_t events() {
  const char* e = std::getenv("DPFAB_STRESS_EVENTS");
  return e ? std::strtoull(e, nullptr, 10) : 800'000;
}

void* ctx(uintptr_t i) { return reinterpret_cast<void*>(i); }

CqEntry entry(uintptr_t i) {
  CqEntry e;
  e.op_context = ctx(i);
  e.flags = FI_RECV | FI_MSG;
  e.len = 100 + i;
  e.buf = ctx(0x1000 + i);
  e.data = 0xd000 + i;
  e.tag = 0x7000 + i;
  e.src_addr = 50 + i;
  return e;
}

fi_cq_err_entry error_entry(uintptr_t i, int err = FI_EIO) {
  fi_cq_err_entry e{};
  e.op_context = ctx(i);
  e.flags = FI_SEND | FI_MSG;
  e.len = 7;
  e.err = err;
  e.prov_errno = -static_cast<int>(i);
  e.olen = 3;
  return e;
}

// ---- creation ----------------------------------------------------------------------------------

TEST(CqCreate, SizeIsTheMinimumNumberOfEntries) {
  for (size_t size : {1, 2, 3, 7, 8, 1000, 1024, 4096}) {
    CqConfig cfg;
    cfg.size = size;
    auto cq = make_cq(cfg);
    EXPECT_GE(cq->capacity(), size);
    EXPECT_LT(cq->capacity(), 2 * size + 1) << "rounded to the ring's power of two only";
    // It really holds `size` entries.
    std::vector<CqEntry> v(size);
    for (size_t i = 0; i < size; ++i) v[i] = entry(i);
    EXPECT_EQ(cq->write_burst(v.data(), size), size);
  }
}

TEST(CqCreate, ZeroSizeLetsTheProviderChooseTheDefault) {
  auto cq = make_cq();
  EXPECT_GE(cq->capacity(), Cq::kDefaultSize);
}

TEST(CqCreate, RejectsOversizeAndUnknownFormat) {
  CqConfig big;
  big.size = Cq::kMaxSize + 1;
  auto r = Cq::create(big, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), -FI_EINVAL);
  CqConfig fmt;
  fmt.format = static_cast<fi_cq_format>(42);
  auto f = Cq::create(fmt, nullptr);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.code(), -FI_EINVAL);
}

TEST(CqCreate, UnspecFormatIsContext) {
  CqConfig cfg;
  cfg.format = FI_CQ_FORMAT_UNSPEC;
  EXPECT_EQ(make_cq(cfg)->format(), FI_CQ_FORMAT_CONTEXT);
}

// ---- formats -----------------------------------------------------------------------------------

void expect_fields(const fi_cq_entry& o, const CqEntry& e) {
  EXPECT_EQ(o.op_context, e.op_context);
}
void expect_fields(const fi_cq_msg_entry& o, const CqEntry& e) {
  EXPECT_EQ(o.op_context, e.op_context);
  EXPECT_EQ(o.flags, e.flags);
  EXPECT_EQ(o.len, e.len);
}
void expect_fields(const fi_cq_data_entry& o, const CqEntry& e) {
  EXPECT_EQ(o.op_context, e.op_context);
  EXPECT_EQ(o.flags, e.flags);
  EXPECT_EQ(o.len, e.len);
  EXPECT_EQ(o.buf, e.buf);
  EXPECT_EQ(o.data, e.data);
}
void expect_fields(const fi_cq_tagged_entry& o, const CqEntry& e) {
  EXPECT_EQ(o.op_context, e.op_context);
  EXPECT_EQ(o.flags, e.flags);
  EXPECT_EQ(o.len, e.len);
  EXPECT_EQ(o.buf, e.buf);
  EXPECT_EQ(o.data, e.data);
  EXPECT_EQ(o.tag, e.tag);
}

// "The format attribute allows the application to select one of several completion formats,
// indicating the structure of the data that the completion queue should return when read."
template <typename T>
void read_in_format(fi_cq_format fmt) {
  SCOPED_TRACE(fmt);
  CqConfig cfg;
  cfg.format = fmt;
  cfg.size = 16;
  auto cq = make_cq(cfg);
  CqEntry in[3] = {entry(1), entry(2), entry(3)};
  ASSERT_EQ(cq->write_burst(in, 3), 3u);
  // Two entries into a three-entry buffer: the third must stay untouched (stride = sizeof(T)).
  T out[3];
  std::memset(out, 0xab, sizeof(out));
  ASSERT_EQ(cq->read(out, 2, nullptr), 2);
  expect_fields(out[0], in[0]);
  expect_fields(out[1], in[1]);
  T canary;
  std::memset(&canary, 0xab, sizeof(canary));
  EXPECT_EQ(std::memcmp(&out[2], &canary, sizeof(T)), 0) << "wrote past count entries";
  ASSERT_EQ(cq->read(out, 3, nullptr), 1);
  expect_fields(out[0], in[2]);
  EXPECT_EQ(cq->read(out, 3, nullptr), -FI_EAGAIN);
}

TEST(CqFormat, ContextReturnsOnlyTheOperationContext) {
  read_in_format<fi_cq_entry>(FI_CQ_FORMAT_CONTEXT);
}
TEST(CqFormat, UnspecReturnsTheProviderDefaultContextFormat) {
  read_in_format<fi_cq_entry>(FI_CQ_FORMAT_UNSPEC);
}
TEST(CqFormat, MsgAddsFlagsAndLength) { read_in_format<fi_cq_msg_entry>(FI_CQ_FORMAT_MSG); }
TEST(CqFormat, DataAddsBufferAndRemoteData) { read_in_format<fi_cq_data_entry>(FI_CQ_FORMAT_DATA); }
TEST(CqFormat, TaggedAddsTheTag) { read_in_format<fi_cq_tagged_entry>(FI_CQ_FORMAT_TAGGED); }

// "fi_cq_readfrom ... allows the CQ to return source address information to the user for any
// received data ... If ... source addressing data is not available, the source address will be
// set to FI_ADDR_NOTAVAIL. The number of input src_addr entries must be the same as count."
TEST(CqRead, ReadfromReturnsTheSourceAddressOfEachCompletion) {
  auto cq = make_cq();
  CqEntry a = entry(1), b = entry(2);
  b.src_addr = FI_ADDR_NOTAVAIL;
  ASSERT_TRUE(cq->write(a));
  ASSERT_TRUE(cq->write(b));
  ASSERT_TRUE(cq->write(ctx(3), FI_SEND));  // convenience form: no source
  fi_cq_entry out[4];
  fi_addr_t src[4] = {1, 1, 1, 1};
  ASSERT_EQ(cq->read(out, 4, src), 3);
  EXPECT_EQ(src[0], a.src_addr);
  EXPECT_EQ(src[1], FI_ADDR_NOTAVAIL);
  EXPECT_EQ(src[2], FI_ADDR_NOTAVAIL);
  EXPECT_EQ(src[3], 1u) << "only count entries written";
  EXPECT_EQ(out[2].op_context, ctx(3));
}

// "If no completions are available to read from the CQ, returns -FI_EAGAIN."
TEST(CqRead, EmptyReturnsEagain) {
  auto cq = make_cq();
  fi_cq_entry out;
  EXPECT_EQ(cq->read(&out, 1, nullptr), -FI_EAGAIN);
  EXPECT_FALSE(cq->ready());
  EXPECT_EQ(cq->count(), 0u);
}

// "A count value of 0 may be used to drive progress on associated endpoints."
TEST(CqRead, CountZeroConsumesNothing) {
  auto cq = make_cq();
  EXPECT_EQ(cq->read(nullptr, 0, nullptr), -FI_EAGAIN);
  ASSERT_TRUE(cq->write(ctx(1), FI_SEND));
  EXPECT_EQ(cq->read(nullptr, 0, nullptr), 0);
  EXPECT_EQ(cq->count(), 1u);
  fi_cq_entry out;
  EXPECT_EQ(cq->read(nullptr, 1, nullptr), -FI_EINVAL);
  EXPECT_EQ(cq->read(&out, 1, nullptr), 1);
}

TEST(CqRead, CompletionsComeOutInTheOrderTheyWereWritten) {
  CqConfig cfg;
  cfg.size = 64;
  cfg.format = FI_CQ_FORMAT_TAGGED;
  auto cq = make_cq(cfg);
  uintptr_t next_in = 0, next_out = 0;
  // Many rounds so that reads cross the ring's wrap-around (the zero-copy window's second part).
  for (int round = 0; round < 50; ++round) {
    std::array<CqEntry, 37> in;
    for (auto& e : in) e = entry(next_in++);
    ASSERT_EQ(cq->write_burst(in.data(), in.size()), in.size());
    fi_cq_tagged_entry out[37];
    ASSERT_EQ(cq->read(out, 37, nullptr), 37);
    for (auto& o : out) EXPECT_EQ(o.op_context, ctx(next_out++));
  }
}

// ---- errors ------------------------------------------------------------------------------------

// "Attempting to read from a CQ while an item is in the error queue results in fi_cq_read failing
// with a return code of -FI_EAVAIL" -- "If the topmost completion is for a failed transfer (an
// error entry), returns -FI_EAVAIL": completions written before the error come first.
TEST(CqError, CompletionsBeforeTheErrorThenEavailUntilReaderrThenLaterOnes) {
  CqConfig cfg;
  cfg.format = FI_CQ_FORMAT_MSG;
  auto cq = make_cq(cfg);
  ASSERT_TRUE(cq->write(ctx(1), FI_SEND));
  ASSERT_TRUE(cq->write(ctx(2), FI_SEND));
  ASSERT_EQ(cq->write_error(error_entry(3), nullptr, 0), FI_SUCCESS);
  ASSERT_TRUE(cq->write(ctx(4), FI_RECV));
  EXPECT_EQ(cq->errors(), 1u);

  fi_cq_msg_entry out[8];
  ASSERT_EQ(cq->read(out, 8, nullptr), 2);
  EXPECT_EQ(out[0].op_context, ctx(1));
  EXPECT_EQ(out[1].op_context, ctx(2));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(cq->read(out, 8, nullptr), -FI_EAVAIL);
  EXPECT_EQ(cq->read(nullptr, 0, nullptr), -FI_EAVAIL);
  EXPECT_TRUE(cq->ready()) << "an error entry counts as something to read";

  fi_cq_err_entry err{};
  ASSERT_EQ(cq->readerr(&err), 1);
  EXPECT_EQ(err.op_context, ctx(3));
  EXPECT_EQ(err.err, FI_EIO);
  EXPECT_EQ(err.prov_errno, -3);
  EXPECT_EQ(err.olen, 3u);
  EXPECT_EQ(err.len, 7u);
  EXPECT_EQ(err.flags, static_cast<uint64_t>(FI_SEND | FI_MSG));
  EXPECT_EQ(cq->errors(), 0u);

  ASSERT_EQ(cq->read(out, 8, nullptr), 1);
  EXPECT_EQ(out[0].op_context, ctx(4));
  EXPECT_EQ(cq->read(out, 8, nullptr), -FI_EAGAIN);
  EXPECT_EQ(cq->readerr(&err), -FI_EAGAIN);
}

// "fi_cq_readerr ... If no error completions are available to read from the CQ, returns
// -FI_EAGAIN." An error behind unread completions is not available yet (order is kept).
TEST(CqError, ReaderrReturnsEagainWhileTheErrorIsBehindCompletions) {
  auto cq = make_cq();
  fi_cq_err_entry err{};
  EXPECT_EQ(cq->readerr(&err), -FI_EAGAIN);
  ASSERT_TRUE(cq->write(ctx(1), FI_SEND));
  ASSERT_EQ(cq->write_error(error_entry(2), nullptr, 0), FI_SUCCESS);
  EXPECT_EQ(cq->readerr(&err), -FI_EAGAIN);
  fi_cq_entry out[2];
  EXPECT_EQ(cq->read(out, 2, nullptr), 1);
  EXPECT_EQ(cq->readerr(&err), 1);
  EXPECT_EQ(err.op_context, ctx(2));
  EXPECT_EQ(cq->readerr(nullptr), -FI_EINVAL);
}

TEST(CqError, ConsecutiveErrorsAreEachReportedInOrder) {
  auto cq = make_cq();
  ASSERT_EQ(cq->write_error(error_entry(1), nullptr, 0), FI_SUCCESS);
  ASSERT_EQ(cq->write_error(error_entry(2, FI_ECANCELED), nullptr, 0), FI_SUCCESS);
  fi_cq_entry out;
  fi_cq_err_entry err{};
  EXPECT_EQ(cq->read(&out, 1, nullptr), -FI_EAVAIL);
  ASSERT_EQ(cq->readerr(&err), 1);
  EXPECT_EQ(err.op_context, ctx(1));
  EXPECT_EQ(cq->read(&out, 1, nullptr), -FI_EAVAIL);
  ASSERT_EQ(cq->readerr(&err), 1);
  EXPECT_EQ(err.op_context, ctx(2));
  EXPECT_EQ(err.err, FI_ECANCELED);
  EXPECT_EQ(cq->read(&out, 1, nullptr), -FI_EAGAIN);
  EXPECT_FALSE(cq->ready());
}

constexpr char kErrText[] = "peer 10.0.0.2 unreachable";

// "On input, err_data_size indicates the size of the err_data buffer in bytes. On output,
// err_data_size will be set to the number of bytes copied to the err_data buffer."
TEST(CqErrData, Api15CopiesIntoTheUserBufferAndSetsTheSize) {
  auto cq = make_cq();  // api_version 1.17
  ASSERT_EQ(cq->write_error(error_entry(1), kErrText, sizeof(kErrText)), FI_SUCCESS);
  ASSERT_EQ(cq->write_error(error_entry(2), kErrText, sizeof(kErrText)), FI_SUCCESS);

  char big[64];
  std::memset(big, 'x', sizeof(big));
  fi_cq_err_entry err{};
  err.err_data = big;
  err.err_data_size = sizeof(big);
  ASSERT_EQ(cq->readerr(&err), 1);
  EXPECT_EQ(err.err_data, big);
  EXPECT_EQ(err.err_data_size, sizeof(kErrText));
  EXPECT_STREQ(big, kErrText);
  EXPECT_EQ(big[sizeof(kErrText)], 'x');

  char small[4];
  std::memset(small, 'x', sizeof(small));
  fi_cq_err_entry err2{};
  err2.err_data = small;
  err2.err_data_size = sizeof(small);
  ASSERT_EQ(cq->readerr(&err2), 1);
  EXPECT_EQ(err2.err_data, small);
  EXPECT_EQ(err2.err_data_size, sizeof(small)) << "min of the two sizes";
  EXPECT_EQ(std::memcmp(small, kErrText, sizeof(small)), 0);
}

TEST(CqErrData, Api15WithoutErrDataReportsZeroBytes) {
  auto cq = make_cq();
  ASSERT_EQ(cq->write_error(error_entry(1), nullptr, 0), FI_SUCCESS);
  char buf[8] = {};
  fi_cq_err_entry err{};
  err.err_data = buf;
  err.err_data_size = sizeof(buf);
  ASSERT_EQ(cq->readerr(&err), 1);
  EXPECT_EQ(err.err_data_size, 0u);
}

TEST(CqErrData, Api15UserBufferMustExistWhenASizeIsGiven) {
  auto cq = make_cq();
  ASSERT_EQ(cq->write_error(error_entry(1), kErrText, sizeof(kErrText)), FI_SUCCESS);
  fi_cq_err_entry err{};
  err.err_data_size = 8;  // and err_data null
  EXPECT_EQ(cq->readerr(&err), -FI_EINVAL);
  EXPECT_EQ(cq->errors(), 1u) << "the error is not lost";
}

// "If err_data_size is 0 on input, or the fabric was opened with release < 1.5, then any buffer
// referenced by err_data will be ignored on input. In this situation, on output err_data will be
// set to a data buffer owned by the provider. The contents of the buffer will remain valid until
// a subsequent read call against the CQ."
TEST(CqErrData, Api15SizeZeroPointsAtAProviderBuffer) {
  auto cq = make_cq();
  ASSERT_EQ(cq->write_error(error_entry(1), kErrText, sizeof(kErrText)), FI_SUCCESS);
  char ignored[64] = {};
  fi_cq_err_entry err{};
  err.err_data = ignored;
  err.err_data_size = 0;
  ASSERT_EQ(cq->readerr(&err), 1);
  ASSERT_NE(err.err_data, nullptr);
  EXPECT_NE(err.err_data, static_cast<void*>(ignored));
  EXPECT_EQ(err.err_data_size, sizeof(kErrText));
  EXPECT_STREQ(static_cast<const char*>(err.err_data), kErrText);
  EXPECT_EQ(ignored[0], 0);
  // Still valid while no other read call ran; a read of completions does not disturb it either.
  ASSERT_TRUE(cq->write(ctx(9), FI_SEND));
  fi_cq_entry out;
  ASSERT_EQ(cq->read(&out, 1, nullptr), 1);
  EXPECT_STREQ(static_cast<const char*>(err.err_data), kErrText);
}

TEST(CqErrData, ApiBelow15AlwaysPointsAtAProviderBufferAndWritesOnlyThe10Entry) {
  CqConfig cfg;
  cfg.api_version = FI_VERSION(1, 4);
  auto cq = make_cq(cfg);
  ASSERT_EQ(cq->write_error(error_entry(1), kErrText, sizeof(kErrText)), FI_SUCCESS);
  char user[64] = {};
  fi_cq_err_entry err{};
  err.err_data = user;
  err.err_data_size = 0x5a5a;  // past the end of a 1.0 struct: must not be written
  ASSERT_EQ(cq->readerr(&err), 1);
  EXPECT_EQ(err.op_context, ctx(1));
  EXPECT_EQ(err.err, FI_EIO);
  ASSERT_NE(err.err_data, nullptr);
  EXPECT_NE(err.err_data, static_cast<void*>(user)) << "the input buffer is ignored below 1.5";
  EXPECT_STREQ(static_cast<const char*>(err.err_data), kErrText);
  EXPECT_EQ(user[0], 0);
  EXPECT_EQ(err.err_data_size, 0x5a5au);
}

// fi_cq_strerror: "Converts provider specific error information into a printable string."
TEST(CqErrData, StrerrorDescribesProvErrnoAndTheErrDataReaderrReturned) {
  auto cq = make_cq();
  ASSERT_EQ(cq->write_error(error_entry(5), kErrText, sizeof(kErrText)), FI_SUCCESS);
  fi_cq_err_entry err{};
  ASSERT_EQ(cq->readerr(&err), 1);
  char buf[256];
  const char* s = cq->strerror(err.prov_errno, err.err_data, buf, sizeof(buf));
  EXPECT_EQ(s, buf);
  EXPECT_NE(std::string(s).find("prov_errno -5"), std::string::npos) << s;
  EXPECT_NE(std::string(s).find(kErrText), std::string::npos) << s;

  // A pointer the CQ did not hand out is never dereferenced.
  const char other[] = "not ours";
  s = cq->strerror(FI_ETIMEDOUT, other, buf, sizeof(buf));
  EXPECT_EQ(std::string(s).find("not ours"), std::string::npos) << s;
  // Without a buffer: a provider-owned string; a tiny buffer: truncated, terminated.
  EXPECT_NE(cq->strerror(FI_EIO, nullptr, nullptr, 0), nullptr);
  char tiny[6];
  s = cq->strerror(FI_EIO, err.err_data, tiny, sizeof(tiny));
  EXPECT_EQ(std::strlen(s), sizeof(tiny) - 1);
}

// ---- full ring, resource management, overrun ---------------------------------------------------

TEST(CqFull, WriteBurstStoresWhatFitsAndLosesNothing) {
  CqConfig cfg;
  cfg.size = 7;
  auto cq = make_cq(cfg);
  ASSERT_EQ(cq->capacity(), 7u);
  bool called = false;
  cq->set_overrun_handler(
      [](void* c, Cq&, const Cq::Overrun&) noexcept { *static_cast<bool*>(c) = true; }, &called);
  std::array<CqEntry, 10> in;
  for (size_t i = 0; i < in.size(); ++i) in[i] = entry(i);
  EXPECT_TRUE(cq->would_fit(7));
  EXPECT_FALSE(cq->would_fit(8));
  EXPECT_EQ(cq->write_burst(in.data(), in.size()), 7u);
  EXPECT_EQ(cq->free_space(), 0u);
  EXPECT_FALSE(cq->would_fit(1));
  EXPECT_FALSE(cq->write(in[7]));
  EXPECT_EQ(cq->write_error(error_entry(1), nullptr, 0), -FI_EAGAIN) << "no slot for the error";
  EXPECT_FALSE(called) << "RM enabled: the producer owns a short write";
  EXPECT_FALSE(cq->overrun());

  fi_cq_entry out[10];
  ASSERT_EQ(cq->read(out, 3, nullptr), 3);
  EXPECT_EQ(cq->free_space(), 3u);
  EXPECT_EQ(cq->write_burst(&in[7], 3), 3u);
  ASSERT_EQ(cq->read(out + 3, 10, nullptr), 7);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(out[i].op_context, ctx(i)) << i;
  EXPECT_EQ(cq->free_space(), 7u);
}

struct OverrunLog {
  int calls = 0;
  std::vector<CqEntry> dropped;
  std::optional<fi_cq_err_entry> error;
  Cq* cq = nullptr;
};

void log_overrun(void* c, Cq& cq, const Cq::Overrun& what) noexcept {
  auto* log = static_cast<OverrunLog*>(c);
  ++log->calls;
  log->cq = &cq;
  log->dropped.assign(what.entries, what.entries + what.count);
  if (what.error) log->error = *what.error;
}

// fi_cq(3) NOTES: "If a completion queue has been overrun, it will be placed into an 'overrun'
// state. Read operations will continue to return any valid, non-corrupted completions, if
// available. After all valid completions have been retrieved, any attempt to read the CQ will
// result in it returning an FI_EOVERRUN error event. Overrun completion queues are considered
// fatal and may not be used to report additional completions once the overrun occurs."
TEST(CqOverrun, RmDisabledCallsTheHandlerWithTheDroppedEntriesAndReportsEoverrun) {
  CqConfig cfg;
  cfg.size = 7;
  cfg.rm_enabled = false;
  auto cq = make_cq(cfg, SignalKind::kEventFd);
  OverrunLog log;
  cq->set_overrun_handler(log_overrun, &log);
  std::array<CqEntry, 10> in;
  for (size_t i = 0; i < in.size(); ++i) in[i] = entry(i);
  const int fd = cq->signal()->export_fd();  // as FI_GETWAIT hands it out
  ASSERT_EQ(cq->try_arm(), FI_SUCCESS);

  EXPECT_EQ(cq->write_burst(in.data(), in.size()), 7u);
  EXPECT_TRUE(cq->overrun());
  ASSERT_EQ(log.calls, 1);
  EXPECT_EQ(log.cq, cq.get());
  ASSERT_EQ(log.dropped.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(log.dropped[i].op_context, ctx(7 + i));
  EXPECT_FALSE(log.error);
  EXPECT_TRUE(fd_readable(fd)) << "the armed reader is woken";

  // Fatal: nothing more is accepted, and the handler is not called again.
  EXPECT_EQ(cq->write_burst(in.data(), 1), 0u);
  EXPECT_EQ(cq->write_error(error_entry(1), nullptr, 0), -FI_EOVERRUN);
  EXPECT_EQ(log.calls, 1);

  fi_cq_entry out[10];
  ASSERT_EQ(cq->read(out, 10, nullptr), 7) << "the valid completions first";
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(out[i].op_context, ctx(i));
  EXPECT_TRUE(cq->ready());
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(cq->read(out, 10, nullptr), -FI_EAVAIL);
    fi_cq_err_entry err{};
    ASSERT_EQ(cq->readerr(&err), 1);
    EXPECT_EQ(err.err, FI_EOVERRUN);
    EXPECT_EQ(err.op_context, nullptr);
  }
}

TEST(CqOverrun, RmDisabledErrorThatDoesNotFitOverrunsWithTheErrorReported) {
  CqConfig cfg;
  cfg.max_errors = 2;
  cfg.rm_enabled = false;
  auto cq = make_cq(cfg);
  OverrunLog log;
  cq->set_overrun_handler(log_overrun, &log);
  ASSERT_EQ(cq->write_error(error_entry(1), nullptr, 0), FI_SUCCESS);
  ASSERT_EQ(cq->write_error(error_entry(2), nullptr, 0), FI_SUCCESS);
  EXPECT_EQ(cq->write_error(error_entry(3, FI_ETRUNC), nullptr, 0), -FI_EOVERRUN);
  ASSERT_EQ(log.calls, 1);
  ASSERT_TRUE(log.error);
  EXPECT_EQ(log.error->op_context, ctx(3));
  EXPECT_EQ(log.error->err, FI_ETRUNC);
  EXPECT_TRUE(log.dropped.empty());
  // The two stored errors are still reported, then the overrun.
  fi_cq_err_entry err{};
  ASSERT_EQ(cq->readerr(&err), 1);
  EXPECT_EQ(err.op_context, ctx(1));
  ASSERT_EQ(cq->readerr(&err), 1);
  EXPECT_EQ(err.op_context, ctx(2));
  ASSERT_EQ(cq->readerr(&err), 1);
  EXPECT_EQ(err.err, FI_EOVERRUN);
}

TEST(CqOverrun, RmEnabledBoundsTheErrorQueueWithoutOverrunning) {
  CqConfig cfg;
  cfg.max_errors = 2;
  auto cq = make_cq(cfg);
  OverrunLog log;
  cq->set_overrun_handler(log_overrun, &log);
  ASSERT_EQ(cq->write_error(error_entry(1), nullptr, 0), FI_SUCCESS);
  ASSERT_EQ(cq->write_error(error_entry(2), nullptr, 0), FI_SUCCESS);
  EXPECT_EQ(cq->write_error(error_entry(3), nullptr, 0), -FI_EAGAIN);
  EXPECT_EQ(log.calls, 0);
  EXPECT_FALSE(cq->overrun());
  fi_cq_err_entry err{};
  ASSERT_EQ(cq->readerr(&err), 1);
  EXPECT_EQ(cq->write_error(error_entry(3), nullptr, 0), FI_SUCCESS) << "room again";
}

// Counted with the counting operator new (count_new.h), not left to a leak checker (CI's ASan
// run has leak detection off): each queued error holds a record and a copy of its err_data on the
// heap, and closing the CQ with them still queued frees every one.
TEST(CqOverrun, ClosingWithErrorsQueuedFreesThem) {
  const size_t before_blocks = dpfab::test::new_blocks();
  const size_t before = dpfab::test::new_bytes();
  auto cq = make_cq();
  const size_t empty_blocks = dpfab::test::new_blocks();
  int failed = 0;
  for (int i = 0; i < 10; ++i)
    failed += cq->write_error(error_entry(i), kErrText, sizeof(kErrText)) != FI_SUCCESS;
  const size_t queued_blocks = dpfab::test::new_blocks();
  cq.reset();
  const size_t after_blocks = dpfab::test::new_blocks();
  const size_t after = dpfab::test::new_bytes();

  ASSERT_EQ(failed, 0);
  EXPECT_EQ(queued_blocks - empty_blocks, 20u) << "a record and an err_data copy per error";
  EXPECT_EQ(after_blocks, before_blocks) << "closing freed every block, the records' too";
  EXPECT_EQ(after, before);
}

// ---- producers ---------------------------------------------------------------------------------

// Progress lcores and application threads can both produce: every entry arrives exactly once, in
// each producer's order, with errors in their place.
TEST(CqProducers, ConcurrentProducersLoseAndDuplicateNothing) {
  constexpr int kProducers = 4;
  const uint32_t kPerProducer = static_cast<uint32_t>(std::min<uint64_t>(200'000, events() / 4));
  constexpr uint32_t kErrorEvery = 997;  // producer 0 interleaves errors
  CqConfig cfg;
  cfg.size = 1024;
  cfg.format = FI_CQ_FORMAT_DATA;
  auto cq = make_cq(cfg);
  auto encode = [](uint64_t p, uint64_t seq) { return ctx((p << 32) | seq); };

  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p)
    producers.emplace_back([&, p] {
      uint32_t seq = 0;
      CqEntry batch[16];
      while (seq < kPerProducer) {
        if (p == 0 && seq % kErrorEvery == kErrorEvery - 1) {
          fi_cq_err_entry e{};
          e.op_context = encode(p, seq);
          e.err = FI_EIO;
          while (cq->write_error(e, &seq, sizeof(seq)) != FI_SUCCESS) std::this_thread::yield();
          ++seq;
          continue;
        }
        uint32_t n = 1 + seq % 16;
        n = std::min(n, kPerProducer - seq);
        if (p == 0) n = std::min(n, kErrorEvery - 1 - seq % kErrorEvery);
        for (uint32_t i = 0; i < n; ++i) {
          batch[i] = CqEntry{};
          batch[i].op_context = encode(p, seq + i);
          batch[i].data = seq + i;
        }
        uint32_t done = 0;
        while (done < n) {
          done += cq->write_burst(batch + done, n - done);
          if (done < n) std::this_thread::yield();
        }
        seq += n;
      }
    });

  std::vector<uint32_t> next(kProducers, 0);
  uint64_t total = 0, errors = 0;
  const uint64_t expected = uint64_t{kProducers} * kPerProducer;
  auto deadline = Clock::now() + std::chrono::seconds(60);
  bool ok = true;
  while (total < expected && Clock::now() < deadline && ok) {
    fi_cq_data_entry out[64];
    ssize_t n = cq->read(out, 64, nullptr);
    if (n == -FI_EAGAIN) {
      std::this_thread::yield();
      continue;
    }
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      uint32_t data = 0;
      err.err_data = &data;
      err.err_data_size = sizeof(data);
      ASSERT_EQ(cq->readerr(&err), 1);
      auto v = reinterpret_cast<uintptr_t>(err.op_context);
      uint32_t p = v >> 32, seq = v & 0xffffffff;
      ok = p == 0 && seq == next[0] && data == seq;
      EXPECT_TRUE(ok) << "error out of place: producer " << p << " seq " << seq;
      ++next[0];
      ++total;
      ++errors;
      continue;
    }
    ASSERT_GT(n, 0);
    for (ssize_t i = 0; i < n && ok; ++i) {
      auto v = reinterpret_cast<uintptr_t>(out[i].op_context);
      uint32_t p = v >> 32, seq = v & 0xffffffff;
      ok = p < kProducers && seq == next[p] && out[i].data == seq;
      EXPECT_TRUE(ok) << "producer " << p << " seq " << seq << " expected " << next[p];
      if (ok) ++next[p];
      ++total;
    }
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(total, expected);
  EXPECT_EQ(errors, kPerProducer / kErrorEvery);
  for (int p = 0; p < kProducers; ++p) EXPECT_EQ(next[p], kPerProducer) << p;
  fi_cq_entry rest;
  EXPECT_EQ(cq->read(&rest, 1, nullptr), -FI_EAGAIN);
}

// The producer fast path: "no syscall unless a consumer is armed", one wake per burst.
TEST(CqProducers, NotifyRaisesOnlyForAnArmedConsumerAndOncePerBurst) {
  auto cq = make_cq({}, SignalKind::kEventFd);
  std::array<CqEntry, 5> in;
  for (size_t i = 0; i < in.size(); ++i) in[i] = entry(i);
  EXPECT_EQ(cq->write_burst(in.data(), in.size()), 5u);
  EXPECT_EQ(cq->signal()->raises(), 0u);
  fi_cq_entry out[5];
  ASSERT_EQ(cq->read(out, 5, nullptr), 5);
  ASSERT_EQ(cq->try_arm(), FI_SUCCESS);
  EXPECT_EQ(cq->write_burst(in.data(), in.size()), 5u);
  EXPECT_EQ(cq->signal()->raises(), 1u);
  EXPECT_EQ(cq->write_burst(in.data(), 0), 0u);
  EXPECT_EQ(cq->signal()->raises(), 1u);
}

// ---- waiting -----------------------------------------------------------------------------------

// "If the timeout expires ... and no data is available to be read from the completion queue,
// returns -FI_EAGAIN."
TEST(CqSread, TimesOutWithEagainAfterAboutTheTimeout) {
  for (SignalKind k : {SignalKind::kEventFd, SignalKind::kMutexCond, SignalKind::kYield}) {
    auto cq = make_cq({}, k);
    fi_cq_entry out;
    auto t0 = Clock::now();
    EXPECT_EQ(cq->sread(&out, 1, nullptr, 1, Deadline::after_ms(150)), -FI_EAGAIN);
    int64_t ms = ms_since(t0);
    EXPECT_GE(ms, 150) << static_cast<int>(k);
    EXPECT_LT(ms, 1150) << static_cast<int>(k);
    EXPECT_FALSE(cq->armed()) << "a timed-out wait leaves the CQ disarmed";
    t0 = Clock::now();
    EXPECT_EQ(cq->sread(&out, 1, nullptr, 1, Deadline::after_ms(0)), -FI_EAGAIN);
    EXPECT_LT(ms_since(t0), 100);
  }
}

// "the calls will not return until either a completion has been read from the CQ or an error or
// timeout occurs" -- woken by a producer on another thread.
TEST(CqSread, ReturnsWhenAnotherThreadWrites) {
  for (SignalKind k : {SignalKind::kEventFd, SignalKind::kMutexCond, SignalKind::kYield}) {
    auto cq = make_cq({}, k);
    std::thread producer([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      cq->write(ctx(42), FI_RECV);
    });
    fi_cq_entry out[4];
    auto t0 = Clock::now();
    EXPECT_EQ(cq->sread(out, 4, nullptr, 1, Deadline::after_ms(5000)), 1) << static_cast<int>(k);
    EXPECT_LT(ms_since(t0), 2500);
    EXPECT_EQ(out[0].op_context, ctx(42));
    producer.join();
  }
}

TEST(CqSread, ReturnsEavailWhenAnErrorIsAtTheHead) {
  auto cq = make_cq({}, SignalKind::kEventFd);
  std::thread producer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    cq->write_error(error_entry(1), nullptr, 0);
  });
  fi_cq_entry out;
  auto t0 = Clock::now();
  EXPECT_EQ(cq->sread(&out, 1, nullptr, 1, Deadline::after_ms(5000)), -FI_EAVAIL);
  EXPECT_LT(ms_since(t0), 2500);
  producer.join();
}

// No lost wakeup: a reader that blocks in sread between every burst of a producer on another
// thread always wakes (a lost wakeup would show as an sread that times out while entries arrive).
TEST(CqSread, NeverMissesAWakeupFromAConcurrentProducer) {
  const uint32_t kEntries = static_cast<uint32_t>(std::min<uint64_t>(50'000, events() / 16));
  auto cq = make_cq({}, SignalKind::kEventFd);
  std::thread producer([&] {
    for (uint32_t i = 0; i < kEntries; ++i) {
      while (!cq->write(ctx(i), FI_RECV)) std::this_thread::yield();
      if (i % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  uint32_t next = 0;
  int timeouts = 0;
  while (next < kEntries && timeouts == 0) {
    fi_cq_entry out[16];
    ssize_t n = cq->sread(out, 16, nullptr, 1, Deadline::after_ms(2000));
    if (n == -FI_EAGAIN) {
      ++timeouts;
      break;
    }
    ASSERT_GT(n, 0);
    for (ssize_t i = 0; i < n; ++i) ASSERT_EQ(out[i].op_context, ctx(next++));
  }
  producer.join();
  EXPECT_EQ(timeouts, 0) << "sread slept through a write after " << next << " entries";
  EXPECT_EQ(next, kEntries);
  EXPECT_GT(cq->signal()->raises(), 0u) << "the reader did sleep at least once";
}

// FI_CQ_COND_THRESHOLD: "The threshold indicates the number of entries that are to be queued
// before at the CQ before the wait is satisfied."
TEST(CqSread, ThresholdWaitsForThatManyEntries) {
  auto cq = make_cq({}, SignalKind::kEventFd);
  std::atomic<int> written{0};
  std::thread producer([&] {
    for (int i = 0; i < 4; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      cq->write(ctx(i), FI_RECV);
      written.fetch_add(1);
    }
  });
  fi_cq_entry out[8];
  ssize_t n = cq->sread(out, 8, nullptr, 3, Deadline::after_ms(5000));
  // (`written` moves after each write, so sread may legitimately see the third entry first.)
  EXPECT_GE(n, 3) << "returned before the threshold was met";
  producer.join();
  EXPECT_EQ(written.load(), 4);
  EXPECT_EQ(cq->count(), 4u - static_cast<size_t>(n));
}

TEST(CqSread, ThresholdNotMetReturnsWhatIsThereAtTheTimeout) {
  auto cq = make_cq({}, SignalKind::kEventFd);
  ASSERT_TRUE(cq->write(ctx(1), FI_RECV));
  fi_cq_entry out[8];
  auto t0 = Clock::now();
  EXPECT_EQ(cq->sread(out, 8, nullptr, 5, Deadline::after_ms(100)), 1);
  EXPECT_GE(ms_since(t0), 100);
}

TEST(CqSread, ThresholdAboveTheCapacityIsClamped) {
  CqConfig cfg;
  cfg.size = 1;
  auto cq = make_cq(cfg, SignalKind::kEventFd);
  ASSERT_TRUE(cq->write(ctx(1), FI_RECV));
  fi_cq_entry out;
  auto t0 = Clock::now();
  EXPECT_EQ(cq->sread(&out, 1, nullptr, 1000, Deadline::after_ms(3000)), 1);
  EXPECT_LT(ms_since(t0), 1000);
}

// "It is invalid for applications to call these functions if the CQ has been configured with a
// wait object of FI_WAIT_NONE or FI_WAIT_SET."
TEST(CqSread, WithoutAWaitObjectIsInvalid) {
  auto cq = make_cq();
  fi_cq_entry out;
  EXPECT_EQ(cq->sread(&out, 1, nullptr, 1, Deadline::after_ms(10)), -FI_EINVAL);
}

// Manual progress: the wait runs the progress source, which may produce the completion itself.
TEST(CqSread, RunsTheProgressSourceWhileWaiting) {
  auto cq = make_cq({}, SignalKind::kEventFd);
  struct Source : dpfab::wait::ProgressSource {
    Cq* cq;
    int calls = 0;
    size_t progress() noexcept override {
      if (++calls == 3) return cq->write(ctx(7), FI_RECV) ? 1 : 0;
      return 0;
    }
  } src;
  src.cq = cq.get();
  cq->set_progress(&src);
  fi_cq_entry out;
  std::thread poker([&] {  // wakes the sleeper so that it runs another progress step
    for (int i = 0; i < 5; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      cq->signal()->raise();
    }
  });
  EXPECT_EQ(cq->sread(&out, 1, nullptr, 1, Deadline::after_ms(5000)), 1);
  EXPECT_EQ(out.op_context, ctx(7));
  poker.join();
}

// fi_cq_signal: "will unblock any thread waiting in fi_cq_sread or fi_cq_sreadfrom."
TEST(CqSignal, UnblocksABlockedSreadWithEagain) {
  for (SignalKind k : {SignalKind::kEventFd, SignalKind::kMutexCond, SignalKind::kYield}) {
    auto cq = make_cq({}, k);
    std::thread signaller([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      cq->interrupt_sread();
    });
    fi_cq_entry out;
    auto t0 = Clock::now();
    EXPECT_EQ(cq->sread(&out, 1, nullptr, 1, Deadline::after_ms(5000)), -FI_EAGAIN);
    EXPECT_LT(ms_since(t0), 2500) << static_cast<int>(k);
    signaller.join();
  }
}

TEST(CqSignal, UnblocksEveryBlockedSread) {
  auto cq = make_cq({}, SignalKind::kEventFd);
  std::atomic<int> returned{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 3; ++i)
    readers.emplace_back([&] {
      fi_cq_entry out;
      if (cq->sread(&out, 1, nullptr, 1, Deadline::after_ms(5000)) == -FI_EAGAIN)
        returned.fetch_add(1);
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto t0 = Clock::now();
  cq->interrupt_sread();
  for (auto& t : readers) t.join();
  EXPECT_EQ(returned.load(), 3);
  EXPECT_LT(ms_since(t0), 2500);
}

// fabtests cq_signal: a signal with nobody blocked makes the next sread return at once (once).
TEST(CqSignal, SignalBeforeSreadMakesTheNextSreadReturn) {
  auto cq = make_cq({}, SignalKind::kEventFd);
  cq->interrupt_sread();
  fi_cq_entry out;
  auto t0 = Clock::now();
  EXPECT_EQ(cq->sread(&out, 1, nullptr, 1, Deadline::after_ms(2000)), -FI_EAGAIN);
  EXPECT_LT(ms_since(t0), 1000);
  t0 = Clock::now();
  EXPECT_EQ(cq->sread(&out, 1, nullptr, 1, Deadline::after_ms(100)), -FI_EAGAIN);
  EXPECT_GE(ms_since(t0), 100) << "the signal is consumed by the sread it woke";
}

TEST(CqSignal, DataReadableAtTheSignalIsReturned) {
  auto cq = make_cq({}, SignalKind::kEventFd);
  ASSERT_TRUE(cq->write(ctx(1), FI_RECV));
  cq->interrupt_sread();
  fi_cq_entry out;
  EXPECT_EQ(cq->sread(&out, 1, nullptr, 1, Deadline::after_ms(1000)), 1);
}

// ---- the wait object and the arm/trywait protocol ----------------------------------------------

// FI_WAIT_FD: the fd becomes readable when a completion arrives at a CQ whose consumer is about
// to block (armed by fi_trywait), and a busy-polled CQ costs no syscall: not readable otherwise.
TEST(CqWaitFd, FdReadableAfterAWriteToAnArmedCqAndOnlyThen) {
  auto cq = make_cq({}, SignalKind::kEventFd);
  int fd = cq->signal()->export_fd();  // what FI_GETWAIT hands out
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(fd_readable(fd));
  ASSERT_TRUE(cq->write(ctx(1), FI_SEND));
  EXPECT_FALSE(fd_readable(fd)) << "nobody armed: no signal";
  EXPECT_EQ(cq->try_arm(), -FI_EAGAIN);
  fi_cq_entry out;
  ASSERT_EQ(cq->read(&out, 1, nullptr), 1);
  ASSERT_EQ(cq->try_arm(), FI_SUCCESS);
  EXPECT_FALSE(fd_readable(fd));
  ASSERT_TRUE(cq->write(ctx(2), FI_SEND));
  EXPECT_TRUE(fd_readable(fd));
  EXPECT_FALSE(cq->armed()) << "the producer took the arm";
}

// fi_trywait: "-FI_EAGAIN ... the application should ... read the CQ"; FI_SUCCESS when blocking
// on the wait object is safe. The arm drains the signal before it checks (doc/design.md, step C1).
TEST(CqWaitFd, TryArmIsBusyWhenNotEmptyAndDrainsTheFdWhenEmpty) {
  auto cq = make_cq({}, SignalKind::kEventFd);
  int fd = cq->signal()->export_fd();  // what FI_GETWAIT hands out
  ASSERT_TRUE(cq->write(ctx(1), FI_SEND));
  EXPECT_EQ(cq->try_arm(), -FI_EAGAIN);
  EXPECT_FALSE(cq->armed());
  fi_cq_entry out;
  ASSERT_EQ(cq->read(&out, 1, nullptr), 1);
  cq->signal()->raise();  // a stale wakeup
  ASSERT_TRUE(fd_readable(fd));
  EXPECT_EQ(cq->try_arm(), FI_SUCCESS);
  EXPECT_TRUE(cq->armed());
  EXPECT_FALSE(fd_readable(fd)) << "drained before the check";
  // An error entry is something to read too.
  ASSERT_EQ(cq->write_error(error_entry(1), nullptr, 0), FI_SUCCESS);
  EXPECT_TRUE(fd_readable(fd));
  EXPECT_EQ(cq->try_arm(), -FI_EAGAIN);
}

TEST(CqBindings, AreCounted) {
  auto cq = make_cq();
  EXPECT_EQ(cq->bindings(), 0);
  cq->add_binding();
  cq->add_binding();
  cq->remove_binding();
  EXPECT_EQ(cq->bindings(), 1);
}

}  // namespace
