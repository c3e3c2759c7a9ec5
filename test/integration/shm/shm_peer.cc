// SPDX-License-Identifier: BSD-3-Clause
//
// shm-peer: one process of the multi-process same-host tests (test/integration/shm). A plain
// libfabric application on the dpdk provider's first FI_EP_RDM entry, driven line by line on its
// stdin; it answers on stdout:
//   (at start)            ready name=<hex of fi_getname> domain=<domain name> pid=<pid>
//   peer <k> <hex>        inserts peer k's address                       -> ok peer <k>
//   drop <k>              forgets peer k (its process is gone)           -> ok drop <k>
//   round <r> <size>      sends one message of <size> bytes (>= 16) to every peer, and waits
//                         (at most 60 s) until every send completed or failed and a message of
//                         round r came from every peer (messages of later rounds are kept)
//                         -> done <r> sent=<n> recv=<n> err=<n> [errs=<k>:<fi_errno>,...]
//                            [missing=<k>,...] ms=<milliseconds>
//   quit                  closes everything and exits 0                   -> bye
// Every message carries {round, sender index, size} and its bytes are checked at the receiver.
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Msg {
  uint32_t round;
  uint32_t from;
  uint64_t size;
};

std::string hex(const void* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t b = static_cast<const uint8_t*>(p)[i];
    s += d[b >> 4];
    s += d[b & 15];
  }
  return s;
}

std::vector<uint8_t> unhex(const std::string& s) {
  std::vector<uint8_t> v;
  for (size_t i = 0; i + 1 < s.size(); i += 2) v.push_back(std::stoi(s.substr(i, 2), nullptr, 16));
  return v;
}

[[noreturn]] void die(const char* what, int rc) {
  std::printf("fatal %s: %d %s\n", what, rc, fi_strerror(-rc));
  std::fflush(stdout);
  std::exit(2);
}

uint8_t pattern(const Msg& m, size_t i) { return static_cast<uint8_t>(m.round * 7 + m.from + i); }

