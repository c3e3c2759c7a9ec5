// SPDX-License-Identifier: BSD-3-Clause
//
// The RDM header (lib/wire/rdm.h): byte-exact layout against a hand-written header, round trips of
// every kind, and every reject reason with a crafted header, each counted under its reason.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "wire/rdm.h"

using namespace dpfab::wire;

namespace {

RdmHeader eager() {
  RdmHeader h;
  h.kind = RdmKind::kEager;
  h.flags = kRdmTagged | kRdmCqData;
  h.epoch = 0x01020304;
  h.seq = 0x05060708;
  h.ack = 0x090a0b0c;
  h.sack = 0x1112131415161718;
  h.window = 0x191a;
  h.msg_id = 0x1b1c1d1e;
  h.offset = 0x100;
  h.length = 0x1000;
  h.tag = 0x2122232425262728;
  h.cq_data = 0x3132333435363738;
  return h;
}

Header outer(size_t payload) { return rdm_outer_header(3, 4, static_cast<uint32_t>(payload)); }

// Encodes h + data_len bytes of 0xab; the whole dpfab payload.
std::vector<uint8_t> payload_of(const RdmHeader& h, size_t data_len) {
  std::vector<uint8_t> p(rdm_header_len(h.kind) + data_len, 0xab);
  EXPECT_EQ(encode_rdm(p, h, data_len), static_cast<int>(rdm_header_len(h.kind)));
  return p;
}

RdmVerdict decode(const std::vector<uint8_t>& p, RdmHeader* h = nullptr) {
  RdmHeader tmp;
  std::span<const uint8_t> data;
  RdmDecodeStats stats;
  RdmVerdict v = decode_rdm(outer(p.size()), p, h ? h : &tmp, &data, stats);
  EXPECT_EQ(stats.get(v), 1u);
  EXPECT_EQ(stats.rejected(), v == RdmVerdict::kOk ? 0u : 1u);
  return v;
}

}  // namespace

TEST(RdmHeader, ByteExactLayout) {
  auto p = payload_of(eager(), 16);
  p.resize(kRdmHeaderLen);
  const uint8_t want[] = {2,    1,    0x00, 0x03, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
                          0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16,
                          0x17, 0x18, 0x19, 0x1a, 0x00, 0x00, 0x1b, 0x1c, 0x1d, 0x1e, 0,
                          0,    0,    0,    0,    0,    0x01, 0x00, 0,    0,    0,    0,
                          0,    0,    0x10, 0x00, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27,
                          0x28, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38};
  ASSERT_EQ(p.size(), sizeof(want));
  EXPECT_EQ(0, std::memcmp(p.data(), want, sizeof(want)));
}

TEST(RdmHeader, RoundTripEveryKind) {
  for (auto k : {RdmKind::kEager, RdmKind::kAck, RdmKind::kRts, RdmKind::kCts, RdmKind::kRdvData}) {
    RdmHeader h = eager();
    h.kind = k;
    size_t data = 0;
    if (k == RdmKind::kAck) {
      h = RdmHeader{};
      h.epoch = 9;
      h.ack = 77;
      h.sack = 5;
      h.window = 64;
      h.flags = kRdmRnr;
    } else if (k == RdmKind::kRts || k == RdmKind::kCts) {
      h.offset = 0;
      if (k == RdmKind::kCts) h.flags = h.tag = h.cq_data = 0;
    } else if (k == RdmKind::kRdvData) {
      h.flags = h.tag = h.cq_data = 0;
      data = 100;
    } else {
      data = 100;
    }
    auto p = payload_of(h, data);
    RdmHeader got;
    std::span<const uint8_t> d;
    RdmDecodeStats stats;
    ASSERT_EQ(decode_rdm(outer(p.size()), p, &got, &d, stats), RdmVerdict::kOk)
        << static_cast<int>(k);
    EXPECT_EQ(got, h);
    EXPECT_EQ(d.size(), data);
    EXPECT_EQ(d.data(), p.data() + rdm_header_len(k));
  }
}

