// SPDX-License-Identifier: BSD-3-Clause
//
// The CM header (lib/wire/cm.h): byte-exact layout against a hand-written header, round trips of
// every kind, and every reject reason with a crafted header, each counted under its reason.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "wire/cm.h"

using namespace dpfab::wire;

namespace {

CmHeader of(CmKind k, uint16_t data_len = 0) {
  CmHeader h;
  h.kind = k;
  h.src_id = k == CmKind::kReject ? 0 : 0x01020304;
  h.dst_id = k == CmKind::kConnReq ? 0 : 0x05060708;
  h.data_len = data_len;
  return h;
}

Header outer(size_t payload) { return cm_outer_header(3, 4, static_cast<uint32_t>(payload)); }

// Encodes h + h.data_len bytes of 0xab: the whole dpfab payload.
std::vector<uint8_t> payload_of(const CmHeader& h) {
  std::vector<uint8_t> p(kCmHeaderLen + h.data_len, 0xab);
  EXPECT_EQ(encode_cm(p, h), static_cast<int>(kCmHeaderLen));
  return p;
}

CmVerdict decode(const std::vector<uint8_t>& p, CmHeader* h = nullptr, const Header& o = outer(0)) {
  CmHeader tmp;
  std::span<const uint8_t> data;
  CmDecodeStats stats;
  Header ou = o;
  ou.payload_len = static_cast<uint32_t>(p.size());
  CmVerdict v = decode_cm(ou, p, h ? h : &tmp, &data, stats);
  EXPECT_EQ(stats.get(v), 1u);
  EXPECT_EQ(stats.rejected(), v == CmVerdict::kOk ? 0u : 1u);
  return v;
}

// Writes raw header bytes (no validation) for crafted rejects.
std::vector<uint8_t> raw(uint8_t version, uint8_t kind, uint16_t flags, uint32_t src, uint32_t dst,
                         uint16_t data_len, uint16_t reserved, size_t data) {
  std::vector<uint8_t> p(kCmHeaderLen + data, 0xcd);
  p[0] = version;
  p[1] = kind;
  store_be16(&p[2], flags);
  store_be32(&p[4], src);
  store_be32(&p[8], dst);
  store_be16(&p[12], data_len);
  store_be16(&p[14], reserved);
  return p;
}

}  // namespace

TEST(CmHeader, ByteExactLayout) {
  CmHeader h = of(CmKind::kAccept, 0x0100);
  h.src_id = 0x11121314;
  h.dst_id = 0x21222324;
  auto p = payload_of(h);
  const uint8_t want[] = {1,    2,    0,    0,    0x11, 0x12, 0x13, 0x14,
                          0x21, 0x22, 0x23, 0x24, 0x01, 0x00, 0,    0};
  ASSERT_GE(p.size(), sizeof(want));
  EXPECT_EQ(0, std::memcmp(p.data(), want, sizeof(want)));
}

TEST(CmHeader, EveryKindRoundTrips) {
  for (uint8_t k = 1; k <= kCmKindMax; ++k) {
    const auto kind = static_cast<CmKind>(k);
    CmHeader h = of(kind, cm_has_data(kind) ? 7 : 0);
    if (kind == CmKind::kReject) h.flags = kCmNoListener;
    CmHeader back;
    EXPECT_EQ(decode(payload_of(h), &back), CmVerdict::kOk) << cm_kind_name(kind);
    EXPECT_EQ(back, h) << cm_kind_name(kind);
  }
}

TEST(CmHeader, DataUpToTheMaximum) {
  EXPECT_EQ(decode(payload_of(of(CmKind::kConnReq, kCmMaxData))), CmVerdict::kOk);
  CmHeader big = of(CmKind::kConnReq, kCmMaxData + 1);
  std::vector<uint8_t> p(kCmHeaderLen + kCmMaxData + 1);
  EXPECT_EQ(encode_cm(p, big), -EINVAL);
  EXPECT_EQ(decode(raw(1, 1, 0, 9, 0, kCmMaxData + 1, 0, kCmMaxData + 1)), CmVerdict::kDataLength);
}

