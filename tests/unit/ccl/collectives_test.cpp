// Every collective x type x op x count (0, 1, 7, and 1M+3 for a representative subset) x in-place
// and out-of-place, over TCP and shared memory, 2-8 ranks as threads; results checked exactly
// against a closed-form reference (avg of floats within 2 ulp).
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>
#include <sstream>
#include <vector>

#include "ccl_test_util.h"
#include "coll_check.h"

namespace {

using reccl::test::Comms;
using reccl::test::ScopedEnv;

struct Config {
  const char* name;
  int nranks;
  bool shm;
  const char* algo;   // RECCL_ALGO ("" = auto)
  const char* chunk;  // RECCL_CHUNK_SIZE
  const char* nch;    // RECCL_NCHANNELS
  bool large;         // add the 1M+3 subset
  bool full;          // full type x op matrix (else a reduced one)
  const char* directMin = "64K";  // RECCL_DIRECT_{RECV,SEND}_MIN_BYTES (1: every ring step, 0: none)
  // RECCL_CHANNEL_THREADS: the ranks share this machine's CPUs, so "0" runs channels in turn on
  // a machine with fewer CPUs than twice the ranks; "16" runs them at once anywhere; "2" with 3
  // channels: a worker takes channel 1, then channel 2.
  const char* threads = "0";
};

std::ostream& operator<<(std::ostream& os, const Config& c) { return os << c.name; }

class CollMatrix : public testing::TestWithParam<Config> {};

TEST_P(CollMatrix, EveryCollectiveTypeOpCount) {
  const Config& cfg = GetParam();
  ScopedEnv shm("RECCL_SHM_DISABLE", cfg.shm ? "0" : "1");
  ScopedEnv algo("RECCL_ALGO", cfg.algo);
  ScopedEnv chunk("RECCL_CHUNK_SIZE", cfg.chunk);
  ScopedEnv nch("RECCL_NCHANNELS", cfg.nch);
  ScopedEnv threads("RECCL_CHANNEL_THREADS", cfg.threads);
  ScopedEnv timeout("RECCL_TIMEOUT_MS", "20000");
  ScopedEnv direct("RECCL_DIRECT_RECV_MIN_BYTES", cfg.directMin);
  ScopedEnv directSend("RECCL_DIRECT_SEND_MIN_BYTES", cfg.directMin);
  int n = cfg.nranks;
  Comms comms(n);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<std::string> errors(n);
  comms.run([&](int r, recclComm_t c) {
    std::vector<size_t> counts = {0, 1, 7};
    if (std::string(cfg.chunk) == "4096") counts.push_back(1000 + 3);  // several chunks and rounds
    errors[r] = reccl::test::runMatrix(r, n, c, counts, cfg.full, cfg.large);
    return recclSuccess;
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(
    Ranks, CollMatrix,
    testing::Values(Config{"tcp2", 2, false, "", "512K", "0", true, true},
                    Config{"shm2", 2, true, "", "512K", "0", true, true},
                    Config{"tcp3_ring_smallchunk", 3, false, "ring", "4096", "0", false, true},
                    Config{"shm3_ring_smallchunk", 3, true, "ring", "4096", "0", false, true},
                    // Every step received straight into the output, headers and payloads split
                    // across reads in every way small chunks allow.
                    Config{"tcp3_ring_smallchunk_direct", 3, false, "ring", "4096", "0", false, true, "1"},
                    Config{"tcp2_ring_smallchunk_direct", 2, false, "ring", "4096", "2", false, true, "1"},
                    Config{"tcp2_nodirect", 2, false, "", "512K", "0", true, false, "0"},
                    // The 1M+3 subset in 16 KiB steps, every one direct: a send's 256 steps but
                    // the last 8 (RECCL_SLOTS) from the buffer, a receive's named two ahead, two
                    // messages on one connection in one group.
                    Config{"tcp2_smallchunk_direct_large", 2, false, "", "16K", "0", true, false, "1"},
                    Config{"tcp4_2ch", 4, false, "", "512K", "2", true, true, "64K", "16"},
                    Config{"tcp3_3ch_in_turn", 3, false, "ring", "4096", "3", false, true, "1", "1"},
                    Config{"tcp3_3ch_2threads", 3, false, "ring", "4096", "3", false, false, "1", "2"},
                    Config{"shm4", 4, true, "", "512K", "0", true, true},
                    Config{"tcp5_rd", 5, false, "rd", "4096", "0", false, false},
                    Config{"shm6_ring", 6, true, "ring", "4096", "2", false, false, "64K", "16"},
                    Config{"tcp8", 8, false, "", "64K", "0", true, false},
                    Config{"shm8", 8, true, "", "64K", "0", false, false}),
    [](const testing::TestParamInfo<Config>& i) { return std::string(i.param.name); });

}  // namespace
