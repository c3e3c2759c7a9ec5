// SPDX-License-Identifier: BSD-3-Clause
//
// The provider through the real libfabric core: getinfo and its hints, fabric and domain open and
// close. meson runs this binary once per port configuration (default memif, net_null, net_ring,
// net_memif, several ports).
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <rdma/fi_endpoint.h>
#include <sched.h>

#include "fixture.h"

using namespace dpfab::test;

namespace {

// Values libfabric 2.x headers still define but deprecate with a warning at each use.
constexpr uint64_t kLocalMr = 1ull << 55;  // FI_LOCAL_MR
constexpr int kMrBasic = 1 << 0;           // FI_MR_BASIC
constexpr int kMrScalable = 1 << 1;        // FI_MR_SCALABLE

cpu_set_t g_affinity_before_fi;

std::string name_of(const fi_info* i) { return i->domain_attr->name; }

// True when the dpdk provider itself offers nothing for these hints (the core may still return
// utility providers layered over us).
bool refused(const fi_info* hints) {
  InfoPtr info;
  int ret = getinfo(hints, &info);
  return ret != 0 || !has_dpdk_entry(info.get());
}

}  // namespace

TEST(Getinfo, OneDgramEntryPerConfiguredPort) {
  InfoPtr info;
  ASSERT_EQ(getinfo(dpdk_hints().get(), &info), 0);
  auto list = as_list(info.get());
  auto ports = expected_ports();
  ASSERT_EQ(list.size(), ports.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const fi_info* e = list[i];
    EXPECT_STREQ(e->fabric_attr->prov_name, "dpdk");
    EXPECT_STREQ(e->fabric_attr->name, "dpdk");
    EXPECT_EQ(name_of(e), ports[i]);
    EXPECT_EQ(e->ep_attr->type, FI_EP_DGRAM);
    EXPECT_TRUE(e->caps & FI_MSG);
    EXPECT_FALSE(e->caps & (FI_TAGGED | FI_RMA | FI_ATOMIC));
    EXPECT_EQ(e->addr_format, static_cast<uint32_t>(FI_FORMAT_UNSPEC));
    EXPECT_EQ(e->domain_attr->data_progress, FI_PROGRESS_MANUAL);
    EXPECT_GT(e->domain_attr->cntr_cnt, 0u);
    EXPECT_GT(e->domain_attr->cq_cnt, 0u);
    EXPECT_GT(e->ep_attr->max_msg_size, 1000u);
    ASSERT_EQ(e->src_addrlen, 16u);
    const auto* mac = static_cast<const uint8_t*>(e->src_addr) + 2;
    EXPECT_TRUE(mac[0] | mac[1] | mac[2] | mac[3] | mac[4] | mac[5])
        << "EAL started in getinfo, so the MAC is known";
    EXPECT_EQ(e->fabric_attr->api_version, FI_VERSION(1, 17));
  }
}

TEST(Getinfo, StartingEalLeavesTheApplicationThreadAffinityAlone) {
  InfoPtr info;
  ASSERT_EQ(getinfo(dpdk_hints().get(), &info), 0);
  cpu_set_t now;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(now), &now), 0);
  EXPECT_TRUE(CPU_EQUAL(&now, &g_affinity_before_fi));
}

TEST(Getinfo, HonoursEndpointType) {
  for (auto type : {FI_EP_DGRAM, FI_EP_RDM, FI_EP_MSG}) {
    InfoPtr info;
    ASSERT_EQ(getinfo(dpdk_hints(type).get(), &info), 0) << type;
    ASSERT_TRUE(has_dpdk_entry(info.get()));
    for (auto* e : as_list(info.get())) EXPECT_EQ(e->ep_attr->type, type);
  }
}

