// SPDX-License-Identifier: BSD-3-Clause
//
// Small string helpers shared by the configuration and EAL argument code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dpfab::str {

/// Removes leading and trailing blanks (space, tab, CR, LF).
std::string_view trim(std::string_view s) noexcept;

/// Splits on `sep`, trims each piece and drops empty pieces.
std::vector<std::string> split(std::string_view s, char sep);

/// Splits a command line on blanks, honouring single and double quotes (no escapes inside single
/// quotes, backslash escapes elsewhere). Returns nullopt on an unterminated quote.
std::optional<std::vector<std::string>> split_args(std::string_view s);

/// Parses a whole decimal integer (optional sign); nullopt on anything else or overflow.
std::optional<int64_t> parse_int(std::string_view s) noexcept;

/// Parses a CPU/lcore list such as "1,3-5"; nullopt on bad syntax, ids >= limit or duplicates.
std::optional<std::vector<unsigned>> parse_cpu_list(std::string_view s, unsigned limit);

/// Formats ids as a compact list ("0-3,6").
std::string format_cpu_list(const std::vector<unsigned>& ids);

std::string to_upper(std::string_view s);
std::string to_lower(std::string_view s);

}  // namespace dpfab::str
