// SPDX-License-Identifier: BSD-3-Clause
//
// Address vectors through the real libfabric core (fi_av_open on a dpdk domain, FI_DPDK_PORTS =
// net_null0). Nothing answers ARP on a null port, so the addresses inserted carry MACs, except
// the port's own address (the domain's resolver knows it) and an unreachable one that checks the
// bounded wait (-FI_EHOSTUNREACH) and the asynchronous error entry on the EQ. Tests are named after
// the fi_av(3) sentence they check. Every wait is bounded.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "fixture.h"

using namespace dpfab::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// An unreachable peer (TEST-NET-1, RFC 5737): never this host's address.
constexpr const char* kUnreachable = "192.0.2.1";

long elapsed_ms(Clock::time_point since) {
  return static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count());
}

class AvTest : public DomainTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(DomainTest::SetUp());
    ASSERT_EQ(d_.info->src_addrlen, sizeof(Address));
    std::memcpy(&self_, d_.info->src_addr, sizeof(self_));
  }
  void TearDown() override {
    for (fid_av* av : avs_) EXPECT_EQ(fi_close(&av->fid), 0);
    EXPECT_EQ(close_fid(&eq_), 0);
    DomainTest::TearDown();
  }

  // Opens an AV that TearDown closes.
  /// `name`: a named (shared) AV; its map_addr goes to *map_addr when given.
  fid_av* open_av(fi_av_type type, uint64_t flags = 0, size_t count = 32,
                  const char* name = nullptr, void** map_addr = nullptr) {
    fi_av_attr attr{};
    attr.type = type;
    attr.count = count;
    attr.flags = flags;
    attr.name = name;
    fid_av* av = nullptr;
    EXPECT_EQ(fi_av_open(d_.domain, &attr, &av, &context_), 0);
    if (av) avs_.push_back(av);
    if (map_addr) *map_addr = attr.map_addr;
    return av;
  }

  void open_eq() {
    fi_eq_attr attr{};
    attr.size = 64;
    attr.wait_obj = FI_WAIT_UNSPEC;
    ASSERT_EQ(fi_eq_open(d_.fabric, &attr, &eq_, nullptr), 0);
  }

  // A peer with a MAC: this port's MAC and IPv4, another UDP port and endpoint id.
  Address peer(uint16_t n) const {
    Address a = self_;
    a.udp_port_be = htons(static_cast<uint16_t>(20000 + n));
    a.ep_id_be = htons(n);
    return a;
  }

  std::string self_ip() const {
    char buf[INET_ADDRSTRLEN];
    in_addr in{self_.ipv4_be};
    inet_ntop(AF_INET, &in, buf, sizeof(buf));
    return buf;
  }

  // fi_eq_sread in short rounds (each round runs the EQ's progress once) until something can be
  // read or `limit` passes. Returns what the last sread returned.
  ssize_t sread_until(uint32_t* event, fi_eq_entry* e, std::chrono::milliseconds limit) {
    const auto until = Clock::now() + limit;
    ssize_t r;
    do {
      r = fi_eq_sread(eq_, event, e, sizeof(*e), 50, 0);
    } while (r == -FI_EAGAIN && Clock::now() < until);
    return r;
  }

  Address self_{};
  fid_eq* eq_ = nullptr;
  std::vector<fid_av*> avs_;
  int context_ = 0;
};

// ---- fi_av_open / fi_close ---------------------------------------------------------------------

TEST_F(AvTest, OpenAndCloseAvsOfVaryingSizesAndTypes) {
  for (fi_av_type type : {FI_AV_MAP, FI_AV_TABLE}) {
    for (int i = 0; i < 17; ++i) {
      fi_av_attr attr{};
      attr.type = type;
      attr.count = size_t{1} << i;
      fid_av* av = nullptr;
      ASSERT_EQ(fi_av_open(d_.domain, &attr, &av, nullptr), 0) << i;
      EXPECT_EQ(av->fid.fclass, static_cast<size_t>(FI_CLASS_AV));
      ASSERT_EQ(fi_close(&av->fid), 0);
    }
  }
}

// "FI_AV_UNSPEC: Provider will choose its preferred AV type. The AV type used will be returned
// through the type field in fi_av_attr."
TEST_F(AvTest, UnspecTypeIsReturnedAsTheTypeUsed) {
  fi_av_attr attr{};
  attr.type = FI_AV_UNSPEC;
  fid_av* av = nullptr;
  ASSERT_EQ(fi_av_open(d_.domain, &attr, &av, nullptr), 0);
  avs_.push_back(av);
  EXPECT_TRUE(attr.type == FI_AV_MAP || attr.type == FI_AV_TABLE);
}