// Per port an RDM entry, a DGRAM one, then an MSG one; the first entry of a plain fi_getinfo
// naming dpdk is our own RDM (fi_pingpong, fabtests and Open MPI take the first), and the core
// lists neither "dpdk;ofi_rxd" nor "dpdk;ofi_rxm": their probes are answered with nothing.
TEST(Getinfo, NativeRdmFirstAndNoUtilityLayer) {
  InfoPtr info;
  ASSERT_EQ(getinfo(dpdk_hints(FI_EP_UNSPEC).get(), &info), 0);
  auto list = as_list(info.get());
  auto ports = expected_ports();
  ASSERT_EQ(list.size(), 3 * ports.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const fi_info* e = list[i];
    EXPECT_STREQ(e->fabric_attr->prov_name, "dpdk");
    EXPECT_EQ(name_of(e), ports[i / 3]);
    const fi_ep_type want[] = {FI_EP_RDM, FI_EP_DGRAM, FI_EP_MSG};
    EXPECT_EQ(e->ep_attr->type, want[i % 3]);
  }
  // The first entry of everything a plain RDM request naming dpdk gets is dpdk's own, whatever
  // the capabilities asked (rxm layers over MSG providers when caps leave room for it).
  for (uint64_t caps : {uint64_t{0}, uint64_t{FI_MSG}, uint64_t{FI_TAGGED}}) {
    auto r = dpdk_hints(FI_EP_RDM);
    r->caps = caps;
    InfoPtr ri;
    ASSERT_EQ(getinfo(r.get(), &ri), 0);
    EXPECT_STREQ(ri->fabric_attr->prov_name, "dpdk") << caps;
    for (fi_info* e = ri.get(); e; e = e->next)
      EXPECT_EQ(std::string(e->fabric_attr->prov_name).find("ofi_rxm"), std::string::npos);
  }
  const fi_info* rdm = list[0];
  EXPECT_TRUE(rdm->caps & FI_TAGGED);
  EXPECT_TRUE(rdm->caps & FI_MSG);
  EXPECT_EQ(rdm->caps & (FI_RMA | FI_ATOMIC), uint64_t{FI_RMA | FI_ATOMIC});
  EXPECT_FALSE(rdm->caps & FI_SOURCE);
  EXPECT_EQ(rdm->tx_attr->msg_order & FI_ORDER_SAS, static_cast<uint64_t>(FI_ORDER_SAS));
  EXPECT_GE(rdm->ep_attr->max_msg_size, 1ull << 30);
  EXPECT_GT(rdm->tx_attr->inject_size, 0u);
  // What Open MPI's mtl ofi asks for.
  auto h = dpdk_hints(FI_EP_RDM);
  h->caps = FI_TAGGED | FI_MSG | FI_DIRECTED_RECV;
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->tx_attr->msg_order = FI_ORDER_SAS;
  h->rx_attr->msg_order = FI_ORDER_SAS;
  h->domain_attr->threading = FI_THREAD_DOMAIN;
  h->domain_attr->resource_mgmt = FI_RM_ENABLED;
  ASSERT_EQ(getinfo(h.get(), &info), 0);
  EXPECT_STREQ(info->fabric_attr->prov_name, "dpdk");
  EXPECT_TRUE(info->caps & FI_DIRECTED_RECV);
  // Nothing layered over us (other providers are, with no provider named).
  free(h->fabric_attr->prov_name);
  h->fabric_attr->prov_name = nullptr;
  ASSERT_EQ(getinfo(h.get(), &info), 0);
  for (fi_info* e = info.get(); e; e = e->next) {
    EXPECT_STRNE(e->fabric_attr->prov_name, "dpdk;ofi_rxd") << e->fabric_attr->prov_name;
    EXPECT_STRNE(e->fabric_attr->prov_name, "dpdk;ofi_rxm") << e->fabric_attr->prov_name;
  }
  // Nor with no hints at all (what fi_info prints).
  fi_info* all = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, nullptr, &all), 0);
  for (fi_info* e = all; e; e = e->next)
    EXPECT_EQ(std::string(e->fabric_attr->prov_name).find("dpdk;"), std::string::npos)
        << e->fabric_attr->prov_name;
  fi_freeinfo(all);
}

