// SPDX-License-Identifier: BSD-3-Clause
//
// The frame format, encoder and decoder: byte-exact agreement with a hand-crafted frame, round
// trips of every field, checksums against an independent implementation, every reject reason with
// a crafted frame, and the mbuf front-ends on mbufs built by hand (single segment and chains,
// software checksums and offload preparation, NIC checksum verdicts).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <cerrno>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "wire/checksum.h"
#include "wire/cm.h"
#include "wire/decoder.h"
#include "wire/encoder.h"
#include "wire/multicast.h"
#include "wire/rdm.h"
#include "wire_test_util.h"

using namespace dpfab::wire;
using namespace wire_test;

namespace {

std::vector<uint8_t> encode(const Route& r, const Header& h, const std::vector<uint8_t>& payload,
                            uint16_t ip_id) {
  std::vector<uint8_t> f(kOverhead + payload.size());
  std::copy(payload.begin(), payload.end(), f.begin() + kPayloadOffset);
  EXPECT_EQ(encode_frame(f, r, h, ip_id), 0);
  return f;
}

std::vector<uint8_t> golden_payload() {
  return std::vector<uint8_t>(kGoldenPayload, kGoldenPayload + 12);
}

std::vector<uint8_t> valid_frame(size_t payload_len = 12) {
  std::vector<uint8_t> payload(payload_len);
  for (size_t i = 0; i < payload_len; ++i) payload[i] = static_cast<uint8_t>(i * 7 + 1);
  Header h = golden_header();
  return encode(golden_route(), h, payload, kGoldenIpId);
}

Verdict decode(const std::vector<uint8_t>& f, Frame* out = nullptr, RxChecksums nic = {}) {
  DecodeStats stats;
  Frame tmp;
  Verdict v = decode_frame(f, out ? out : &tmp, stats, nic);
  EXPECT_EQ(stats.get(v), 1u);
  return v;
}

// Field offsets in a frame without IPv4 options.
constexpr size_t kIpTotalLenOff = kIpv4Offset + 2;
constexpr size_t kIpFragOff = kIpv4Offset + 6;
constexpr size_t kIpProtoOff = kIpv4Offset + 9;
constexpr size_t kUdpLenOff = kUdpOffset + 4;
constexpr size_t kUdpCksumOff = kUdpOffset + 6;

void put16(std::vector<uint8_t>& f, size_t off, uint16_t v) {
  f[off] = static_cast<uint8_t>(v >> 8);
  f[off + 1] = static_cast<uint8_t>(v);
}

// A frame of wire version 1, the previous layout (format.h), written out byte by byte as a dpfab
// of that version sent it (nothing of lib/wire builds it): the golden route, then the 32-byte
// header: version 1, `type`, `flags`, src_ep 3, dst_ep 7, payload_len, seq, ack and msg_id (0, as
// version 1 always sent them), cq_data at offset 24; then `payload`. The UDP checksum is computed
// (fix_checksums) or, with `udp_checksum` false, 0 as on memif.
std::vector<uint8_t> v1_frame(uint8_t type, uint16_t flags, uint64_t cq_data,
                              const std::vector<uint8_t>& payload, bool udp_checksum = true) {
  // 12 bytes a row, as kGoldenFrame; lengths, checksums and flags are filled in below.
  std::vector<uint8_t> f = {
      0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01,  // Ethernet,
      0x08, 0x00, 0x45, 0x00, 0x00, 0x00, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11,  // IPv4,
      0x00, 0x00, 0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, 0x24, 0x0c,  // UDP,
      0x24, 0x0d, 0x00, 0x00, 0x00, 0x00, 0x01, type, 0x00, 0x00, 0x00, 0x03,  // the dpfab header:
      0x00, 0x07,  // version 1, type, flags, src_ep 3, dst_ep 7
  };
  put16(f, kIpTotalLenOff, static_cast<uint16_t>(20 + 8 + 32 + payload.size()));
  put16(f, kUdpLenOff, static_cast<uint16_t>(8 + 32 + payload.size()));
  put16(f, kUdpCksumOff, udp_checksum ? 1 : 0);  // fix_checksums fills in a non-zero one
  put16(f, kHeaderOffset + 2, flags);
  for (int shift = 24; shift >= 0; shift -= 8)
    f.push_back(static_cast<uint8_t>(payload.size() >> shift));  // payload_len
  f.insert(f.end(), 12, 0);                                      // seq, ack, msg_id
  for (int shift = 56; shift >= 0; shift -= 8) f.push_back(static_cast<uint8_t>(cq_data >> shift));
  EXPECT_EQ(f.size(), 14u + 20 + 8 + 32);
  f.insert(f.end(), payload.begin(), payload.end());
  fix_checksums(f);
  return f;
}

// What version 1 put in each kind of frame (the RDM and CM headers did not change): a DGRAM
// message with remote CQ data; an RDM eager message "hello" (RDM header version 1, 64 bytes);
// a CM connection request with 5 bytes of connection data (CM header version 1, 16 bytes).
std::vector<uint8_t> v1_dgram() {
  return v1_frame(1, kHasCqData, 0x1122334455667788ull, golden_payload());
}
std::vector<uint8_t> v1_rdm_payload() {
  std::vector<uint8_t> r = {
      1,   1,   0,   0,   0x01, 0x02, 0x03, 0x04,  // rdm_version, kEager, flags, epoch
      0,   0,   0,   0,   0,    0,    0,    0,     // seq 0, ack 0
      0,   0,   0,   0,   0,    0,    0,    0,     // sack
      0,   64,  0,   0,   0,    0,    0,    1,     // window 64, reserved, msg_id 1
      0,   0,   0,   0,   0,    0,    0,    0,     // offset 0
      0,   0,   0,   0,   0,    0,    0,    5,     // length 5
      0,   0,   0,   0,   0,    0,    0,    0,     // tag
      0,   0,   0,   0,   0,    0,    0,    0,     // cq_data
      'h', 'e', 'l', 'l', 'o',
  };
  return r;
}
std::vector<uint8_t> v1_rdm() { return v1_frame(7, 0, 0, v1_rdm_payload()); }
std::vector<uint8_t> v1_cm_payload() {
  return {1,   1,   0,   0,   0x12, 0x34, 0x56, 0x78,  // cm_version, kConnReq, flags, src_id
          0,   0,   0,   0,   0,    5,    0,    0,     // dst_id 0, data_len 5, reserved
          'h', 'e', 'l', 'l', 'o'};
}
std::vector<uint8_t> v1_cm() { return v1_frame(8, 0, 0, v1_cm_payload()); }

}  // namespace

// ---- Format constants ----