TEST(CmHeader, RejectsEveryMalformedHeaderUnderItsReason) {
  Header rdm = outer(0);
  rdm.type = Type::kRdm;
  EXPECT_EQ(decode(payload_of(of(CmKind::kConnReq)), nullptr, rdm), CmVerdict::kOuterHeader);
  Header cq_data = outer(0);
  cq_data.cq_data = 1;
  EXPECT_EQ(decode(payload_of(of(CmKind::kConnReq)), nullptr, cq_data), CmVerdict::kOuterHeader);
  Header flags = outer(0);
  flags.flags = kHasCqData;
  EXPECT_EQ(decode(payload_of(of(CmKind::kConnReq)), nullptr, flags), CmVerdict::kOuterHeader);

  auto short_p = payload_of(of(CmKind::kKeepalive));
  short_p.resize(kCmHeaderLen - 1);
  EXPECT_EQ(decode(short_p), CmVerdict::kTruncated);
  EXPECT_EQ(decode(raw(2, 1, 0, 9, 0, 0, 0, 0)), CmVerdict::kVersion);
  EXPECT_EQ(decode(raw(1, 0, 0, 9, 0, 0, 0, 0)), CmVerdict::kKind);
  EXPECT_EQ(decode(raw(1, kCmKindMax + 1, 0, 9, 1, 0, 0, 0)), CmVerdict::kKind);
  EXPECT_EQ(decode(raw(1, 1, kCmNoListener, 9, 0, 0, 0, 0)), CmVerdict::kFlags);
  EXPECT_EQ(decode(raw(1, 3, 2, 0, 9, 0, 0, 0)), CmVerdict::kFlags);
  EXPECT_EQ(decode(raw(1, 1, 0, 0, 0, 0, 0, 0)), CmVerdict::kIds);  // connreq without source
  EXPECT_EQ(decode(raw(1, 1, 0, 9, 1, 0, 0, 0)), CmVerdict::kIds);  // connreq with destination
  EXPECT_EQ(decode(raw(1, 3, 0, 9, 1, 0, 0, 0)), CmVerdict::kIds);  // reject with a source
  EXPECT_EQ(decode(raw(1, 2, 0, 9, 0, 0, 0, 0)), CmVerdict::kIds);  // accept to nobody
  EXPECT_EQ(decode(raw(1, 7, 0, 9, 0, 0, 0, 0)), CmVerdict::kIds);  // keepalive to nobody
  EXPECT_EQ(decode(raw(1, 1, 0, 9, 0, 0, 1, 0)), CmVerdict::kReserved);
  EXPECT_EQ(decode(raw(1, 1, 0, 9, 0, 3, 0, 4)), CmVerdict::kDataLength);  // longer payload
  EXPECT_EQ(decode(raw(1, 1, 0, 9, 0, 5, 0, 4)), CmVerdict::kDataLength);  // shorter payload
  EXPECT_EQ(decode(raw(1, 5, 0, 9, 1, 1, 0, 1)), CmVerdict::kDataLength);  // data on shutdown
}

TEST(CmHeader, EncodeRefusesWhatDecodeRejectsAndShortBuffers) {
  CmHeader h = of(CmKind::kKeepalive);
  h.dst_id = 0;
  uint8_t buf[kCmHeaderLen];
  EXPECT_EQ(encode_cm(buf, h), -EINVAL);
  h = of(CmKind::kShutdown, 1);
  EXPECT_EQ(encode_cm(buf, h), -EINVAL);
  EXPECT_EQ(encode_cm(std::span<uint8_t>(buf, kCmHeaderLen - 1), of(CmKind::kShutdown)), -ENOSPC);
}

TEST(CmHeader, NamesOfVerdictsAndKinds) {
  EXPECT_STREQ(cm_verdict_name(CmVerdict::kIds), "ids");
  EXPECT_STREQ(cm_verdict_name(CmVerdict::kCount), "?");
  EXPECT_STREQ(cm_kind_name(CmKind::kShutdownAck), "shutdown-ack");
  EXPECT_STREQ(cm_kind_name(static_cast<CmKind>(0)), "?");
}