// FI_AV_UNSPEC takes the domain's av_type ("Only address vectors of type AV index are requested")
// when the domain was opened with one.
TEST_F(AvTest, UnspecTypeFollowsTheDomainsAvType) {
  InfoPtr table_info(fi_dupinfo(d_.info));
  ASSERT_NE(table_info, nullptr);
  table_info->domain_attr->av_type = FI_AV_TABLE;
  fid_domain* dom = nullptr;
  ASSERT_EQ(fi_domain(d_.fabric, table_info.get(), &dom, nullptr), 0);
  fi_av_attr attr{};
  attr.type = FI_AV_UNSPEC;
  fid_av* av = nullptr;
  ASSERT_EQ(fi_av_open(dom, &attr, &av, nullptr), 0);
  EXPECT_EQ(attr.type, FI_AV_TABLE);
  EXPECT_EQ(fi_close(&av->fid), 0);
  EXPECT_EQ(fi_close(&dom->fid), 0);
}

TEST_F(AvTest, UnsupportedAttributesAreRejected) {
  fid_av* av = nullptr;
  fi_av_attr attr{};
  attr.type = FI_AV_TABLE;
  attr.rx_ctx_bits = 2;  // scalable endpoints only
  EXPECT_EQ(fi_av_open(d_.domain, &attr, &av, nullptr), -FI_EINVAL);
  attr.rx_ctx_bits = 0;
  attr.flags = FI_READ;  // "An AV opened for read-only access must be named"
  EXPECT_EQ(fi_av_open(d_.domain, &attr, &av, nullptr), -FI_EINVAL);
  attr.flags = FI_SEND;
  EXPECT_EQ(fi_av_open(d_.domain, &attr, &av, nullptr), -FI_EBADFLAGS);
  attr.flags = FI_SYMMETRIC;  // a hint
  ASSERT_EQ(fi_av_open(d_.domain, &attr, &av, nullptr), 0);
  avs_.push_back(av);
}

// ---- named (shared) AVs: FI_SHARED_AV ---------------------------------------------------------

std::string unique_av_name(const char* what) {
  return std::string("dpfab-test-") + what + "-" + std::to_string(getpid());
}

// "FI_READ: Opens an AV for read-only access. An AV opened for read-only access must be named
// (name attribute specified), and the AV must exist."
TEST_F(AvTest, ReadOnlyOpenOfANameNoOneCreatedFails) {
  const std::string name = unique_av_name("absent");
  fi_av_attr attr{};
  attr.name = name.c_str();
  attr.flags = FI_READ;
  fid_av* av = nullptr;
  EXPECT_EQ(fi_av_open(d_.domain, &attr, &av, nullptr), -FI_ENOENT);
}

TEST_F(AvTest, GetinfoOffersSharedAv) {
  InfoPtr hints = dpdk_hints();
  hints->caps = FI_MSG | FI_SHARED_AV;
  hints->ep_attr->type = FI_EP_RDM;
  InfoPtr info;
  ASSERT_EQ(getinfo(hints.get(), &info), 0);
  fi_info* fi = first_dpdk(info.get());
  ASSERT_NE(fi, nullptr);
  EXPECT_TRUE(fi->caps & FI_SHARED_AV);
  // Asking for a domain capability does not drop the others: neither FI_LOCAL_COMM nor
  // FI_REMOTE_COMM asked for means both.
  EXPECT_EQ(fi->caps & (FI_LOCAL_COMM | FI_REMOTE_COMM), FI_LOCAL_COMM | FI_REMOTE_COMM);
  EXPECT_TRUE(fi->domain_attr->caps & FI_SHARED_AV);
}