TEST(Format, OverheadIsEthernetIpv4UdpAndThe20ByteHeader) {
  EXPECT_EQ(kVersion, 2u);
  EXPECT_EQ(kOverhead, 62u);
  EXPECT_EQ(kHeaderLen, 20u);
  EXPECT_EQ(kL3Overhead, 48u);
  EXPECT_EQ(kPayloadOffset, 62u);
  EXPECT_EQ(max_payload(1500), 1452u);
  EXPECT_EQ(max_payload(9000), 8952u);
  EXPECT_EQ(max_payload(48), 0u);
  EXPECT_EQ(max_payload(49), 1u);
  EXPECT_EQ(max_payload(100000), kMaxPayload);
  EXPECT_EQ(kMaxPayload, 65535u - 48u);
  // Every header byte of a frame lies in its first 64-byte cache line (format.h).
  EXPECT_LE(kOverhead, 64u);
}

TEST(Format, HeaderIsWrittenInNetworkByteOrderAtTheDocumentedOffsets) {
  Header h = golden_header();
  uint8_t b[kHeaderLen];
  write_header(b, h);
  const uint8_t want[kHeaderLen] = {2, 1,  0,    1,    0,    3,    0,    7,    0,    0,
                                    0, 12, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
  EXPECT_EQ(0, std::memcmp(b, want, kHeaderLen));
  EXPECT_EQ(read_header(b), h);
}

TEST(Format, OnlyDataRdmAndCmAreAcceptedTheNumbersVersion1ReservedAreNot) {
  EXPECT_FALSE(type_accepted(0));
  EXPECT_TRUE(type_accepted(static_cast<uint8_t>(Type::kData)));
  EXPECT_TRUE(type_accepted(static_cast<uint8_t>(Type::kRdm)));
  EXPECT_TRUE(type_accepted(static_cast<uint8_t>(Type::kCm)));
  // The numbers stay those of version 1, so that captures of either version read the same.
  EXPECT_EQ(static_cast<uint8_t>(Type::kData), 1u);
  EXPECT_EQ(static_cast<uint8_t>(Type::kRdm), 7u);
  EXPECT_EQ(static_cast<uint8_t>(Type::kCm), 8u);
  EXPECT_FALSE(type_accepted(static_cast<uint8_t>(Type::kCm) + 1));
  for (uint8_t t = 2; t <= 6; ++t) EXPECT_FALSE(type_accepted(t)) << int(t);
  EXPECT_FALSE(type_accepted(255));
}

// ---- Encoder ----

TEST(Encoder, RawBufferMatchesTheHandCraftedFrameByteForByte) {
  auto f = encode(golden_route(), golden_header(), golden_payload(), kGoldenIpId);
  EXPECT_EQ(f, kGoldenFrame);
}

TEST(Encoder, PayloadLengthComesFromTheBufferNotTheHeader) {
  Header h = golden_header();
  h.payload_len = 9999;
  auto f = encode(golden_route(), h, golden_payload(), kGoldenIpId);
  EXPECT_EQ(f, kGoldenFrame);
}

TEST(Encoder, ChecksumsAgreeWithAnIndependentImplementationForEveryPayloadLength) {
  std::mt19937 rng(42);
  for (size_t len = 0; len <= 300; ++len) {
    std::vector<uint8_t> payload(len);
    for (auto& b : payload) b = static_cast<uint8_t>(rng());
    auto f = encode(golden_route(), golden_header(), payload, static_cast<uint16_t>(len));
    auto g = f;
    fix_checksums(g);
    EXPECT_EQ(f, g) << "payload length " << len;
  }
}

TEST(Encoder, ComputedUdpChecksumZeroIsSentAsAllOnes) {
  // Choose two payload bytes so that the one's-complement sum is 0xffff: the checksum computes
  // to 0, which RFC 768 transmits as 0xffff (0 would mean "no checksum").
  std::vector<uint8_t> payload = {0, 0, 0x12, 0x34};
  auto f = encode(golden_route(), golden_header(), payload, 1);
  const uint16_t c = static_cast<uint16_t>((f[kUdpCksumOff] << 8) | f[kUdpCksumOff + 1]);
  payload[0] = static_cast<uint8_t>(c >> 8);
  payload[1] = static_cast<uint8_t>(c);
  f = encode(golden_route(), golden_header(), payload, 1);
  EXPECT_EQ(f[kUdpCksumOff], 0xff);
  EXPECT_EQ(f[kUdpCksumOff + 1], 0xff);
  EXPECT_EQ(decode(f), Verdict::kData);
}

TEST(Encoder, WritesTtl64DfAndIhl5) {
  auto f = valid_frame();
  EXPECT_EQ(f[kIpv4Offset], 0x45);
  EXPECT_EQ(f[kIpv4Offset + 8], 64);
  EXPECT_EQ(f[kIpFragOff], 0x40);
  EXPECT_EQ(f[kIpFragOff + 1], 0x00);
  EXPECT_EQ(f[kIpProtoOff], 17);
  EXPECT_EQ(f[12], 0x08);
  EXPECT_EQ(f[13], 0x00);
}

TEST(Encoder, RefusesWhatTheDecoderWouldRejectAndWritesNothing) {
  std::vector<uint8_t> f(kOverhead + 4, 0xaa);
  const auto before = f;
  Header h = golden_header();
  for (uint8_t v : {0, 1, 3}) {  // 1: the header would carry version 1 in version 2's layout
    h.version = v;
    EXPECT_EQ(encode_frame(f, golden_route(), h, 0), -EINVAL) << int(v);
  }
  h = golden_header();
  h.type = static_cast<Type>(2);  // reserved in version 1, never implemented
  EXPECT_EQ(encode_frame(f, golden_route(), h, 0), -EINVAL);
  h = golden_header();
  h.flags = 0x8000;
  EXPECT_EQ(encode_frame(f, golden_route(), h, 0), -EINVAL);
  std::vector<uint8_t> small(kOverhead - 1);
  EXPECT_EQ(encode_frame(small, golden_route(), golden_header(), 0), -EINVAL);
  EXPECT_EQ(f, before);
  std::vector<uint8_t> big(kOverhead + kMaxPayload + 1);
  EXPECT_EQ(encode_frame(big, golden_route(), golden_header(), 0), -EMSGSIZE);
  std::vector<uint8_t> biggest(kOverhead + kMaxPayload);
  EXPECT_EQ(encode_frame(biggest, golden_route(), golden_header(), 0), 0);
  EXPECT_EQ(decode(biggest), Verdict::kData);
}

// ---- Decoder: valid frames ----

TEST(Decoder, DecodesEveryFieldOfTheHandCraftedFrame) {
  Frame fr;
  ASSERT_EQ(decode(kGoldenFrame, &fr), Verdict::kData);
  Route r = golden_route();
  EXPECT_EQ(0, std::memcmp(&fr.src_mac, &r.src_mac, 6));
  EXPECT_EQ(0, std::memcmp(&fr.dst_mac, &r.dst_mac, 6));
  EXPECT_EQ(fr.src_ip_be, r.src_ip_be);
  EXPECT_EQ(fr.dst_ip_be, r.dst_ip_be);
  EXPECT_EQ(fr.src_port_be, r.src_port_be);
  EXPECT_EQ(fr.dst_port_be, r.dst_port_be);
  EXPECT_EQ(fr.ip_id, kGoldenIpId);
  EXPECT_EQ(fr.header, golden_header());
  EXPECT_EQ(fr.payload_offset, kPayloadOffset);
  EXPECT_EQ(fr.payload_len, 12u);
  ASSERT_EQ(fr.payload, kGoldenFrame.data() + kPayloadOffset);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(fr.payload), 12), kGoldenPayload);
}

