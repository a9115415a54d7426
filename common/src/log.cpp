#include "reccl/common/log.h"

#include <bpf/libbpf.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>

namespace reccl {
namespace {

struct SubsysName {
  const char* name;
  uint32_t bit;
};
constexpr SubsysName kSubsysNames[] = {
    {"INIT", kLogInit},         {"COLL", kLogColl},         {"NET", kLogNet},
    {"SHM", kLogShm},           {"BOOTSTRAP", kLogBootstrap}, {"FAILOVER", kLogFailover},
    {"DETECTOR", kLogDetector}, {"BPF", kLogBpf},           {"TESTBED", kLogTestbed},
    {"INJECT", kLogInject},     {"BENCH", kLogBench},       {"ALL", kLogAll},
};

const char* subsysName(uint32_t subsys) {
  for (const auto& s : kSubsysNames)
    if (s.bit == subsys) return s.name;
  return "misc";
}

const char* levelName(LogLevel l) {
  switch (l) {
    case LogLevel::kVersion: return "version";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kInfo: return "info";
    case LogLevel::kTrace: return "trace";
    default: return "";
  }
}

struct LogState {
  std::atomic<int> level{static_cast<int>(LogLevel::kWarn)};
  std::atomic<uint32_t> mask{kLogAll};
  std::atomic<bool> loaded{false};
  std::mutex mu;  // guards sink and file
  LogSink sink;
  FILE* file = nullptr;
};

LogState& state() {
  static LogState* s = new LogState();  // never destroyed: logging may run during exit
  return *s;
}

// RECCL_DEBUG_FILE: %h hostname, %p pid, %% literal percent.
std::string expandFileName(const char* pattern) {
  std::string out;
  for (const char* p = pattern; *p; ++p) {
    if (*p != '%' || p[1] == '\0') {
      out += *p;
      continue;
    }
    ++p;
    if (*p == 'h') {
      char host[256] = {};
      gethostname(host, sizeof host - 1);
      out += host;
    } else if (*p == 'p') {
      out += std::to_string(getpid());
    } else {
      out += *p;
    }
  }
  return out;
}

void loadEnv(LogState& s) {
  int level = static_cast<int>(LogLevel::kWarn);
  if (const char* v = std::getenv("RECCL_DEBUG")) {
    if (!strcasecmp(v, "NONE")) level = 0;
    else if (!strcasecmp(v, "VERSION")) level = 1;
    else if (!strcasecmp(v, "WARN")) level = 2;
    else if (!strcasecmp(v, "INFO")) level = 3;
    else if (!strcasecmp(v, "TRACE")) level = 4;
  }
  uint32_t mask = kLogAll;
  if (const char* v = std::getenv("RECCL_DEBUG_SUBSYS")) {
    bool invert = v[0] == '^';
    uint32_t bits = 0;
    std::string list(invert ? v + 1 : v);
    size_t pos = 0;
    while (pos <= list.size()) {
      size_t end = list.find(',', pos);
      if (end == std::string::npos) end = list.size();
      std::string tok = list.substr(pos, end - pos);
      for (const auto& n : kSubsysNames)
        if (!strcasecmp(tok.c_str(), n.name)) bits |= n.bit;
      pos = end + 1;
    }
    mask = invert ? ~bits : bits;
  }
  std::lock_guard lk(s.mu);
  if (const char* f = std::getenv("RECCL_DEBUG_FILE"); f && *f && !s.file) {
    std::string name = expandFileName(f);
    s.file = std::fopen(name.c_str(), "a");
  }
  s.level.store(level, std::memory_order_relaxed);
  s.mask.store(mask, std::memory_order_relaxed);
  s.loaded.store(true, std::memory_order_release);
}

thread_local int tlsLibbpfQuiet = 0;

int libbpfPrint(enum libbpf_print_level lvl, const char* fmt, va_list ap) {
  if (tlsLibbpfQuiet > 0) return 0;
  LogLevel level = lvl == LIBBPF_WARN ? LogLevel::kWarn
                   : lvl == LIBBPF_INFO ? LogLevel::kInfo
                                        : LogLevel::kTrace;
  if (!logEnabled(level, kLogBpf)) return 0;
  char buf[1024];
  vsnprintf(buf, sizeof buf, fmt, ap);
  size_t n = strlen(buf);
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) buf[--n] = '\0';
  const char* text = std::strncmp(buf, "libbpf: ", 8) == 0 ? buf + 8 : buf;  // its own prefix, not twice
  logf(level, kLogBpf, "libbpf: %s", text);
  return 0;
}

}  // namespace

void logReloadEnv() noexcept { loadEnv(state()); }

bool logEnabled(LogLevel level, uint32_t subsys) noexcept {
  LogState& s = state();
  if (!s.loaded.load(std::memory_order_acquire)) loadEnv(s);
  return static_cast<int>(level) <= s.level.load(std::memory_order_relaxed) &&
         (s.mask.load(std::memory_order_relaxed) & subsys) != 0;
}

void logf(LogLevel level, uint32_t subsys, const char* fmt, ...) noexcept {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  static thread_local long tid = syscall(SYS_gettid);
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  char host[64] = {};
  gethostname(host, sizeof host - 1);
  char line[2300];
  snprintf(line, sizeof line, "%s:%d:%ld %ld.%06ld reccl %s %s: %s", host, getpid(), tid,
           static_cast<long>(ts.tv_sec), ts.tv_nsec / 1000, levelName(level),
           subsysName(subsys), msg);
  LogState& s = state();
  std::lock_guard lk(s.mu);
  if (s.sink) {
    s.sink(level, line);
    return;
  }
  FILE* out = s.file ? s.file : stderr;
  std::fprintf(out, "%s\n", line);
  std::fflush(out);
}

void logSetSink(LogSink sink) {
  LogState& s = state();
  std::lock_guard lk(s.mu);
  s.sink = std::move(sink);
}

void logCaptureLibbpf() noexcept { libbpf_set_print(libbpfPrint); }

LibbpfQuiet::LibbpfQuiet() noexcept {
  logCaptureLibbpf();
  ++tlsLibbpfQuiet;
}

LibbpfQuiet::~LibbpfQuiet() { --tlsLibbpfQuiet; }

}  // namespace reccl
