// SPDX-License-Identifier: BSD-3-Clause
#include "proto/atomic.h"

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>

#include <array>
#include <complex>
#include <cstring>
#include <mutex>

#include "common/spinlock.h"

namespace dpfab::proto::atomic {
namespace {

__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;
// Views of an element for the CPU's atomics; may_alias: the bytes hold the application's type.
typedef uint8_t __attribute__((may_alias)) a8;
typedef uint16_t __attribute__((may_alias)) a16;
typedef uint32_t __attribute__((may_alias)) a32;
typedef uint64_t __attribute__((may_alias)) a64;

enum class Fam { kInt, kReal, kComplex };

bool is_int(int dt) noexcept {
  return (dt >= FI_INT8 && dt <= FI_UINT64) || dt == FI_INT128 || dt == FI_UINT128;
}
bool is_complex(int dt) noexcept {
  return dt == FI_FLOAT_COMPLEX || dt == FI_DOUBLE_COMPLEX || dt == FI_LONG_DOUBLE_COMPLEX;
}

// Process-wide locks for the elements the CPU cannot update with one compare-and-swap. An
// element's address picks its lock, so every atomic on that element takes the same one.
std::array<SpinLock, 64> g_stripes;
SpinLock& stripe_of(const void* p) noexcept {
  auto a = reinterpret_cast<uintptr_t>(p) >> 4;
  a ^= a >> 7;
  return g_stripes[a % g_stripes.size()];
}

// An unsigned type wide enough that products of two operands do not overflow a signed int
// (integer promotion) before they are truncated back.
template <class T>
using Wide = std::conditional_t<(sizeof(T) <= 4), uint64_t, u128>;

template <class T>
bool truth(const T& v) noexcept {
  return v != T(0);
}

// The new value of an element that holds `old`, for operand `x` and compare value `c`. Returns
// whether the element is written (a failed compare, ATOMIC_READ or a MIN that changes nothing
// writes nothing).
template <class T, Fam F>
bool compute(int op, const T& old, const T& x, const T& c, T* nv) noexcept {
  switch (op) {
    case FI_MIN:
      if constexpr (F != Fam::kComplex) {
        if (x < old) return *nv = x, true;
      }
      return false;
    case FI_MAX:
      if constexpr (F != Fam::kComplex) {
        if (x > old) return *nv = x, true;
      }
      return false;
    case FI_SUM:
      if constexpr (F == Fam::kInt)
        *nv = static_cast<T>(static_cast<Wide<T>>(old) + static_cast<Wide<T>>(x));
      else
        *nv = old + x;
      return true;
    case FI_PROD:
      if constexpr (F == Fam::kInt)
        *nv = static_cast<T>(static_cast<Wide<T>>(old) * static_cast<Wide<T>>(x));
      else
        *nv = old * x;
      return true;
    case FI_LOR:
      *nv = T(truth(old) || truth(x) ? 1 : 0);
      return true;
    case FI_LAND:
      *nv = T(truth(old) && truth(x) ? 1 : 0);
      return true;
    case FI_LXOR:
      *nv = T(truth(old) != truth(x) ? 1 : 0);
      return true;
    case FI_BOR:
      if constexpr (F == Fam::kInt) *nv = old | x;
      return F == Fam::kInt;
    case FI_BAND:
      if constexpr (F == Fam::kInt) *nv = old & x;
      return F == Fam::kInt;
    case FI_BXOR:
      if constexpr (F == Fam::kInt) *nv = old ^ x;
      return F == Fam::kInt;
    case FI_ATOMIC_READ:
      return false;
    case FI_ATOMIC_WRITE:
      *nv = x;
      return true;
    case FI_CSWAP:
      if (c == old) return *nv = x, true;
      return false;
    case FI_CSWAP_NE:
      if (c != old) return *nv = x, true;
      return false;
    case FI_CSWAP_LE:
      if constexpr (F != Fam::kComplex) {
        if (c <= old) return *nv = x, true;
      }
      return false;
    case FI_CSWAP_LT:
      if constexpr (F != Fam::kComplex) {
        if (c < old) return *nv = x, true;
      }
      return false;
    case FI_CSWAP_GE:
      if constexpr (F != Fam::kComplex) {
        if (c >= old) return *nv = x, true;
      }
      return false;
    case FI_CSWAP_GT:
      if constexpr (F != Fam::kComplex) {
        if (c > old) return *nv = x, true;
      }
      return false;
    case FI_MSWAP:
      if constexpr (F == Fam::kInt) *nv = (x & c) | (old & ~c);
      return F == Fam::kInt;
    default:
      return false;
  }
}

// One element with the CPU's compare-and-swap on its bits (U: the unsigned type of its size).
template <class T, Fam F, class U>
T apply_cas(int op, uint8_t* e, const T& x, const T& c) noexcept {
  U* p = reinterpret_cast<U*>(e);
  // seq_cst: atomics on one element from several threads form one order; the old value returned
  // is the one this operation replaced (or read).
  U cur = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  for (;;) {
    T old;
    std::memcpy(static_cast<void*>(&old), &cur, sizeof(T));
    T nv;
    if (!compute<T, F>(op, old, x, c, &nv)) return old;
    U want;
    std::memcpy(&want, static_cast<const void*>(&nv), sizeof(U));
    if (__atomic_compare_exchange_n(p, &cur, want, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
      return old;
  }
}

// `raw` (or null) gets the element's bytes as they were, copied as bytes: a long double returned by
// value goes through the x87 stack, which carries 10 of its 16 bytes and leaves the rest of the
// copy to whatever the stack held (fetched values came back with garbage padding).
template <class T, Fam F>
T apply(int op, uint8_t* e, const T& x, const T& c, uint8_t* raw) noexcept {
  const bool aligned = (reinterpret_cast<uintptr_t>(e) & (sizeof(T) - 1)) == 0;
  if constexpr (sizeof(T) == 1) return apply_cas<T, F, a8>(op, e, x, c);
  if constexpr (sizeof(T) == 2) {
    if (aligned) return apply_cas<T, F, a16>(op, e, x, c);
  }
  if constexpr (sizeof(T) == 4) {
    if (aligned) return apply_cas<T, F, a32>(op, e, x, c);
  }
  if constexpr (sizeof(T) == 8) {
    if (aligned) return apply_cas<T, F, a64>(op, e, x, c);
  }
  std::lock_guard lock(stripe_of(e));
  if (raw) std::memcpy(raw, e, sizeof(T));
  T old;
  std::memcpy(static_cast<void*>(&old), e, sizeof(T));
  T nv;
  std::memcpy(static_cast<void*>(&nv), e, sizeof(T));  // padding bytes stay as they were
  if (compute<T, F>(op, old, x, c, &nv)) std::memcpy(e, static_cast<const void*>(&nv), sizeof(T));
  return old;
}

template <class T, Fam F>
void run(int op, Kind kind, uint8_t* dst, const uint8_t* operand, const uint8_t* compare,
         uint8_t* result, size_t count) noexcept {
  for (size_t i = 0; i < count; ++i) {
    T x{}, c{};
    if (operand && op != FI_ATOMIC_READ)
      std::memcpy(static_cast<void*>(&x), operand + i * sizeof(T), sizeof(T));
    if (kind == Kind::kCompare && compare)
      std::memcpy(static_cast<void*>(&c), compare + i * sizeof(T), sizeof(T));
    uint8_t* raw = result ? result + i * sizeof(T) : nullptr;
    if constexpr (sizeof(T) <= 8) {  // no padding: the compare-and-swap paths' value is the bytes
      const T old = apply<T, F>(op, dst + i * sizeof(T), x, c, nullptr);
      if (raw) std::memcpy(raw, static_cast<const void*>(&old), sizeof(T));
    } else {
      (void)apply<T, F>(op, dst + i * sizeof(T), x, c, raw);
    }
  }
}

}  // namespace

size_t datatype_size(int dt) noexcept {
  switch (dt) {
    case FI_INT8:
    case FI_UINT8:
      return 1;
    case FI_INT16:
    case FI_UINT16:
      return 2;
    case FI_INT32:
    case FI_UINT32:
    case FI_FLOAT:
      return 4;
    case FI_INT64:
    case FI_UINT64:
    case FI_DOUBLE:
    case FI_FLOAT_COMPLEX:
      return 8;
    case FI_DOUBLE_COMPLEX:
    case FI_INT128:
    case FI_UINT128:
      return 16;
    case FI_LONG_DOUBLE:
      return sizeof(long double);
    case FI_LONG_DOUBLE_COMPLEX:
      return sizeof(std::complex<long double>);
    default:
      return 0;
  }
}

bool valid(int op, int dt, Kind kind) noexcept {
  if (datatype_size(dt) == 0) return false;
  switch (kind) {
    case Kind::kWrite:
      if (op < FI_MIN || op > FI_ATOMIC_WRITE || op == FI_ATOMIC_READ) return false;
      break;
    case Kind::kFetch:
      if (op < FI_MIN || op > FI_ATOMIC_WRITE) return false;
      break;
    case Kind::kCompare:
      if (op < FI_CSWAP || op > FI_MSWAP) return false;
      break;
  }
  switch (op) {
    case FI_MIN:
    case FI_MAX:
    case FI_CSWAP_LE:
    case FI_CSWAP_LT:
    case FI_CSWAP_GE:
    case FI_CSWAP_GT:
      return !is_complex(dt);
    case FI_BOR:
    case FI_BAND:
    case FI_BXOR:
    case FI_MSWAP:
      return is_int(dt);
    default:
      return true;
  }
}

uint64_t rights(int op, Kind kind) noexcept {
  if (kind == Kind::kWrite) return FI_REMOTE_WRITE;
  if (op == FI_ATOMIC_READ) return FI_REMOTE_READ;
  return FI_REMOTE_READ | FI_REMOTE_WRITE;
}

void execute(int op, int dt, Kind kind, uint8_t* dst, const uint8_t* operand,
             const uint8_t* compare, uint8_t* result, size_t count) noexcept {
  switch (dt) {
    case FI_INT8:
      return run<int8_t, Fam::kInt>(op, kind, dst, operand, compare, result, count);
    case FI_UINT8:
      return run<uint8_t, Fam::kInt>(op, kind, dst, operand, compare, result, count);
    case FI_INT16:
      return run<int16_t, Fam::kInt>(op, kind, dst, operand, compare, result, count);
    case FI_UINT16:
      return run<uint16_t, Fam::kInt>(op, kind, dst, operand, compare, result, count);
    case FI_INT32:
      return run<int32_t, Fam::kInt>(op, kind, dst, operand, compare, result, count);
    case FI_UINT32:
      return run<uint32_t, Fam::kInt>(op, kind, dst, operand, compare, result, count);
    case FI_INT64:
      return run<int64_t, Fam::kInt>(op, kind, dst, operand, compare, result, count);
    case FI_UINT64:
      return run<uint64_t, Fam::kInt>(op, kind, dst, operand, compare, result, count);
    case FI_INT128:
      return run<i128, Fam::kInt>(op, kind, dst, operand, compare, result, count);
    case FI_UINT128:
      return run<u128, Fam::kInt>(op, kind, dst, operand, compare, result, count);
    case FI_FLOAT:
      return run<float, Fam::kReal>(op, kind, dst, operand, compare, result, count);
    case FI_DOUBLE:
      return run<double, Fam::kReal>(op, kind, dst, operand, compare, result, count);
    case FI_LONG_DOUBLE:
      return run<long double, Fam::kReal>(op, kind, dst, operand, compare, result, count);
    case FI_FLOAT_COMPLEX:
      return run<std::complex<float>, Fam::kComplex>(op, kind, dst, operand, compare, result,
                                                     count);
    case FI_DOUBLE_COMPLEX:
      return run<std::complex<double>, Fam::kComplex>(op, kind, dst, operand, compare, result,
                                                      count);
    case FI_LONG_DOUBLE_COMPLEX:
      return run<std::complex<long double>, Fam::kComplex>(op, kind, dst, operand, compare, result,
                                                           count);
    default:
      return;
  }
}

}  // namespace dpfab::proto::atomic
