// SPDX-License-Identifier: BSD-3-Clause
// STUB: being written (issue 3).
#pragma once
