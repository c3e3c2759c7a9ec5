// SPDX-License-Identifier: BSD-3-Clause
//
// Helpers for the FI_EP_MSG tests through the real libfabric core, on fixture.h's Domain and
// Endpoint: a side (fabric, domain, EQ), its passive endpoint, connected endpoints with a CQ, and
// reading CM events with a bound. Every wait is bounded: a test fails, it never hangs.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fixture.h"

namespace dpfab::test {

/// One CM event (or error entry) read from an EQ.
struct CmEvent {
  int rc = 0;          ///< sizeof(fi_eq_cm_entry) + data, or a negative FI_E* (-FI_EAVAIL: error)
  uint32_t event = 0;  ///< FI_CONNREQ, FI_CONNECTED, FI_SHUTDOWN (when rc > 0)
  fid_t fid = nullptr;
  fi_info* info = nullptr;    ///< FI_CONNREQ: the caller frees it (fi_freeinfo)
  std::vector<uint8_t> data;  ///< connection data, or an error's err_data
  int err = 0;                ///< error entries: the positive FI_E* value
};

/// Reads one event from `eq` within `timeout_ms` (fi_eq_sread: it progresses the port); an error
/// entry is read with fi_eq_readerr into `err`/`data`.
inline CmEvent read_cm(fid_eq* eq, int timeout_ms) {
  CmEvent e;
  // An fi_eq_cm_entry followed by up to 512 bytes of connection data.
  alignas(fi_eq_cm_entry) uint8_t buf[sizeof(fi_eq_cm_entry) + 512] = {};
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  ssize_t rc;
  do {  // a POSIX signal (net_tap's SIGIO, a watchdog) ends a sread early: go on
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          end - std::chrono::steady_clock::now())
                          .count();
    rc = fi_eq_sread(eq, &e.event, buf, sizeof(buf), static_cast<int>(std::max<long>(left, 0)), 0);
  } while (rc == -FI_EAGAIN && std::chrono::steady_clock::now() < end);
  e.rc = static_cast<int>(rc);
  if (rc == -FI_EAVAIL) {
    uint8_t err_data[512];
    fi_eq_err_entry err{};
    err.err_data = err_data;
    err.err_data_size = sizeof(err_data);
    if (fi_eq_readerr(eq, &err, 0) == sizeof(err)) {
      e.err = err.err;
      e.fid = err.fid;
      e.data.assign(err_data, err_data + err.err_data_size);
    }
    return e;
  }
  if (rc >= static_cast<ssize_t>(sizeof(fi_eq_cm_entry))) {
    fi_eq_cm_entry entry;
    std::memcpy(&entry, buf, sizeof(entry));
    e.fid = entry.fid;
    e.info = entry.info;
    e.data.assign(buf + sizeof(fi_eq_cm_entry), buf + rc);
  }
  return e;
}

/// Hints for dpdk's FI_EP_MSG.
inline InfoPtr msg_hints(uint64_t caps = FI_MSG | FI_TAGGED) {
  InfoPtr h = dpdk_hints(FI_EP_MSG);
  h->caps = caps;
  return h;
}

/// One side of a connection: fabric, domain and EQ (FI_WAIT_UNSPEC), from an FI_EP_MSG info.
struct MsgSide : Domain {
  fid_eq* eq = nullptr;

  int open(const char* node = nullptr, const char* service = nullptr, uint64_t flags = 0,
           fi_wait_obj eq_wait = FI_WAIT_UNSPEC) {
    if (int r = Domain::open(msg_hints().get(), node, service, flags)) return r;
    return open_eq(&eq, eq_wait);
  }
  ~MsgSide() { close_fid(&eq); }
};

/// A passive endpoint of `side`, bound to its EQ and listening; `addr` is its name.
struct Listener {
  fid_pep* pep = nullptr;
  uint8_t addr[32] = {};  // 16 bytes, or 32 with the same-host path on

  int open(MsgSide& side, fi_info* info = nullptr) {
    if (int r = fi_passive_ep(side.fabric, info ? info : side.info, &pep, nullptr)) return r;
    if (int r = fi_pep_bind(pep, &side.eq->fid, 0)) return r;
    if (int r = fi_listen(pep)) return r;
    size_t len = sizeof(addr);
    return fi_getname(&pep->fid, addr, &len);
  }
  Listener() = default;
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  ~Listener() {
    if (pep) fi_close(&pep->fid);
  }
};

/// An FI_EP_MSG endpoint with one CQ (FI_CQ_FORMAT_TAGGED, FI_WAIT_UNSPEC) for both directions,
/// bound to its side's EQ.
struct Conn : Endpoint {
  int open(MsgSide& side, fi_info* info) {
    EpOptions o;
    o.cq_format = FI_CQ_FORMAT_TAGGED;
    o.cq_size = 1024;
    o.cq_wait = FI_WAIT_UNSPEC;
    o.eq = side.eq;
    return Endpoint::open(side, o, info);
  }

  /// One completion within `timeout_ms` (fi_cq_sread); an error is read into `err`.
  int wait(fi_cq_tagged_entry* c, int timeout_ms, fi_cq_err_entry* err = nullptr) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      ssize_t r = fi_cq_sread(cq, c, 1, nullptr, 50);
      if (r == 1) return 0;
      if (r == -FI_EAVAIL) {
        fi_cq_err_entry e{};
        if (fi_cq_readerr(cq, &e, 0) != 1) return -FI_EOTHER;
        if (err) *err = e;
        return -FI_EAVAIL;
      }
      if (r != -FI_EAGAIN) return static_cast<int>(r);
      if (std::chrono::steady_clock::now() >= end) return -FI_ETIMEDOUT;
    }
  }
};

}  // namespace dpfab::test