// "If name is non-NULL and map_addr is 0, then the map_addr used by the provider will be returned
// through the attribute structure." "The only requirement is that an fi_addr_t returned as part of
// an fi_av_insert call on one process is usable on another process which opens an AV of the same
// name." Here the other process is a forked child (fabtests fi_rdm_shared_av forks too): it opens
// the AV read-only after the parent inserted, reads the
// fi_addr from map_addr, and finds the parent's address there; an insertion made after it opened
// is seen too; it cannot insert.
TEST_F(AvTest, NamedAvIsSharedWithAnotherProcess) {
  const std::string name = unique_av_name("shared");
  void* map_addr = nullptr;
  fid_av* av = open_av(FI_AV_MAP, 0, 4, name.c_str(), &map_addr);
  ASSERT_NE(av, nullptr);
  ASSERT_NE(map_addr, nullptr);
  const auto* map = static_cast<const fi_addr_t*>(map_addr);
  EXPECT_EQ(map[0], FI_ADDR_NOTAVAIL);
  Address first = peer(1), second = peer(2);
  fi_addr_t fa = FI_ADDR_NOTAVAIL;
  ASSERT_EQ(fi_av_insert(av, &first, 1, &fa, 0, nullptr), 1);
  EXPECT_EQ(map[0], fa);

  int to_child[2], to_parent[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(to_parent), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child: exit codes name the check that failed. It opens the AV on its copy of the
    // parent's domain (opening an AV touches no port; the EAL's threads are not in the child),
    // and leaves without closing what it did not open (_exit).
    auto child = [&]() -> int {
      fi_av_attr ro{};
      ro.type = FI_AV_MAP;
      ro.name = name.c_str();
      ro.flags = FI_READ;
      fid_av* rav = nullptr;
      if (fi_av_open(d_.domain, &ro, &rav, nullptr) != 0 || !ro.map_addr) return 12;
      const fi_addr_t shared_fa = static_cast<const fi_addr_t*>(ro.map_addr)[0];
      if (shared_fa != fa) return 13;
      Address got{};
      size_t len = sizeof(got);
      if (fi_av_lookup(rav, shared_fa, &got, &len) != 0 || std::memcmp(&got, &first, 16) != 0)
        return 14;
      if (fi_av_insert(rav, &second, 1, nullptr, 0, nullptr) != -FI_EOPNOTSUPP) return 15;
      if (fi_av_remove(rav, const_cast<fi_addr_t*>(&shared_fa), 1, 0) != -FI_EOPNOTSUPP) return 16;
      char c = 1;
      if (write(to_parent[1], &c, 1) != 1 || read(to_child[0], &c, 1) != 1) return 17;
      // The parent inserted `second` meanwhile.
      const fi_addr_t fb = static_cast<const fi_addr_t*>(ro.map_addr)[1];
      len = sizeof(got);
      if (fb == FI_ADDR_NOTAVAIL || fi_av_lookup(rav, fb, &got, &len) != 0 ||
          std::memcmp(&got, &second, 16) != 0)
        return 18;
      // ...and removed `first`.
      len = sizeof(got);
      if (fi_av_lookup(rav, shared_fa, &got, &len) != -FI_EINVAL) return 19;
      if (fi_close(&rav->fid)) return 20;
      return 0;
    };
    _exit(child());
  }
  char c = 0;
  ASSERT_EQ(read(to_parent[0], &c, 1), 1);
  fi_addr_t fb = FI_ADDR_NOTAVAIL;
  EXPECT_EQ(fi_av_insert(av, &second, 1, &fb, 0, nullptr), 1);
  EXPECT_EQ(map[1], fb);
  EXPECT_EQ(fi_av_remove(av, &fa, 1, 0), 0);
  ASSERT_EQ(write(to_child[1], &c, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's failed check (see the test)";
  for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) close(fd);
}

// A shared AV does not grow: its count is its room.
TEST_F(AvTest, NamedAvTakesCountAddresses) {
  const std::string name = unique_av_name("count");
  fid_av* av = open_av(FI_AV_TABLE, 0, 2, name.c_str());
  ASSERT_NE(av, nullptr);
  Address addrs[3] = {peer(1), peer(2), peer(3)};
  int errs[3] = {};
  EXPECT_EQ(fi_av_insert(av, addrs, 2, nullptr, 0, nullptr), 2);
  EXPECT_EQ(fi_av_insert(av, &addrs[2], 1, nullptr, FI_SYNC_ERR, errs), 0);
  EXPECT_EQ(errs[0], FI_ENOSPC);
}

TEST_F(AvTest, DomainIsBusyWhileAnAvIsOpen) {
  fid_av* av = open_av(FI_AV_TABLE);
  ASSERT_NE(av, nullptr);
  EXPECT_EQ(fi_close(&d_.domain->fid), -FI_EBUSY);
}

TEST_F(AvTest, AvSetsAreNotSupported) {
  fid_av* av = open_av(FI_AV_TABLE);
  ASSERT_NE(av, nullptr);
  fi_av_set_attr attr{};
  fid_av_set* set = nullptr;
  EXPECT_EQ(fi_av_set(av, &attr, &set, nullptr), -FI_ENOSYS);
}

// ---- synchronous insertion, lookup, remove -----------------------------------------------------

// "the first address inserted may be referenced at index 0, the second at index 1, and so forth."
TEST_F(AvTest, TableIndicesFollowInsertionOrder) {
  fid_av* av = open_av(FI_AV_TABLE);
  ASSERT_NE(av, nullptr);
  Address a[3] = {peer(1), peer(2), peer(3)};
  fi_addr_t out[3];
  ASSERT_EQ(fi_av_insert(av, a, 2, out, 0, nullptr), 2);
  ASSERT_EQ(fi_av_insert(av, &a[2], 1, &out[2], 0, nullptr), 1);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i], static_cast<fi_addr_t>(i));
    Address got{};
    size_t len = sizeof(got);
    ASSERT_EQ(fi_av_lookup(av, out[i], &got, &len), 0);
    EXPECT_EQ(len, sizeof(Address));
    EXPECT_EQ(std::memcmp(&got, &a[i], sizeof(got)), 0);
  }
}

