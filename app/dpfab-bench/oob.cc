// SPDX-License-Identifier: BSD-3-Clause
#include "oob.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace dpfab::bench {

namespace {

bool make_addr(const std::string& path, sockaddr_un* sa) {
  if (path.size() >= sizeof(sa->sun_path)) return false;
  *sa = {};
  sa->sun_family = AF_UNIX;
  std::memcpy(sa->sun_path, path.c_str(), path.size() + 1);
  return true;
}

int ms_left(int64_t deadline) {
  int64_t left = (deadline - now_ns()) / 1'000'000;
  return left < 0 ? 0 : static_cast<int>(left);
}

}  // namespace

int64_t server_slice_ns(int timeout_ms) {
  return std::clamp<int64_t>(int64_t{timeout_ms} * 250'000, 10'000'000, 100'000'000);
}

json oob_reply(const std::string& error) { return json{{"ok", error.empty()}, {"error", error}}; }

void write_event(int fd, const json& event) {
  const std::string line = event.dump() + "\n";
  size_t off = 0;
  while (off < line.size()) {
    const ssize_t n = write(fd, line.data() + off, line.size() - off);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

std::optional<json> Oob::ask(const json& cmd) {
  if (!send(cmd)) return std::nullopt;
  return recv(kOobTimeoutMs);
}

Oob::~Oob() {
  if (fd_ >= 0) close(fd_);
}

std::string Oob::accept(const std::string& path, int timeout_ms) {
  sockaddr_un sa;
  if (!make_addr(path, &sa)) return "oob: socket path too long: " + path;
  int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (ls < 0) return std::string("oob: socket: ") + std::strerror(errno);
  unlink(path.c_str());
  if (bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || listen(ls, 1) != 0) {
    std::string e = std::string("oob: bind/listen ") + path + ": " + std::strerror(errno);
    close(ls);
    return e;
  }
  pollfd p{ls, POLLIN, 0};
  int r = poll(&p, 1, timeout_ms);
  if (r == 1) fd_ = ::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
  close(ls);
  unlink(path.c_str());
  if (fd_ < 0) return r == 0 ? "oob: no peer connected in time" : "oob: accept failed";
  return "";
}

std::string Oob::connect(const std::string& path, int timeout_ms) {
  sockaddr_un sa;
  if (!make_addr(path, &sa)) return "oob: socket path too long: " + path;
  int64_t deadline = now_ns() + int64_t{timeout_ms} * 1'000'000;
  for (;;) {
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return std::string("oob: socket: ") + std::strerror(errno);
    if (::connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
      fd_ = s;
      return "";
    }
    int e = errno;
    close(s);
    if (now_ns() >= deadline) return "oob: connect " + path + ": " + std::strerror(e);
    usleep(20'000);
  }
}

bool Oob::send(const json& msg) {
  std::string line = msg.dump() + "\n";
  size_t off = 0;
  while (off < line.size()) {
    ssize_t n = ::send(fd_, line.data() + off, line.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::optional<json> Oob::recv(int timeout_ms) {
  int64_t deadline = now_ns() + int64_t{timeout_ms} * 1'000'000;
  for (;;) {
    size_t nl = buf_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      json j = json::parse(line, nullptr, false);
      if (j.is_discarded()) return std::nullopt;
      return j;
    }
    if (closed_ || fd_ < 0) return std::nullopt;
    pollfd p{fd_, POLLIN, 0};
    int r = poll(&p, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return std::nullopt;
    char tmp[4096];
    ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      closed_ = true;
      return std::nullopt;
    }
    buf_.append(tmp, static_cast<size_t>(n));
  }
}

bool Oob::readable() {
  if (buf_.find('\n') != std::string::npos || closed_) return true;
  pollfd p{fd_, POLLIN, 0};
  return poll(&p, 1, 0) == 1;
}

}  // namespace dpfab::bench
