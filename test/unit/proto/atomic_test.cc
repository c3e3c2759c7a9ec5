// SPDX-License-Identifier: BSD-3-Clause
//
// The atomic operations of fi_atomic(3) (lib/proto/atomic.h): the table of what is offered (as
// libfabric's util layer defines it), every offered op on every datatype against a reference
// computed here, the old values returned, misaligned elements, and atomicity between threads
// (CPU compare-and-swap for small elements, the lock stripes for 16- and 32-byte ones).
#include "proto/atomic.h"

#include <gtest/gtest.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>

#include <complex>
#include <cstring>
#include <thread>
#include <vector>

namespace {

namespace at = dpfab::proto::atomic;
using at::Kind;

__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

bool is_int(int dt) { return dt <= FI_UINT64 || dt == FI_INT128 || dt == FI_UINT128; }
bool is_complex(int dt) {
  return dt == FI_FLOAT_COMPLEX || dt == FI_DOUBLE_COMPLEX || dt == FI_LONG_DOUBLE_COMPLEX;
}

TEST(Atomic, DatatypeSizes) {
  EXPECT_EQ(at::datatype_size(FI_INT8), 1u);
  EXPECT_EQ(at::datatype_size(FI_UINT16), 2u);
  EXPECT_EQ(at::datatype_size(FI_FLOAT), 4u);
  EXPECT_EQ(at::datatype_size(FI_UINT64), 8u);
  EXPECT_EQ(at::datatype_size(FI_FLOAT_COMPLEX), 8u);
  EXPECT_EQ(at::datatype_size(FI_DOUBLE_COMPLEX), 16u);
  EXPECT_EQ(at::datatype_size(FI_LONG_DOUBLE), sizeof(long double));
  EXPECT_EQ(at::datatype_size(FI_LONG_DOUBLE_COMPLEX), 2 * sizeof(long double));
  EXPECT_EQ(at::datatype_size(FI_INT128), 16u);
  EXPECT_EQ(at::datatype_size(FI_UINT128 + 1), 0u);
  EXPECT_EQ(at::datatype_size(-1), 0u);
}

// The table of fi_atomic(3) as prov/util defines it, and the counts it implies.
TEST(Atomic, WhatIsOffered) {
  int write = 0, fetch = 0, compare = 0;
  for (int dt = 0; dt <= FI_UINT128; ++dt) {
    for (int op = 0; op < FI_ATOMIC_OP_LAST; ++op) {
      const bool real = !is_complex(dt), integer = is_int(dt);
      bool w = false, f = false, c = false;
      switch (op) {
        case FI_MIN:
        case FI_MAX:
          w = f = real;
          break;
        case FI_SUM:
        case FI_PROD:
        case FI_LOR:
        case FI_LAND:
        case FI_LXOR:
        case FI_ATOMIC_WRITE:
          w = f = true;
          break;
        case FI_BOR:
        case FI_BAND:
        case FI_BXOR:
          w = f = integer;
          break;
        case FI_ATOMIC_READ:
          f = true;
          break;
        case FI_CSWAP:
        case FI_CSWAP_NE:
          c = true;
          break;
        case FI_CSWAP_LE:
        case FI_CSWAP_LT:
        case FI_CSWAP_GE:
        case FI_CSWAP_GT:
          c = real;
          break;
        case FI_MSWAP:
          c = integer;
          break;
      }
      EXPECT_EQ(at::valid(op, dt, Kind::kWrite), w) << op << " " << dt;
      EXPECT_EQ(at::valid(op, dt, Kind::kFetch), f) << op << " " << dt;
      EXPECT_EQ(at::valid(op, dt, Kind::kCompare), c) << op << " " << dt;
      write += w;
      fetch += f;
      compare += c;
    }
  }
  // 16 datatypes: 6 ops on all, 2 on the 13 real ones, 3 on the 10 integers.
  EXPECT_EQ(write, 6 * 16 + 2 * 13 + 3 * 10);
  EXPECT_EQ(fetch, write + 16);
  EXPECT_EQ(compare, 2 * 16 + 4 * 13 + 10);
  EXPECT_FALSE(at::valid(FI_ATOMIC_OP_LAST, FI_UINT64, Kind::kFetch));
  EXPECT_FALSE(at::valid(FI_SUM, FI_UINT128 + 1, Kind::kWrite));
  EXPECT_EQ(at::rights(FI_SUM, Kind::kWrite), FI_REMOTE_WRITE);
  EXPECT_EQ(at::rights(FI_ATOMIC_READ, Kind::kFetch), FI_REMOTE_READ);
  EXPECT_EQ(at::rights(FI_CSWAP, Kind::kCompare), FI_REMOTE_READ | FI_REMOTE_WRITE);
}

template <class T>
bool truth(const T& v) {
  return v != T(0);
}

template <class T>
constexpr bool kInt = std::is_integral_v<T> || std::is_same_v<T, i128> || std::is_same_v<T, u128>;

// Reference semantics of fi_atomic(3) for one element: returns the new value.
template <class T>
T reference(int op, T old, T x, T c, bool integer, bool complex) {
  (void)integer;
  switch (op) {
    case FI_MIN:
      if constexpr (!std::is_same_v<T, std::complex<float>> &&
                    !std::is_same_v<T, std::complex<double>> &&
                    !std::is_same_v<T, std::complex<long double>>)
        return x < old ? x : old;
      return old;
    case FI_MAX:
      if constexpr (!std::is_same_v<T, std::complex<float>> &&
                    !std::is_same_v<T, std::complex<double>> &&
                    !std::is_same_v<T, std::complex<long double>>)
        return x > old ? x : old;
      return old;
    case FI_SUM:  // integers wrap (computed unsigned: no signed overflow)
      if constexpr (kInt<T>)
        return static_cast<T>(static_cast<u128>(old) + static_cast<u128>(x));
      else
        return static_cast<T>(old + x);
    case FI_PROD:
      if constexpr (kInt<T>)
        return static_cast<T>(static_cast<u128>(old) * static_cast<u128>(x));
      else
        return static_cast<T>(old * x);
    case FI_LOR:
      return T(truth(old) || truth(x) ? 1 : 0);
    case FI_LAND:
      return T(truth(old) && truth(x) ? 1 : 0);
    case FI_LXOR:
      return T(truth(old) != truth(x) ? 1 : 0);
    case FI_ATOMIC_READ:
      return old;
    case FI_ATOMIC_WRITE:
      return x;
    case FI_CSWAP:
      return c == old ? x : old;
    case FI_CSWAP_NE:
      return c != old ? x : old;
    default:
      break;
  }
  if constexpr (kInt<T>) {
    switch (op) {
      case FI_BOR:
        return static_cast<T>(old | x);
      case FI_BAND:
        return static_cast<T>(old & x);
      case FI_BXOR:
        return static_cast<T>(old ^ x);
      case FI_MSWAP:
        return static_cast<T>((x & c) | (old & ~c));
    }
  }
  if constexpr (!std::is_same_v<T, std::complex<float>> &&
                !std::is_same_v<T, std::complex<double>> &&
                !std::is_same_v<T, std::complex<long double>>) {
    switch (op) {
      case FI_CSWAP_LE:
        return c <= old ? x : old;
      case FI_CSWAP_LT:
        return c < old ? x : old;
      case FI_CSWAP_GE:
        return c >= old ? x : old;
      case FI_CSWAP_GT:
        return c > old ? x : old;
    }
  }
  (void)complex;
  return old;
}

// Runs every offered op of `kind` on 3 elements of T (values chosen so that compares go both
// ways) and checks the new values and the old ones returned.
template <class T>
void check_type(int dt, const T (&olds)[3], const T (&xs)[3], const T (&cs)[3]) {
  for (Kind kind : {Kind::kWrite, Kind::kFetch, Kind::kCompare}) {
    for (int op = 0; op < FI_ATOMIC_OP_LAST; ++op) {
      if (!at::valid(op, dt, kind)) continue;
      // Storage with room for the alignment at/ off by one (misaligned elements too).
      for (size_t shift : {size_t{0}, size_t{1}}) {
        std::vector<uint8_t> mem(3 * sizeof(T) + 16 + shift);
        uint8_t* dst = mem.data() + 16 - (reinterpret_cast<uintptr_t>(mem.data()) % 16) + shift;
        std::memcpy(dst, olds, sizeof(olds));
        T result[3];
        std::memset(static_cast<void*>(result), 0xa5, sizeof(result));
        at::execute(op, dt, kind, dst, reinterpret_cast<const uint8_t*>(xs),
                    kind == Kind::kCompare ? reinterpret_cast<const uint8_t*>(cs) : nullptr,
                    kind == Kind::kWrite ? nullptr : reinterpret_cast<uint8_t*>(result), 3);
        for (int i = 0; i < 3; ++i) {
          T now;
          std::memcpy(&now, dst + i * sizeof(T), sizeof(T));
          const T want = reference<T>(op, olds[i], xs[i], cs[i], is_int(dt), is_complex(dt));
          EXPECT_TRUE(now == want) << "op " << op << " dt " << dt << " kind "
                                   << static_cast<int>(kind) << " element " << i;
          if (kind != Kind::kWrite) {
            EXPECT_TRUE(result[i] == olds[i]) << "old value, op " << op << " dt " << dt;
          }
        }
      }
    }
  }
}

TEST(Atomic, EveryOfferedOpOnEveryDatatype) {
  check_type<int8_t>(FI_INT8, {-5, 7, 0}, {3, -7, 9}, {-5, 8, 0});
  check_type<uint8_t>(FI_UINT8, {250, 7, 0}, {10, 7, 9}, {250, 6, 1});
  check_type<int16_t>(FI_INT16, {-500, 700, 0}, {300, -700, 9}, {-500, 800, 0});
  check_type<uint16_t>(FI_UINT16, {65000, 7, 0}, {1000, 7, 9}, {65000, 6, 1});
  check_type<int32_t>(FI_INT32, {-5, 70000, 0}, {3, -7, 9}, {-5, 80000, 0});
  check_type<uint32_t>(FI_UINT32, {0xffffffffu, 7, 0}, {2, 7, 9}, {0xffffffffu, 6, 1});
  check_type<int64_t>(FI_INT64, {-5, 7, 0}, {3, INT64_MAX, 9}, {-5, 8, 0});
  check_type<uint64_t>(FI_UINT64, {~0ull, 7, 0}, {2, 7, 9}, {~0ull, 6, 1});
  check_type<float>(FI_FLOAT, {1.5f, -2.0f, 0.0f}, {2.25f, -2.0f, 3.0f}, {1.5f, -1.0f, 0.0f});
  check_type<double>(FI_DOUBLE, {1.5, -2.0, 0.0}, {2.25, -2.0, 3.0}, {1.5, -1.0, 0.0});
  check_type<long double>(FI_LONG_DOUBLE, {1.5L, -2.0L, 0.0L}, {2.25L, -2.0L, 3.0L},
                          {1.5L, -1.0L, 0.0L});
  using cf = std::complex<float>;
  check_type<cf>(FI_FLOAT_COMPLEX, {cf(1, 2), cf(0, 0), cf(-1, 0)}, {cf(3, -1), cf(0, 1), cf(2, 2)},
                 {cf(1, 2), cf(1, 0), cf(-1, 0)});
  using cd = std::complex<double>;
  check_type<cd>(FI_DOUBLE_COMPLEX, {cd(1, 2), cd(0, 0), cd(-1, 0)},
                 {cd(3, -1), cd(0, 1), cd(2, 2)}, {cd(1, 2), cd(1, 0), cd(-1, 0)});
  using cl = std::complex<long double>;
  check_type<cl>(FI_LONG_DOUBLE_COMPLEX, {cl(1, 2), cl(0, 0), cl(-1, 0)},
                 {cl(3, -1), cl(0, 1), cl(2, 2)}, {cl(1, 2), cl(1, 0), cl(-1, 0)});
  check_type<i128>(FI_INT128, {-(i128{1} << 100), 7, 0}, {3, -7, 9}, {-(i128{1} << 100), 8, 0});
  check_type<u128>(FI_UINT128, {~u128{0}, 7, 0}, {2, 7, 9}, {~u128{0}, 6, 1});
}

// Threads adding to the same elements: nothing lost (CAS for 8 bytes, misaligned 8 bytes and
// 16-byte integers under the stripes).
TEST(Atomic, ConcurrentAddsAreAtomic) {
  alignas(16) uint8_t mem[64] = {};
  constexpr int kThreads = 4, kAdds = 20000;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&] {
      const uint64_t one = 1;
      const u128 one128 = 1;
      const long double half = 0.5L;
      for (int i = 0; i < kAdds; ++i) {
        at::execute(FI_SUM, FI_UINT64, Kind::kWrite, mem, reinterpret_cast<const uint8_t*>(&one),
                    nullptr, nullptr, 1);
        at::execute(FI_SUM, FI_UINT64, Kind::kWrite, mem + 9,
                    reinterpret_cast<const uint8_t*>(&one), nullptr, nullptr, 1);
        at::execute(FI_SUM, FI_UINT128, Kind::kWrite, mem + 32,
                    reinterpret_cast<const uint8_t*>(&one128), nullptr, nullptr, 1);
        at::execute(FI_SUM, FI_LONG_DOUBLE, Kind::kWrite, mem + 48,
                    reinterpret_cast<const uint8_t*>(&half), nullptr, nullptr, 1);
      }
    });
  for (auto& t : ts) t.join();
  uint64_t a, b;
  u128 c;
  long double d;
  std::memcpy(&a, mem, 8);
  std::memcpy(&b, mem + 9, 8);
  std::memcpy(&c, mem + 32, 16);
  std::memcpy(&d, mem + 48, sizeof(d));
  EXPECT_EQ(a, uint64_t{kThreads} * kAdds);
  EXPECT_EQ(b, uint64_t{kThreads} * kAdds);
  EXPECT_TRUE(c == u128{kThreads} * kAdds);
  EXPECT_EQ(d, 0.5L * kThreads * kAdds);
}

}  // namespace
