// PreMulSum ops (recclRedOpCreatePreMulSum): every rank's input times its own scalar, summed;
// allreduce, reduce and reduce-scatter, every type, bit for bit against a closed form computed
// here; the scalar's two residences; the op's checks and its life on a communicator.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ccl_test_util.h"
#include "reccl/reccl.h"
#include "reccl/reccl.hpp"
#include "reduce/reduce.h"
#include "values.h"

namespace {

using reccl::test::Comms;
using reccl::test::isFloat;
using reccl::test::ScopedEnv;

constexpr int kRanks = 3;

// One element of `t` holding `v`: integers modulo 2^bits (v whole), floats rounded to nearest.
std::vector<std::byte> encode(recclDataType_t t, double v) {
  std::vector<std::byte> b(reccl::reduce::typeSize(t));
  auto put = [&](auto x) { std::memcpy(b.data(), &x, sizeof x); };
  const auto w = static_cast<uint64_t>(static_cast<int64_t>(v));
  switch (t) {
    case recclInt8:
    case recclUint8: put(static_cast<uint8_t>(w)); break;
    case recclInt32:
    case recclUint32: put(static_cast<uint32_t>(w)); break;
    case recclInt64:
    case recclUint64: put(w); break;
    case recclFloat16: put(reccl::reduce::floatToHalf(static_cast<float>(v))); break;
    case recclBfloat16: put(reccl::reduce::floatToBfloat16(static_cast<float>(v))); break;
    case recclFloat32: put(static_cast<float>(v)); break;
    default: put(v); break;
  }
  return b;
}

// Rank r's element i, and its scalar: whole numbers for integers (the scalars wrap the 8-bit
// types on purpose), halves for floats, every product and sum exact in the narrowest float.
double input(int r, size_t i) { return static_cast<double>((r + 1) * static_cast<int>(i % 7 + 1)); }
double scalarOf(recclDataType_t t, int r) { return isFloat(t) ? 0.5 * (r + 1) : 37.0 * (r + 1); }

// The expected element: each rank's input times its scalar in the type (integers wrap), summed.
std::vector<std::byte> expected(recclDataType_t t, size_t i) {
  if (isFloat(t)) {
    double sum = 0;
    for (int r = 0; r < kRanks; ++r) sum += input(r, i) * scalarOf(t, r);
    return encode(t, sum);
  }
  uint64_t sum = 0;
  for (int r = 0; r < kRanks; ++r)
    sum += static_cast<uint64_t>(input(r, i)) * static_cast<uint64_t>(scalarOf(t, r));
  return encode(t, static_cast<double>(static_cast<int64_t>(sum)));  // encode keeps the low bits
}

std::vector<std::byte> fill(recclDataType_t t, int r, size_t count) {
  const size_t es = reccl::reduce::typeSize(t);
  std::vector<std::byte> buf(count * es);
  for (size_t i = 0; i < count; ++i) std::memcpy(buf.data() + i * es, encode(t, input(r, i)).data(), es);
  return buf;
}

// Compares `got` (count elements starting at element `first` of the closed form) bit for bit.
void expectExact(recclDataType_t t, const std::vector<std::byte>& got, size_t first, size_t count,
                 const std::string& what) {
  const size_t es = reccl::reduce::typeSize(t);
  for (size_t i = 0; i < count; ++i) {
    auto want = expected(t, first + i);
    ASSERT_EQ(std::memcmp(got.data() + i * es, want.data(), es), 0)
        << what << ": " << reccl::reduce::typeName(t) << " element " << first + i;
  }
}

// (sockets, allreduce algorithm): false is shared memory between the ranks; the ring reads each
// input element once as it sends or reduces it, recursive doubling scales its copy of the input.
class PreMulSum : public ::testing::TestWithParam<std::tuple<bool, const char*>> {
 protected:
  ScopedEnv shm_{"RECCL_SHM_DISABLE", std::get<0>(GetParam()) ? "1" : "0"};
  ScopedEnv algo_{"RECCL_ALGO", std::get<1>(GetParam())};
};

TEST_P(PreMulSum, AllReduceReduceAndReduceScatterOfEveryTypeAreExact) {
  Comms w(kRanks);
  ASSERT_TRUE(w.ok()) << w.error();
  const size_t count = 1000;  // over several steps with the default chunk for the 1-byte types too
  for (int ti = 0; ti < recclNumTypes; ++ti) {
    const auto t = static_cast<recclDataType_t>(ti);
    const size_t es = reccl::reduce::typeSize(t);
    std::vector<std::vector<std::byte>> in(kRanks), out(kRanks), red(kRanks), rs(kRanks), big(kRanks);
    auto rcs = w.run([&](int r, recclComm_t c) -> recclResult_t {
      auto s = encode(t, scalarOf(t, r));
      recclRedOp_t op;
      if (recclResult_t rc = recclRedOpCreatePreMulSum(&op, s.data(), t, recclScalarHostImmediate, c); rc) return rc;
      s.assign(s.size(), std::byte{0xff});  // copied at creation: this must not matter
      in[r] = fill(t, r, count);
      const auto inCopy = in[r];
      out[r].resize(count * es);
      red[r].resize(count * es);
      if (recclResult_t rc = recclAllReduce(in[r].data(), out[r].data(), count, t, op, c, nullptr); rc) return rc;
      if (in[r] != inCopy) return recclInternalError;  // the input is the caller's: left as it was
      if (recclResult_t rc = recclReduce(in[r].data(), red[r].data(), count, t, op, 1, c, nullptr); rc) return rc;
      // Reduce-scatter of kRanks blocks of `count / kRanks` (rank r's inputs run on across blocks).
      big[r] = fill(t, r, count / kRanks * kRanks);
      rs[r].resize(count / kRanks * es);
      if (recclResult_t rc = recclReduceScatter(big[r].data(), rs[r].data(), count / kRanks, t, op, c, nullptr); rc)
        return rc;
      return recclRedOpDestroy(op, c);
    });
    for (int r = 0; r < kRanks; ++r) ASSERT_EQ(rcs[r], recclSuccess) << "rank " << r << ": " << recclGetLastError(nullptr);
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_NO_FATAL_FAILURE(expectExact(t, out[r], 0, count, "allreduce rank " + std::to_string(r)));
      ASSERT_NO_FATAL_FAILURE(
          expectExact(t, rs[r], count / kRanks * r, count / kRanks, "reducescatter rank " + std::to_string(r)));
    }
    ASSERT_NO_FATAL_FAILURE(expectExact(t, red[1], 0, count, "reduce at root 1"));
  }
}

