// SPDX-License-Identifier: BSD-3-Clause
//
// Fuzz target: the frame decoder (lib/wire/decoder.h). The input is one received frame, Ethernet
// header first. Besides "no crash, no sanitizer report", it checks properties:
//   - every decode is counted exactly once, under its verdict;
//   - a kData frame's payload lies inside the input and agrees with the header; a kOldVersion
//     frame (wire version 1) holds that version's whole header;
//   - re-encoding what was decoded gives a frame that decodes to the same fields and payload;
//   - NIC-verified checksums only ever accept more, NIC-rejected ones never deliver data;
//   - the mbuf front-end agrees with the flat one, in one segment and split into a chain, except
//     that a chain may report kSegmentedHeader when the cut falls inside the headers.
// A violated property aborts (__builtin_trap), which libFuzzer reports as a crash.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "fuzz_mbuf.h"
#include "wire/arp.h"
#include "wire/decoder.h"
#include "wire/encoder.h"

using namespace dpfab::wire;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

bool same_mac(const rte_ether_addr& a, const rte_ether_addr& b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

void check_reencode(const Frame& f) {
  std::vector<uint8_t> g(kOverhead + f.payload_len);
  std::memcpy(g.data() + kPayloadOffset, f.payload, f.payload_len);
  Route r;
  r.src_mac = f.src_mac;
  r.dst_mac = f.dst_mac;
  r.src_ip_be = f.src_ip_be;
  r.dst_ip_be = f.dst_ip_be;
  r.src_port_be = f.src_port_be;
  r.dst_port_be = f.dst_port_be;
  check(encode_frame(g, r, f.header, f.ip_id) == 0);
  DecodeStats stats;
  Frame h;
  check(decode_frame(g, &h, stats) == Verdict::kData);
  check(h.header == f.header && h.ip_id == f.ip_id && h.src_ip_be == f.src_ip_be &&
        h.dst_ip_be == f.dst_ip_be && h.src_port_be == f.src_port_be &&
        h.dst_port_be == f.dst_port_be && same_mac(h.src_mac, f.src_mac) &&
        same_mac(h.dst_mac, f.dst_mac) && h.payload_len == f.payload_len &&
        h.payload_offset == kPayloadOffset);
  check(std::memcmp(h.payload, f.payload, f.payload_len) == 0);
}

// The mbuf front-end on `data` cut into segments at `cuts`.
void check_mbuf(const uint8_t* data, size_t size, const std::vector<size_t>& cuts, Verdict flat,
                const Frame& ff, uint64_t ol_flags) {
  fuzz::Chain c(data, size, cuts);
  c.head()->ol_flags = ol_flags;
  DecodeStats stats;
  Frame f;
  const Verdict v = decode_mbuf(c.head(), &f, stats);
  check(stats.get(v) == 1);
  const size_t first = cuts.empty() ? size : cuts.front();
  if (v == Verdict::kSegmentedHeader) {
    check(first < size);  // only a chain can split the headers
    check(flat != Verdict::kData || first < ff.payload_offset);
    return;
  }
  check(v == flat);
  if (v == Verdict::kData) {
    check(f.header == ff.header && f.payload_offset == ff.payload_offset &&
          f.payload_len == ff.payload_len);
    if (f.payload != nullptr) check(std::memcmp(f.payload, ff.payload, f.payload_len) == 0);
    check((f.payload != nullptr) == (f.payload_offset + f.payload_len <= first));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  DecodeStats stats;
  Frame f;
  const std::span<const uint8_t> bytes(data, size);
  const Verdict v = decode_frame(bytes, &f, stats);
  check(stats.get(v) == 1 && stats.rejected() == (v >= kFirstReject ? 1u : 0u));
  check(v != Verdict::kSegmentedHeader);  // a flat buffer has no segments

  if (v == Verdict::kData) {
    check(f.payload == data + f.payload_offset);
    check(f.payload_offset >= kPayloadOffset && f.payload_offset + f.payload_len <= size);
    check(f.header.payload_len == f.payload_len && f.header.version == kVersion);
    check_reencode(f);
  } else if (v == Verdict::kOldVersion) {
    // A frame of wire version 1 (format.h): at least its 32-byte header after the UDP header.
    check(size >= kOverhead - kHeaderLen + v1::kHeaderLen);
  } else if (v == Verdict::kArp) {
    check(f.payload == data + kEthHdrLen && f.payload_len == size - kEthHdrLen);
    ArpMessage m;
    (void)parse_arp({f.payload, f.payload_len}, &m);
  }

  // NIC checksum verdicts.
  Frame fg, fb;
  const Verdict good = decode_frame(bytes, &fg, stats, {RxChecksum::kGood, RxChecksum::kGood});
  if (v == Verdict::kData) check(good == Verdict::kData);
  if (v != Verdict::kIpChecksum && v != Verdict::kUdpChecksum) check(good == v);
  const Verdict bad = decode_frame(bytes, &fb, stats, {RxChecksum::kBad, RxChecksum::kBad});
  check(bad != Verdict::kData);

  // The mbuf front-end (an mbuf segment holds at most 65535 bytes).
  if (size <= UINT16_MAX) {
    check_mbuf(data, size, {}, v, f, 0);
    const size_t cut = size == 0 ? 0 : (size_t{data[0]} * 131 + size) % (size + 1);
    check_mbuf(data, size, {cut}, v, f, 0);
    check_mbuf(data, size, {kPayloadOffset, kPayloadOffset + 1}, v, f, 0);
    // The NIC's "good" and "none" (integrity verified) both skip the software checksums.
    const uint8_t sel = size != 0 ? data[size - 1] : 0;
    check_mbuf(data, size, {cut}, good, fg,
               ((sel & 1) ? RTE_MBUF_F_RX_IP_CKSUM_GOOD : RTE_MBUF_F_RX_IP_CKSUM_NONE) |
                   ((sel & 2) ? RTE_MBUF_F_RX_L4_CKSUM_GOOD : RTE_MBUF_F_RX_L4_CKSUM_NONE));
    fuzz::Chain c(data, size, {});
    c.head()->ol_flags = (sel & 4) ? RTE_MBUF_F_RX_IP_CKSUM_BAD : RTE_MBUF_F_RX_L4_CKSUM_BAD;
    Frame fm;
    check(decode_mbuf(c.head(), &fm, stats) != Verdict::kData);
  }
  return 0;
}

/// For corpus_runner.cc: the verdict name the seed files are named after.
extern "C" const char* dpfab_fuzz_verdict(const uint8_t* data, size_t size) {
  DecodeStats stats;
  Frame f;
  return verdict_name(decode_frame({data, size}, &f, stats));
}
