// SPDX-License-Identifier: BSD-3-Clause
// Port specs and the virtual devices dpfab creates from them: "net_memif0,role=auto,socket=/x"
// split into the device and its devargs, dpfab's own keys (memif role=auto, mtu=), and what
// keeps a device from coming up. Internal to lib/port (port.cc).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "common/fd.h"
#include "common/result.h"

namespace dpfab::port::vdev {

/// "net_memif0,role=auto,socket=/x" -> {"net_memif0", "role=auto,socket=/x"}.
std::pair<std::string, std::string> split_spec(const std::string& spec);
/// The value of `key` in comma-separated devargs ("" when absent or without a value).
std::string get_arg(const std::string& args, const std::string& key);
/// `args` with `key` set to `value` (replaced, or appended).
std::string set_arg(const std::string& args, const std::string& key, const std::string& value);

/// The MTU a spec asks for with dpfab's own `mtu=` key; memif ports default to 9000; 0: the
/// device's own. -FI_EINVAL for a bad value or a device that is not memif.
Result<uint16_t> spec_mtu(const std::string& name, const std::string& args);

/// Creates the vdev of `spec` (with spec_mtu's `mtu`); returns the devargs DPDK probed (memif
/// role=auto resolved, dpfab's own keys removed). *role_lock holds a memif role=auto role.
/// `wait_busy`: a role=auto socket whose two roles are held is waited on (up to 5 s: a client on
/// its way out) before -FI_EBUSY; without, -FI_EBUSY at once (the same-host path will do).
Result<std::string> create_vdev(const std::string& spec, uint16_t mtu, UniqueFd* role_lock,
                                bool wait_busy = true);

/// A memif client (`args` as probed) whose server does not listen (any more).
bool memif_server_gone(const std::string& name, const std::string& args);

/// What keeps a created device from starting, when DPDK's error `ret` says little.
std::string start_failure_cause(const std::string& name, const std::string& args, int ret);

}  // namespace dpfab::port::vdev
