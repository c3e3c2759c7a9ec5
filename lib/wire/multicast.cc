// SPDX-License-Identifier: BSD-3-Clause
#include "wire/multicast.h"

#include <rte_ip.h>

#include "wire/format.h"

namespace dpfab::wire {

namespace {
constexpr uint8_t kIpProtoIgmp = 2;
constexpr uint32_t kAllRoutersBe =
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? 0x020000e0u : 0xe0000002u;
}  // namespace

size_t build_igmp_v2(std::span<uint8_t> frame, const Local& local, IgmpType type,
                     uint32_t group_be) noexcept {
  if (frame.size() < kMinFrameLen || !is_multicast_ipv4(group_be)) return 0;
  uint8_t* p = frame.data();
  std::memset(p, 0, kMinFrameLen);
  const uint32_t dst_be = type == IgmpType::kLeave ? kAllRoutersBe : group_be;
  const rte_ether_addr dst_mac = multicast_mac(dst_be);
  std::memcpy(p, &dst_mac, RTE_ETHER_ADDR_LEN);
  std::memcpy(p + 6, &local.mac, RTE_ETHER_ADDR_LEN);
  store_be16(p + 12, kEtherTypeIpv4);

  uint8_t* ip = p + kEthHdrLen;
  ip[0] = 0x46;  // version 4, IHL 6: the Router Alert option follows the 20 bytes
  ip[1] = 0xc0;  // DSCP CS6 (internetwork control), as Linux sends IGMP
  store_be16(ip + 2, 24 + 8);
  store_be16(ip + 4, 0);
  store_be16(ip + 6, RTE_IPV4_HDR_DF_FLAG);
  ip[8] = 1;  // TTL 1: link-local (RFC 2236 2)
  ip[9] = kIpProtoIgmp;
  std::memcpy(ip + 12, &local.ip_be, 4);
  std::memcpy(ip + 16, &dst_be, 4);
  ip[20] = 0x94;  // Router Alert: copied, class 0, option 20; length 4; value 0
  ip[21] = 0x04;
  const uint16_t ip_ck = static_cast<uint16_t>(~rte_raw_cksum(ip, 24));
  std::memcpy(ip + 10, &ip_ck, 2);  // rte_raw_cksum sums in memory order: store as is

  uint8_t* igmp = ip + 24;
  igmp[0] = static_cast<uint8_t>(type);
  igmp[1] = 0;  // max response time: 0 in messages a host sends
  std::memcpy(igmp + 4, &group_be, 4);
  const uint16_t igmp_ck = static_cast<uint16_t>(~rte_raw_cksum(igmp, 8));
  std::memcpy(igmp + 2, &igmp_ck, 2);
  return kMinFrameLen;
}

}  // namespace dpfab::wire
