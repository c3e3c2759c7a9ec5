// SPDX-License-Identifier: BSD-3-Clause
//
// Fuzz target: endpoint addresses (lib/wire/address.h), which applications pass on from other
// processes (fi_getname -> out of band -> fi_av_insert) and whose host part decides whether a
// peer is reached through shared memory (fi_dpdk(7) "Same-host peers"). The input's first byte
// chooses the reader: even, the binary forms (read_address on the rest); odd, the string forms
// (parse_address, as fi_av_insertsym and fi_av_straddr's output take). Properties:
//   - read_address: what it accepts it took from inside the input (16 or 32 bytes, as the form
//     says); written back in the form found and read again, it gives the same address (and
//     once more the same bytes): the bytes an endpoint hands out are a fixed point;
//   - only a 32-byte native address has a host part; a 16-byte one never names a node;
//   - parse_address: what it accepts, format_address prints in a form it parses back to the same
//     fields.
// A violated property aborts (__builtin_trap), which libFuzzer reports as a crash.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "wire/address.h"

using namespace dpfab::wire;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

bool same(const Address& a, const Address& b) {
  return std::memcmp(a.mac, b.mac, 6) == 0 && a.ipv4_be == b.ipv4_be &&
         a.udp_port_be == b.udp_port_be && a.ep_id_be == b.ep_id_be && a.host_be == b.host_be &&
         a.node_be == b.node_be && a.nonce_be == b.nonce_be;
}

const char* run_binary(const uint8_t* data, size_t size) {
  AddrFormat f{};
  size_t used = 0;
  const auto a = read_address(data, size, &f, &used);
  check(a.has_value() == valid_address(data, size));
  if (!a) return "refused";
  check(used <= size && (used == kShortAddressLen || used == sizeof(Address)));
  check((f == AddrFormat::kSockaddrIn) ==
        (data[0] != kAddressVersion && data[0] != kAddressVersionShort));
  if (used == kShortAddressLen) check(!a->has_node() && a->host_be == 0);
  uint8_t out[sizeof(Address)];
  const size_t n = write_address(*a, f, out, sizeof(out));
  check(n == address_len(*a, f) && n <= sizeof(out));
  AddrFormat f2{};
  size_t used2 = 0;
  const auto b = read_address(out, n, &f2, &used2);
  check(b.has_value() && f2 == f && used2 == n);
  if (f == AddrFormat::kSockaddrIn) {
    check(b->ipv4_be == a->ipv4_be && b->udp_port_be == a->udp_port_be);
    return "sockaddr_in";
  }
  // A 32-byte address without a host identity is written in the 16-byte form: its node and nonce
  // mean nothing without a host, and go.
  if (a->host_be != 0) {
    check(same(*a, *b) && n == sizeof(Address));
  } else {
    check(b->host_be == 0 && n == kShortAddressLen && std::memcmp(a->mac, b->mac, 6) == 0 &&
          a->ipv4_be == b->ipv4_be && a->udp_port_be == b->udp_port_be &&
          a->ep_id_be == b->ep_id_be);
  }
  uint8_t again[sizeof(Address)];
  check(write_address(*b, f2, again, sizeof(again)) == n && std::memcmp(again, out, n) == 0);
  return used == sizeof(Address) ? "native" : "short";
}

const char* run_string(const uint8_t* data, size_t size) {
  const std::string_view s(reinterpret_cast<const char*>(data), size);
  const auto a = parse_address(s);
  if (!a) return "refused";
  const bool sin = s.rfind("fi_sockaddr_in://", 0) == 0;
  const std::string printed =
      format_address(*a, sin ? AddrFormat::kSockaddrIn : AddrFormat::kNative);
  const auto b = parse_address(printed);
  check(b.has_value());
  if (sin) {
    check(b->ipv4_be == a->ipv4_be && b->udp_port_be == a->udp_port_be);
  } else {
    check(same(*a, *b));
  }
  return sin ? "sockaddr_in" : "native";
}

const char* run(const uint8_t* data, size_t size) {
  if (size == 0) return "refused";
  return data[0] & 1 ? run_string(data + 1, size - 1) : run_binary(data + 1, size - 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  run(data, size);
  return 0;
}

extern "C" const char* dpfab_fuzz_verdict(const uint8_t* data, size_t size) {
  return run(data, size);
}