TEST(RdmHeader, EmptyMessageIsOneEmptySegment) {
  RdmHeader h = eager();
  h.offset = h.length = 0;
  EXPECT_EQ(decode(payload_of(h, 0)), RdmVerdict::kOk);
}

TEST(RdmHeader, EncodeRefusesWhatDecodeRejects) {
  std::vector<uint8_t> buf(128, 0x5a);
  RdmHeader h = eager();
  h.epoch = 0;
  EXPECT_EQ(encode_rdm(buf, h, 0), -EINVAL);
  EXPECT_EQ(buf[0], 0x5a);
  h = eager();
  EXPECT_EQ(encode_rdm(std::span<uint8_t>(buf.data(), 63), h, 16), -ENOSPC);
  EXPECT_EQ(encode_rdm(buf, h, 0x1000), -EINVAL);  // beyond the message
}

TEST(RdmHeader, EveryRejectReason) {
  RdmDecodeStats stats;
  RdmHeader h;
  std::span<const uint8_t> d;
  auto good = payload_of(eager(), 10);

  // Outer header fields.
  for (int field = 0; field < 4; ++field) {
    Header o = outer(good.size());
    switch (field) {
      case 0:
        o.type = Type::kData;
        break;
      case 1:
        o.type = Type::kCm;
        break;
      case 2:
        o.flags = kHasCqData;
        break;
      case 3:
        o.cq_data = 1;
        break;
    }
    EXPECT_EQ(decode_rdm(o, good, &h, &d, stats), RdmVerdict::kOuterHeader) << field;
  }
  EXPECT_EQ(stats.get(RdmVerdict::kOuterHeader), 4u);

  auto mutate = [&](auto&& f) {
    auto p = good;
    f(p);
    return decode(p);
  };
  EXPECT_EQ(decode(std::vector<uint8_t>(good.begin(), good.begin() + 31)), RdmVerdict::kTruncated);
  EXPECT_EQ(decode(std::vector<uint8_t>(good.begin(), good.begin() + 63)), RdmVerdict::kTruncated);
  EXPECT_EQ(mutate([](auto& p) { p[0] = 1; }), RdmVerdict::kVersion);  // an older dpfab's
  EXPECT_EQ(mutate([](auto& p) { p[0] = 3; }), RdmVerdict::kVersion);
  EXPECT_EQ(mutate([](auto& p) { p[1] = 0; }), RdmVerdict::kKind);
  EXPECT_EQ(mutate([](auto& p) { p[1] = kRdmKindMax + 1; }), RdmVerdict::kKind);
  EXPECT_EQ(mutate([](auto& p) { p[3] |= kRdmRnr; }), RdmVerdict::kFlags);
  EXPECT_EQ(mutate([](auto& p) { p[2] = 0x80; }), RdmVerdict::kFlags);
  EXPECT_EQ(mutate([](auto& p) { std::memset(&p[4], 0, 4); }), RdmVerdict::kEpoch);
  EXPECT_EQ(mutate([](auto& p) { p[27] = 1; }), RdmVerdict::kReserved);
  EXPECT_EQ(mutate([](auto& p) { p[32] = 1; }), RdmVerdict::kRange);   // offset 2^56 + 0x100
  EXPECT_EQ(mutate([](auto& p) { p[40] = 1; }), RdmVerdict::kLength);  // length 2^56 + 0x1000
  EXPECT_EQ(mutate([](auto& p) { p[3] &= ~kRdmTagged; }), RdmVerdict::kTagField);
  EXPECT_EQ(mutate([](auto& p) { p[3] &= ~kRdmCqData; }), RdmVerdict::kCqDataField);

  // The segment must lie in the message.
  RdmHeader e = eager();
  e.offset = e.length - 10;
  auto p = payload_of(e, 10);
  EXPECT_EQ(decode(p), RdmVerdict::kOk);
  p.push_back(0);
  EXPECT_EQ(decode(p), RdmVerdict::kRange);
}