TEST_F(AvTest, MapInsertionReturnsUsableFiAddrs) {
  fid_av* av = open_av(FI_AV_MAP);
  ASSERT_NE(av, nullptr);
  std::vector<Address> a;
  for (uint16_t i = 0; i < 64; ++i) a.push_back(peer(i));
  std::vector<fi_addr_t> out(64, FI_ADDR_NOTAVAIL);
  ASSERT_EQ(fi_av_insert(av, a.data(), a.size(), out.data(), 0, nullptr), 64);
  EXPECT_EQ(std::set<fi_addr_t>(out.begin(), out.end()).size(), 64u);
  Address got{};
  size_t len = sizeof(got);
  ASSERT_EQ(fi_av_lookup(av, out[33], &got, &len), 0);
  EXPECT_EQ(std::memcmp(&got, &a[33], sizeof(got)), 0);
}

// "In the case of failure, the return value will be less than the number of addresses that was
// specified." "the fi_addr buffer associated with a failed ... insertion will be set to
// FI_ADDR_NOTAVAIL."
TEST_F(AvTest, BadAddressIsNotInsertedAndSyncErrReportsIt) {
  fid_av* av = open_av(FI_AV_TABLE);
  ASSERT_NE(av, nullptr);
  Address a[2] = {peer(1), peer(2)};
  a[1].version = 0;
  fi_addr_t out[2] = {0, 0};
  ASSERT_EQ(fi_av_insert(av, a, 2, out, 0, nullptr), 1);
  EXPECT_NE(out[0], FI_ADDR_NOTAVAIL);
  EXPECT_EQ(out[1], FI_ADDR_NOTAVAIL);
  int errs[2] = {-1, 0};
  ASSERT_EQ(fi_av_insert(av, a, 2, nullptr, FI_SYNC_ERR, errs), 1);
  EXPECT_EQ(errs[0], 0);
  EXPECT_NE(errs[1], 0);
}

TEST_F(AvTest, RemovedAddressIsInvalidUntilInsertedAgain) {
  fid_av* av = open_av(FI_AV_MAP);
  ASSERT_NE(av, nullptr);
  Address a = peer(7);
  fi_addr_t f;
  ASSERT_EQ(fi_av_insert(av, &a, 1, &f, 0, nullptr), 1);
  ASSERT_EQ(fi_av_remove(av, &f, 1, 0), 0);
  Address got{};
  size_t len = sizeof(got);
  EXPECT_EQ(fi_av_lookup(av, f, &got, &len), -FI_EINVAL);
  EXPECT_EQ(fi_av_remove(av, &f, 1, 0), -FI_EINVAL);
  fi_addr_t again;
  ASSERT_EQ(fi_av_insert(av, &a, 1, &again, 0, nullptr), 1);
  ASSERT_EQ(fi_av_lookup(av, again, &got, &len), 0);
  EXPECT_EQ(std::memcmp(&got, &a, sizeof(got)), 0);
}

