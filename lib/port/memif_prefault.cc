// SPDX-License-Identifier: BSD-3-Clause
#include "memif_prefault.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace dpfab::port {

size_t prefault_memif_regions(bool backward) noexcept {
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;  // Linux 5.14
#endif
  // The memif PMD maps its regions from memfds it names "memif_region_<n>" (the client creates
  // them, the server maps the client's fds): both show as "/memfd:memif_region_<n> (deleted)".
  // Every memif port of the process is covered; pages already present cost next to nothing.
  FILE* maps = std::fopen("/proc/self/maps", "re");
  if (!maps) return 0;
  const size_t page = sysconf(_SC_PAGESIZE) > 0 ? static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 4096;
  struct Range {
    char* base;
    size_t len;
  };
  constexpr size_t kMaxRanges = 64;
  Range ranges[kMaxRanges];
  size_t nranges = 0;
  char line[512];
  bool partial = false;  // in the middle of a line longer than the buffer
  while (std::fgets(line, sizeof(line), maps) && nranges < kMaxRanges) {
    const bool whole = std::strchr(line, '\n') != nullptr;
    const bool continuation = partial;
    partial = !whole;
    if (continuation || !std::strstr(line, "/memfd:memif_region_")) continue;
    unsigned long start = 0, end = 0;
    char perms[5] = {};
    if (std::sscanf(line, "%lx-%lx %4s", &start, &end, perms) != 3) continue;
    if (perms[1] != 'w' || perms[3] != 's' || end <= start) continue;  // shared and writable only
    ranges[nranges++] = {reinterpret_cast<char*>(start), end - start};
  }
  std::fclose(maps);
  // Both ends of the link do this at link-up, often at the same moment (the first message wakes
  // the server while the client is still populating), and the first toucher of a shmem page
  // holds its lock while the page is allocated and zeroed. Walking the same pages in the same
  // order, the two processes took turns waiting on those locks: each wait a sleep, measured up
  // to 26 per link-up here (and more on an idle machine), each one an OS wakeup counted against
  // the first messages. So the client walks forward and the server backward, a few pages per
  // call: they meet once, in one small chunk, and then walk through pages the other has made.
  constexpr size_t kChunkPages = 8;
  auto populate = [&](char* base, size_t len) {
    if (madvise(base, len, MADV_POPULATE_WRITE) == 0) return;
    // An older kernel: write every page without changing it (an atomic add of 0 cannot lose a
    // concurrent store of the peer's).
    for (size_t off = 0; off < len; off += page)
      __atomic_fetch_add(reinterpret_cast<uint64_t*>(base + off), 0, __ATOMIC_RELAXED);
  };
  size_t pages = 0;
  for (size_t i = 0; i < nranges; ++i) {
    const Range& r = ranges[backward ? nranges - 1 - i : i];
    if (!backward) {
      populate(r.base, r.len);
    } else {
      const size_t chunk = kChunkPages * page;
      for (size_t end = r.len; end > 0;) {
        const size_t start = end > chunk ? end - chunk : 0;
        populate(r.base + start, end - start);
        end = start;
      }
    }
    pages += r.len / page;
  }
  return pages;
}

}  // namespace dpfab::port