class Peer {
 public:
  void open() {
    fi_info* hints = fi_allocinfo();
    hints->fabric_attr->prov_name = strdup("dpdk");
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_MSG | FI_SOURCE;
    hints->domain_attr->mr_mode = 0;
    int rc = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info_);
    fi_freeinfo(hints);
    if (rc) die("fi_getinfo", rc);
    if ((rc = fi_fabric(info_->fabric_attr, &fabric_, nullptr))) die("fi_fabric", rc);
    if ((rc = fi_domain(fabric_, info_, &domain_, nullptr))) die("fi_domain", rc);
    fi_cq_attr cqa{};
    cqa.format = FI_CQ_FORMAT_TAGGED;
    cqa.size = 4096;
    if ((rc = fi_cq_open(domain_, &cqa, &cq_, nullptr))) die("fi_cq_open", rc);
    fi_av_attr ava{};
    ava.type = FI_AV_TABLE;
    if ((rc = fi_av_open(domain_, &ava, &av_, nullptr))) die("fi_av_open", rc);
    if ((rc = fi_endpoint(domain_, info_, &ep_, nullptr))) die("fi_endpoint", rc);
    if ((rc = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV))) die("bind cq", rc);
    if ((rc = fi_ep_bind(ep_, &av_->fid, 0))) die("bind av", rc);
    if ((rc = fi_enable(ep_))) die("fi_enable", rc);
    rx_.resize(kRx);
    for (auto& b : rx_) b.resize(kMax);
    for (size_t i = 0; i < kRx; ++i) post(i);
    char name[64];
    size_t len = sizeof(name);
    if ((rc = fi_getname(&ep_->fid, name, &len))) die("fi_getname", rc);
    std::printf("ready name=%s domain=%s pid=%d\n", hex(name, len).c_str(),
                info_->domain_attr->name, getpid());
  }

  void close() {
    if (ep_) fi_close(&ep_->fid);
    if (av_) fi_close(&av_->fid);
    if (cq_) fi_close(&cq_->fid);
    if (domain_) fi_close(&domain_->fid);
    if (fabric_) fi_close(&fabric_->fid);
    fi_freeinfo(info_);
  }

  void add_peer(uint32_t k, const std::string& h) {
    std::vector<uint8_t> a = unhex(h);
    fi_addr_t fa = FI_ADDR_NOTAVAIL;
    int n = fi_av_insert(av_, a.data(), 1, &fa, 0, nullptr);
    if (n != 1) die("fi_av_insert", n < 0 ? n : -FI_EINVAL);
    peers_[k] = fa;
    by_addr_[fa] = k;
    std::printf("ok peer %u\n", k);
  }

  void drop(uint32_t k) {
    peers_.erase(k);
    std::printf("ok drop %u\n", k);
  }

  void round(uint32_t r, size_t size, uint32_t me) {
    if (size < sizeof(Msg)) size = sizeof(Msg);
    if (size > kMax) size = kMax;
    const auto t0 = Clock::now();
    const auto deadline = t0 + std::chrono::seconds(60);
    std::map<uint32_t, int> errs;
    // The send buffers live until quit: a send that outlived its round (a peer that died) still
    // points into one.
    std::vector<std::vector<uint8_t>>& bufs = tx_bufs_[r];
    bufs.reserve(peers_.size());
    size_t outstanding = 0, sent = 0;
    for (auto& [k, fa] : peers_) {
      bufs.emplace_back(size);
      Msg m{r, me, size};
      std::memcpy(bufs.back().data(), &m, sizeof(m));
      for (size_t i = sizeof(m); i < size; ++i) bufs.back()[i] = pattern(m, i);
      for (;;) {
        ssize_t rc = fi_send(ep_, bufs.back().data(), size, nullptr, fa,
                             reinterpret_cast<void*>(static_cast<uintptr_t>(k + 1)));
        if (rc == 0) {
          ++outstanding;
          break;
        }
        if (rc != -FI_EAGAIN) {
          errs[k] = static_cast<int>(-rc);  // refused at once (a peer known to be gone)
          break;
        }
        poll(&outstanding, &sent, errs);
        if (Clock::now() > deadline) break;
      }
    }
    for (;;) {
      bool all = outstanding == 0;
      for (auto& [k, fa] : peers_)
        if (!errs.count(k) && !got_[r].count(k)) all = false;
      if (all || Clock::now() > deadline) break;
      poll(&outstanding, &sent, errs);
    }
    std::string e, missing;
    for (auto& [k, v] : errs)
      e += (e.empty() ? "" : ",") + std::to_string(k) + ":" + std::to_string(v);
    for (auto& [k, fa] : peers_)
      if (!errs.count(k) && !got_[r].count(k))
        missing += (missing.empty() ? "" : ",") + std::to_string(k);
    std::printf(
        "done %u sent=%zu recv=%zu err=%zu%s%s%s%s ms=%lld\n", r, sent, got_[r].size(), errs.size(),
        e.empty() ? "" : " errs=", e.c_str(), missing.empty() ? "" : " missing=", missing.c_str(),
        static_cast<long long>(
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()));
    if (bad_) std::printf("corrupt %zu\n", bad_);
  }

 private:
  static constexpr size_t kRx = 256;
  static constexpr size_t kMax = 1 << 20;

  void post(size_t i) {
    for (;;) {
      ssize_t rc = fi_recv(ep_, rx_[i].data(), kMax, nullptr, FI_ADDR_UNSPEC,
                           reinterpret_cast<void*>(static_cast<uintptr_t>(0x10000 + i)));
      if (rc == 0) return;
      if (rc != -FI_EAGAIN) die("fi_recv", static_cast<int>(rc));
      fi_cq_entry e;
      (void)fi_cq_read(cq_, &e, 0);
    }
  }

  void poll(size_t* outstanding, size_t* sent, std::map<uint32_t, int>& errs) {
    fi_cq_tagged_entry es[16];
    fi_addr_t src[16];
    ssize_t n = fi_cq_readfrom(cq_, es, 16, src);
    // Many processes share few cores: let the others run while nothing came.
    if (n == -FI_EAGAIN) sched_yield();
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(cq_, &err, 0) == 1) {
        const auto ctx = reinterpret_cast<uintptr_t>(err.op_context);
        if (ctx >= 0x10000) {
          post(ctx - 0x10000);  // a receive failed (bound to a message of a peer that died)
        } else if (ctx > 0) {
          errs[static_cast<uint32_t>(ctx - 1)] = err.err;
          --*outstanding;
        }
      }
      return;
    }
    for (ssize_t i = 0; i < n; ++i) {
      const auto ctx = reinterpret_cast<uintptr_t>(es[i].op_context);
      if (ctx >= 0x10000) {
        const size_t slot = ctx - 0x10000;
        Msg m{};
        if (es[i].len >= sizeof(m)) std::memcpy(&m, rx_[slot].data(), sizeof(m));
        if (es[i].len < sizeof(m) || m.size != es[i].len) {
          ++bad_;
        } else {
          for (size_t b = sizeof(m); b < m.size; ++b)
            if (rx_[slot][b] != pattern(m, b)) {
              ++bad_;
              break;
            }
          got_[m.round].insert(m.from);
        }
        post(slot);
      } else if (ctx > 0) {
        --*outstanding;
        ++*sent;
      }
    }
  }

  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  fid_ep* ep_ = nullptr;
  std::vector<std::vector<uint8_t>> rx_;
  std::map<uint32_t, fi_addr_t> peers_;
  std::map<fi_addr_t, uint32_t> by_addr_;
  std::map<uint32_t, std::set<uint32_t>> got_;  // round -> senders heard
  std::map<uint32_t, std::vector<std::vector<uint8_t>>> tx_bufs_;
  size_t bad_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const uint32_t me = argc > 1 ? static_cast<uint32_t>(std::atoi(argv[1])) : 0;
  Peer p;
  p.open();
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    if (cmd == "peer") {
      uint32_t k;
      std::string h;
      in >> k >> h;
      p.add_peer(k, h);
    } else if (cmd == "drop") {
      uint32_t k;
      in >> k;
      p.drop(k);
    } else if (cmd == "round") {
      uint32_t r;
      size_t size;
      in >> r >> size;
      p.round(r, size, me);
    } else if (cmd == "quit") {
      break;
    }
  }
  p.close();
  std::printf("bye\n");
  return 0;
}