TEST(Decoder, RoundTripsEveryFieldOverRandomValues) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    Route r;
    for (auto& b : r.src_mac.addr_bytes) b = static_cast<uint8_t>(rng());
    for (auto& b : r.dst_mac.addr_bytes) b = static_cast<uint8_t>(rng());
    r.src_ip_be = static_cast<uint32_t>(rng());
    r.dst_ip_be = static_cast<uint32_t>(rng());
    r.src_port_be = static_cast<uint16_t>(rng());
    r.dst_port_be = static_cast<uint16_t>(rng());
    // Well-formed addresses (the decoder rejects the others): a unicast source, and a group
    // destination exactly when the destination IPv4 is one.
    r.src_mac.addr_bytes[0] &= 0xfe;
    r.src_ip_be &= htonl(0x7fffffff);
    if (is_multicast_ipv4(r.dst_ip_be))
      r.dst_mac = multicast_mac(r.dst_ip_be);
    else
      r.dst_mac.addr_bytes[0] &= 0xfe;
    Header h;
    h.flags = static_cast<uint16_t>(rng() & kKnownFlags);
    h.src_ep = static_cast<uint16_t>(rng());
    h.dst_ep = static_cast<uint16_t>(rng());
    h.cq_data = rng();
    std::vector<uint8_t> payload(rng() % 1500);
    for (auto& b : payload) b = static_cast<uint8_t>(rng());
    const auto ip_id = static_cast<uint16_t>(rng());
    auto f = encode(r, h, payload, ip_id);
    Frame fr;
    ASSERT_EQ(decode(f, &fr), Verdict::kData) << i;
    h.payload_len = static_cast<uint32_t>(payload.size());
    EXPECT_EQ(fr.header, h);
    EXPECT_EQ(0, std::memcmp(&fr.src_mac, &r.src_mac, 6));
    EXPECT_EQ(0, std::memcmp(&fr.dst_mac, &r.dst_mac, 6));
    EXPECT_EQ(fr.src_ip_be, r.src_ip_be);
    EXPECT_EQ(fr.dst_ip_be, r.dst_ip_be);
    EXPECT_EQ(fr.src_port_be, r.src_port_be);
    EXPECT_EQ(fr.dst_port_be, r.dst_port_be);
    EXPECT_EQ(fr.ip_id, ip_id);
    ASSERT_EQ(fr.payload_len, payload.size());
    if (!payload.empty()) {  // an empty vector's data() may be null, which memcmp may not get
      EXPECT_EQ(0, std::memcmp(fr.payload, payload.data(), payload.size()));
    }
  }
}

TEST(Decoder, AcceptsIpv4OptionsAndSkipsThem) {
  auto f = valid_frame();
  // Insert 8 bytes of options (NOP NOP NOP NOP, NOP NOP NOP EOL): IHL 7.
  const uint8_t opts[8] = {1, 1, 1, 1, 1, 1, 1, 0};
  f.insert(f.begin() + kUdpOffset, opts, opts + 8);
  f[kIpv4Offset] = 0x47;
  put16(f, kIpTotalLenOff, static_cast<uint16_t>(20 + 8 + 8 + 20 + 12));
  fix_checksums(f);
  Frame fr;
  ASSERT_EQ(decode(f, &fr), Verdict::kData);
  EXPECT_EQ(fr.payload_offset, kPayloadOffset + 8);
  EXPECT_EQ(fr.payload_len, 12u);
  EXPECT_EQ(fr.payload, f.data() + kPayloadOffset + 8);
  EXPECT_EQ(fr.src_port_be, htons(9228));
  EXPECT_EQ(fr.header, golden_header());
}

TEST(Decoder, IgnoresEthernetPaddingAfterTheIpv4TotalLength) {
  auto f = valid_frame(0);  // 62 bytes; 6 bytes of trailer, as a switch pads a short frame
  f.resize(68, 0);
  Frame fr;
  ASSERT_EQ(decode(f, &fr), Verdict::kData);
  EXPECT_EQ(fr.payload_len, 0u);
}

TEST(Decoder, UdpChecksumZeroMeansNoneAndIsAccepted) {
  auto f = valid_frame();
  put16(f, kUdpCksumOff, 0);
  f[kPayloadOffset] ^= 0xff;  // nothing verifies the payload now
  EXPECT_EQ(decode(f), Verdict::kData);
}

TEST(Decoder, FramesWithDfClearAreAccepted) {
  auto f = valid_frame();
  put16(f, kIpFragOff, 0);
  fix_checksums(f);
  EXPECT_EQ(decode(f), Verdict::kData);
}

// ---- Decoder: every reject reason ----

TEST(Decoder, RejectsAFrameTruncatedAtEveryLength) {
  for (auto full : {valid_frame(0), valid_frame(12), valid_frame(301)}) {
    for (size_t n = 0; n < full.size(); ++n) {
      std::vector<uint8_t> f(full.begin(), full.begin() + static_cast<ptrdiff_t>(n));
      const Verdict want = n < 14   ? Verdict::kEthTruncated
                           : n < 34 ? Verdict::kIpTruncated
                                    : Verdict::kIpTotalLength;
      EXPECT_EQ(decode(f), want) << "length " << n;
    }
    EXPECT_EQ(decode(full), Verdict::kData);
  }
}