// ofi_rxd's probe (caps FI_MSG, mode FI_LOCAL_MR | FI_CONTEXT | FI_MSG_PREFIX, DGRAM) is answered
// with nothing; an application that accepts every mode bit (fabtests fi_av_test: mode ~0) is
// answered with our DGRAM entries.
TEST(Getinfo, OnlyTheRxdProbeItselfGetsNothing) {
  auto probe = dpdk_hints();
  probe->caps = FI_MSG;
  probe->mode = kLocalMr | FI_CONTEXT | FI_MSG_PREFIX;
  InfoPtr info;
  EXPECT_EQ(getinfo(probe.get(), &info), -FI_ENODATA);
  auto any_mode = dpdk_hints();
  any_mode->mode = ~0ull;
  any_mode->domain_attr->mode = ~0ull;
  any_mode->domain_attr->mr_mode = ~(kMrBasic | kMrScalable);
  any_mode->addr_format = FI_SOCKADDR;
  ASSERT_EQ(getinfo(any_mode.get(), &info), 0);
  ASSERT_TRUE(has_dpdk_entry(info.get()));
  EXPECT_EQ(info->ep_attr->type, FI_EP_DGRAM);
}

TEST(Getinfo, HonoursCapsAndMode) {
  for (auto [caps, ok] : {std::pair<uint64_t, bool>{FI_MSG, true},
                          {FI_MSG | FI_SEND, true},
                          {FI_TAGGED, false},
                          {FI_RMA, false},
                          {FI_ATOMIC, false},
                          {FI_MSG | FI_MULTICAST, true},
                          {FI_MSG | FI_COLLECTIVE, false}}) {
    auto h = dpdk_hints();
    h->caps = caps;
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    InfoPtr info;
    int ret = getinfo(h.get(), &info);
    bool ours = ret == 0 && has_dpdk_entry(info.get());
    EXPECT_EQ(ours, ok) << std::hex << caps;
    for (auto* e : as_list(info.get())) {
      EXPECT_TRUE(e->caps & FI_MSG);
      EXPECT_EQ(e->mode & ~(FI_CONTEXT | FI_CONTEXT2), 0u) << "no mode bits beyond the hints";
    }
  }
}

TEST(Getinfo, HonoursAddressFormat) {
  auto h = dpdk_hints();
  h->addr_format = FI_SOCKADDR_IN6;
  InfoPtr info;
  EXPECT_TRUE(refused(h.get()));
  h->addr_format = FI_SOCKADDR_IN;  // IPv4 + UDP port (av_test.cc checks the addresses)
  ASSERT_EQ(getinfo(h.get(), &info), 0);
  EXPECT_EQ(first_dpdk(info.get())->addr_format, static_cast<uint32_t>(FI_SOCKADDR_IN));
  h->addr_format = FI_FORMAT_UNSPEC;
  EXPECT_EQ(getinfo(h.get(), &info), 0);
}

TEST(Getinfo, HonoursFabricAndDomainNames) {
  auto ports = expected_ports();
  auto h = dpdk_hints();
  h->domain_attr->name = strdup(ports.back().c_str());
  InfoPtr info;
  ASSERT_EQ(getinfo(h.get(), &info), 0);
  ASSERT_EQ(as_list(info.get()).size(), 1u);
  EXPECT_EQ(name_of(first_dpdk(info.get())), ports.back());

  free(h->domain_attr->name);
  h->domain_attr->name = strdup("no_such_port0");
  EXPECT_TRUE(refused(h.get()));

  auto f = dpdk_hints();
  f->fabric_attr->name = strdup("some_other_fabric");
  EXPECT_TRUE(refused(f.get()));
}

TEST(Getinfo, HonoursSizesAndProgress) {
  auto h = dpdk_hints();
  h->ep_attr->max_msg_size = 1ull << 30;
  InfoPtr info;
  EXPECT_TRUE(refused(h.get())) << "larger than a datagram";

  h = dpdk_hints();
  h->tx_attr->size = 1u << 20;
  EXPECT_TRUE(refused(h.get()));

  h = dpdk_hints();
  h->domain_attr->data_progress = FI_PROGRESS_AUTO;
  EXPECT_TRUE(refused(h.get())) << "no worker lcores configured";

  h = dpdk_hints();
  h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
  h->domain_attr->threading = FI_THREAD_DOMAIN;
  h->domain_attr->resource_mgmt = FI_RM_DISABLED;
  ASSERT_EQ(getinfo(h.get(), &info), 0);
  fi_info* e = first_dpdk(info.get());
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->domain_attr->threading, FI_THREAD_DOMAIN);
  EXPECT_EQ(e->domain_attr->resource_mgmt, FI_RM_DISABLED);
}

