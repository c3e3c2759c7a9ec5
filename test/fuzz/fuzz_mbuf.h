// SPDX-License-Identifier: BSD-3-Clause
//
// rte_mbuf chains for the fuzz targets, built by hand (no EAL, no mempool). Each segment's buffer
// is a heap block of exactly the segment's size, so AddressSanitizer catches any read past it.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace fuzz {

class Chain {
 public:
  /// `bytes` split into segments at `cuts` (ascending offsets within [0, size]).
  Chain(const uint8_t* bytes, size_t size, const std::vector<size_t>& cuts) {
    std::vector<size_t> ends;
    for (size_t c : cuts)
      if (c <= size && (ends.empty() || c >= ends.back())) ends.push_back(c);
    ends.push_back(size);
    segs_.reserve(ends.size());
    size_t from = 0;
    for (size_t end : ends) {
      Seg& s = segs_.emplace_back();
      const size_t n = end - from;
      s.buf = std::make_unique<uint8_t[]>(n == 0 ? 1 : n);
      if (n != 0) std::memcpy(s.buf.get(), bytes + from, n);
      std::memset(&s.m, 0, sizeof(s.m));
      s.m.buf_addr = s.buf.get();
      s.m.buf_len = static_cast<uint16_t>(n);
      s.m.data_off = 0;
      s.m.data_len = static_cast<uint16_t>(n);
      s.m.pkt_len = static_cast<uint32_t>(n);
      s.m.refcnt = 1;
      s.m.nb_segs = 1;
      from = end;
    }
    for (size_t i = 0; i + 1 < segs_.size(); ++i) segs_[i].m.next = &segs_[i + 1].m;
    segs_[0].m.pkt_len = static_cast<uint32_t>(size);
    segs_[0].m.nb_segs = static_cast<uint16_t>(segs_.size());
  }
  rte_mbuf* head() { return &segs_[0].m; }

 private:
  struct Seg {
    rte_mbuf m;
    std::unique_ptr<uint8_t[]> buf;
  };
  std::vector<Seg> segs_;
};

}  // namespace fuzz
