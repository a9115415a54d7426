// libFuzzer target for the fault plan parser: any byte string is either a valid plan or a
// one-line kInvalidArgument error starting with "plan: "; nothing else (no crash, no throw).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "reccl/inject/fault_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto plan = reccl::inject::parsePlan(text);
  if (plan.ok()) {
    if (plan->actions.empty() || plan->actions.size() > reccl::inject::kMaxPlanActions) std::abort();
    for (const auto& a : plan->actions)
      if (a.atMs < 0 || a.atMs + a.durationMs > reccl::inject::kMaxPlanMs) std::abort();
  } else {
    const auto& st = plan.status();
    if (st.code() != reccl::Errc::kInvalidArgument) std::abort();
    if (st.message().rfind("plan: ", 0) != 0) std::abort();
    if (st.message().find('\n') != std::string::npos) std::abort();
  }
  return 0;
}
