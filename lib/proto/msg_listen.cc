// SPDX-License-Identifier: BSD-3-Clause
#include "proto/msg_listen.h"

namespace dpfab::proto::msg {

ListenTable::Seen ListenTable::on_request(const Key& k, uint64_t now) {
  if (auto it = records_.find(k); it != records_.end()) {
    if (it->second.expires > now) return it->second.state;
    records_.erase(it);  // its time was up: a request seen again after that is new
  }
  if (records_.size() >= cfg_.max) {
    expire(now);
    if (records_.size() >= cfg_.max) return Seen::kFull;
  }
  Record r;
  r.expires = now + cfg_.linger_ns;  // also bounds a request the application never answers
  records_.emplace(k, std::move(r));
  return Seen::kNew;
}

void ListenTable::rejected(const Key& k, std::span<const uint8_t> data, uint64_t now) {
  if (auto it = records_.find(k); it != records_.end()) {
    it->second.state = Seen::kRejected;
    it->second.expires = now + cfg_.linger_ns;
    it->second.reject_data.assign(data.begin(), data.end());
  }
}

std::span<const uint8_t> ListenTable::reject_data(const Key& k) const noexcept {
  auto it = records_.find(k);
  if (it == records_.end()) return {};
  return it->second.reject_data;
}

void ListenTable::expire(uint64_t now) noexcept {
  std::erase_if(records_, [now](const auto& kv) { return kv.second.expires <= now; });
}

}  // namespace dpfab::proto::msg