// "If the actual address is larger than what can fit into the buffer, it will be truncated. On
// output, addrlen is set to the size of the buffer needed to store the address"
TEST_F(AvTest, LookupTruncatesAndReturnsTheNeededSize) {
  fid_av* av = open_av(FI_AV_TABLE);
  ASSERT_NE(av, nullptr);
  Address a = peer(1);
  ASSERT_EQ(fi_av_insert(av, &a, 1, nullptr, 0, nullptr), 1);
  uint8_t buf[8];
  size_t len = sizeof(buf);
  ASSERT_EQ(fi_av_lookup(av, 0, buf, &len), 0);
  EXPECT_EQ(len, sizeof(Address));
  EXPECT_EQ(std::memcmp(buf, &a, sizeof(buf)), 0);
}

// "converts the provided address into a printable string ... the address itself is not required
// to have been inserted ... On output, addrlen is set to the size of the buffer needed"
TEST_F(AvTest, StraddrPrintsAnyAddress) {
  fid_av* av = open_av(FI_AV_TABLE);
  ASSERT_NE(av, nullptr);
  Address a = peer(3);
  char buf[96];
  size_t len = sizeof(buf);
  ASSERT_EQ(fi_av_straddr(av, &a, buf, &len), buf);
  const std::string s = buf;
  EXPECT_EQ(s.rfind("fi_dpdk://", 0), 0u) << s;
  EXPECT_NE(s.find(self_ip() + ":20003/3"), std::string::npos) << s;
  EXPECT_EQ(len, s.size() + 1);
  char small[8];
  len = sizeof(small);
  ASSERT_EQ(fi_av_straddr(av, &a, small, &len), small);
  EXPECT_EQ(std::string(small), s.substr(0, 7));
  EXPECT_EQ(len, s.size() + 1);
}

// ---- fi_av_insertsvc / insertsym and address resolution ----------------------------------------

// The port's own IPv4: the domain's resolver knows its MAC (a loopback peer on this host).
TEST_F(AvTest, InsertSvcOfThisHostResolvesItsMac) {
  fid_av* av = open_av(FI_AV_TABLE);
  ASSERT_NE(av, nullptr);
  fi_addr_t f = FI_ADDR_NOTAVAIL;
  ASSERT_EQ(fi_av_insertsvc(av, self_ip().c_str(), "9228", &f, 0, nullptr), 1);
  Address got{};
  size_t len = sizeof(got);
  ASSERT_EQ(fi_av_lookup(av, f, &got, &len), 0);
  EXPECT_EQ(std::memcmp(got.mac, self_.mac, 6), 0);
  EXPECT_EQ(got.ipv4_be, self_.ipv4_be);
  EXPECT_EQ(got.udp_port_be, htons(9228));
  EXPECT_EQ(got.ep_id_be, 0);
}

// fi_getinfo(node, service) gives a dest_addr without a MAC ("learned by ARP when the address is
// inserted into an AV").
TEST_F(AvTest, GetinfoDestAddrInsertsWithTheResolvedMac) {
  InfoPtr info;
  ASSERT_EQ(getinfo(dpdk_hints().get(), &info, self_ip().c_str(), "4242"), 0);
  fi_info* e = first_dpdk(info.get());
  ASSERT_NE(e, nullptr);
  ASSERT_NE(e->dest_addr, nullptr);
  fid_av* av = open_av(FI_AV_MAP);
  ASSERT_NE(av, nullptr);
  fi_addr_t f;
  ASSERT_EQ(fi_av_insert(av, e->dest_addr, 1, &f, 0, nullptr), 1);
  Address got{};
  size_t len = sizeof(got);
  ASSERT_EQ(fi_av_lookup(av, f, &got, &len), 0);
  EXPECT_EQ(std::memcmp(got.mac, self_.mac, 6), 0);
  EXPECT_EQ(got.udp_port_be, htons(4242));
}

// The node may be "an FI_ADDR_STR formatted address ... In such cases, the service parameter must
// be NULL."
TEST_F(AvTest, InsertSvcTakesAnAddressString) {
  fid_av* av = open_av(FI_AV_TABLE);
  ASSERT_NE(av, nullptr);
  Address a = peer(5);
  char str[96];
  size_t len = sizeof(str);
  ASSERT_NE(fi_av_straddr(av, &a, str, &len), nullptr);
  fi_addr_t f;
  ASSERT_EQ(fi_av_insertsvc(av, str, nullptr, &f, 0, nullptr), 1);
  Address got{};
  len = sizeof(got);
  ASSERT_EQ(fi_av_lookup(av, f, &got, &len), 0);
  EXPECT_EQ(std::memcmp(&got, &a, sizeof(got)), 0);
}

