// SPDX-License-Identifier: BSD-3-Clause
#include "log.h"

#include <cstdarg>
#include <cstdio>

namespace dpfab::log {
namespace {

std::atomic<fi_log_level> stderr_max{FI_LOG_WARN};

const char* level_name(fi_log_level level) {
  switch (level) {
    case FI_LOG_WARN:
      return "warn";
    case FI_LOG_TRACE:
      return "trace";
    case FI_LOG_INFO:
      return "info";
    case FI_LOG_DEBUG:
      return "debug";
    default:
      return "?";
  }
}

const char* subsys_name(fi_log_subsys subsys) {
  static const char* const names[] = {"core", "fabric", "domain", "ep_ctrl", "ep_data",
                                      "av",   "cq",     "eq",     "mr",      "cntr"};
  auto i = static_cast<size_t>(subsys);
  return i < sizeof(names) / sizeof(names[0]) ? names[i] : "?";
}

void stderr_sink(fi_log_level level, fi_log_subsys subsys, const char* func, int line,
                 const char* msg) {
  std::fprintf(stderr, "dpfab:%s:%s:%s():%d %s\n", level_name(level), subsys_name(subsys), func,
               line, msg);
}

bool stderr_filter(fi_log_level level, fi_log_subsys) {
  return level <= stderr_max.load(std::memory_order_relaxed);
}

// The sink and filter are swapped as a pair only at provider init/cleanup, before and after any
// logging thread exists; relaxed atomics keep the reads data-race free.
std::atomic<Sink> g_sink{stderr_sink};
std::atomic<Filter> g_filter{stderr_filter};

}  // namespace

void set_sink(Sink sink, Filter filter) noexcept {
  g_filter.store(filter ? filter : stderr_filter, std::memory_order_relaxed);
  g_sink.store(sink ? sink : stderr_sink, std::memory_order_relaxed);
}

bool enabled(fi_log_level level, fi_log_subsys subsys) noexcept {
  return g_filter.load(std::memory_order_relaxed)(level, subsys);
}

void write(fi_log_level level, fi_log_subsys subsys, const char* func, int line, const char* fmt,
           ...) noexcept {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  g_sink.load(std::memory_order_relaxed)(level, subsys, func, line, buf);
}

void use_stderr(fi_log_level max_level) noexcept {
  stderr_max.store(max_level, std::memory_order_relaxed);
  set_sink(nullptr, nullptr);
}

}  // namespace dpfab::log
