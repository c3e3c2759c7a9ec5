// SPDX-License-Identifier: BSD-3-Clause
//
// The out-of-band channel between the two peers: a unix stream socket carrying one JSON object
// per line. Commands, fabric addresses and each case's figures go over it; benchmark traffic never
// does. Every receive is bounded by a timeout.
#pragma once

#include <optional>
#include <string>

#include "common.h"

namespace dpfab::bench {

class Oob {
 public:
  Oob() = default;
  Oob(const Oob&) = delete;
  Oob& operator=(const Oob&) = delete;
  ~Oob();

  /// Server side: binds `path` (removing a stale file first), listens, and accepts one peer
  /// within timeout_ms. Returns "" or an error.
  std::string accept(const std::string& path, int timeout_ms);
  /// Client side: connects to `path`, retrying until timeout_ms passes. Returns "" or an error.
  std::string connect(const std::string& path, int timeout_ms);

  /// Sends one message. Returns false when the peer is gone.
  bool send(const json& msg);
  /// Receives one message within timeout_ms; nullopt on timeout, end of file or a bad line
  /// (closed() tells end of file apart).
  std::optional<json> recv(int timeout_ms);
  /// Whether a message (or end of file) is waiting, without blocking.
  bool readable();
  bool closed() const { return closed_; }

 private:
  int fd_ = -1;
  bool closed_ = false;
  std::string buf_;  ///< received bytes not yet consumed as lines
};

}  // namespace dpfab::bench