// A synchronous insertion waits for the peer's MAC at most a few seconds, then that address fails
// with FI_EHOSTUNREACH (nothing answers ARP on a null port).
TEST_F(AvTest, InsertSvcOfAnUnreachableHostFailsWithinTheBound) {
  fid_av* av = open_av(FI_AV_TABLE);
  ASSERT_NE(av, nullptr);
  fi_addr_t f = 0;
  int err = 0;
  const auto t0 = Clock::now();
  EXPECT_EQ(fi_av_insertsvc(av, kUnreachable, "9228", &f, FI_SYNC_ERR, &err), 0);
  const long ms = elapsed_ms(t0);
  EXPECT_EQ(f, FI_ADDR_NOTAVAIL);
  EXPECT_EQ(err, FI_EHOSTUNREACH);
  EXPECT_GE(ms, 500);
  EXPECT_LE(ms, 4000);
}

// "if node = "10.1.1.1", nodecnt = 2, service = "5000", and svccnt = 2 ... 10.1.1.1:5000,
// 10.1.1.1:5001, 10.1.1.2:5000, 10.1.1.2:5001." Here node is this host (nodecnt 1): its MAC is
// known, so every address inserts.
TEST_F(AvTest, InsertSymInsertsEveryServiceOfTheNode) {
  fid_av* av = open_av(FI_AV_TABLE);
  ASSERT_NE(av, nullptr);
  fi_addr_t out[3];
  ASSERT_EQ(fi_av_insertsym(av, self_ip().c_str(), 1, "5000", 3, out, 0, nullptr), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i], static_cast<fi_addr_t>(i));
    Address got{};
    size_t len = sizeof(got);
    ASSERT_EQ(fi_av_lookup(av, out[i], &got, &len), 0);
    EXPECT_EQ(got.udp_port_be, htons(static_cast<uint16_t>(5000 + i)));
  }
}

// ---- asynchronous insertion (FI_EVENT) ---------------------------------------------------------

TEST_F(AvTest, BindNeedsAnEqFlagsZeroAndFiEvent) {
  open_eq();
  fid_av* sync_av = open_av(FI_AV_TABLE);
  ASSERT_NE(sync_av, nullptr);
  EXPECT_EQ(fi_av_bind(sync_av, &eq_->fid, 0), -FI_EINVAL);
  fid_av* av = open_av(FI_AV_TABLE, FI_EVENT);
  ASSERT_NE(av, nullptr);
  EXPECT_EQ(fi_av_bind(av, &eq_->fid, FI_SEND), -FI_EINVAL);  // "Flags ... must be 0"
  EXPECT_EQ(fi_av_bind(av, &d_.domain->fid, 0), -FI_EINVAL);
  EXPECT_EQ(fi_av_bind(av, &eq_->fid, 0), 0);
}

// "any insertions attempted before an EQ is bound to the AV will fail with -FI_ENOEQ."
TEST_F(AvTest, AsyncInsertBeforeBindFailsWithEnoeq) {
  fid_av* av = open_av(FI_AV_MAP, FI_EVENT);
  ASSERT_NE(av, nullptr);
  Address a = peer(1);
  EXPECT_EQ(fi_av_insert(av, &a, 1, nullptr, 0, nullptr), -FI_ENOEQ);
}

// "The context field in all completions will be the context specified to the insert call, and the
// data field in the final completion entry will report the number of addresses successfully
// inserted."
TEST_F(AvTest, AsyncGoodVectorCompletesOnTheEq) {
  open_eq();
  fid_av* av = open_av(FI_AV_MAP, FI_EVENT);
  ASSERT_NE(av, nullptr);
  ASSERT_EQ(fi_av_bind(av, &eq_->fid, 0), 0);
  Address a[4] = {peer(1), peer(2), peer(3), peer(4)};
  fi_addr_t out[4] = {FI_ADDR_NOTAVAIL, FI_ADDR_NOTAVAIL, FI_ADDR_NOTAVAIL, FI_ADDR_NOTAVAIL};
  int ctx;
  ASSERT_EQ(fi_av_insert(av, a, 4, out, 0, &ctx), 0);
  uint32_t event = 0;
  fi_eq_entry e{};
  ASSERT_EQ(fi_eq_sread(eq_, &event, &e, sizeof(e), 2000, 0), static_cast<ssize_t>(sizeof(e)));
  EXPECT_EQ(event, static_cast<uint32_t>(FI_AV_COMPLETE));
  EXPECT_EQ(e.fid, &av->fid);
  EXPECT_EQ(e.context, &ctx);
  EXPECT_EQ(e.data, 4u);
  for (fi_addr_t f : out) EXPECT_NE(f, FI_ADDR_NOTAVAIL);
}