// In place (recvbuff == sendbuff), as a gradient allreduce runs.
TEST_P(PreMulSum, InPlaceAllReduceIsExact) {
  Comms w(kRanks);
  ASSERT_TRUE(w.ok()) << w.error();
  const recclDataType_t t = recclFloat32;
  const size_t count = 300001;  // several channels and steps, and a last block of one element
  std::vector<std::vector<std::byte>> buf(kRanks);
  auto rcs = w.run([&](int r, recclComm_t c) -> recclResult_t {
    auto s = encode(t, scalarOf(t, r));
    recclRedOp_t op;
    if (recclResult_t rc = recclRedOpCreatePreMulSum(&op, s.data(), t, recclScalarHostImmediate, c); rc) return rc;
    buf[r] = fill(t, r, count);
    if (recclResult_t rc = recclAllReduce(buf[r].data(), buf[r].data(), count, t, op, c, nullptr); rc) return rc;
    return recclRedOpDestroy(op, c);
  });
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(rcs[r], recclSuccess) << recclGetLastError(nullptr);
  for (int r = 0; r < kRanks; ++r) ASSERT_NO_FATAL_FAILURE(expectExact(t, buf[r], 0, count, "rank " + std::to_string(r)));
}

INSTANTIATE_TEST_SUITE_P(TransportsAndAlgorithms, PreMulSum, ::testing::Combine(::testing::Bool(), ::testing::Values("ring", "rd")),
                         [](const ::testing::TestParamInfo<PreMulSum::ParamType>& p) {
                           return std::string(std::get<0>(p.param) ? "Sockets" : "SharedMemory") + "_" +
                                  std::get<1>(p.param);
                         });