TEST(Decoder, RejectsATruncatedFrameWithIpv4Options) {
  auto f = valid_frame();
  const uint8_t opts[4] = {1, 1, 1, 0};
  f.insert(f.begin() + kUdpOffset, opts, opts + 4);
  f[kIpv4Offset] = 0x46;
  put16(f, kIpTotalLenOff, static_cast<uint16_t>(24 + 28 + 12));
  fix_checksums(f);
  ASSERT_EQ(decode(f), Verdict::kData);
  for (size_t n = 34; n < 38; ++n)
    EXPECT_EQ(decode(std::vector<uint8_t>(f.begin(), f.begin() + static_cast<ptrdiff_t>(n))),
              Verdict::kIpTruncated);
}

TEST(Decoder, ReportsArpAndRejectsVlanAndOtherEtherTypes) {
  auto f = valid_frame();
  put16(f, 12, 0x0806);
  Frame fr;
  ASSERT_EQ(decode(f, &fr), Verdict::kArp);
  EXPECT_EQ(fr.payload, f.data() + 14);
  EXPECT_EQ(fr.payload_len, f.size() - 14);
  put16(f, 12, 0x8100);
  EXPECT_EQ(decode(f), Verdict::kVlan);
  put16(f, 12, 0x88a8);
  EXPECT_EQ(decode(f), Verdict::kVlan);
  for (uint16_t t : {0x86dd, 0x0000, 0x88cc, 0x0801, 0xffff}) {
    put16(f, 12, t);
    EXPECT_EQ(decode(f), Verdict::kEtherType) << t;
  }
}

TEST(Decoder, RejectsIpVersionOtherThan4AndIhlBelow5) {
  auto f = valid_frame();
  f[kIpv4Offset] = 0x65;
  fix_checksums(f);
  EXPECT_EQ(decode(f), Verdict::kIpVersion);
  for (uint8_t ihl = 0; ihl < 5; ++ihl) {
    f[kIpv4Offset] = static_cast<uint8_t>(0x40 | ihl);
    EXPECT_EQ(decode(f), Verdict::kIpHeaderLength) << int(ihl);
  }
}

TEST(Decoder, RejectsABadIpv4ChecksumUnlessTheNicVerifiedIt) {
  auto f = valid_frame();
  f[kIpv4Offset + 10] ^= 0x01;
  EXPECT_EQ(decode(f), Verdict::kIpChecksum);
  EXPECT_EQ(decode(f, nullptr, {RxChecksum::kGood, RxChecksum::kUnknown}), Verdict::kData);
  auto good = valid_frame();
  EXPECT_EQ(decode(good, nullptr, {RxChecksum::kBad, RxChecksum::kUnknown}), Verdict::kIpChecksum);
}

TEST(Decoder, RejectsABadUdpChecksumUnlessTheNicVerifiedIt) {
  auto f = valid_frame();
  f[kPayloadOffset + 3] ^= 0x10;  // corrupt the payload: only the UDP checksum notices
  EXPECT_EQ(decode(f), Verdict::kUdpChecksum);
  EXPECT_EQ(decode(f, nullptr, {RxChecksum::kUnknown, RxChecksum::kGood}), Verdict::kData);
  auto good = valid_frame();
  EXPECT_EQ(decode(good, nullptr, {RxChecksum::kUnknown, RxChecksum::kBad}), Verdict::kUdpChecksum);
  good[kUdpCksumOff] ^= 0x80;
  EXPECT_EQ(decode(good), Verdict::kUdpChecksum);
}

TEST(Decoder, RejectsIpTotalLengthBeyondTheFrameOrTooShortForTheHeaders) {
  auto f = valid_frame();
  put16(f, kIpTotalLenOff, static_cast<uint16_t>(f.size() - 14 + 1));
  fix_checksums(f);
  EXPECT_EQ(decode(f), Verdict::kIpTotalLength);
  put16(f, kIpTotalLenOff, 20 + 8 + 20 - 1);
  fix_checksums(f);
  EXPECT_EQ(decode(f), Verdict::kIpTotalLength);
}

TEST(Decoder, RejectsFragments) {
  auto f = valid_frame();
  for (uint16_t frag : {0x2000 /* MF */, 0x6000 /* DF|MF */, 0x0001 /* offset 8 */,
                        0x1fff /* max offset */, 0x2001}) {
    put16(f, kIpFragOff, frag);
    fix_checksums(f);
    EXPECT_EQ(decode(f), Verdict::kIpFragment) << std::hex << frag;
  }
}

TEST(Decoder, RejectsProtocolsOtherThanUdp) {
  auto f = valid_frame();
  for (uint8_t proto : {1, 6, 132, 255}) {
    f[kIpProtoOff] = proto;
    fix_checksums(f);
    EXPECT_EQ(decode(f), Verdict::kIpProtocol) << int(proto);
  }
}

TEST(Decoder, RejectsUdpLengthMismatchesBothWays) {
  auto f = valid_frame();
  const uint16_t udp_len = static_cast<uint16_t>(8 + 20 + 12);
  for (uint16_t bad : {uint16_t(udp_len + 1), uint16_t(udp_len - 1), uint16_t(0), uint16_t(8)}) {
    put16(f, kUdpLenOff, bad);
    fix_checksums(f);
    EXPECT_EQ(decode(f), Verdict::kUdpLength) << bad;
  }
  // Padding after the datagram does not make a short UDP length acceptable: IPv4 total length
  // and UDP length must agree.
  auto p = valid_frame();
  p.resize(p.size() + 4, 0);
  put16(p, kIpTotalLenOff, static_cast<uint16_t>(20 + udp_len + 4));
  fix_checksums(p);
  EXPECT_EQ(decode(p), Verdict::kUdpLength);
}

TEST(Decoder, RejectsABadHeaderVersionTypeOrFlags) {
  auto f = valid_frame();
  // 1 too: a version-2 frame with a 1 in its version byte is not a frame of version 1 (its
  // payload_len does not fit version 1's 32-byte header), so it is no old peer either.
  for (uint8_t v : {0, 1, 3, 255}) {
    auto g = f;
    g[kHeaderOffset] = v;
    fix_checksums(g);
    EXPECT_EQ(decode(g), Verdict::kHeaderVersion) << int(v);
  }
  for (uint8_t t : {0, 2, 3, 4, 5, 6, 9, 200, 255}) {
    auto g = f;
    g[kHeaderOffset + 1] = t;
    fix_checksums(g);
    EXPECT_EQ(decode(g), Verdict::kHeaderType) << int(t);
  }
  for (uint16_t fl : {0x0002, 0x8000, 0xffff}) {
    auto g = f;
    put16(g, kHeaderOffset + 2, fl);
    fix_checksums(g);
    EXPECT_EQ(decode(g), Verdict::kHeaderFlags) << fl;
  }
}

// ---- Wire version 1 (format.h): refused and counted, never parsed as version 2 ----

