// SPDX-License-Identifier: BSD-3-Clause
#include "strings.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace dpfab::str {

std::string_view trim(std::string_view s) noexcept {
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string_view::npos) end = s.size();
    auto piece = trim(s.substr(start, end - start));
    if (!piece.empty()) out.emplace_back(piece);
    start = end + 1;
  }
  return out;
}

std::optional<std::vector<std::string>> split_args(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quote == '\'') {
      if (c == '\'')
        quote = 0;
      else
        cur += c;
    } else if (c == '\\' && i + 1 < s.size()) {
      cur += s[++i];
      in_word = true;
    } else if (quote == '"') {
      if (c == '"')
        quote = 0;
      else
        cur += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (in_word) out.push_back(std::move(cur));
      cur.clear();
      in_word = false;
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (quote != 0) return std::nullopt;
  if (in_word) out.push_back(std::move(cur));
  return out;
}

std::optional<int64_t> parse_int(std::string_view s) noexcept {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<std::vector<unsigned>> parse_cpu_list(std::string_view s, unsigned limit) {
  std::vector<unsigned> ids;
  for (const auto& piece : split(s, ',')) {
    auto dash = piece.find('-');
    auto lo = parse_int(std::string_view(piece).substr(0, dash));
    auto hi = dash == std::string::npos ? lo : parse_int(std::string_view(piece).substr(dash + 1));
    if (!lo || !hi || *lo < 0 || *hi < *lo || *hi >= static_cast<int64_t>(limit))
      return std::nullopt;
    for (int64_t i = *lo; i <= *hi; ++i) {
      if (std::find(ids.begin(), ids.end(), static_cast<unsigned>(i)) != ids.end())
        return std::nullopt;
      ids.push_back(static_cast<unsigned>(i));
    }
  }
  return ids;
}

std::string format_cpu_list(const std::vector<unsigned>& ids_in) {
  std::vector<unsigned> ids = ids_in;
  std::sort(ids.begin(), ids.end());
  std::string out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ids[i]);
    if (j > i) out += '-' + std::to_string(ids[j]);
    i = j + 1;
  }
  return out;
}

std::string to_upper(std::string_view s) {
  std::string r(s);
  for (auto& c : r) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return r;
}

std::string to_lower(std::string_view s) {
  std::string r(s);
  for (auto& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

}  // namespace dpfab::str
