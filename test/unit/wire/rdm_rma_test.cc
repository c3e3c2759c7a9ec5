// SPDX-License-Identifier: BSD-3-Clause
//
// The RMA kinds of the RDM header (lib/wire/rdm.h): the extension's byte-exact layout, round
// trips of kWrite, kReadReq, kReadResp, kAtomic and kRmaResp, and their reject reasons.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "wire/rdm.h"

using namespace dpfab::wire;

namespace {

RdmHeader write_seg() {
  RdmHeader h;
  h.kind = RdmKind::kWrite;
  h.flags = kRdmCqData | kRdmRespReq;
  h.epoch = 7;
  h.seq = 3;
  h.msg_id = 0x00010002;
  h.offset = 0x100;
  h.length = 0x1000;
  h.cq_data = 0x99;
  h.rkey = 0x0102030405060708;
  h.raddr = 0x1112131415161718;
  return h;
}

Header outer(size_t payload) { return rdm_outer_header(3, 4, static_cast<uint32_t>(payload)); }

RdmVerdict decode(const std::vector<uint8_t>& p, RdmHeader* h = nullptr,
                  std::span<const uint8_t>* d = nullptr) {
  RdmHeader tmp;
  std::span<const uint8_t> data;
  RdmDecodeStats stats;
  RdmVerdict v = decode_rdm(outer(p.size()), p, h ? h : &tmp, d ? d : &data, stats);
  EXPECT_EQ(stats.get(v), 1u);
  return v;
}

std::vector<uint8_t> payload_of(const RdmHeader& h, size_t data_len) {
  std::vector<uint8_t> p(rdm_header_len(h.kind) + data_len, 0xab);
  EXPECT_EQ(encode_rdm(p, h, data_len), static_cast<int>(rdm_header_len(h.kind)));
  return p;
}

}  // namespace

TEST(RdmRma, HeaderLengths) {
  EXPECT_EQ(rdm_header_len(RdmKind::kWrite), 88u);
  EXPECT_EQ(rdm_header_len(RdmKind::kReadReq), 88u);
  EXPECT_EQ(rdm_header_len(RdmKind::kAtomic), 88u);
  EXPECT_EQ(rdm_header_len(RdmKind::kRmaResp), 88u);
  EXPECT_EQ(rdm_header_len(RdmKind::kReadResp), 64u);
  EXPECT_TRUE(rdm_has_data(RdmKind::kReadResp));
  EXPECT_FALSE(rdm_has_data(RdmKind::kReadReq));
  EXPECT_FALSE(rdm_has_rma(RdmKind::kReadResp));
}

TEST(RdmRma, ExtensionIsByteExact) {
  RdmHeader h;
  h.kind = RdmKind::kAtomic;
  h.flags = kRdmFetch;
  h.epoch = 1;
  h.length = 8;
  h.rkey = 0x2122232425262728;
  h.raddr = 0x3132333435363738;
  h.atomic_op = 2;  // FI_SUM
  h.datatype = 7;   // FI_UINT64
  auto p = payload_of(h, 8);
  const uint8_t want[] = {0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x31, 0x32, 0x33, 0x34,
                          0x35, 0x36, 0x37, 0x38, 2,    7,    0,    0,    0,    0,    0,    0};
  ASSERT_EQ(p.size(), 88u + 8u);
  EXPECT_EQ(std::memcmp(p.data() + 64, want, sizeof(want)), 0);
  EXPECT_EQ(p[1], 9);     // kind
  EXPECT_EQ(p[3], 0x20);  // kRdmFetch

  RdmHeader r;
  r.kind = RdmKind::kRmaResp;
  r.epoch = 1;
  r.status = 0x0d;  // FI_EACCES
  auto q = payload_of(r, 0);
  EXPECT_EQ(q[84], 0);
  EXPECT_EQ(q[87], 0x0d);
}

TEST(RdmRma, RoundTripEveryKind) {
  std::vector<std::pair<RdmHeader, size_t>> cases;
  cases.emplace_back(write_seg(), 64);
  RdmHeader rr;
  rr.kind = RdmKind::kReadReq;
  rr.epoch = 1;
  rr.seq = 9;
  rr.msg_id = 44;
  rr.length = 1 << 20;
  rr.rkey = 5;
  rr.raddr = 6;
  cases.emplace_back(rr, 0);
  RdmHeader rs;
  rs.kind = RdmKind::kReadResp;
  rs.flags = kRdmAckReq;
  rs.epoch = 2;
  rs.msg_id = 44;
  rs.offset = 4096;
  rs.length = 1 << 20;
  cases.emplace_back(rs, 100);
  RdmHeader at;
  at.kind = RdmKind::kAtomic;
  at.flags = kRdmCompare;
  at.epoch = 3;
  at.length = 16;
  at.rkey = 1;
  at.raddr = 8;
  at.atomic_op = 12;  // FI_CSWAP
  at.datatype = 6;
  cases.emplace_back(at, 16);
  RdmHeader resp;
  resp.kind = RdmKind::kRmaResp;
  resp.epoch = 4;
  resp.msg_id = 3;
  resp.length = 8;
  cases.emplace_back(resp, 8);
  for (auto& [h, n] : cases) {
    auto p = payload_of(h, n);
    RdmHeader got;
    std::span<const uint8_t> d;
    ASSERT_EQ(decode(p, &got, &d), RdmVerdict::kOk) << static_cast<int>(h.kind);
    EXPECT_EQ(got, h);
    EXPECT_EQ(d.size(), n);
    EXPECT_EQ(d.data(), p.data() + rdm_header_len(h.kind));
  }
}

