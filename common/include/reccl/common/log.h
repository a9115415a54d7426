// One-line, lowercase logs controlled like NCCL's: RECCL_DEBUG=WARN|INFO|TRACE,
// RECCL_DEBUG_SUBSYS=INIT,NET,... (or ^NET to exclude), RECCL_DEBUG_FILE=%h.%p.log.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace reccl {

enum class LogLevel : int { kNone = 0, kVersion = 1, kWarn = 2, kInfo = 3, kTrace = 4 };

enum LogSubsys : uint32_t {
  kLogInit = 1u << 0,
  kLogColl = 1u << 1,
  kLogNet = 1u << 2,
  kLogShm = 1u << 3,
  kLogBootstrap = 1u << 4,
  kLogFailover = 1u << 5,
  kLogDetector = 1u << 6,
  kLogBpf = 1u << 7,
  kLogTestbed = 1u << 8,
  kLogInject = 1u << 9,
  kLogBench = 1u << 10,
  kLogAll = ~0u,
};

bool logEnabled(LogLevel level, uint32_t subsys) noexcept;
void logf(LogLevel level, uint32_t subsys, const char* fmt, ...) noexcept
    __attribute__((format(printf, 3, 4)));

// Re-reads RECCL_DEBUG* (called lazily on first use; tests call it after setenv).
void logReloadEnv() noexcept;
// Replaces the output (default: stderr or RECCL_DEBUG_FILE). nullptr restores the default.
using LogSink = std::function<void(LogLevel, std::string_view line)>;
void logSetSink(LogSink sink);
// Routes libbpf's own messages through this logger (debug -> TRACE, info -> INFO, warn -> WARN).
void logCaptureLibbpf() noexcept;
// While one lives, libbpf's messages from this thread are dropped (a feature probe fails on
// purpose and would fill the log with verifier output); it routes libbpf through this logger
// first. libbpf has one process-wide printer: swapping it per probe raced between threads that
// probe at once (a communicator's rank threads), leaving it silent or loud for good.
class LibbpfQuiet {
 public:
  LibbpfQuiet() noexcept;
  ~LibbpfQuiet();
  LibbpfQuiet(const LibbpfQuiet&) = delete;
  LibbpfQuiet& operator=(const LibbpfQuiet&) = delete;
};

}  // namespace reccl

#define RECCL_LOG_AT_(lvl, subsys, ...)                                              \
  do {                                                                               \
    if (::reccl::logEnabled(lvl, subsys)) ::reccl::logf(lvl, subsys, __VA_ARGS__);   \
  } while (0)
#define RECCL_WARN(subsys, ...) RECCL_LOG_AT_(::reccl::LogLevel::kWarn, subsys, __VA_ARGS__)
#define RECCL_INFO(subsys, ...) RECCL_LOG_AT_(::reccl::LogLevel::kInfo, subsys, __VA_ARGS__)
#define RECCL_TRACE(subsys, ...) RECCL_LOG_AT_(::reccl::LogLevel::kTrace, subsys, __VA_ARGS__)
