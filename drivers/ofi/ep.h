// SPDX-License-Identifier: BSD-3-Clause
//
// What the endpoint types share (ep.cc): fi_endpoint's dispatch by type, the fid, the bindings
// (CQs, counters, AV, EQ), operation flags, the address an endpoint asks for, and the fi_ops that
// do not depend on the protocol. ep_dgram.cc is FI_EP_DGRAM over proto::DgramEndpoint, ep_rdm.cc
// FI_EP_RDM over proto::RdmEndpoint, ep_msg.cc FI_EP_MSG over proto::MsgEndpoint (pep.cc: passive
// endpoints; ep_rdm_data.h: the data-path tables RDM and MSG share); each embeds EpBase as its
// base and fills in its own ops tables.
#pragma once

#include <rdma/fi_endpoint.h>

#include <cstdint>
#include <memory>

#include "dpdk.h"
#include "event/cntr.h"
#include "event/cq.h"
#include "proto/av.h"
#include "proto/msg_passive.h"
#include "wire/address.h"

namespace dpfab::ofi {

struct EpBase {
  fid_ep fid{};
  Domain* domain = nullptr;
  progress::PortEngine* engine = nullptr;
  fi_ep_type type = FI_EP_DGRAM;
  event::Cq* tx_cq = nullptr;
  event::Cq* rx_cq = nullptr;
  ::fid* tx_cq_fid = nullptr;
  ::fid* rx_cq_fid = nullptr;
  bool tx_selective = false, rx_selective = false;  // FI_SELECTIVE_COMPLETION bindings
  event::Cntr* tx_cntr = nullptr;
  event::Cntr* rx_cntr = nullptr;
  /// FI_WRITE, FI_READ, FI_REMOTE_WRITE, FI_REMOTE_READ counters (RDM and MSG endpoints).
  event::Cntr* write_cntr = nullptr;
  event::Cntr* read_cntr = nullptr;
  event::Cntr* rwrite_cntr = nullptr;
  event::Cntr* rread_cntr = nullptr;
  fid_av* av_fid = nullptr;
  proto::AddressVector* av = nullptr;
  fid_eq* eq = nullptr;
  uint64_t tx_op_flags = 0, rx_op_flags = 0;
  uint64_t caps = 0;
  /// Whether receives' source addresses count (api::directed_recv of caps and the API version).
  bool directed_msg = false, directed_tagged = false;
  /// The largest message a send takes, and the largest an inject takes, untagged and tagged: the
  /// info's max_msg_size and inject_size until FI_OPT_MAX_*_SIZE / FI_OPT_INJECT_*_SIZE (API
  /// 1.22) lower them. Larger sends are -FI_EMSGSIZE.
  struct SizeLimits {
    size_t max_msg = SIZE_MAX, max_tagged = SIZE_MAX;
    size_t inject_msg = SIZE_MAX, inject_tagged = SIZE_MAX;
  } limits, info_limits;     ///< in force; the info's (what the options may not exceed)
  uint16_t udp_port_be = 0;  ///< asked for (info->src_addr / fi_setname), 0 = ephemeral
  uint16_t ep_id_be = 0;
  wire::AddrFormat format = wire::AddrFormat::kNative;  ///< what fi_getname writes
  bool enabled = false;
  /// Names the endpoint to the domain's MrTable (FI_MR_ENDPOINT bindings): unique in the process
  /// and never reused, unlike the object's address.
  uint64_t token = 0;
  /// fi_ep_alias (RDM and MSG endpoints): an alias is an EpBase of its own whose op flags are its
  /// own and whose calls go to `alias_of`; the endpoint counts its open aliases (fi_close is
  /// -FI_EBUSY while there are any).
  EpBase* alias_of = nullptr;
  std::atomic<int> aliases{0};

