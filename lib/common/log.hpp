#pragma once
// RR_DEBUG logging to stderr: WARN (0, default), INFO (1) setup decisions, TRACE (2).

#include <cstdio>

namespace rr {

enum class LogLevel { kWarn = 0, kInfo = 1, kTrace = 2 };

// The process-wide level, read once from RR_DEBUG (WARN, INFO, TRACE or 0/1/2).
LogLevel log_level();

}  // namespace rr

#define RR_LOG(level, fmt, ...)                                                   \
  do {                                                                             \
    if (static_cast<int>(::rr::log_level()) >= static_cast<int>(level))            \
      std::fprintf(stderr, "ringreduce %s: " fmt "\n",                            \
                   level == ::rr::LogLevel::kWarn   ? "WARN"                       \
                   : level == ::rr::LogLevel::kInfo ? "INFO"                       \
                                                    : "TRACE",                     \
                   ##__VA_ARGS__);                                                 \
  } while (0)