// "There will be one EQ error entry generated for each failed address insertion, followed by one
// non-error event"; the unreachable address fails after the bounded resolution, reported through
// the EQ that the application waits on.
TEST_F(AvTest, AsyncUnreachableAddressGivesAnErrorEntryThenTheCompletion) {
  open_eq();
  fid_av* av = open_av(FI_AV_TABLE, FI_EVENT);
  ASSERT_NE(av, nullptr);
  ASSERT_EQ(fi_av_bind(av, &eq_->fid, 0), 0);
  fi_addr_t out[2] = {7, 7};
  int ctx;
  const auto t0 = Clock::now();
  ASSERT_EQ(fi_av_insertsym(av, kUnreachable, 1, "9228", 1, out, 0, &ctx), 0);
  EXPECT_LT(elapsed_ms(t0), 500);  // returns at once
  uint32_t event = 0;
  fi_eq_entry e{};
  ASSERT_EQ(sread_until(&event, &e, 5000ms), -FI_EAVAIL);
  EXPECT_LE(elapsed_ms(t0), 4500);
  fi_eq_err_entry err{};
  ASSERT_EQ(fi_eq_readerr(eq_, &err, 0), static_cast<ssize_t>(sizeof(err)));
  EXPECT_EQ(err.fid, &av->fid);
  EXPECT_EQ(err.context, &ctx);
  EXPECT_EQ(err.data, 0u);
  EXPECT_EQ(err.err, FI_EHOSTUNREACH);
  ASSERT_EQ(fi_eq_sread(eq_, &event, &e, sizeof(e), 1000, 0), static_cast<ssize_t>(sizeof(e)));
  EXPECT_EQ(event, static_cast<uint32_t>(FI_AV_COMPLETE));
  EXPECT_EQ(e.context, &ctx);
  EXPECT_EQ(e.data, 0u);
  EXPECT_EQ(out[0], FI_ADDR_NOTAVAIL);
}

// The EQ is busy while an AV is bound to it; closing the AV releases it.
TEST_F(AvTest, BoundEqIsBusyUntilTheAvCloses) {
  open_eq();
  fi_av_attr attr{};
  attr.type = FI_AV_TABLE;
  attr.flags = FI_EVENT;
  fid_av* av = nullptr;
  ASSERT_EQ(fi_av_open(d_.domain, &attr, &av, nullptr), 0);
  ASSERT_EQ(fi_av_bind(av, &eq_->fid, 0), 0);
  EXPECT_EQ(fi_close(&eq_->fid), -FI_EBUSY);
  ASSERT_EQ(fi_close(&av->fid), 0);
  EXPECT_EQ(fi_close(&eq_->fid), 0);
  eq_ = nullptr;
}

// ---- FI_SOCKADDR_IN ----------------------------------------------------------------------------

// fi_getinfo(3) addr_format: an application that asks for FI_SOCKADDR_IN (or FI_SOCKADDR, narrowed
// to it as the udp provider does) gets struct sockaddr_in addresses everywhere: src_addr,
// fi_getname, fi_av_lookup, fi_av_straddr. The AV resolves the MAC of an inserted sockaddr_in.
class SockaddrTest : public DomainTest {
 protected:
  void SetUp() override {}  // open(): each test its address format
  void open(uint32_t format) {
    InfoPtr hints = dpdk_hints();
    hints->addr_format = format;
    ASSERT_EQ(d_.open(hints.get()), 0) << d_.failed;
    ASSERT_EQ(d_.open_av(&av_), 0) << d_.failed;
  }
  void TearDown() override {
    EXPECT_EQ(close_fid(&ep_), 0);
    EXPECT_EQ(close_fid(&av_), 0);
    DomainTest::TearDown();
  }
  fid_av* av_ = nullptr;
  fid_ep* ep_ = nullptr;
};

