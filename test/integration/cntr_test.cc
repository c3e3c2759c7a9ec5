// SPDX-License-Identifier: BSD-3-Clause
// STUB: being written (issue 3); replaced before the issue closes.
#include <gtest/gtest.h>
