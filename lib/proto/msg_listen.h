// SPDX-License-Identifier: BSD-3-Clause
//
// ListenTable: what a passive endpoint (fi_passive_ep, fi_listen) remembers of the connection
// requests it has seen, so that each request is reported once however often its connector repeats
// it, and a request already rejected is answered with the same reject again.
//
// A request is named by its connector's address (IPv4, UDP port, endpoint id) and the connector's
// connection id (wire/cm.h), so a connector that comes back with a new endpoint at the same address
// is a new request. A record lives while the application decides (kPending: a repeated request is
// dropped) and, after fi_reject (kRejected: repeats get the reject again), for `linger_ns`, longer
// than a connector repeats its request; then it is forgotten. fi_accept forgets it at once: the
// accepting endpoint, which shares the passive endpoint's UDP port (PortShare), is what recognises
// the repeats from then on. Records are bounded (`max`): a request that finds the table full of
// live records is dropped (counted by the caller); its connector repeats it.
//
// Threading: one owner at a time (the passive endpoint's lock); control path, it allocates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace dpfab::proto::msg {

class ListenTable {
 public:
  struct Config {
    size_t max = 1024;
    uint64_t linger_ns = 20'000'000'000;  ///< twice the default connect timeout
  };
  /// A request: the connector's address (network byte order) and connection id.
  struct Key {
    uint32_t ip_be = 0;
    uint16_t port_be = 0;
    uint16_t ep_be = 0;
    uint32_t conn_id = 0;
    friend bool operator==(const Key&, const Key&) = default;
  };
  enum class Seen : uint8_t {
    kNew,       ///< first sight: report it (FI_CONNREQ); now kPending
    kPending,   ///< repeated while the application decides: drop it
    kRejected,  ///< repeated after fi_reject: send the reject again (reject_data())
    kFull,      ///< no room for a new record: drop it, the connector repeats it
  };

  explicit ListenTable(const Config& cfg) : cfg_(cfg) {}

  /// A kConnReq arrived. May throw std::bad_alloc (the caller drops the request).
  Seen on_request(const Key& k, uint64_t now);
  /// fi_accept / fi_reject of the request `k` (nothing when it was forgotten already). An accepted
  /// request is forgotten.
  void accepted(const Key& k) noexcept { records_.erase(k); }
  void rejected(const Key& k, std::span<const uint8_t> data, uint64_t now);
  /// The data of a rejected request (empty when unknown).
  std::span<const uint8_t> reject_data(const Key& k) const noexcept;
  /// Forgets records whose time is up.
  void expire(uint64_t now) noexcept;
  size_t size() const noexcept { return records_.size(); }

 private:
  struct Record {
    Seen state = Seen::kPending;
    uint64_t expires = UINT64_MAX;
    std::vector<uint8_t> reject_data;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const noexcept {
      uint64_t a = uint64_t{k.ip_be} << 32 | uint64_t{k.port_be} << 16 | k.ep_be;
      return static_cast<size_t>((a ^ (uint64_t{k.conn_id} * 0x9e3779b97f4a7c15ull)) *
                                 0xbf58476d1ce4e5b9ull);
    }
  };

  Config cfg_;
  std::unordered_map<Key, Record, KeyHash> records_;
};

}  // namespace dpfab::proto::msg
