#include <gtest/gtest.h>

#include <numeric>

#include "ccl_test_util.h"

using reccl::test::Comms;

TEST(CclSmoke, AllReduceFloatSumTcpAndShm) {
  for (const char* shm : {"1", "0"}) {
    reccl::test::ScopedEnv env("RECCL_SHM_DISABLE", shm);
    for (int n : {2, 3, 4}) {
      for (size_t count : {size_t{1}, size_t{7}, size_t{100000}, size_t{1 << 20}}) {
        Comms comms(n);
        ASSERT_TRUE(comms.ok()) << comms.error();
        std::vector<std::vector<float>> out(n);
        auto rcs = comms.run([&](int r, recclComm_t c) {
          std::vector<float> in(count);
          for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>((i + r) % 13);
          out[r].assign(count, -1.0f);
          return recclAllReduce(in.data(), out[r].data(), count, recclFloat32, recclSum, c, nullptr);
        });
        for (int r = 0; r < n; ++r) ASSERT_EQ(rcs[r], recclSuccess) << recclGetLastError(nullptr);
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) {
            float want = 0;
            for (int k = 0; k < n; ++k) want += static_cast<float>((i + k) % 13);
            ASSERT_EQ(out[r][i], want) << "shm=" << shm << " n=" << n << " count=" << count << " rank " << r << " i " << i;
          }
      }
    }
  }
}
