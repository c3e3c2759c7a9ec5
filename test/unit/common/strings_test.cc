// SPDX-License-Identifier: BSD-3-Clause
#include "common/strings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using namespace dpfab::str;
using testing::ElementsAre;

TEST(Strings, TrimAndSplit) {
  EXPECT_EQ(trim("  a b \t\r\n"), "a b");
  EXPECT_THAT(split(" a; ;b ;", ';'), ElementsAre("a", "b"));
  EXPECT_TRUE(split("", ';').empty());
}

TEST(Strings, SplitArgsHonoursQuotes) {
  auto a = split_args(R"(--a 'b c' "d e" f\ g)");
  ASSERT_TRUE(a);
  EXPECT_THAT(*a, ElementsAre("--a", "b c", "d e", "f g"));
  EXPECT_FALSE(split_args("'open"));
  EXPECT_TRUE(split_args("")->empty());
}

TEST(Strings, ParseInt) {
  EXPECT_EQ(parse_int("42"), 42);
  EXPECT_EQ(parse_int(" -7 "), -7);
  EXPECT_EQ(parse_int("+3"), 3);
  EXPECT_FALSE(parse_int("4x"));
  EXPECT_FALSE(parse_int(""));
  EXPECT_FALSE(parse_int("99999999999999999999999"));
}

TEST(Strings, CpuLists) {
  EXPECT_THAT(*parse_cpu_list("1,3-5", 8), ElementsAre(1u, 3u, 4u, 5u));
  EXPECT_TRUE(parse_cpu_list("", 8)->empty());
  EXPECT_FALSE(parse_cpu_list("5-3", 8));
  EXPECT_FALSE(parse_cpu_list("8", 8));
  EXPECT_FALSE(parse_cpu_list("1,1", 8));
  EXPECT_EQ(format_cpu_list({3, 0, 1, 2, 6}), "0-3,6");
}