TEST(OldVersion, TheVersion1FramesAreWellFormedFramesOfTheirTime) {
  // The CM payload is what the unchanged CM decoder accepts: only the dpfab header's version
  // stands between it and delivery. The RDM payload is of RDM version 1, which the RDM decoder
  // refuses as well since version 2 (wire/rdm.h), and otherwise well formed: with the version
  // byte of today it decodes.
  RdmDecodeStats rs;
  RdmHeader rh;
  std::span<const uint8_t> data;
  auto rp = v1_rdm_payload();
  EXPECT_EQ(
      decode_rdm(rdm_outer_header(3, 7, static_cast<uint32_t>(rp.size())), rp, &rh, &data, rs),
      RdmVerdict::kVersion);
  rp[0] = kRdmVersion;
  EXPECT_EQ(
      decode_rdm(rdm_outer_header(3, 7, static_cast<uint32_t>(rp.size())), rp, &rh, &data, rs),
      RdmVerdict::kOk);
  CmDecodeStats cs;
  CmHeader ch;
  const auto cp = v1_cm_payload();
  EXPECT_EQ(decode_cm(cm_outer_header(3, 7, static_cast<uint32_t>(cp.size())), cp, &ch, &data, cs),
            CmVerdict::kOk);
  EXPECT_EQ(ch.kind, CmKind::kConnReq);
  // And each frame's Ethernet, IPv4 and UDP layers are sound: with another version byte, the
  // decoder gets as far as the version and rejects it as unknown.
  for (const auto& f : {v1_dgram(), v1_rdm(), v1_cm()}) {
    auto g = f;
    g[kHeaderOffset] = 0;
    fix_checksums(g);
    EXPECT_EQ(decode(g), Verdict::kHeaderVersion);
  }
}

TEST(OldVersion, DgramRdmAndCmFramesOfVersion1AreRefusedUnderTheirOwnVerdictAndCounted) {
  struct Case {
    const char* what;
    std::vector<uint8_t> frame;
  } cases[] = {
      {"dgram", v1_dgram()},
      {"rdm", v1_rdm()},
      {"cm", v1_cm()},
      {"dgram, no UDP checksum (memif)", v1_frame(1, 0, 0, golden_payload(), false)},
      {"dgram, empty", v1_frame(1, 0, 0, {})},
  };
  DecodeStats all;
  for (const auto& c : cases) {
    DecodeStats stats;
    Frame fr;
    EXPECT_EQ(decode_frame(c.frame, &fr, stats), Verdict::kOldVersion) << c.what;
    EXPECT_EQ(stats.get(Verdict::kOldVersion), 1u) << c.what;
    EXPECT_EQ(stats.rejected(), 1u) << c.what;
    EXPECT_EQ(stats.get(Verdict::kHeaderVersion), 0u) << c.what;
    // The sender is named, so that the port can say who runs the older dpfab.
    const Route r = golden_route();
    EXPECT_EQ(fr.src_ip_be, r.src_ip_be) << c.what;
    EXPECT_EQ(fr.src_port_be, r.src_port_be) << c.what;
    EXPECT_EQ(fr.dst_port_be, r.dst_port_be) << c.what;
    EXPECT_EQ(0, std::memcmp(&fr.src_mac, &r.src_mac, 6)) << c.what;
    EXPECT_EQ(decode_frame(c.frame, &fr, all), Verdict::kOldVersion);
    // NIC-verified checksums change nothing.
    EXPECT_EQ(decode_frame(c.frame, &fr, all, {RxChecksum::kGood, RxChecksum::kGood}),
              Verdict::kOldVersion);
    // Nor does the mbuf front-end, in one segment or with the payload in a second one.
    TestMbuf mb;
    mb.append(c.frame.data(), c.frame.size());
    EXPECT_EQ(decode_mbuf(&mb.m, &fr, all), Verdict::kOldVersion) << c.what;
    TestChain ch(c.frame, {kPayloadOffset});
    EXPECT_EQ(decode_mbuf(ch.head(), &fr, all), Verdict::kOldVersion) << c.what;
  }
  EXPECT_EQ(all.get(Verdict::kOldVersion), 4u * std::size(cases));
  EXPECT_EQ(all.rejected(), all.get(Verdict::kOldVersion));
  EXPECT_STREQ(verdict_name(Verdict::kOldVersion), "old-version");
}

TEST(OldVersion, OnlyAWholeVersion1HeaderCountsAsAnOldPeerOtherwiseItIsAnUnknownVersion) {
  // Version byte 1, but not a frame of version 1: its payload_len disagrees with the UDP length
  // under a 32-byte header (someone else's datagram that starts with a 1), its type is none
  // version 1 sent, or it is too short to hold a version-1 header.
  auto wrong_len = v1_dgram();
  wrong_len[kHeaderOffset + kPayloadLenOffset + 3] ^= 1;
  fix_checksums(wrong_len);
  EXPECT_EQ(decode(wrong_len), Verdict::kHeaderVersion);
  auto v2_len = v1_dgram();  // the payload_len a version-2 header would carry
  v2_len[kHeaderOffset + kPayloadLenOffset + 3] =
      static_cast<uint8_t>(12 + v1::kHeaderLen - kHeaderLen);
  fix_checksums(v2_len);
  EXPECT_EQ(decode(v2_len), Verdict::kHeaderVersion);
  for (uint8_t t : {0, 2, 6, 9, 255}) {
    auto g = v1_dgram();
    g[kHeaderOffset + 1] = t;
    fix_checksums(g);
    EXPECT_EQ(decode(g), Verdict::kHeaderVersion) << int(t);
  }
  // 20 to 31 bytes after the UDP header: a version-2 header's worth, not a version-1 one.
  for (size_t cut = 1; cut <= 12; ++cut) {
    auto g = v1_frame(1, 0, 0, {});
    g.resize(g.size() - cut);
    put16(g, kIpTotalLenOff, static_cast<uint16_t>(g.size() - kEthHdrLen));
    put16(g, kUdpLenOff, static_cast<uint16_t>(g.size() - kUdpOffset));
    fix_checksums(g);
    EXPECT_EQ(decode(g), Verdict::kHeaderVersion) << cut;
  }
}

