// SPDX-License-Identifier: BSD-3-Clause
//
// The atomic operations of fi_atomic(3), executed at the target: every fi_op on every fi_datatype
// the operation defines, with the combinations libfabric's own software atomics offer
// (prov/util's tables): MIN, MAX and CSWAP_LE/LT/GE/GT on the real types (integers, float, double,
// long double, 128-bit integers); SUM, PROD, LOR, LAND, LXOR, ATOMIC_READ, ATOMIC_WRITE, CSWAP and
// CSWAP_NE on every type, complex ones included; BOR, BAND, BXOR and MSWAP on integers.
//
// Atomicity. Each element is updated atomically with respect to every other atomic this process
// executes on it, from any peer and through any endpoint or domain, whatever thread runs the poll
// step: elements of 1, 2, 4 or 8 bytes at an address aligned to their size with the CPU's
// compare-and-swap (so also with respect to the target application's own CPU atomics of the same
// width), others (long double, the complex types of 16 and 32 bytes, 128-bit integers, misaligned
// elements) under one of a set of process-wide spin locks chosen by the element's address.
// Atomics are not atomic with respect to plain stores of the target CPU, nor with RMA writes, nor
// between operations that view the same bytes as elements of different sizes.
//
// Threads: any; no allocation, no syscall.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dpfab::proto::atomic {

/// Which call an atomic came from: fi_atomic (no result), fi_fetch_atomic, fi_compare_atomic.
enum class Kind : uint8_t { kWrite, kFetch, kCompare };

/// Bytes of one element of fi_datatype `dt`; 0 when dpfab has no such datatype.
size_t datatype_size(int dt) noexcept;
/// Whether fi_op `op` on fi_datatype `dt` is offered for `kind` (the table above).
bool valid(int op, int dt, Kind kind) noexcept;
/// The rights the target region must grant: FI_REMOTE_READ for ATOMIC_READ, FI_REMOTE_WRITE for
/// fi_atomic, both for the other fetching and compare atomics.
uint64_t rights(int op, Kind kind) noexcept;
/// Executes `op` on `count` elements at `dst`: `operand` holds `count` operands (unused by
/// ATOMIC_READ), `compare` as many compare values (kCompare), and `result` (kFetch, kCompare;
/// may be null otherwise) receives the values the elements had. `valid(op, dt, kind)` must hold.
/// Buffers other than `dst` need no alignment.
void execute(int op, int dt, Kind kind, uint8_t* dst, const uint8_t* operand,
             const uint8_t* compare, uint8_t* result, size_t count) noexcept;

}  // namespace dpfab::proto::atomic
