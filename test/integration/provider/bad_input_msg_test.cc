// SPDX-License-Identifier: BSD-3-Clause
//
// Bad input through the real libfabric core, FI_EP_MSG: passive endpoints and connection
// management called with NULL or junk arguments and in the wrong states (bad_input_test.cc has
// the rest). Each must give a clear -FI_E* and never crash or hang the process.
#include <gtest/gtest.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "bad_input.h"
#include "fixture.h"

using namespace dpfab::test;

namespace {

// ---- FI_EP_MSG: passive endpoints, connection management -----------------------------------

// Reads one event from `eq` within 2 s (fi_eq_sread progresses the port): its type, or -FI_EAVAIL.
int next_event(fid_eq* eq, fi_info** info = nullptr) {
  alignas(fi_eq_cm_entry) uint8_t buf[sizeof(fi_eq_cm_entry) + 256];
  uint32_t event = 0;
  ssize_t r = fi_eq_sread(eq, &event, buf, sizeof(buf), 2000, 0);
  if (r == -FI_EAVAIL) {
    fi_eq_err_entry err{};
    (void)fi_eq_readerr(eq, &err, 0);
  }
  if (r < 0) return static_cast<int>(r);
  if (info) std::memcpy(info, buf + offsetof(fi_eq_cm_entry, info), sizeof(*info));
  return static_cast<int>(event);
}

TEST_F(BadInput, MsgCallsRefuseBadArgumentsAndWrongStates) {
  auto hints = dpdk_hints(FI_EP_MSG);
  InfoPtr infos;
  ASSERT_EQ(getinfo(hints.get(), &infos), 0);
  fi_info* mi = first_dpdk(infos.get());
  ASSERT_NE(mi, nullptr);
  fi_eq_attr ea{};
  ea.wait_obj = FI_WAIT_UNSPEC;
  fid_eq* eq = nullptr;
  ASSERT_EQ(fi_eq_open(d_.fabric, &ea, &eq, nullptr), 0);

  // Passive endpoints.
  fid_pep* pep = nullptr;
  EXPECT_EQ(fi_passive_ep(d_.fabric, nullptr, &pep, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_passive_ep(d_.fabric, mi, nullptr, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_passive_ep(d_.fabric, d_.info, &pep, nullptr), -FI_EINVAL) << "a DGRAM info";
  ASSERT_EQ(fi_passive_ep(d_.fabric, mi, &pep, nullptr), 0);
  EXPECT_EQ(fi_listen(pep), -FI_ENOEQ);
  EXPECT_EQ(fi_pep_bind(pep, nullptr, 0), -FI_EINVAL);
  EXPECT_EQ(fi_pep_bind(pep, &e_.cq->fid, 0), -FI_EINVAL) << "not an EQ";
  EXPECT_EQ(fi_pep_bind(pep, &eq->fid, 1), -FI_EBADFLAGS);
  ASSERT_EQ(fi_pep_bind(pep, &eq->fid, 0), 0);
  EXPECT_EQ(fi_pep_bind(pep, &eq->fid, 0), -FI_EINVAL) << "one EQ";
  EXPECT_EQ(fi_close(&eq->fid), -FI_EBUSY) << "a passive endpoint is bound";
  char junk[4] = {};
  EXPECT_EQ(fi_setname(&pep->fid, junk, sizeof(junk)), -FI_EINVAL);
  ASSERT_EQ(fi_listen(pep), 0);
  EXPECT_EQ(fi_listen(pep), -FI_EALREADY);
  uint8_t pep_addr[16];
  size_t len = sizeof(pep_addr);
  EXPECT_EQ(fi_getname(&pep->fid, nullptr, nullptr), -FI_EINVAL);
  ASSERT_EQ(fi_getname(&pep->fid, pep_addr, &len), 0);
  EXPECT_EQ(fi_setname(&pep->fid, pep_addr, len), -FI_EOPBADSTATE) << "listening already";
  EXPECT_EQ(fi_connect(reinterpret_cast<fid_ep*>(pep), pep_addr, nullptr, 0), -FI_EOPNOTSUPP);
  EXPECT_EQ(fi_reject(pep, nullptr, nullptr, 0), -FI_EINVAL);
  EXPECT_EQ(fi_reject(pep, &e_.cq->fid, nullptr, 0), -FI_EINVAL) << "not a request";
  size_t opt = 0, optlen = 1;
  EXPECT_EQ(fi_getopt(&pep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &opt, &optlen),
            -FI_ETOOSMALL);
  EXPECT_EQ(optlen, sizeof(size_t));

  // An active endpoint: bindings, enable, data before the connection, bad CM arguments.
  fid_ep* ep = nullptr;
  ASSERT_EQ(fi_endpoint(d_.domain, mi, &ep, nullptr), 0);
  EXPECT_EQ(fi_ep_bind(ep, &av_->fid, 0), -FI_EINVAL) << "MSG endpoints take no AV";
  EXPECT_EQ(fi_enable(ep), -FI_ENOEQ);
  fi_cq_attr ca{};
  ca.format = FI_CQ_FORMAT_DATA;
  fid_cq* cq = nullptr;
  ASSERT_EQ(fi_cq_open(d_.domain, &ca, &cq, nullptr), 0);
  ASSERT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
  ASSERT_EQ(fi_ep_bind(ep, &eq->fid, 0), 0);
  char buf[8] = {};
  EXPECT_EQ(fi_send(ep, buf, 1, nullptr, 0, nullptr), -FI_EOPBADSTATE) << "before fi_enable";
  EXPECT_EQ(fi_recv(ep, buf, 1, nullptr, 0, nullptr), -FI_EOPBADSTATE) << "before fi_enable";
  EXPECT_EQ(fi_shutdown(ep, 0), -FI_ENOTCONN);
  ASSERT_EQ(fi_enable(ep), 0);
  EXPECT_EQ(fi_send(ep, buf, 1, nullptr, 0, nullptr), -FI_ENOTCONN) << "not connected";
  EXPECT_EQ(fi_inject(ep, buf, 1, 0), -FI_ENOTCONN);
  EXPECT_EQ(fi_send(ep, nullptr, 1, nullptr, 0, nullptr), -FI_ENOTCONN);
  EXPECT_EQ(fi_recv(ep, nullptr, 1, nullptr, 0, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_accept(ep, nullptr, 0), -FI_EOPBADSTATE) << "not made from a request";
  EXPECT_EQ(fi_connect(ep, nullptr, nullptr, 0), -FI_EINVAL);
  EXPECT_EQ(fi_connect(ep, pep_addr, nullptr, 4), -FI_EINVAL) << "length without data";
  std::vector<char> big(257);
  EXPECT_EQ(fi_connect(ep, pep_addr, big.data(), big.size()), -FI_EINVAL) << "above 256 bytes";
  uint8_t zeros[16] = {};  // fi_connect reads an address of the info's format: 16 bytes
  EXPECT_EQ(fi_connect(ep, zeros, nullptr, 0), -FI_EINVAL) << "not an address";
  len = 2;
  EXPECT_EQ(fi_getpeer(ep, nullptr, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_getpeer(ep, buf, &len), -FI_ENOTCONN);
  EXPECT_EQ(fi_shutdown(ep, 0), -FI_ENOTCONN) << "never connected";
  ASSERT_EQ(fi_connect(ep, pep_addr, "hi", 2), 0);
  EXPECT_EQ(fi_connect(ep, pep_addr, nullptr, 0), -FI_EISCONN);

  // The request: accepted once; the handle is no good after that (nor after a reject).
  fi_info* req = nullptr;
  ASSERT_EQ(next_event(eq, &req), FI_CONNREQ);
  ASSERT_NE(req, nullptr);
  fid_ep* acc = nullptr;
  fid_cq* acq = nullptr;
  ASSERT_EQ(fi_cq_open(d_.domain, &ca, &acq, nullptr), 0);
  ASSERT_EQ(fi_endpoint(d_.domain, req, &acc, nullptr), 0);
  ASSERT_EQ(fi_ep_bind(acc, &acq->fid, FI_TRANSMIT | FI_RECV), 0);
  ASSERT_EQ(fi_ep_bind(acc, &eq->fid, 0), 0);
  EXPECT_EQ(fi_connect(acc, pep_addr, nullptr, 0), -FI_EOPBADSTATE) << "made to accept";
  EXPECT_EQ(fi_accept(acc, big.data(), big.size()), -FI_EINVAL);
  ASSERT_EQ(fi_accept(acc, nullptr, 0), 0);
  EXPECT_EQ(fi_accept(acc, nullptr, 0), -FI_EISCONN) << "fi_accept twice";
  EXPECT_EQ(fi_reject(pep, req->handle, nullptr, 0), -FI_EINVAL) << "accepted already";
  fid_ep* again = nullptr;
  EXPECT_EQ(fi_endpoint(d_.domain, req, &again, nullptr), -FI_EINVAL) << "the request is gone";
  EXPECT_EQ(next_event(eq), FI_CONNECTED);
  EXPECT_EQ(next_event(eq), FI_CONNECTED);
  EXPECT_EQ(fi_shutdown(ep, 7), -FI_EBADFLAGS);
  ASSERT_EQ(fi_shutdown(ep, 0), 0);
  EXPECT_EQ(fi_shutdown(ep, 0), 0) << "a second shutdown changes nothing";
  EXPECT_EQ(next_event(eq), FI_SHUTDOWN);
  EXPECT_EQ(next_event(eq), FI_SHUTDOWN);
  EXPECT_EQ(fi_send(ep, buf, 1, nullptr, 0, nullptr), -FI_ENOTCONN) << "after the shutdown";
  EXPECT_EQ(fi_connect(ep, pep_addr, nullptr, 0), -FI_EOPBADSTATE) << "connect once";
  fi_freeinfo(req);
  // Closing: the passive endpoint before the endpoint that accepted on its port.
  EXPECT_EQ(fi_close(&pep->fid), 0);
  for (fid* f : {&acc->fid, &ep->fid, &acq->fid, &cq->fid, &eq->fid}) EXPECT_EQ(fi_close(f), 0);
}

}  // namespace