TEST_F(SockaddrTest, SockaddrInHintsGiveSockaddrInAddresses) {
  open(FI_SOCKADDR_IN);
  EXPECT_EQ(d_.info->addr_format, static_cast<uint32_t>(FI_SOCKADDR_IN));
  ASSERT_EQ(d_.info->src_addrlen, sizeof(sockaddr_in));
  sockaddr_in self;
  std::memcpy(&self, d_.info->src_addr, sizeof(self));
  EXPECT_EQ(self.sin_family, AF_INET);
  EXPECT_NE(self.sin_addr.s_addr, 0u);

  // fi_getname on an endpoint of this info: a sockaddr_in with the endpoint's UDP port.
  ASSERT_EQ(fi_endpoint(d_.domain, d_.info, &ep_, nullptr), 0);
  sockaddr_in name{};
  size_t len = sizeof(name);
  ASSERT_EQ(fi_getname(&ep_->fid, &name, &len), 0);
  EXPECT_EQ(len, sizeof(name));
  EXPECT_EQ(name.sin_family, AF_INET);
  EXPECT_EQ(name.sin_addr.s_addr, self.sin_addr.s_addr);

  // fi_av_insert of a sockaddr_in: the MAC comes from the resolver (our own address here);
  // fi_av_lookup hands it back as a sockaddr_in.
  sockaddr_in peer = self;
  peer.sin_port = htons(9228);
  fi_addr_t f = FI_ADDR_NOTAVAIL;
  ASSERT_EQ(fi_av_insert(av_, &peer, 1, &f, 0, nullptr), 1);
  sockaddr_in got{};
  len = sizeof(got);
  ASSERT_EQ(fi_av_lookup(av_, f, &got, &len), 0);
  EXPECT_EQ(len, sizeof(got));
  EXPECT_EQ(got.sin_family, AF_INET);
  EXPECT_EQ(got.sin_addr.s_addr, peer.sin_addr.s_addr);
  EXPECT_EQ(got.sin_port, peer.sin_port);

  char buf[64];
  len = sizeof(buf);
  ASSERT_EQ(fi_av_straddr(av_, &peer, buf, &len), buf);
  char ip[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof(ip));
  EXPECT_EQ(std::string(buf), std::string("fi_sockaddr_in://") + ip + ":9228");
}

TEST_F(SockaddrTest, SockaddrIsNarrowedToSockaddrIn) {
  open(FI_SOCKADDR);
  EXPECT_EQ(d_.info->addr_format, static_cast<uint32_t>(FI_SOCKADDR_IN));
}

TEST_F(SockaddrTest, OtherAddressFormatsAreNotOffered) {
  for (uint32_t format :
       {uint32_t{FI_SOCKADDR_IN6}, uint32_t{FI_SOCKADDR_IB}, uint32_t{FI_ADDR_STR}}) {
    InfoPtr hints = dpdk_hints();
    hints->addr_format = format;
    InfoPtr info;
    getinfo(hints.get(), &info);
    EXPECT_EQ(first_dpdk(info.get()), nullptr) << format;
  }
}

// An AV of a native-format domain still takes a sockaddr_in (and a sockaddr_in6 is refused).
TEST_F(SockaddrTest, NativeAvAcceptsSockaddrInAndRefusesOtherFamilies) {
  open(FI_FORMAT_UNSPEC);
  EXPECT_EQ(d_.info->addr_format, static_cast<uint32_t>(FI_FORMAT_UNSPEC));
  Address self;
  std::memcpy(&self, d_.info->src_addr, sizeof(self));
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_addr.s_addr = self.ipv4_be;
  peer.sin_port = htons(777);
  fi_addr_t f = FI_ADDR_NOTAVAIL;
  ASSERT_EQ(fi_av_insert(av_, &peer, 1, &f, 0, nullptr), 1);
  Address got{};
  size_t len = sizeof(got);
  ASSERT_EQ(fi_av_lookup(av_, f, &got, &len), 0);
  EXPECT_EQ(got.version, 1);
  EXPECT_EQ(std::memcmp(got.mac, self.mac, 6), 0);
  EXPECT_EQ(got.udp_port_be, htons(777));
  sockaddr_in bad = peer;
  bad.sin_family = AF_INET6;
  EXPECT_EQ(fi_av_insert(av_, &bad, 1, &f, 0, nullptr), 0);
  EXPECT_EQ(f, FI_ADDR_NOTAVAIL);
}

}  // namespace
