#include "source_wait.h"

#include <chrono>
#include <thread>

namespace reccl::bench {

SourceWait waitFaultSourceReady(recclComm_t comm, long deadlineMs) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const auto end = t0 + std::chrono::milliseconds(deadlineMs);
  SourceWait w;
  for (;;) {
    recclCommStats_t st{};
    st.size = sizeof st;
    if (recclCommGetStats(comm, &st) != recclSuccess) break;  // the first collective reports it
    w.source = st.faultSourceName;
    if (!st.faultSourceStarting) {
      w.ready = true;
      break;
    }
    if (Clock::now() >= end) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  w.waitedMs = static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count());
  return w;
}

std::string formatSourceLine(const SourceWait& w) {
  std::string s = "# fault source: " + (w.source.empty() ? std::string("unknown") : w.source);
  if (w.ready)
    s += " (waited " + std::to_string(w.waitedMs) + " ms for it before timing)\n";
  else
    s += " (still starting after " + std::to_string(w.waitedMs) + " ms; timing anyway)\n";
  return s;
}

}  // namespace reccl::bench
