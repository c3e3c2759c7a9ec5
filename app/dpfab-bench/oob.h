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

/// How long any out-of-band reply may take (opening a group included).
inline constexpr int kOobTimeoutMs = 30'000;

/// The server waits in slices, checking the oob socket between them: a quarter of the client's
/// timeout (so that a server woken only by its slice still answers in time), 10..100 ms.
int64_t server_slice_ns(int timeout_ms);
/// A server's answer to a command: ok when `error` is empty.
json oob_reply(const std::string& error);
/// Writes one event (a JSON object, one line) to dpfab-bench's events fd; a closed fd drops it.
void write_event(int fd, const json& event);

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
  /// Sends a command and receives its answer within kOobTimeoutMs; nullopt as recv().
  std::optional<json> ask(const json& cmd);
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