TEST(OldVersion, AVersion1FrameIsNeverReadAsVersion2WhateverItsFields) {
  // Whatever a version-1 frame carries in the bytes version 2 reads differently (its seq, ack,
  // msg_id where version 2 has cq_data, and its cq_data where version 2 has payload), it is
  // refused: the version is checked before any of them is read.
  std::mt19937_64 rng(3);
  for (int i = 0; i < 500; ++i) {
    std::vector<uint8_t> payload(rng() % 200);
    for (auto& b : payload) b = static_cast<uint8_t>(rng());
    const uint8_t types[] = {1, 7, 8};
    auto f = v1_frame(types[rng() % 3], static_cast<uint16_t>(rng() & kKnownFlags), rng(), payload,
                      (rng() & 1) != 0);
    for (size_t off = kHeaderOffset + 12; off < kHeaderOffset + 24; ++off)
      f[off] = static_cast<uint8_t>(rng());  // seq, ack, msg_id: any value
    fix_checksums(f);
    EXPECT_EQ(decode(f), Verdict::kOldVersion) << i;
  }
}

TEST(Decoder, RejectsAPayloadLengthThatDisagreesWithTheUdpLengthBothWays) {
  auto f = valid_frame();
  for (uint32_t len : {11u, 13u, 0u, 0xffffffffu}) {
    auto g = f;
    g[kHeaderOffset + 8] = static_cast<uint8_t>(len >> 24);
    g[kHeaderOffset + 9] = static_cast<uint8_t>(len >> 16);
    g[kHeaderOffset + 10] = static_cast<uint8_t>(len >> 8);
    g[kHeaderOffset + 11] = static_cast<uint8_t>(len);
    fix_checksums(g);
    EXPECT_EQ(decode(g), Verdict::kPayloadLength) << len;
  }
}

TEST(Decoder, CountsEveryVerdictOnce) {
  DecodeStats stats;
  Frame fr;
  auto good = valid_frame();
  auto bad = good;
  bad[kIpv4Offset + 10] ^= 1;
  std::vector<uint8_t> empty;
  EXPECT_EQ(decode_frame(good, &fr, stats), Verdict::kData);
  EXPECT_EQ(decode_frame(good, &fr, stats), Verdict::kData);
  EXPECT_EQ(decode_frame(bad, &fr, stats), Verdict::kIpChecksum);
  EXPECT_EQ(decode_frame(empty, &fr, stats), Verdict::kEthTruncated);
  EXPECT_EQ(stats.get(Verdict::kData), 2u);
  EXPECT_EQ(stats.get(Verdict::kIpChecksum), 1u);
  EXPECT_EQ(stats.get(Verdict::kEthTruncated), 1u);
  EXPECT_EQ(stats.get(Verdict::kUdpChecksum), 0u);
  EXPECT_EQ(stats.rejected(), 2u);
}

TEST(Decoder, EveryVerdictHasADistinctName) {
  std::set<std::string> names;
  for (size_t i = 0; i < static_cast<size_t>(Verdict::kCount); ++i) {
    std::string n = verdict_name(static_cast<Verdict>(i));
    EXPECT_NE(n, "?");
    names.insert(n);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(Verdict::kCount));
  EXPECT_STREQ(verdict_name(Verdict::kCount), "?");
}

// ---- HeaderTemplate: encode_mbuf's headers for udp_none links, prepared once ----

TEST(HeaderTemplate, WritesTheBytesEncodeMbufWritesOnALinkWithoutUdpChecksum) {
  std::mt19937_64 rng(11);
  TxChecksumCaps caps;
  caps.udp_none = true;
  for (int i = 0; i < 3000; ++i) {
    Route r;
    for (auto& b : r.src_mac.addr_bytes) b = static_cast<uint8_t>(rng());
    for (auto& b : r.dst_mac.addr_bytes) b = static_cast<uint8_t>(rng());
    r.src_ip_be = static_cast<uint32_t>(rng());
    r.dst_ip_be = static_cast<uint32_t>(rng());
    r.src_port_be = static_cast<uint16_t>(rng());
    r.dst_port_be = static_cast<uint16_t>(rng());
    Header h;
    h.type = rng() & 1 ? Type::kRdm : Type::kData;
    h.flags = h.type == Type::kData ? static_cast<uint16_t>(rng() & kKnownFlags) : 0;
    h.src_ep = static_cast<uint16_t>(rng());
    h.dst_ep = static_cast<uint16_t>(rng());
    if (h.type == Type::kData) h.cq_data = rng();
    h.payload_len = static_cast<uint32_t>(rng());  // ignored: the payload's length counts
    HeaderTemplate t;
    ASSERT_EQ(t.init(r, h), 0);
    // Lengths from empty to the largest payload, the extremes often; any identification.
    const size_t len = i % 7 == 0 ? kMaxPayload : i % 7 == 1 ? 0 : rng() % (kMaxPayload + 1);
    const auto ip_id = static_cast<uint16_t>(i % 5 == 0 ? 0xffff : rng());
    std::vector<uint8_t> payload(len);
    for (auto& b : payload) b = static_cast<uint8_t>(rng());
    TestMbuf mb(kMaxPayload + kOverhead);
    if (len) mb.append(payload.data(), len);
    ASSERT_EQ(encode_mbuf(&mb.m, r, h, ip_id, caps), 0);
    std::vector<uint8_t> got(kOverhead);
    // A route's destination MAC is the caller's to give per frame (it may change).
    t.write(got.data(), r.dst_mac.addr_bytes, static_cast<uint32_t>(len), ip_id);
    ASSERT_EQ(0, std::memcmp(got.data(), rte_pktmbuf_mtod(&mb.m, const uint8_t*), kOverhead))
        << "frame " << i << ", payload " << len << ", id " << ip_id;
  }
}

TEST(HeaderTemplate, RefusesAHeaderTheDecoderWouldReject) {
  HeaderTemplate t;
  Header bad = golden_header();
  bad.flags = 0x8000;
  EXPECT_EQ(t.init(golden_route(), bad), -EINVAL);
  bad = golden_header();
  bad.version = 9;
  EXPECT_EQ(t.init(golden_route(), bad), -EINVAL);
}

// ---- mbuf front-ends (rte_mbufs built by hand, no EAL) ----

TEST(EncoderMbuf, SoftwareChecksumsMatchTheHandCraftedFrame) {
  TestMbuf mb;
  auto payload = golden_payload();
  mb.append(payload.data(), payload.size());
  mb.m.ol_flags = RTE_MBUF_F_TX_TCP_CKSUM;  // stale flags are cleared
  ASSERT_EQ(encode_mbuf(&mb.m, golden_route(), golden_header(), kGoldenIpId, {}), 0);
  ASSERT_EQ(mb.m.pkt_len, kGoldenFrame.size());
  ASSERT_EQ(mb.m.data_len, kGoldenFrame.size());
  EXPECT_EQ(0,
            std::memcmp(rte_pktmbuf_mtod(&mb.m, void*), kGoldenFrame.data(), kGoldenFrame.size()));
  EXPECT_EQ(mb.m.ol_flags, 0u);
}

