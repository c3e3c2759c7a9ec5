// SPDX-License-Identifier: BSD-3-Clause
//
// progress::UdpClaims: a UDP port of one address is held by one claim at a time, in this process
// or another, and is free again once its holder closes it or exits (killed included); other
// addresses (another MAC or IPv4) do not contend. Each test has a claims folder of its own.
#include "progress/udp_claims.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace dpfab::progress {
namespace {

rte_ether_addr mac_of(uint8_t last) {
  rte_ether_addr m{};
  m.addr_bytes[0] = 0x02;
  m.addr_bytes[5] = last;
  return m;
}

class UdpClaimsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dpfab-claims-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    base_ = tmpl;
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + base_ + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
  }
  // The folder does not exist yet: try_claim makes it.
  UdpClaims claims() const { return UdpClaims(base_ + "/claims"); }

  std::string base_;
  const uint32_t ip_ = htonl(0x0a4d0002);
  const uint16_t port_ = htons(49152);
};

TEST_F(UdpClaimsTest, APortIsHeldByOneClaimAtATime) {
  UdpClaims c = claims();
  bool held = true;
  UniqueFd first = c.try_claim(mac_of(1), ip_, port_, &held);
  ASSERT_TRUE(first.valid());
  EXPECT_FALSE(held);
  UniqueFd second = c.try_claim(mac_of(1), ip_, port_, &held);
  EXPECT_FALSE(second.valid());
  EXPECT_TRUE(held);
  first.reset();  // closing the claim frees the port
  UniqueFd third = c.try_claim(mac_of(1), ip_, port_, &held);
  EXPECT_TRUE(third.valid());
  EXPECT_FALSE(held);
}

TEST_F(UdpClaimsTest, OtherPortsAndOtherAddressesDoNotContend) {
  UdpClaims c = claims();
  UniqueFd a = c.try_claim(mac_of(1), ip_, port_);
  ASSERT_TRUE(a.valid());
  EXPECT_TRUE(c.try_claim(mac_of(1), ip_, htons(49153)).valid());
  EXPECT_TRUE(c.try_claim(mac_of(2), ip_, port_).valid());  // another link (memif: own MAC)
  EXPECT_TRUE(c.try_claim(mac_of(1), htonl(0x0a4d0003), port_).valid());
}

// The kernel drops the lock of a process that is killed: its port is free at once.
TEST_F(UdpClaimsTest, AClaimOfAnotherProcessHoldsUntilItIsKilled) {
  UdpClaims c = claims();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    UniqueFd mine = c.try_claim(mac_of(1), ip_, port_);
    char ok = mine.valid() ? 1 : 0;
    if (write(ready[1], &ok, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, 1);
  bool held = false;
  EXPECT_FALSE(c.try_claim(mac_of(1), ip_, port_, &held).valid());
  EXPECT_TRUE(held);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(c.try_claim(mac_of(1), ip_, port_, &held).valid());
  EXPECT_FALSE(held);
  close(ready[0]);
  close(ready[1]);
}

// Without a folder to keep claims in, nothing is known: no claim, and not "held".
TEST_F(UdpClaimsTest, AFolderThatCannotBeMadeGivesNoClaimAndNotHeld) {
  UdpClaims c(base_ + "/no/such/parent");
  bool held = true;
  EXPECT_FALSE(c.try_claim(mac_of(1), ip_, port_, &held).valid());
  EXPECT_FALSE(held);
}

}  // namespace
}  // namespace dpfab::progress