TEST(RdmRma, Rejects) {
  // kWrite: segments as kEager; no tag.
  RdmHeader w = write_seg();
  EXPECT_EQ(rdm_validate(w, 0x1000 - 0x100), RdmVerdict::kOk);
  EXPECT_EQ(rdm_validate(w, 0x1000 - 0x100 + 1), RdmVerdict::kRange);
  EXPECT_EQ(rdm_validate(w, 0), RdmVerdict::kDataLength);
  w.tag = 1;
  EXPECT_EQ(rdm_validate(w, 1), RdmVerdict::kTagField);
  w = write_seg();
  w.flags |= kRdmTagged;
  EXPECT_EQ(rdm_validate(w, 1), RdmVerdict::kFlags);
  w = write_seg();
  w.atomic_op = 1;
  EXPECT_EQ(rdm_validate(w, 1), RdmVerdict::kRmaFields);
  w = write_seg();
  w.status = 1;
  EXPECT_EQ(rdm_validate(w, 1), RdmVerdict::kRmaFields);
  w = write_seg();
  w.rma_reserved = 1;
  EXPECT_EQ(rdm_validate(w, 1), RdmVerdict::kReserved);

  // kReadReq: no data, offset 0, no flags.
  RdmHeader r;
  r.kind = RdmKind::kReadReq;
  r.epoch = 1;
  r.length = 100;
  EXPECT_EQ(rdm_validate(r, 0), RdmVerdict::kOk);
  EXPECT_EQ(rdm_validate(r, 1), RdmVerdict::kDataLength);
  r.offset = 1;
  EXPECT_EQ(rdm_validate(r, 0), RdmVerdict::kRange);
  r.offset = 0;
  r.flags = kRdmRespReq;
  EXPECT_EQ(rdm_validate(r, 0), RdmVerdict::kFlags);
  r.flags = 0;
  r.length = kRdmMaxLength + 1;
  EXPECT_EQ(rdm_validate(r, 0), RdmVerdict::kLength);

  // kAtomic: one packet of operands; op and datatype in range; fetch xor compare.
  RdmHeader a;
  a.kind = RdmKind::kAtomic;
  a.epoch = 1;
  a.length = 8;
  EXPECT_EQ(rdm_validate(a, 8), RdmVerdict::kOk);
  EXPECT_EQ(rdm_validate(a, 4), RdmVerdict::kRange);
  a.length = 0;
  EXPECT_EQ(rdm_validate(a, 0), RdmVerdict::kDataLength);
  a.length = 8;
  a.atomic_op = kRdmAtomicOpMax + 1;
  EXPECT_EQ(rdm_validate(a, 8), RdmVerdict::kRmaFields);
  a.atomic_op = kRdmAtomicOpMax;
  a.datatype = kRdmDatatypeMax + 1;
  EXPECT_EQ(rdm_validate(a, 8), RdmVerdict::kRmaFields);
  a.datatype = kRdmDatatypeMax;
  a.flags = kRdmFetch | kRdmCompare;
  EXPECT_EQ(rdm_validate(a, 8), RdmVerdict::kRmaFields);
  a.flags = kRdmCqData;
  EXPECT_EQ(rdm_validate(a, 8), RdmVerdict::kFlags);

  // kRmaResp: no key or address; status only here.
  RdmHeader s;
  s.kind = RdmKind::kRmaResp;
  s.epoch = 1;
  s.status = 13;
  EXPECT_EQ(rdm_validate(s, 0), RdmVerdict::kOk);
  s.status = 0x10000;
  EXPECT_EQ(rdm_validate(s, 0), RdmVerdict::kRmaFields);
  s.status = 0;
  s.rkey = 1;
  EXPECT_EQ(rdm_validate(s, 0), RdmVerdict::kRmaFields);
  s.rkey = 0;
  s.length = 4;
  EXPECT_EQ(rdm_validate(s, 2), RdmVerdict::kRange);

  // The other kinds cannot carry the extension's fields.
  RdmHeader e;
  e.kind = RdmKind::kEager;
  e.epoch = 1;
  e.length = 1;
  e.raddr = 1;
  EXPECT_EQ(rdm_validate(e, 1), RdmVerdict::kRmaFields);

  // On the wire: an atomic op byte out of range is counted under its verdict.
  RdmHeader ok = a;
  ok.flags = 0;
  auto p = payload_of(ok, 8);
  p[80] = 200;
  EXPECT_EQ(decode(p), RdmVerdict::kRmaFields);
  p[80] = 0;
  p[1] = kRdmKindMax + 1;
  EXPECT_EQ(decode(p), RdmVerdict::kKind);
  EXPECT_STREQ(rdm_verdict_name(RdmVerdict::kRmaFields), "rma-fields");
}
