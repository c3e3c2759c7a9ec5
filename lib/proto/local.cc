// SPDX-License-Identifier: BSD-3-Clause
//
// Frames through the same-host path (endpoint.h transmit_frame): DGRAM datagrams and connection
// management frames to a peer of this host go as kFrame records, byte for byte the frame the
// port would carry; the receiving engine decodes them as it decodes the port's (progress/engine.h).
#include <rdma/fi_errno.h>
#include <rte_mbuf.h>

#include "proto/endpoint.h"

namespace dpfab::proto {

int transmit_frame(Link* link, const wire::Address& to, rte_mbuf* m) noexcept {
  if (to.has_node() && link->local()) {
    bool pending;
    if (shm::Conn* c = link->local_route(to, &pending)) {
      const shm::RecordHeader h{0, shm::RecordKind::kFrame, 0, 0, 0, 0, 0, 0};
      switch (c->send(h, {rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m)})) {
        case 0:
          rte_pktmbuf_free(m);
          return 1;
        case -FI_EHOSTUNREACH:
          rte_pktmbuf_free(m);
          return -1;
        default:
          return 0;
      }
    }
    if (pending) return 0;  // its link is being made: the caller tries again
  }
  return link->transmit(&m, 1) == 1 ? 1 : 0;
}

}  // namespace dpfab::proto
