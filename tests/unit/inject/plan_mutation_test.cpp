// Seeded random mutation of valid plans (runs everywhere, also where libFuzzer cannot be built):
// every mutant parses to a valid plan or to a one-line "plan: ..." kInvalidArgument error.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "reccl/inject/fault_plan.h"

using namespace reccl;
using namespace reccl::inject;

TEST(FaultPlanMutation, NeverCrashesAndAlwaysExplains) {
  const std::vector<std::string> seeds = {
      R"({"version":1,"actions":[{"at_ms":0,"action":"drop","target":{"netns":"tb-h0","dev":"rail0"},"duration_ms":20,"params":{"rate":0.01,"direction":"egress","flow":"udp:*:*:10.100.0.2:5000"}}]})",
      R"([{"at_ms":5,"action":"link-down","target":{"netns":"a","dev":"b","side":"switch"},"duration_ms":3}])",
      R"([{"at_ms":1,"action":"flap","target":{"netns":"a","dev":"b"},"params":{"period_ms":8,"count":3,"jitter_ms":1,"carrier":true}}])",
  };
  const std::string alphabet = "{}[]\":,0123456789.-eE truefalsnul\\";
  std::mt19937 rng(20251129);
  int valid = 0, invalid = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s = seeds[rng() % seeds.size()];
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      size_t pos = rng() % s.size();
      switch (rng() % 4) {
        case 0: s[pos] = alphabet[rng() % alphabet.size()]; break;
        case 1: s.erase(pos, 1 + rng() % 8); break;
        case 2: s.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
        case 3: s.insert(pos, s.substr(rng() % s.size(), rng() % 16)); break;
      }
    }
    auto p = parsePlan(s);
    if (p.ok()) {
      ++valid;
      ASSERT_FALSE(p->actions.empty()) << s;
    } else {
      ++invalid;
      ASSERT_EQ(p.status().code(), Errc::kInvalidArgument) << s;
      ASSERT_EQ(p.status().message().rfind("plan: ", 0), 0u) << s << " -> " << p.status().message();
      ASSERT_EQ(p.status().message().find('\n'), std::string::npos) << s;
    }
  }
  // The mutator must reach both outcomes, or it tests nothing.
  EXPECT_GT(valid, 100);
  EXPECT_GT(invalid, 100);
}
