#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
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

TEST(CclSmoke, SingleRankCommunicator) {
  Comms comms(1);
  ASSERT_TRUE(comms.ok()) << comms.error();
  recclComm_t c = comms[0];
  std::vector<int32_t> in = {1, 2, 3}, out(3, 0);
  ASSERT_EQ(recclAllReduce(in.data(), out.data(), 3, recclInt32, recclAvg, c, nullptr), recclSuccess);
  EXPECT_EQ(out, in);
  out.assign(3, 0);
  ASSERT_EQ(recclAllGather(in.data(), out.data(), 3, recclInt32, c, nullptr), recclSuccess);
  EXPECT_EQ(out, in);
  out.assign(3, 0);
  ASSERT_EQ(recclReduceScatter(in.data(), out.data(), 3, recclInt32, recclSum, c, nullptr), recclSuccess);
  EXPECT_EQ(out, in);
  out.assign(3, 0);
  ASSERT_EQ(recclBroadcast(in.data(), out.data(), 3, recclInt32, 0, c, nullptr), recclSuccess);
  EXPECT_EQ(out, in);
  out.assign(3, 0);
  ASSERT_EQ(recclAllToAll(in.data(), out.data(), 3, recclInt32, c, nullptr), recclSuccess);
  EXPECT_EQ(out, in);
  out.assign(3, 0);
  recclGroupStart();
  recclSend(in.data(), 3, recclInt32, 0, c, nullptr);
  recclRecv(out.data(), 3, recclInt32, 0, c, nullptr);
  ASSERT_EQ(recclGroupEnd(), recclSuccess);
  EXPECT_EQ(out, in);
  EXPECT_EQ(recclBarrier(c, nullptr), recclSuccess);
  recclCommStats_t st{};
  st.size = sizeof(st);
  ASSERT_EQ(recclCommGetStats(c, &st), recclSuccess);
  EXPECT_EQ(st.collectives, 7u);
  EXPECT_EQ(st.size, sizeof(st));
}

// recclCommGetStats across header versions: a caller whose struct is larger (a newer header)
// gets only the fields this library has, and `size` back as the bytes filled, so a field past it
// is known to be unfilled rather than 0; a smaller one (an older header) gets no byte past its own.
TEST(CclSmoke, StatsSizeSaysWhatTheLibraryFilled) {
  Comms comms(1);
  ASSERT_TRUE(comms.ok()) << comms.error();
  recclComm_t c = comms[0];
  int32_t v = 1;
  ASSERT_EQ(recclAllReduce(&v, &v, 1, recclInt32, recclSum, c, nullptr), recclSuccess);

  struct Newer {
    recclCommStats_t known;
    uint64_t fieldOfANewerHeader;
  } newer{};
  newer.known.size = sizeof(newer);
  newer.fieldOfANewerHeader = 0xfeedu;
  ASSERT_EQ(recclCommGetStats(c, &newer.known), recclSuccess);
  EXPECT_EQ(newer.known.size, sizeof(recclCommStats_t));
  EXPECT_EQ(newer.known.collectives, 1u);
  EXPECT_EQ(newer.fieldOfANewerHeader, 0xfeedu) << "written past the library's own struct";

  // An older header that ended after `collectives`.
  const size_t olderSize = offsetof(recclCommStats_t, collectives) + sizeof(uint64_t);
  recclCommStats_t older;
  std::memset(&older, 0xab, sizeof(older));
  older.size = olderSize;
  ASSERT_EQ(recclCommGetStats(c, &older), recclSuccess);
  EXPECT_EQ(older.size, olderSize);
  EXPECT_EQ(older.collectives, 1u);
  const auto* bytes = reinterpret_cast<const unsigned char*>(&older);
  for (size_t i = olderSize; i < sizeof(older); ++i) ASSERT_EQ(bytes[i], 0xab) << "byte " << i << " written";

  recclCommStats_t tooSmall{};
  tooSmall.size = sizeof(size_t) - 1;
  EXPECT_EQ(recclCommGetStats(c, &tooSmall), recclInvalidArgument);
  EXPECT_EQ(recclCommGetStats(c, nullptr), recclInvalidArgument);
}
