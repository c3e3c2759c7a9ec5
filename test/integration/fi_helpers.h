// SPDX-License-Identifier: BSD-3-Clause
//
// Helpers for tests that go through the real libfabric core (FI_PROVIDER_PATH points at the
// plugin in the build tree; meson sets it).
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace dpfab::test {

struct InfoDeleter {
  void operator()(fi_info* i) const { fi_freeinfo(i); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

/// Hints that choose the dpdk provider (this is what makes the provider start EAL in getinfo).
// Hints naming dpdk, for one endpoint type (most tests here are DGRAM tests; getinfo's own
// tests ask for FI_EP_UNSPEC to see every entry).
inline InfoPtr dpdk_hints(fi_ep_type type = FI_EP_DGRAM) {
  InfoPtr h(fi_allocinfo());
  h->fabric_attr->prov_name = strdup("dpdk");
  h->ep_attr->type = type;
  return h;
}

inline int getinfo(const fi_info* hints, InfoPtr* out, const char* node = nullptr,
                   const char* service = nullptr, uint64_t flags = 0,
                   uint32_t version = FI_VERSION(1, 17)) {
  fi_info* info = nullptr;
  int ret = fi_getinfo(version, node, service, flags, hints, &info);
  out->reset(info);
  return ret;
}

/// The entries of the dpdk provider itself. With hints that name "dpdk" the core also returns
/// utility providers layered on us ("dpdk;ofi_rxd" RDM over our DGRAM); those are the core's.
inline std::vector<fi_info*> as_list(fi_info* head) {
  std::vector<fi_info*> v;
  for (; head; head = head->next)
    if (head->fabric_attr->prov_name && std::strcmp(head->fabric_attr->prov_name, "dpdk") == 0)
      v.push_back(head);
  return v;
}

/// The first entry of the dpdk provider itself (nullptr when none).
inline fi_info* first_dpdk(fi_info* head) {
  auto v = as_list(head);
  return v.empty() ? nullptr : v.front();
}

/// Whether any entry is the dpdk provider's own.
inline bool has_dpdk_entry(fi_info* head) { return !as_list(head).empty(); }

/// The port names the test environment configured (FI_DPDK_PORTS, else the default memif port).
inline std::vector<std::string> expected_ports() {
  const char* env = std::getenv("FI_DPDK_PORTS");
  std::string s = env ? env : "net_memif0";
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(';', start);
    if (end == std::string::npos) end = s.size();
    std::string piece = s.substr(start, end - start);
    piece = piece.substr(0, piece.find(','));
    if (!piece.empty()) names.push_back(piece);
    start = end + 1;
  }
  return names;
}

/// Two processes of a test (fork, pipes): writes `ep`'s name to `out_fd`, reads the peer's from
/// `in_fd` and inserts it into `av`. Returns 0, or the step that failed (20 getname, 21 write,
/// 22 read, 23 insert).
inline int exchange_names(fid_ep* ep, fid_av* av, int out_fd, int in_fd, fi_addr_t* peer) {
  char name[64];
  size_t len = sizeof(name);
  if (fi_getname(&ep->fid, name, &len) != 0) return 20;
  if (write(out_fd, &len, sizeof(len)) != sizeof(len) ||
      write(out_fd, name, len) != static_cast<ssize_t>(len))
    return 21;
  char other[64];
  size_t olen = 0;
  if (read(in_fd, &olen, sizeof(olen)) != sizeof(olen) || olen > sizeof(other) ||
      read(in_fd, other, olen) != static_cast<ssize_t>(olen))
    return 22;
  if (fi_av_insert(av, other, 1, peer, 0, nullptr) != 1) return 23;
  return 0;
}

/// Waits for child `pid` at most `bound` (SIGKILL after it); true when it exited with status 0.
inline bool reap_child(pid_t pid, std::chrono::seconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  int status = 0;
  pid_t r = 0;
  while ((r = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (r == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return false;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/// Reads exactly `len` bytes from `fd`; false on EOF or error.
inline bool read_all(int fd, void* buf, size_t len) {
  auto* p = static_cast<uint8_t*>(buf);
  while (len) {
    ssize_t n = read(fd, p, len);
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

/// One dpdk endpoint of `type` with its CQ (`format`, 4096 entries, FI_WAIT_UNSPEC) and a table
/// AV, through libfabric, enabled; `addr` is its name. open() returns 0 or a -FI_E* value.
struct EpNode {
  static constexpr size_t kAddrLen = 32;  // 16 without the same-host path's host part
  InfoPtr info;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  fid_ep* ep = nullptr;
  uint8_t addr[kAddrLen] = {};

  int open(fi_ep_type type = FI_EP_DGRAM, uint64_t caps = 0,
           fi_cq_format format = FI_CQ_FORMAT_MSG) {
    InfoPtr hints = dpdk_hints(type);
    if (caps) hints->caps = caps;
    if (int r = getinfo(hints.get(), &info)) return r;
    fi_info* e = first_dpdk(info.get());
    if (!e || e->ep_attr->type != type) return -FI_ENODATA;
    if (int r = fi_fabric(e->fabric_attr, &fabric, nullptr)) return r;
    if (int r = fi_domain(fabric, e, &domain, nullptr)) return r;
    fi_cq_attr cq_attr{};
    cq_attr.format = format;
    cq_attr.size = 4096;
    cq_attr.wait_obj = FI_WAIT_UNSPEC;
    if (int r = fi_cq_open(domain, &cq_attr, &cq, nullptr)) return r;
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    if (int r = fi_av_open(domain, &av_attr, &av, nullptr)) return r;
    if (int r = fi_endpoint(domain, e, &ep, nullptr)) return r;
    if (int r = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV)) return r;
    if (int r = fi_ep_bind(ep, &av->fid, 0)) return r;
    if (int r = fi_enable(ep)) return r;
    size_t len = sizeof(addr);
    return fi_getname(&ep->fid, addr, &len);
  }
  EpNode() = default;
  EpNode(const EpNode&) = delete;
  EpNode& operator=(const EpNode&) = delete;
  ~EpNode() {
    if (ep) fi_close(&ep->fid);
    if (av) fi_close(&av->fid);
    if (cq) fi_close(&cq->fid);
    if (domain) fi_close(&domain->fid);
    if (fabric) fi_close(&fabric->fid);
  }
};

}  // namespace dpfab::test
