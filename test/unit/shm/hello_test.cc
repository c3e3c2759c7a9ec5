// SPDX-License-Identifier: BSD-3-Clause
#include "shm/hello.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace dpfab::shm;

namespace {

Hello sample() {
  Hello h;
  h.kind = HelloKind::kHello;
  h.host = 0x0123456789abcdefull;
  h.node = 7;
  h.nonce = 0xdeadbeef;
  h.to_node = 3;
  h.to_nonce = 0x1234;
  h.ring_bytes = 128 << 10;
  h.ipv4_be = 0x0100007f;
  const uint8_t mac[6] = {2, 0x64, 0x70, 1, 2, 3};
  std::memcpy(h.mac, mac, 6);
  h.probe_addr = 0x7fff0000;
  for (int i = 0; i < 16; ++i) h.probe[i] = static_cast<uint8_t>(i * 3);
  h.seg_bytes = segment_bytes(h.ring_bytes);
  return h;
}

HelloVerdict spoiled(void (*spoil)(uint8_t*), Hello h = sample()) {
  uint8_t b[kHelloBytes];
  encode_hello(h, b);
  spoil(b);
  Hello out;
  return decode_hello({b, kHelloBytes}, &out);
}

}  // namespace

TEST(ShmHello, RoundTripsBothKinds) {
  Hello h = sample();
  uint8_t b[kHelloBytes];
  encode_hello(h, b);
  Hello out;
  ASSERT_EQ(decode_hello({b, kHelloBytes}, &out), HelloVerdict::kOk);
  EXPECT_EQ(out.kind, HelloKind::kHello);
  EXPECT_EQ(out.host, h.host);
  EXPECT_EQ(out.node, 7u);
  EXPECT_EQ(out.nonce, 0xdeadbeefu);
  EXPECT_EQ(out.to_node, 3u);
  EXPECT_EQ(out.ring_bytes, h.ring_bytes);
  EXPECT_EQ(out.seg_bytes, h.seg_bytes);
  EXPECT_EQ(0, std::memcmp(out.probe, h.probe, 16));
  EXPECT_EQ(0, std::memcmp(out.mac, h.mac, 6));

  Hello ack = sample();
  ack.kind = HelloKind::kAck;
  ack.status = HelloStatus::kYield;
  ack.ring_bytes = 0;
  ack.seg_bytes = 0;
  encode_hello(ack, b);
  ASSERT_EQ(decode_hello({b, kHelloBytes}, &out), HelloVerdict::kOk);
  EXPECT_EQ(out.kind, HelloKind::kAck);
  EXPECT_EQ(out.status, HelloStatus::kYield);
}

TEST(ShmHello, RefusesWhatIsMalformed) {
  uint8_t b[kHelloBytes + 1] = {};
  Hello out;
  EXPECT_EQ(decode_hello({b, kHelloBytes - 1}, &out), HelloVerdict::kLength);
  EXPECT_EQ(decode_hello({b, kHelloBytes + 1}, &out), HelloVerdict::kLength);
  EXPECT_EQ(spoiled([](uint8_t* p) { p[0] = 'x'; }), HelloVerdict::kMagic);
  EXPECT_EQ(spoiled([](uint8_t* p) { p[8] = 9; }), HelloVerdict::kVersion);
  EXPECT_EQ(spoiled([](uint8_t* p) { p[12] = 1; }), HelloVerdict::kStatus) << "a hello has none";
  EXPECT_EQ(spoiled([](uint8_t* p) { std::memset(p + 24, 0, 4); }), HelloVerdict::kNode);
  EXPECT_EQ(spoiled([](uint8_t* p) { std::memset(p + 28, 0, 4); }), HelloVerdict::kNode);
  EXPECT_EQ(spoiled([](uint8_t* p) { std::memset(p + 32, 0, 4); }), HelloVerdict::kNode);
  EXPECT_EQ(spoiled([](uint8_t* p) { p[40] = 1; }), HelloVerdict::kRing) << "not a power of two";
  EXPECT_EQ(spoiled([](uint8_t* p) { p[80] ^= 1; }), HelloVerdict::kRing)
      << "a segment that does not match the rings";
  EXPECT_EQ(spoiled([](uint8_t* p) { p[54] = 1; }), HelloVerdict::kReserved);
  EXPECT_EQ(spoiled([](uint8_t* p) { p[127] = 1; }), HelloVerdict::kReserved);
  Hello ack = sample();
  ack.kind = HelloKind::kAck;
  EXPECT_EQ(spoiled([](uint8_t*) {}, ack), HelloVerdict::kRing) << "an ack carries no rings";
  ack.ring_bytes = 0;
  ack.seg_bytes = 0;
  EXPECT_EQ(spoiled([](uint8_t* p) { p[12] = 4; }, ack), HelloVerdict::kStatus);
}
