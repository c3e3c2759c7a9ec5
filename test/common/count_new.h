// SPDX-License-Identifier: BSD-3-Clause
//
// A counting operator new/delete for tests that measure what code allocates (and frees) on the
// heap, exactly: every block new hands out is counted with its usable size until it is deleted.
// Unlike heap_bytes() (test_util.h: malloc's statistics) it is blind to malloc's own caches (a
// small block freed into glibc's tcache still counts as in use there) and to allocations that do
// not go through operator new. Link count_new.cc into the test binary (it replaces the global
// operator new and delete of the whole program, all threads; aligned forms are left alone).
#pragma once

#include <cstddef>

namespace dpfab::test {

/// Bytes of the blocks operator new handed out and delete has not taken back yet.
size_t new_bytes() noexcept;
/// The number of those blocks.
size_t new_blocks() noexcept;

}  // namespace dpfab::test
