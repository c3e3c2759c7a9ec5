// SPDX-License-Identifier: BSD-3-Clause
//
// The counting operator new/delete of count_new.h: malloc and free underneath (so sanitizers see
// every block as before), live bytes and blocks counted with relaxed atomics (a total read after
// the measured code, no ordering between threads needed beyond that of the code itself).
#include "count_new.h"

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

namespace {

std::atomic<size_t> g_bytes{0};
std::atomic<size_t> g_blocks{0};

void* counted_alloc(size_t n) noexcept {
  void* p = std::malloc(n ? n : 1);
  if (p) {
    g_bytes.fetch_add(malloc_usable_size(p), std::memory_order_relaxed);
    g_blocks.fetch_add(1, std::memory_order_relaxed);
  }
  return p;
}

void counted_free(void* p) noexcept {
  if (!p) return;
  g_bytes.fetch_sub(malloc_usable_size(p), std::memory_order_relaxed);
  g_blocks.fetch_sub(1, std::memory_order_relaxed);
  std::free(p);
}

}  // namespace

namespace dpfab::test {
size_t new_bytes() noexcept { return g_bytes.load(std::memory_order_relaxed); }
size_t new_blocks() noexcept { return g_blocks.load(std::memory_order_relaxed); }
}  // namespace dpfab::test

void* operator new(size_t n) {
  if (void* p = counted_alloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) {
  if (void* p = counted_alloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new(size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, size_t) noexcept { counted_free(p); }
void operator delete[](void* p, size_t) noexcept { counted_free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { counted_free(p); }