TEST(Getinfo, NodeAndServiceNameTheDestinationOrTheSource) {
  InfoPtr info;
  ASSERT_EQ(getinfo(dpdk_hints().get(), &info, "10.1.2.3", "9228"), 0);
  fi_info* e = first_dpdk(info.get());
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->dest_addrlen, 16u);
  const auto* d = static_cast<const uint8_t*>(e->dest_addr);
  uint32_t ip;
  uint16_t port;
  std::memcpy(&ip, d + 8, 4);
  std::memcpy(&port, d + 12, 2);
  EXPECT_EQ(ntohl(ip), 0x0a010203u);
  EXPECT_EQ(ntohs(port), 9228);

  ASSERT_EQ(getinfo(dpdk_hints().get(), &info, nullptr, "7000", FI_SOURCE), 0);
  e = first_dpdk(info.get());
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->dest_addr, nullptr);
  std::memcpy(&port, static_cast<const uint8_t*>(e->src_addr) + 12, 2);
  EXPECT_EQ(ntohs(port), 7000);

  // Our -FI_EINVAL reaches the application as the core's -FI_ENODATA (no provider matched).
  EXPECT_NE(getinfo(dpdk_hints().get(), &info, nullptr, "not-a-port"), 0);
  EXPECT_NE(getinfo(dpdk_hints().get(), &info, nullptr, "70000"), 0);
}

TEST(Getinfo, RejectsForeignAddressesInHints) {
  auto h = dpdk_hints();
  h->src_addr = calloc(1, 4);
  h->src_addrlen = 4;
  InfoPtr info;
  EXPECT_TRUE(refused(h.get()));
}

TEST(Getinfo, OldApiVersionGetsAnMrModeItUnderstands) {
  auto h = dpdk_hints();
  h->domain_attr->mr_mode = kMrBasic;
  InfoPtr info;
  ASSERT_EQ(getinfo(h.get(), &info, nullptr, nullptr, 0, FI_VERSION(1, 4)), 0);
  ASSERT_NE(first_dpdk(info.get()), nullptr);
  EXPECT_EQ(first_dpdk(info.get())->domain_attr->mr_mode, kMrBasic);
}

TEST(Fabric, OpenDomainOnEveryPortAndClose) {
  InfoPtr info;
  ASSERT_EQ(getinfo(dpdk_hints().get(), &info), 0);
  ASSERT_NE(first_dpdk(info.get()), nullptr);
  fid_fabric* fabric = nullptr;
  ASSERT_EQ(fi_fabric(first_dpdk(info.get())->fabric_attr, &fabric, nullptr), 0);
  std::vector<fid_domain*> domains;
  for (auto* e : as_list(info.get())) {
    fid_domain* d = nullptr;
    ASSERT_EQ(fi_domain(fabric, e, &d, nullptr), 0) << name_of(e);
    domains.push_back(d);
  }
  EXPECT_EQ(fi_close(&fabric->fid), -FI_EBUSY) << "domains are still open";
  for (auto* d : domains) EXPECT_EQ(fi_close(&d->fid), 0);
  EXPECT_EQ(fi_close(&fabric->fid), 0);
}

