// SPDX-License-Identifier: BSD-3-Clause
//
// fi_inject rate of small datagrams from one thread, on any provider (a plain libfabric program,
// so dpdk and udp are measured by the same code in the same run):
//   inject-rate <provider> [size=64] [seconds=2]
// One DGRAM endpoint sends to itself (its own fi_getname address in its AV). Every 32 injects it
// calls fi_cq_read once, which is the dpdk provider's manual progress (draining the loopback);
// -FI_EAGAIN from fi_inject is retried and counted. Prints injects per second.
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(x)                                                       \
  do {                                                                 \
    int r_ = (x);                                                      \
    if (r_) {                                                          \
      std::fprintf(stderr, "%s: %d (%s)\n", #x, r_, fi_strerror(-r_)); \
      return 1;                                                        \
    }                                                                  \
  } while (0)

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <provider> [size] [seconds]\n", argv[0]);
    return 2;
  }
  const size_t size = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 64;
  const double seconds = argc > 3 ? std::atof(argv[3]) : 2.0;
  fi_info* hints = fi_allocinfo();
  hints->fabric_attr->prov_name = strdup(argv[1]);
  hints->ep_attr->type = FI_EP_DGRAM;
  hints->caps = FI_MSG;
  hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_MSG_PREFIX;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
  fi_info* all = nullptr;
  CHECK(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &all));
  fi_info* info = all;
  for (fi_info* i = all; i; i = i->next)  // the provider itself, not a utility layered on it
    if (!std::strcmp(i->fabric_attr->prov_name, argv[1])) {
      info = i;
      break;
    }
  if (info->mode & FI_MSG_PREFIX) {
    std::fprintf(stderr, "provider needs FI_MSG_PREFIX: not handled here\n");
    return 1;
  }
  fid_fabric* fabric;
  fid_domain* domain;
  fid_ep* ep;
  fid_cq* cq;
  fid_av* av;
  CHECK(fi_fabric(info->fabric_attr, &fabric, nullptr));
  CHECK(fi_domain(fabric, info, &domain, nullptr));
  fi_cq_attr ca{};
  ca.format = FI_CQ_FORMAT_CONTEXT;
  ca.size = 4096;
  CHECK(fi_cq_open(domain, &ca, &cq, nullptr));
  fi_av_attr aa{};
  aa.type = FI_AV_TABLE;
  CHECK(fi_av_open(domain, &aa, &av, nullptr));
  CHECK(fi_endpoint(domain, info, &ep, nullptr));
  CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
  CHECK(fi_ep_bind(ep, &av->fid, 0));
  CHECK(fi_enable(ep));
  char name[128];
  size_t len = sizeof(name);
  CHECK(fi_getname(&ep->fid, name, &len));
  fi_addr_t self;
  if (fi_av_insert(av, name, 1, &self, 0, nullptr) != 1) return 1;
  std::vector<char> buf(size, 'x');
  fi_cq_entry e[16];
  uint64_t sent = 0, eagain = 0;
  auto t0 = std::chrono::steady_clock::now();
  auto end = t0 + std::chrono::duration<double>(seconds);
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      ssize_t r = fi_inject(ep, buf.data(), size, self);
      if (r == 0) {
        ++sent;
      } else if (r == -FI_EAGAIN) {
        ++eagain;
        fi_cq_read(cq, e, 16);
      } else {
        std::fprintf(stderr, "fi_inject: %zd\n", r);
        return 1;
      }
    }
    fi_cq_read(cq, e, 16);
    if (std::chrono::steady_clock::now() >= end) break;
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s: %zu B fi_inject: %.2f M/s (%llu sent in %.2f s, %llu EAGAIN)\n", argv[1], size,
              sent / s / 1e6, static_cast<unsigned long long>(sent), s,
              static_cast<unsigned long long>(eagain));
  fi_close(&ep->fid);
  fi_close(&av->fid);
  fi_close(&cq->fid);
  fi_close(&domain->fid);
  fi_close(&fabric->fid);
  fi_freeinfo(all);
  return 0;
}
