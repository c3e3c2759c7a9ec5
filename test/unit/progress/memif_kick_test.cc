// SPDX-License-Identifier: BSD-3-Clause
//
// The memif kick channel (lib/progress/memif_kick.h) between two ends in one process: the hello
// exchange, kicks only when armed and only once per arming, the peer's end, and refused hellos.
// No EAL.
#include "progress/memif_kick.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>

#include "common/clock.h"
#include "progress/port_wake.h"
#include "test_util.h"

using dpfab::progress::KickChannel;
using dpfab::test::fd_readable;

namespace {

// One end: the channel, and the peer half it published (what the engine would hold).
struct End {
  KickChannel::Peer published;
  int publishes = 0;
  bool take = true;  // false: the sender does not take what is published (its TX lock is stuck)
  std::unique_ptr<KickChannel> ch;
  End(const std::string& link, bool server)
      : ch(std::make_unique<KickChannel>(link, server, [this](KickChannel::Peer p) {
          if (!take) return false;
          published = p;
          ++publishes;
          return true;
        })) {}
};

std::string unique_link(const char* what) {
  return std::string("/tmp/kick-test-") + what + "-" + std::to_string(getpid()) + ".sock#0";
}

// Runs the owner side of both ends until each has the other's half (bounded).
bool handshake(End& server, End& client) {
  if (!client.ch->accept_or_connect()) return false;
  if (!fd_readable(server.ch->listen_fd(), 2000) || !server.ch->accept_or_connect()) return false;
  auto done = [&] {
    return server.published.flag && client.published.flag && server.ch->peer_kicks_us() &&
           client.ch->peer_kicks_us();
  };
  for (int i = 0; i < 100 && !done(); ++i) {
    if (fd_readable(server.ch->conn_fd(), 10)) server.ch->on_conn_readable();
    if (fd_readable(client.ch->conn_fd(), 10)) client.ch->on_conn_readable();
  }
  return done();
}

// Both ends open, then the handshake: a linked pair.
bool open_and_handshake(End& server, End& client) {
  return server.ch->open() && client.ch->open() && handshake(server, client);
}

// Having the peer's hello is not enough to rely on its kicks: the peer's sender gets our half only
// when the peer reads our hello. An end relies on the kick (peer_kicks_us) once the peer
// acknowledged. Trusting the hello alone stranded a frame sent in between (integration-wakeup-
// memif under ASan on a loaded machine).
TEST(MemifKick, AnEndReliesOnTheKickOnlyAfterThePeerTookItsHello) {
  const std::string link = unique_link("ack");
  End server(link, true), client(link, false);
  ASSERT_TRUE(server.ch->open());
  ASSERT_TRUE(client.ch->open());
  ASSERT_TRUE(client.ch->accept_or_connect());  // the client's hello is queued
  ASSERT_TRUE(fd_readable(server.ch->listen_fd(), 2000));
  ASSERT_TRUE(server.ch->accept_or_connect());  // the server's hello is queued
  // The client takes the server's hello; the server has not read the client's yet.
  ASSERT_TRUE(fd_readable(client.ch->conn_fd(), 2000));
  client.ch->on_conn_readable();
  EXPECT_NE(client.published.flag, nullptr) << "the client can kick the server";
  EXPECT_EQ(server.published.flag, nullptr);
  EXPECT_FALSE(client.ch->peer_kicks_us()) << "the server cannot kick the client yet";
  EXPECT_FALSE(server.ch->peer_kicks_us());
  // The server reads the client's hello: it publishes, then acknowledges.
  ASSERT_TRUE(fd_readable(server.ch->conn_fd(), 2000));
  server.ch->on_conn_readable();
  ASSERT_NE(server.published.flag, nullptr);
  EXPECT_FALSE(server.ch->peer_kicks_us()) << "the client's ack has not been read";
  ASSERT_TRUE(fd_readable(client.ch->conn_fd(), 2000));
  client.ch->on_conn_readable();
  EXPECT_TRUE(client.ch->peer_kicks_us());
  ASSERT_TRUE(fd_readable(server.ch->conn_fd(), 2000));
  server.ch->on_conn_readable();
  EXPECT_TRUE(server.ch->peer_kicks_us());
  // And it holds: an armed client is kicked by the server's sender.
  client.ch->arm();
  KickChannel::kick(server.published);
  EXPECT_TRUE(fd_readable(client.ch->wake_fd(), 1000));
  // The connection ends: nobody relies on it any more.
  server.ch.reset();
  ASSERT_TRUE(fd_readable(client.ch->conn_fd(), 2000));
  client.ch->on_conn_readable();
  EXPECT_FALSE(client.ch->connected());
  EXPECT_FALSE(client.ch->peer_kicks_us());
}

TEST(MemifKick, EndsExchangeHellosAndKickOnlyWhenArmed) {
  const std::string link = unique_link("arm");
  End server(link, true), client(link, false);
  ASSERT_TRUE(server.ch->open());
  ASSERT_TRUE(client.ch->open());
  ASSERT_GE(server.ch->listen_fd(), 0);
  EXPECT_EQ(client.ch->listen_fd(), -1);
  ASSERT_TRUE(handshake(server, client));
  EXPECT_TRUE(server.ch->connected());
  EXPECT_TRUE(client.ch->connected());

  // Not armed: a send kicks nobody (no syscall on the sender's path).
  KickChannel::kick(client.published);
  EXPECT_FALSE(fd_readable(server.ch->wake_fd(), 20));

  // Armed: the first send kicks, and clears the flag; the second does not kick again.
  server.ch->arm();
  KickChannel::kick(client.published);
  EXPECT_TRUE(fd_readable(server.ch->wake_fd(), 1000));
  server.ch->drain();
  EXPECT_FALSE(fd_readable(server.ch->wake_fd(), 0));
  KickChannel::kick(client.published);
  EXPECT_FALSE(fd_readable(server.ch->wake_fd(), 20)) << "kicked twice for one arming";

  // Armed again, then disarmed: no kick.
  server.ch->arm();
  server.ch->disarm();
  KickChannel::kick(client.published);
  EXPECT_FALSE(fd_readable(server.ch->wake_fd(), 20));

  // The other direction.
  client.ch->arm();
  KickChannel::kick(server.published);
  EXPECT_TRUE(fd_readable(client.ch->wake_fd(), 1000));
}

// A kick carries its time (CLOCK_MONOTONIC, in the kicked end's page), which the kicked end takes
// once to learn what its wake cost (progress/spin.h). A send that kicks nobody stamps nothing.
TEST(MemifKick, AKickLeavesItsTimeForTheKickedEndToTakeOnce) {
  const std::string link = unique_link("time");
  End server(link, true), client(link, false);
  ASSERT_TRUE(open_and_handshake(server, client));
  ASSERT_NE(client.published.kicked_ns, nullptr);

  KickChannel::kick(client.published);  // not armed
  EXPECT_EQ(server.ch->take_kick_time(), 0);

  server.ch->arm();
  const int64_t before = dpfab::clock::mono_ns();
  KickChannel::kick(client.published);
  const int64_t after = dpfab::clock::mono_ns();
  ASSERT_TRUE(fd_readable(server.ch->wake_fd(), 1000));
  const int64_t t = server.ch->take_kick_time();
  EXPECT_GE(t, before);
  EXPECT_LE(t, after);
  EXPECT_EQ(server.ch->take_kick_time(), 0) << "taken twice";
  EXPECT_EQ(client.ch->take_kick_time(), 0) << "the kicker's own page is untouched";
}

TEST(MemifKick, APeersEndWithdrawsItsHalfAndANewPeerIsTaken) {
  const std::string link = unique_link("end");
  End server(link, true);
  ASSERT_TRUE(server.ch->open());
  {
    End client(link, false);
    ASSERT_TRUE(client.ch->open());
    ASSERT_TRUE(handshake(server, client));
    EXPECT_EQ(server.publishes, 1);
  }
  // The client is gone: the server notices on its connection, withdraws the half first.
  ASSERT_TRUE(fd_readable(server.ch->conn_fd(), 2000));
  server.ch->on_conn_readable();
  EXPECT_FALSE(server.ch->connected());
  EXPECT_EQ(server.published.flag, nullptr);
  EXPECT_EQ(server.publishes, 2);
  EXPECT_EQ(server.ch->disconnects.load(), 1u);
  // A new client (a restarted peer) is accepted and used.
  End client2(link, false);
  ASSERT_TRUE(client2.ch->open());
  ASSERT_TRUE(handshake(server, client2));
  server.ch->arm();
  KickChannel::kick(client2.published);
  EXPECT_TRUE(fd_readable(server.ch->wake_fd(), 1000));
}

TEST(MemifKick, AClientWithoutAServerRetriesLater) {
  End client(unique_link("nobody"), false);
  ASSERT_TRUE(client.ch->open());
  EXPECT_FALSE(client.ch->accept_or_connect());
  EXPECT_FALSE(client.ch->connected());
  EXPECT_EQ(client.published.flag, nullptr);
}

// Connects to the server's abstract name as a stranger would, sends `payload` with `fds`.
int stranger_hello(const std::string& link, const void* payload, size_t len, const int* fds,
                   int nfds) {
  int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::string name = "dpfab-kick:" + link;
  std::memcpy(sa.sun_path + 1, name.data(), name.size());
  if (connect(s, reinterpret_cast<sockaddr*>(&sa),
              static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size())) != 0) {
    close(s);
    return -1;
  }
  iovec iov{const_cast<void*>(payload), len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  char cbuf[CMSG_SPACE(4 * sizeof(int))] = {};
  if (nfds > 0) {
    msg.msg_control = cbuf;
    msg.msg_controllen = CMSG_SPACE(static_cast<size_t>(nfds) * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(static_cast<size_t>(nfds) * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds, static_cast<size_t>(nfds) * sizeof(int));
  }
  sendmsg(s, &msg, MSG_NOSIGNAL);
  return s;
}

TEST(MemifKick, MalformedHellosAreRefusedAndNothingIsTaken) {
  const std::string link = unique_link("bad");
  End server(link, true);
  ASSERT_TRUE(server.ch->open());
  const char magic[8] = {'d', 'p', 'f', 'a', 'b', 'k', '1', 0};
  int unsealed = memfd_create("unsealed", MFD_CLOEXEC);
  ASSERT_EQ(ftruncate(unsealed, 4096), 0);
  int small = memfd_create("small", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(ftruncate(small, 16), 0);
  ASSERT_EQ(fcntl(small, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  int efd = eventfd(0, EFD_CLOEXEC);
  struct Case {
    const char* what;
    const void* payload;
    size_t len;
    int fds[2];
    int nfds;
  } cases[] = {
      {"wrong magic", "dpfabk2", 8, {unsealed, efd}, 2},
      {"no fds", magic, sizeof(magic), {}, 0},
      {"one fd", magic, sizeof(magic), {efd}, 1},
      {"a page that may shrink", magic, sizeof(magic), {unsealed, efd}, 2},
      {"a page too small", magic, sizeof(magic), {small, efd}, 2},
      {"short", magic, 3, {unsealed, efd}, 2},
      {"an ack carrying fds", "dpfabka", 8, {unsealed, efd}, 2},
  };
  uint64_t refused = 0;
  for (const auto& c : cases) {
    int s = stranger_hello(link, c.payload, c.len, c.fds, c.nfds);
    ASSERT_GE(s, 0) << c.what;
    ASSERT_TRUE(fd_readable(server.ch->listen_fd(), 2000)) << c.what;
    ASSERT_TRUE(server.ch->accept_or_connect()) << c.what;
    ASSERT_TRUE(fd_readable(server.ch->conn_fd(), 2000)) << c.what;
    server.ch->on_conn_readable();
    EXPECT_EQ(server.published.flag, nullptr) << c.what;
    EXPECT_FALSE(server.ch->connected()) << c.what << ": the connection is kept";
    EXPECT_EQ(server.ch->refused.load(), ++refused) << c.what;
    close(s);
  }
  // A real client is still taken afterwards.
  End client(link, false);
  ASSERT_TRUE(client.ch->open());
  ASSERT_TRUE(handshake(server, client));
  close(unsealed);
  close(small);
  close(efd);
}

// The engine could not take its TX lock to withdraw the peer (a signal handler's exit() on the
// thread inside transmit): the channel goes away without waiting, and the sender's copy stays
// usable, so a late kick neither faults nor writes to a closed (or reused) descriptor.
TEST(MemifKick, AWithdrawalTheSenderDoesNotTakeLeavesItsKickUsable) {
  const std::string link = unique_link("stuck");
  End server(link, true), client(link, false);
  ASSERT_TRUE(open_and_handshake(server, client));
  const KickChannel::Peer held = client.published;  // what the sender holds
  client.take = false;
  client.ch.reset();  // withdraws: refused
  EXPECT_NE(fcntl(held.wake_fd, F_GETFD), -1) << "the sender's eventfd was closed under it";
  server.ch->arm();
  KickChannel::kick(held);  // the page is still mapped
  EXPECT_TRUE(fd_readable(server.ch->wake_fd(), 1000));
  close(held.wake_fd);  // the test's own clean-up of what was left
}

// A new peer the sender does not take is dropped at once: nothing is published.
TEST(MemifKick, APeerTheSenderDoesNotTakeIsNotKept) {
  const std::string link = unique_link("untaken");
  End server(link, true), client(link, false);
  client.take = false;
  ASSERT_TRUE(server.ch->open());
  ASSERT_TRUE(client.ch->open());
  EXPECT_FALSE(handshake(server, client));
  EXPECT_EQ(client.published.flag, nullptr);
  EXPECT_EQ(client.publishes, 0);
  EXPECT_NE(server.published.flag, nullptr);
  EXPECT_FALSE(server.ch->peer_kicks_us()) << "acknowledged a hello that was not taken";
}

// A sleeper's arm (PortWake::arm, A1-A2) leaves the kick eventfd empty whatever came before it:
// the write of a kick that lands after an arm which found the flag clear (the sender clears the
// flag under its TX lock and writes at the end of its call), and the port's own rekick, which
// writes the fd while the flag is set. Either left readable with the flag set would end every
// later sleep at once, until the next kick.
TEST(MemifKick, AnArmLeavesTheEventfdEmptyAfterALateWriteOrARekick) {
  const std::string link = unique_link("late");
  End server(link, true), client(link, false);
  ASSERT_TRUE(open_and_handshake(server, client));
  dpfab::progress::PortWake wake;
  wake.attach_kick(server.ch.get());
  wake.set_kick_in_use(true);

  wake.arm();
  ASSERT_TRUE(server.ch->flag_set());
  ASSERT_TRUE(KickChannel::take_kick(client.published));  // the sender clears the flag...
  wake.arm();  // ...a sleeper arms before its write: nothing to read, the flag set again
  ASSERT_TRUE(server.ch->flag_set());
  KickChannel::kick_fd(client.published.wake_fd);        // ...and the write lands now
  ASSERT_TRUE(fd_readable(server.ch->wake_fd(), 1000));  // one wake-up, spurious
  wake.arm();
  EXPECT_FALSE(fd_readable(server.ch->wake_fd(), 0)) << "readable with the flag set";
  EXPECT_TRUE(server.ch->flag_set());

  wake.rekick();  // sleepers must look again
  ASSERT_TRUE(fd_readable(server.ch->wake_fd(), 1000));
  wake.arm();
  EXPECT_FALSE(fd_readable(server.ch->wake_fd(), 0)) << "the rekick stayed readable";

  // A kick taken and written before the arm: read, counted once.
  const uint64_t before = wake.stats().kick_wakes.load();
  KickChannel::kick(client.published);
  ASSERT_TRUE(fd_readable(server.ch->wake_fd(), 1000));
  wake.arm();
  EXPECT_FALSE(fd_readable(server.ch->wake_fd(), 0));
  EXPECT_EQ(wake.stats().kick_wakes.load(), before + 1);
}

}  // namespace
