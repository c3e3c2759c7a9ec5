// SPDX-License-Identifier: BSD-3-Clause
// STUB: the UCP-style worker extension (fi_open_ops) is being written (issue 3).
#include "dpdk.h"