  virtual ~EpBase() = default;
  /// Our address as fi_getname gives it (the bound UDP port once enabled).
  virtual wire::Address address() const noexcept = 0;
};

inline EpBase* ep_base_of(fid* f) noexcept { return container_of_fid<EpBase>(f); }
/// The endpoint a call on `f` is for: the endpoint itself, or the one an alias stands for.
inline EpBase* ep_target_of(fid* f) noexcept {
  EpBase* e = ep_base_of(f);
  return e->alias_of ? e->alias_of : e;
}

/// Fills the fields every endpoint takes from its info (caps, op flags, address format, the UDP
/// port and endpoint id of info->src_addr). The caller takes the domain reference once the
/// endpoint exists (ep_base_release drops it).
void ep_base_init(EpBase* e, Domain* dom, const fi_info* info, void* context) noexcept;
/// Drops the bindings' references and the domain's (fi_close; the protocol is gone by then).
void ep_base_release(EpBase* e) noexcept;
/// fi_ep_bind of a CQ, counter, AV or EQ: checks and records the binding (the protocol object
/// takes it at enable). -FI_EINVAL, -FI_EBADFLAGS, -FI_EOPBADSTATE after enable.
int ep_base_bind(fid* f, fid* bfid, uint64_t flags) noexcept;
/// fi_enable's checks common to every type: -FI_ENOCQ, -FI_ENOAV.
int ep_base_enable_check(const EpBase* e) noexcept;
/// Binds the endpoint's UDP port (asked for, else ephemeral) on its port engine to `r`.
/// @return the port (network order) or a negative FI_E* code.
int ep_base_bind_port(EpBase* e, proto::Receiver* r) noexcept;
/// The end of a successful fi_enable: CQ overruns go to the bound EQ (RM disabled), and the
/// endpoint is enabled.
void ep_base_enabled(EpBase* e) noexcept;
/// fi_control FI_GETOPSFLAG / FI_SETOPSFLAG, and FI_ALIAS on RDM and MSG endpoints (an alias
/// whose fid_ep tables are the endpoint's: their calls find the endpoint with ep_target_of);
/// -FI_ENOSYS for other commands.
int ep_base_control(EpBase* e, int command, void* arg) noexcept;
/// fi_getopt / fi_setopt of the size options of API 1.22 (FI_OPT_MAX_MSG_SIZE,
/// FI_OPT_MAX_TAGGED_SIZE, FI_OPT_INJECT_MSG_SIZE, FI_OPT_INJECT_TAGGED_SIZE: a size_t), for
/// applications of 1.22 or later and headers that declare them. A set value is at most the
/// info's (-FI_EINVAL beyond) and holds for the calls made from then on. -FI_ENOPROTOOPT for
/// any other option, for an older application, for the tagged sizes without FI_TAGGED and for
/// the RMA and atomic sizes (not offered); -FI_EINVAL for a wrong length or null pointer,
/// -FI_ETOOSMALL (and the length needed in *len) for a short get buffer.
int ep_base_getopt_size(EpBase* e, int name, void* val, size_t* len) noexcept;
int ep_base_setopt_size(EpBase* e, int name, const void* val, size_t len) noexcept;
/// Whether a send of `len` bytes is within the endpoint's limits (tagged or not, inject or not).
inline bool ep_size_ok(const EpBase* e, size_t len, bool tagged, bool inject) noexcept {
  const EpBase::SizeLimits& l = e->limits;
  return len <= (tagged ? l.max_tagged : l.max_msg) &&
         (!inject || len <= (tagged ? l.inject_tagged : l.inject_msg));
}
/// fi_getname / fi_setname (fi_ops_cm).
int ep_getname(fid* f, void* addr, size_t* addrlen) noexcept;
int ep_setname(fid* f, void* addr, size_t addrlen) noexcept;

/// The fi_msg(3) iov rules: at most `limit` entries, an array when count > 0, and no entry with
/// a length but no buffer.
bool valid_iov(const iovec* iov, size_t count, size_t limit) noexcept;

/// Tables of the types without RMA and atomics (FI_EP_DGRAM).
extern fi_ops_rma g_no_rma_ops;
extern fi_ops_atomic g_no_atomic_ops;

/// fi_endpoint for FI_EP_DGRAM (ep_dgram.cc), and for an info without an endpoint type.
int dgram_endpoint_open(Domain* dom, fi_info* info, fid_ep** ep, void* context) noexcept;
/// fi_endpoint for FI_EP_RDM (ep_rdm.cc).
int rdm_endpoint_open(Domain* dom, fi_info* info, fid_ep** ep, void* context) noexcept;

// ---- FI_EP_MSG (ep_msg.cc, pep.cc) ----

/// A passive endpoint's UDP port, shared with the endpoints that accept its requests
/// (proto::PortShare): bound to the engine at fi_listen, unbound when the passive endpoint and
/// the last of them have closed (the last shared_ptr goes).
struct SharedPort {
  progress::PortEngine* engine;
  uint16_t udp_port_be;
  proto::PortShare share;
  SharedPort(progress::PortEngine* e, uint16_t port_be, proto::Receiver* passive) noexcept
      : engine(e), udp_port_be(port_be), share(e, &e->msg_stats(), passive) {}
  ~SharedPort() { engine->unbind(udp_port_be); }
  /// Frees endpoint id `ep_be` once no poll step is delivering to it.
  void remove(uint16_t ep_be) noexcept { share.remove(ep_be); }
};

/// fi_endpoint for FI_EP_MSG. info->handle may be an FI_CONNREQ's request (the endpoint accepts
/// it) or a passive endpoint (the endpoint takes over its UDP port).
int msg_endpoint_open(Domain* dom, fi_info* info, fid_ep** ep, void* context) noexcept;
/// The connector's address and connection id of a connection request still open (neither
/// accepted nor rejected, its passive endpoint open), and the UDP port it came in on, which the
/// accepting endpoint shares. -FI_EINVAL otherwise (`handle` is looked up, never read, first).
int msg_take_connreq(fid_t handle, wire::Address* from, uint32_t* conn_id,
                     std::shared_ptr<SharedPort>* port) noexcept;
/// fi_accept of that request: its passive endpoint drops the connector's repeats from now on,
/// and the request is closed. -FI_EINVAL when it is not open.
int msg_accepted_connreq(fid_t handle) noexcept;
/// The UDP port (network order) of an open passive endpoint, 0 when none is assigned yet;
/// -FI_EINVAL when `pep` is not one.
int msg_pep_port(fid_t pep) noexcept;
/// fi_getopt FI_OPT_CM_DATA_SIZE (a size_t): wire::kCmMaxData.
int msg_cm_data_size_opt(void* val, size_t* len) noexcept;

}  // namespace dpfab::ofi