TEST(EncoderMbuf, ChecksumOffloadSetsFlagsLengthsAndThePseudoHeaderSum) {
  for (auto caps :
       {TxChecksumCaps{true, true}, TxChecksumCaps{true, false}, TxChecksumCaps{false, true}}) {
    TestMbuf mb;
    auto payload = golden_payload();
    mb.append(payload.data(), payload.size());
    ASSERT_EQ(encode_mbuf(&mb.m, golden_route(), golden_header(), kGoldenIpId, caps), 0);
    const auto* p = rte_pktmbuf_mtod(&mb.m, const uint8_t*);
    uint64_t want = RTE_MBUF_F_TX_IPV4;
    if (caps.ipv4) want |= RTE_MBUF_F_TX_IP_CKSUM;
    if (caps.udp) want |= RTE_MBUF_F_TX_UDP_CKSUM;
    EXPECT_EQ(mb.m.ol_flags, want);
    EXPECT_EQ(mb.m.l2_len, 14u);
    EXPECT_EQ(mb.m.l3_len, 20u);
    // IPv4 checksum: 0 when offloaded, else the hand-crafted value.
    EXPECT_EQ(p[kIpv4Offset + 10], caps.ipv4 ? 0 : kGoldenFrame[kIpv4Offset + 10]);
    EXPECT_EQ(p[kIpv4Offset + 11], caps.ipv4 ? 0 : kGoldenFrame[kIpv4Offset + 11]);
    // UDP checksum: the non-complemented pseudo-header sum when offloaded (computed here
    // independently: src, dst, zero, protocol, UDP length), else the full checksum.
    uint8_t ph[12] = {10, 0, 0, 1, 10, 0, 0, 2, 0, 17, 0, 8 + 20 + 12};
    const uint16_t phs = ones_sum(ph, sizeof(ph));
    const uint16_t got = static_cast<uint16_t>((p[kUdpCksumOff] << 8) | p[kUdpCksumOff + 1]);
    EXPECT_EQ(got, caps.udp ? phs : 0x1f30);
    // Everything else is the hand-crafted frame.
    std::vector<uint8_t> f(p, p + mb.m.data_len);
    std::vector<uint8_t> g = kGoldenFrame;
    for (size_t off : {kIpv4Offset + 10, kIpv4Offset + 11, kUdpCksumOff, kUdpCksumOff + 1})
      f[off] = g[off] = 0;
    EXPECT_EQ(f, g);
  }
}

// memif and ring ports (udp_checksum = auto): no UDP checksum, the field stays 0 ("none
// computed", RFC 768), and the decoder takes such a frame without verifying it.
TEST(EncoderMbuf, WithoutUdpChecksumTheFieldIsZeroAndTheDecoderAcceptsIt) {
  TestMbuf mb;
  auto payload = golden_payload();
  mb.append(payload.data(), payload.size());
  TxChecksumCaps caps;
  caps.udp_none = true;
  ASSERT_EQ(encode_mbuf(&mb.m, golden_route(), golden_header(), kGoldenIpId, caps), 0);
  const auto* p = rte_pktmbuf_mtod(&mb.m, const uint8_t*);
  EXPECT_EQ(mb.m.ol_flags, 0u);
  EXPECT_EQ(p[kUdpCksumOff], 0);
  EXPECT_EQ(p[kUdpCksumOff + 1], 0);
  std::vector<uint8_t> f(p, p + mb.m.data_len);
  std::vector<uint8_t> g = kGoldenFrame;
  g[kUdpCksumOff] = g[kUdpCksumOff + 1] = 0;
  EXPECT_EQ(f, g) << "everything else, the IPv4 checksum included, is the hand-crafted frame";
  DecodeStats stats;
  Frame out;
  EXPECT_EQ(decode_frame(f, &out, stats), Verdict::kData);
}

TEST(EncoderMbuf, ComputesTheUdpChecksumOverAChainOfSegments) {
  std::vector<uint8_t> payload(1001);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 13 + 5);
  const auto flat = encode(golden_route(), golden_header(), payload, 77);
  for (auto cuts : std::vector<std::vector<size_t>>{{1}, {500}, {333, 334, 1000}, {999}}) {
    TestChain c(payload, cuts);
    ASSERT_EQ(encode_mbuf(c.head(), golden_route(), golden_header(), 77, {}), 0);
    EXPECT_EQ(c.head()->pkt_len, flat.size());
    EXPECT_EQ(c.bytes(), flat);
  }
}

TEST(EncoderMbuf, FailsWithoutHeadroomAndLeavesTheMbufUnchanged) {
  TestMbuf mb(64, kOverhead - 1);
  const uint8_t b[4] = {1, 2, 3, 4};
  mb.append(b, 4);
  EXPECT_EQ(encode_mbuf(&mb.m, golden_route(), golden_header(), 0, {}), -ENOSPC);
  EXPECT_EQ(mb.m.data_off, kOverhead - 1);
  EXPECT_EQ(mb.m.pkt_len, 4u);
  Header bad = golden_header();
  bad.type = static_cast<Type>(9);
  TestMbuf ok;
  ok.append(b, 4);
  EXPECT_EQ(encode_mbuf(&ok.m, golden_route(), bad, 0, {}), -EINVAL);
  EXPECT_EQ(ok.m.pkt_len, 4u);
  EXPECT_EQ(encode_mbuf(nullptr, golden_route(), golden_header(), 0, {}), -EINVAL);
}

TEST(DecoderMbuf, DecodesASingleSegmentLikeTheFlatBuffer) {
  TestMbuf mb;
  mb.append(kGoldenFrame.data(), kGoldenFrame.size());
  DecodeStats stats;
  Frame fr;
  ASSERT_EQ(decode_mbuf(&mb.m, &fr, stats), Verdict::kData);
  EXPECT_EQ(fr.header, golden_header());
  EXPECT_EQ(fr.payload, rte_pktmbuf_mtod(&mb.m, const uint8_t*) + kPayloadOffset);
  EXPECT_EQ(stats.get(Verdict::kData), 1u);
}