// recclScalarDevice: the scalar is read when each call runs, so a change between calls counts;
// inside a group, when the group runs.
TEST(PreMulSumOp, ADeviceResidentScalarIsReadWhenTheCallRuns) {
  Comms w(2);
  ASSERT_TRUE(w.ok()) << w.error();
  double scalar[2] = {1.0, 1.0};
  double got[2][3] = {};
  auto rcs = w.run([&](int r, recclComm_t c) -> recclResult_t {
    recclRedOp_t op;
    if (recclResult_t rc = recclRedOpCreatePreMulSum(&op, &scalar[r], recclFloat64, recclScalarDevice, c); rc) return rc;
    const double one = 1.0;
    if (recclResult_t rc = recclAllReduce(&one, &got[r][0], 1, recclFloat64, op, c, nullptr); rc) return rc;
    scalar[r] = 10.0 * (r + 1);  // 10 and 20: 30 next
    if (recclResult_t rc = recclAllReduce(&one, &got[r][1], 1, recclFloat64, op, c, nullptr); rc) return rc;
    recclGroupStart();
    recclResult_t queued = recclAllReduce(&one, &got[r][2], 1, recclFloat64, op, c, nullptr);
    scalar[r] = 100.0 * (r + 1);  // after the call, before the group runs: 300
    recclResult_t ran = recclGroupEnd();
    if (queued != recclSuccess) return queued;
    if (ran != recclSuccess) return ran;
    return recclRedOpDestroy(op, c);
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(rcs[r], recclSuccess) << recclGetLastError(nullptr);
    EXPECT_EQ(got[r][0], 2.0);
    EXPECT_EQ(got[r][1], 30.0);
    EXPECT_EQ(got[r][2], 300.0);
  }
}

// Ops are per communicator, per datatype, and live until destroyed; a freed value is handed out
// again; every refusal is recclInvalidArgument with a message naming the problem.
TEST(PreMulSumOp, TheOpIsCheckedAgainstItsCommunicatorTypeAndLife) {
  Comms w(1);
  Comms other(1);
  ASSERT_TRUE(w.ok()) << w.error();
  ASSERT_TRUE(other.ok()) << other.error();
  recclComm_t c = w[0];
  float two = 2.0f, x = 3.0f, y = 0;
  recclRedOp_t op, op2;
  ASSERT_EQ(recclRedOpCreatePreMulSum(&op, &two, recclFloat32, recclScalarHostImmediate, c), recclSuccess);
  EXPECT_GE(static_cast<int>(op), static_cast<int>(recclNumOps));
  ASSERT_EQ(recclAllReduce(&x, &y, 1, recclFloat32, op, c, nullptr), recclSuccess);
  EXPECT_EQ(y, 6.0f);  // one rank: its input times its scalar

  auto refused = [&](recclResult_t rc, const char* want) {
    EXPECT_EQ(rc, recclInvalidArgument);
    std::string msg = recclGetLastError(nullptr);
    EXPECT_NE(msg.find(want), std::string::npos) << msg;
  };
  double d = 3, e = 0;
  refused(recclAllReduce(&d, &e, 1, recclFloat64, op, c, nullptr), "is a premulsum of float, the call's datatype is double");
  refused(recclAllReduce(&x, &y, 1, recclFloat32, op, other[0], nullptr), "no live op made on this communicator");
  refused(recclRedOpCreatePreMulSum(&op2, nullptr, recclFloat32, recclScalarHostImmediate, c), "scalar: null pointer");
  refused(recclRedOpCreatePreMulSum(&op2, &two, recclFloat32, static_cast<recclScalarResidence_t>(7), c),
          "residence: unknown value 7");
  refused(recclRedOpCreatePreMulSum(nullptr, &two, recclFloat32, recclScalarHostImmediate, c), "op: null pointer");
  refused(recclRedOpCreatePreMulSum(&op2, &two, static_cast<recclDataType_t>(42), recclScalarHostImmediate, c),
          "datatype: unknown value 42");
  refused(recclRedOpDestroy(recclSum, c), "sum is built in");
  ASSERT_EQ(recclRedOpDestroy(op, c), recclSuccess);
  refused(recclRedOpDestroy(op, c), "is no live op of this communicator");
  refused(recclAllReduce(&x, &y, 1, recclFloat32, op, c, nullptr), "no live op made on this communicator");
  refused(recclAllReduce(&x, &y, 1, recclFloat32, static_cast<recclRedOp_t>(-1), c, nullptr), "op: unknown value -1");
  ASSERT_EQ(recclRedOpCreatePreMulSum(&op2, &two, recclFloat32, recclScalarHostImmediate, c), recclSuccess);
  EXPECT_EQ(op2, op);  // the freed value, handed out again
  EXPECT_EQ(recclRedOpDestroy(op2, c), recclSuccess);
}

// The C++ layer's reccl::RedOp: made, moved, and destroyed exactly once, when its last owner goes.
TEST(PreMulSumOp, TheCxxRedOpDestroysItsOpOnceWhenItsOwnerGoes) {
  Comms w(1);
  ASSERT_TRUE(w.ok()) << w.error();
  recclComm_t c = w[0];
  float two = 2.0f, x = 3.0f, y = 0;
  recclRedOp_t value;
  {
    reccl::RedOp made;
    ASSERT_EQ(reccl::RedOp::preMulSum(&made, &two, recclFloat32, c), recclSuccess);
    value = made.get();
    reccl::RedOp moved(std::move(made));
    EXPECT_EQ(made.get(), recclSum);  // the moved-from holds nothing to destroy
    ASSERT_EQ(recclAllReduce(&x, &y, 1, recclFloat32, moved.get(), c, nullptr), recclSuccess);
    EXPECT_EQ(y, 6.0f);
  }
  EXPECT_EQ(recclRedOpDestroy(value, c), recclInvalidArgument) << "the op outlived its RedOp";
  reccl::RedOp builtIn(recclMax);  // a built-in op is never destroyed
  EXPECT_EQ(builtIn.get(), recclMax);
}

// A rank that calls a PreMulSum while its peer calls a sum is a mismatch at both, named.
TEST(PreMulSumOp, APreMulSumAgainstASumIsAMismatch) {
  Comms w(2);
  ASSERT_TRUE(w.ok()) << w.error();
  std::string why[2];
  auto rcs = w.run([&](int r, recclComm_t c) -> recclResult_t {
    float s = 2.0f, x = 1.0f, y = 0;
    recclRedOp_t op = recclSum;
    if (r == 0) {
      if (recclResult_t rc = recclRedOpCreatePreMulSum(&op, &s, recclFloat32, recclScalarHostImmediate, c); rc) return rc;
    }
    recclResult_t rc = recclAllReduce(&x, &y, 1, recclFloat32, op, c, nullptr);
    if (rc != recclSuccess) why[r] = recclGetLastError(nullptr);
    return rc;
  });
  bool named = false;
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(rcs[r], recclSuccess) << "rank " << r;
    named = named || why[r].find("premulsum") != std::string::npos;
  }
  EXPECT_TRUE(named) << why[0] << " | " << why[1];
}

}  // namespace
