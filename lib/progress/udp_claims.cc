// SPDX-License-Identifier: BSD-3-Clause
#include "progress/udp_claims.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>

namespace dpfab::progress {

UniqueFd UdpClaims::try_claim(const rte_ether_addr& mac, uint32_t ipv4_be, uint16_t udp_port_be,
                              bool* held) const noexcept {
  if (held) *held = false;
  // A folder every user may add to, as /tmp (sticky: a user removes only its own files).
  if (mkdir(dir_.c_str(), 01777) == 0) chmod(dir_.c_str(), 01777);
  // The network namespace: interfaces of one name, MAC and address in two namespaces are two.
  struct stat ns {};
  if (stat("/proc/self/ns/net", &ns) != 0) ns.st_ino = 0;
  const uint8_t* m = mac.addr_bytes;
  const uint32_t ip = ntohl(ipv4_be);
  char path[512];
  int n = std::snprintf(path, sizeof(path), "%s/%lu-%02x%02x%02x%02x%02x%02x-%u.%u.%u.%u-%u",
                        dir_.c_str(), static_cast<unsigned long>(ns.st_ino), m[0], m[1], m[2], m[3],
                        m[4], m[5], ip >> 24, (ip >> 16) & 0xff, (ip >> 8) & 0xff, ip & 0xff,
                        ntohs(udp_port_be));
  if (n < 0 || static_cast<size_t>(n) >= sizeof(path)) return UniqueFd();
  // Readable by all: another user's process can then lock it too (a lock needs only an open fd).
  UniqueFd fd(open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0444));
  if (!fd.valid()) fd = UniqueFd(open(path, O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return UniqueFd();
  if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (held && errno == EWOULDBLOCK) *held = true;
    return UniqueFd();
  }
  return fd;
}

}  // namespace dpfab::progress