TEST(RdmHeader, KindSpecificRules) {
  // An empty segment of a non-empty message is rejected (it would never make progress).
  RdmHeader e = eager();
  std::vector<uint8_t> p(kRdmHeaderLen);
  EXPECT_EQ(encode_rdm(p, e, 0), -EINVAL);
  EXPECT_EQ(rdm_validate(e, 0), RdmVerdict::kDataLength);

  // kAck: no seq, no data; its 32 bytes only; msg_id echoes the acked stream's epoch.
  RdmHeader a;
  a.epoch = 1;
  EXPECT_EQ(rdm_validate(a, 0), RdmVerdict::kOk);
  a.seq = 1;
  EXPECT_EQ(rdm_validate(a, 0), RdmVerdict::kAckFields);
  a.seq = 0;
  a.msg_id = 0x1234;
  EXPECT_EQ(rdm_validate(a, 0), RdmVerdict::kOk);
  a.msg_id = 0;
  EXPECT_EQ(rdm_validate(a, 1), RdmVerdict::kDataLength);
  a.flags = kRdmRnr | kRdmAckReq;
  EXPECT_EQ(rdm_validate(a, 0), RdmVerdict::kOk);
  a.flags = kRdmTagged;
  EXPECT_EQ(rdm_validate(a, 0), RdmVerdict::kFlags);

  // kRts/kCts: no data, offset 0; kCts/kRdvData: no flags.
  RdmHeader r = eager();
  r.kind = RdmKind::kRts;
  r.offset = 0;
  EXPECT_EQ(rdm_validate(r, 0), RdmVerdict::kOk);
  EXPECT_EQ(rdm_validate(r, 1), RdmVerdict::kDataLength);
  r.offset = 1;
  EXPECT_EQ(rdm_validate(r, 0), RdmVerdict::kRange);
  // kRts with kRdmRef: offset is the message's address in the sender's memory, never 0.
  r.flags |= kRdmRef;
  r.offset = 0x7f00'1234'5000;
  EXPECT_EQ(rdm_validate(r, 0), RdmVerdict::kOk);
  EXPECT_EQ(rdm_validate(r, 1), RdmVerdict::kDataLength);
  r.offset = 0;
  EXPECT_EQ(rdm_validate(r, 0), RdmVerdict::kRange);
  r.flags &= ~kRdmRef;
  for (RdmKind k : {RdmKind::kEager, RdmKind::kCts, RdmKind::kRdvData, RdmKind::kAck}) {
    RdmHeader o = r;
    o.kind = k;
    o.flags = kRdmRef;
    o.tag = o.cq_data = 0;
    EXPECT_EQ(rdm_validate(o, 0), RdmVerdict::kFlags) << "kRts only";
  }
  r.kind = RdmKind::kCts;
  EXPECT_EQ(rdm_validate(r, 0), RdmVerdict::kFlags);
  r.flags = 0;
  EXPECT_EQ(rdm_validate(r, 0), RdmVerdict::kTagField);
  r.tag = 0;
  EXPECT_EQ(rdm_validate(r, 0), RdmVerdict::kCqDataField);
  r.cq_data = 0;
  EXPECT_EQ(rdm_validate(r, 0), RdmVerdict::kOk);
}

TEST(RdmHeader, SeqOrderWraps) {
  EXPECT_TRUE(seq_lt(0xffffffffu, 0));
  EXPECT_TRUE(seq_lt(1, 2));
  EXPECT_FALSE(seq_lt(2, 2));
  EXPECT_TRUE(seq_le(2, 2));
  EXPECT_FALSE(seq_lt(5, 0xfffffff0u));
}

TEST(RdmHeader, VerdictNames) {
  EXPECT_STREQ(rdm_verdict_name(RdmVerdict::kOk), "ok");
  EXPECT_STREQ(rdm_verdict_name(RdmVerdict::kCqDataField), "cq-data-field");
  EXPECT_STREQ(rdm_verdict_name(RdmVerdict::kCount), "?");
}