TEST(DecoderMbuf, VerifiesTheChecksumOverAChainAndGivesThePayloadOffset) {
  std::vector<uint8_t> payload(700);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i ^ 0x5a);
  const auto flat = encode(golden_route(), golden_header(), payload, 3);
  DecodeStats stats;
  for (auto cuts :
       std::vector<std::vector<size_t>>{{kOverhead}, {kOverhead + 1}, {100, 101, 500}}) {
    TestChain c(flat, cuts);
    Frame fr;
    ASSERT_EQ(decode_mbuf(c.head(), &fr, stats), Verdict::kData);
    EXPECT_EQ(fr.payload, nullptr);  // the payload crosses segments
    EXPECT_EQ(fr.payload_offset, kPayloadOffset);
    EXPECT_EQ(fr.payload_len, payload.size());
    auto corrupt = flat;
    corrupt[flat.size() - 1] ^= 1;
    TestChain d(corrupt, cuts);
    EXPECT_EQ(decode_mbuf(d.head(), &fr, stats), Verdict::kUdpChecksum);
  }
  TestChain whole(flat, {flat.size() - 0});  // an empty last segment
  Frame fr;
  ASSERT_EQ(decode_mbuf(whole.head(), &fr, stats), Verdict::kData);
  EXPECT_EQ(fr.payload, rte_pktmbuf_mtod(whole.head(), const uint8_t*) + kPayloadOffset);
}

TEST(DecoderMbuf, RejectsHeadersSplitAcrossSegments) {
  const auto flat = valid_frame(100);
  DecodeStats stats;
  Frame fr;
  for (size_t cut : {size_t(0), size_t(13), size_t(14), size_t(30), size_t(42), kOverhead - 1}) {
    TestChain c(flat, {cut});
    EXPECT_EQ(decode_mbuf(c.head(), &fr, stats), Verdict::kSegmentedHeader) << cut;
  }
  EXPECT_EQ(stats.get(Verdict::kSegmentedHeader), 6u);
}

TEST(DecoderMbuf, TakesTheNicChecksumVerdictsFromOlFlags) {
  auto bad_ip = valid_frame();
  bad_ip[kIpv4Offset + 10] ^= 1;
  auto bad_udp = valid_frame();
  bad_udp[kPayloadOffset] ^= 1;
  auto good = valid_frame();
  struct Case {
    const std::vector<uint8_t>* f;
    uint64_t ol;
    Verdict want;
  } cases[] = {
      {&bad_ip, 0, Verdict::kIpChecksum},
      {&bad_ip, RTE_MBUF_F_RX_IP_CKSUM_GOOD, Verdict::kData},
      {&bad_ip, RTE_MBUF_F_RX_IP_CKSUM_NONE, Verdict::kData},
      {&good, RTE_MBUF_F_RX_IP_CKSUM_BAD, Verdict::kIpChecksum},
      {&bad_udp, 0, Verdict::kUdpChecksum},
      {&bad_udp, RTE_MBUF_F_RX_L4_CKSUM_GOOD, Verdict::kData},
      {&bad_udp, RTE_MBUF_F_RX_L4_CKSUM_NONE, Verdict::kData},
      {&good, RTE_MBUF_F_RX_L4_CKSUM_BAD, Verdict::kUdpChecksum},
      {&good, RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_L4_CKSUM_GOOD, Verdict::kData},
  };
  for (const auto& c : cases) {
    TestMbuf mb;
    mb.append(c.f->data(), c.f->size());
    mb.m.ol_flags = c.ol;
    DecodeStats stats;
    Frame fr;
    EXPECT_EQ(decode_mbuf(&mb.m, &fr, stats), c.want) << std::hex << c.ol;
  }
}

TEST(Encoder, TxChecksumCapsComeFromTheOffloadMask) {
  auto c = TxChecksumCaps::from_offloads(RTE_ETH_TX_OFFLOAD_IPV4_CKSUM);
  EXPECT_TRUE(c.ipv4);
  EXPECT_FALSE(c.udp);
  c = TxChecksumCaps::from_offloads(RTE_ETH_TX_OFFLOAD_UDP_CKSUM | RTE_ETH_TX_OFFLOAD_TCP_CKSUM);
  EXPECT_FALSE(c.ipv4);
  EXPECT_TRUE(c.udp);
  c = TxChecksumCaps::from_offloads(0);
  EXPECT_FALSE(c.ipv4 || c.udp);
}

TEST(Checksum, ChainSumIsRightForEveryCutAndOffsetIncludingOddOnes) {
  // DPDK 22.11's rte_raw_cksum_mbuf gets segments at odd offsets wrong (checksum.h); ours must
  // agree with the independent sum for every split point, start offset and length parity.
  std::vector<uint8_t> d(301);
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint8_t>(i * 29 + 0xa7);
  for (size_t cut = 0; cut <= d.size(); ++cut) {
    for (size_t second : {size_t(0), size_t(1), size_t(7), size_t(150)}) {
      std::vector<size_t> cuts = {cut};
      if (cut + second < d.size() && second != 0) cuts.push_back(cut + second);
      TestChain c(d, cuts);
      for (uint32_t off : {0u, 1u, 2u, 3u, 100u}) {
        for (uint32_t len : {0u, 1u, 2u, 199u, static_cast<uint32_t>(d.size()) - off}) {
          if (off + len > d.size()) continue;
          uint16_t got;
          ASSERT_EQ(raw_cksum_mbuf(c.head(), off, len, &got), 0);
          const uint16_t want = ones_sum(d.data() + off, len);
          EXPECT_EQ(got, static_cast<uint16_t>((want >> 8) | (want << 8)))
              << "cut " << cut << " off " << off << " len " << len;
        }
      }
      uint16_t s;
      EXPECT_EQ(raw_cksum_mbuf(c.head(), 1, static_cast<uint32_t>(d.size()), &s), -1);
    }
  }
}

// The receive path's IPv4 header check (ipv4_header_sum_ok, 32-bit words) against DPDK's 16-bit
// sum, for every header length, random headers and headers made to sum right, including the
// carries that only a 32-bit accumulator sees (all-ones words) and an all-zero header.
TEST(Checksum, Ipv4HeaderCheckAgreesWithRteRawCksum) {
  std::mt19937 rng(7);
  uint8_t h[60];
  size_t ok = 0;
  for (size_t ihl = 20; ihl <= 60; ihl += 4) {
    for (int round = 0; round < 4000; ++round) {
      const int pattern = round % 4;
      for (size_t i = 0; i < ihl; ++i)
        h[i] = pattern == 0 ? 0 : pattern == 1 ? 0xff : static_cast<uint8_t>(rng());
      if (round % 2 == 1) {  // a header with its checksum field filled in: sums to 0xffff
        h[10] = h[11] = 0;
        const uint16_t c = static_cast<uint16_t>(~rte_raw_cksum(h, ihl));
        std::memcpy(h + 10, &c, 2);
      }
      const bool want = rte_raw_cksum(h, ihl) == 0xffff;
      ASSERT_EQ(ipv4_header_sum_ok(h, ihl), want) << "ihl " << ihl << " round " << round;
      ok += want;
    }
  }
  EXPECT_GT(ok, 20000u);  // about half the headers were right ones: both answers were tried
}