TEST(Fabric, TwoFabricsShareTheProcessRuntime) {
  InfoPtr info;
  ASSERT_EQ(getinfo(dpdk_hints().get(), &info), 0);
  fi_info* e = first_dpdk(info.get());
  ASSERT_NE(e, nullptr);
  fid_fabric *a = nullptr, *b = nullptr;
  ASSERT_EQ(fi_fabric(e->fabric_attr, &a, nullptr), 0);
  ASSERT_EQ(fi_fabric(e->fabric_attr, &b, nullptr), 0);
  fid_domain *da = nullptr, *db = nullptr;
  ASSERT_EQ(fi_domain(a, e, &da, nullptr), 0);
  ASSERT_EQ(fi_domain(b, e, &db, nullptr), 0);
  EXPECT_EQ(fi_close(&da->fid), 0);
  EXPECT_EQ(fi_close(&db->fid), 0);
  EXPECT_EQ(fi_close(&a->fid), 0);
  EXPECT_EQ(fi_close(&b->fid), 0);
}

TEST(Fabric, WrongFabricNameIsRefused) {
  InfoPtr info;
  ASSERT_EQ(getinfo(dpdk_hints().get(), &info), 0);
  ASSERT_NE(first_dpdk(info.get()), nullptr);
  fi_fabric_attr attr = *first_dpdk(info.get())->fabric_attr;
  attr.name = const_cast<char*>("not_dpdk");
  fid_fabric* fabric = nullptr;
  EXPECT_EQ(fi_fabric(&attr, &fabric, nullptr), -FI_ENODATA);
}

TEST(Domain, UnknownDomainNameIsRefused) {
  InfoPtr info;
  ASSERT_EQ(getinfo(dpdk_hints().get(), &info), 0);
  fi_info* e = first_dpdk(info.get());
  ASSERT_NE(e, nullptr);
  fid_fabric* fabric = nullptr;
  ASSERT_EQ(fi_fabric(e->fabric_attr, &fabric, nullptr), 0);
  InfoPtr bogus(fi_dupinfo(e));
  fi_freeinfo(bogus->next);
  bogus->next = nullptr;
  free(bogus->domain_attr->name);
  bogus->domain_attr->name = strdup("net_bogus9");
  fid_domain* d = nullptr;
  EXPECT_EQ(fi_domain(fabric, bogus.get(), &d, nullptr), -FI_ENODEV);
  EXPECT_EQ(fi_close(&fabric->fid), 0);
}

TEST(Domain, MemoryRegistrationIsNeededOnlyForRemoteAccess) {
  InfoPtr info;
  ASSERT_EQ(getinfo(dpdk_hints().get(), &info), 0);
  fi_info* e = first_dpdk(info.get());
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->domain_attr->mr_mode, 0) << "no registration required";
  EXPECT_EQ(e->domain_attr->mr_key_size, 8u);
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  ASSERT_EQ(fi_fabric(e->fabric_attr, &fabric, nullptr), 0);
  ASSERT_EQ(fi_domain(fabric, e, &domain, nullptr), 0);
  fid_mr* mr = nullptr;
  char buf[64];
  ASSERT_EQ(fi_mr_reg(domain, buf, sizeof(buf), FI_SEND | FI_RECV, 0, 0, 0, &mr, nullptr), 0);
  EXPECT_NE(fi_mr_desc(mr), nullptr);
  EXPECT_EQ(fi_close(&domain->fid), -FI_EBUSY) << "the region holds the domain";
  EXPECT_EQ(fi_close(&mr->fid), 0);
  // A target of RMA: requested keys (mr_mode 0), unique among the domain's open regions.
  ASSERT_EQ(fi_mr_reg(domain, buf, sizeof(buf), FI_REMOTE_WRITE, 0, 7, 0, &mr, nullptr), 0);
  EXPECT_EQ(fi_mr_key(mr), 7u);
  fid_mr* dup = nullptr;
  EXPECT_EQ(fi_mr_reg(domain, buf, sizeof(buf), FI_REMOTE_READ, 0, 7, 0, &dup, nullptr),
            -FI_ENOKEY);
  EXPECT_EQ(fi_close(&mr->fid), 0);
  EXPECT_EQ(fi_close(&domain->fid), 0);
  EXPECT_EQ(fi_close(&fabric->fid), 0);
}

int main(int argc, char** argv) {
  // Before any libfabric call: EAL must leave the application thread's affinity as it was.
  pthread_getaffinity_np(pthread_self(), sizeof(g_affinity_before_fi), &g_affinity_before_fi);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
