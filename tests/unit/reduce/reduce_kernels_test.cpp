// Every (ISA this CPU runs, type, op) kernel against an independent scalar reference: odd
// lengths, unaligned pointers, dst aliasing a or b, special float values. Bit-exact, except that
// the NaN a sum or product produces may carry any payload.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "reduce.h"
#include "reduce_isa.h"
#include "reference.h"

namespace reccl::reduce {
namespace {

namespace ref = testref;

}  // namespace

// Readable parameters in test listings ("avx2" instead of the enum's bytes).
void PrintTo(Isa isa, std::ostream* os) { *os << isaName(isa); }

namespace {

constexpr size_t kCounts[] = {0, 1, 7, 31, 33, 1000003};

template <typename T>
T wrapSum(T a, T b) { return T(uint64_t(a) + uint64_t(b)); }
template <typename T>
T wrapProd(T a, T b) { return T(uint64_t(a) * uint64_t(b)); }

// Reference result of one element; `bytes` of a, b, out are little-endian elements.
void refElement(recclDataType_t type, recclRedOp_t op, const unsigned char* a,
                const unsigned char* b, unsigned char* out) {
  auto ints = [&]<typename T>(T) {
    T x, y, r;
    std::memcpy(&x, a, sizeof(T));
    std::memcpy(&y, b, sizeof(T));
    switch (op) {
      case recclSum: case recclAvg: r = wrapSum(x, y); break;
      case recclProd: r = wrapProd(x, y); break;
      case recclMax: r = x < y ? y : x; break;
      default: r = y < x ? y : x; break;
    }
    std::memcpy(out, &r, sizeof(T));
  };
  auto floats = [&]<typename F>(F) -> F {
    F x, y;
    std::memcpy(&x, a, sizeof(F));
    std::memcpy(&y, b, sizeof(F));
    switch (op) {
      case recclSum: case recclAvg: return x + y;
      case recclProd: return x * y;
      case recclMax: return ref::ieeeMax(x, y);
      default: return ref::ieeeMin(x, y);
    }
  };
  auto f32op = [&](float x, float y) {
    switch (op) {
      case recclSum: case recclAvg: return x + y;
      case recclProd: return x * y;
      case recclMax: return ref::ieeeMax(x, y);
      default: return ref::ieeeMin(x, y);
    }
  };
  uint16_t ha, hb, hr;
  switch (type) {
    case recclInt8: return ints(int8_t{});
    case recclUint8: return ints(uint8_t{});
    case recclInt32: return ints(int32_t{});
    case recclUint32: return ints(uint32_t{});
    case recclInt64: return ints(int64_t{});
    case recclUint64: return ints(uint64_t{});
    case recclFloat32: { float r = floats(float{}); std::memcpy(out, &r, 4); return; }
    case recclFloat64: { double r = floats(double{}); std::memcpy(out, &r, 8); return; }
    case recclFloat16:
      std::memcpy(&ha, a, 2);
      std::memcpy(&hb, b, 2);
      hr = ref::floatToHalf(f32op(ref::halfToFloat(ha), ref::halfToFloat(hb)));
      std::memcpy(out, &hr, 2);
      return;
    case recclBfloat16:
      std::memcpy(&ha, a, 2);
      std::memcpy(&hb, b, 2);
      hr = ref::floatToBf16(f32op(ref::bf16ToFloat(ha), ref::bf16ToFloat(hb)));
      std::memcpy(out, &hr, 2);
      return;
    default: return;
  }
}

bool isNan(recclDataType_t type, const unsigned char* p) {
  uint16_t h;
  switch (type) {
    case recclFloat32: { float f; std::memcpy(&f, p, 4); return std::isnan(f); }
    case recclFloat64: { double f; std::memcpy(&f, p, 8); return std::isnan(f); }
    case recclFloat16: std::memcpy(&h, p, 2); return ref::halfIsNan(h);
    case recclBfloat16: std::memcpy(&h, p, 2); return (h & 0x7F80) == 0x7F80 && (h & 0x7F);
    default: return false;
  }
}

// Random elements; for floats mostly ordinary values with sprinkled specials (NaN, inf, ±0,
// subnormals, equal pairs) so every branch of max/min and rounding is hit.
void fill(recclDataType_t type, unsigned char* p, size_t count, std::mt19937_64& rng) {
  const size_t es = typeSize(type);
  std::uniform_real_distribution<double> val(-4.0, 4.0);
  std::uniform_int_distribution<int> pick(0, 99);
  for (size_t i = 0; i < count; ++i) {
    uint64_t raw = rng();
    int k = pick(rng);
    unsigned char* e = p + i * es;
    if (type == recclFloat32 || type == recclFloat64 || type == recclFloat16 || type == recclBfloat16) {
      double v = val(rng);
      if (k < 3) v = std::nan("");
      else if (k < 5) v = (k == 3 ? 1 : -1) * INFINITY;
      else if (k < 8) v = (k == 6 ? -0.0 : 0.0);
      else if (k < 10) v = std::ldexp(v, -140);  // float32 subnormal, tiny for the others
      else if (k < 12) v = std::ldexp(v, 20);     // overflows float16
      if (k >= 12 && k < 20) {  // raw bits: NaN payloads, signalling NaNs, subnormals
        std::memcpy(e, &raw, es);
        continue;
      }
      if (type == recclFloat32) { float f = float(v); std::memcpy(e, &f, 4); }
      else if (type == recclFloat64) { std::memcpy(e, &v, 8); }
      else if (type == recclFloat16) { uint16_t h = ref::floatToHalf(float(v)); std::memcpy(e, &h, 2); }
      else { uint16_t h = ref::floatToBf16(float(v)); std::memcpy(e, &h, 2); }
    } else {
      if (k < 10) raw = 0;
      else if (k < 20) raw = ~uint64_t{0};  // -1 / max
      std::memcpy(e, &raw, es);
    }
  }
}

enum class Layout { kOutOfPlace, kDstIsA, kDstIsB, kUnaligned };
const char* layoutName(Layout l) {
  switch (l) {
    case Layout::kOutOfPlace: return "out-of-place";
    case Layout::kDstIsA: return "dst==a";
    case Layout::kDstIsB: return "dst==b";
    case Layout::kUnaligned: return "unaligned";
  }
  return "?";
}

using Param = std::tuple<Isa, recclDataType_t, recclRedOp_t>;

class ReduceKernelTest : public ::testing::TestWithParam<Param> {};

TEST_P(ReduceKernelTest, MatchesReference) {
  auto [isa, type, op] = GetParam();
  if (!isaSupported(isa)) GTEST_SKIP() << "this CPU lacks " << isaName(isa);
  ReduceFn fn = kernelFor(isa, type, op);
  ASSERT_NE(fn, nullptr);
  const size_t es = typeSize(type);
  std::mt19937_64 rng(1234 + 97 * type + 13 * op);
  for (size_t count : kCounts) {
    for (Layout layout : {Layout::kOutOfPlace, Layout::kDstIsA, Layout::kDstIsB, Layout::kUnaligned}) {
      // Guard bytes around dst catch writes past the end.
      const size_t pad = 64;
      std::vector<unsigned char> abuf(count * es + 2 * pad), bbuf(count * es + 2 * pad),
          dbuf(count * es + 2 * pad, 0xA5), expect(count * es);
      size_t off = layout == Layout::kUnaligned ? pad + 1 : pad;  // odd byte address
      unsigned char* a = abuf.data() + off;
      unsigned char* b = bbuf.data() + (layout == Layout::kUnaligned ? pad + 3 : pad);
      fill(type, a, count, rng);
      fill(type, b, count, rng);
      for (size_t i = 0; i < count; ++i) refElement(type, op, a + i * es, b + i * es, expect.data() + i * es);
      unsigned char* d = layout == Layout::kDstIsA ? a : layout == Layout::kDstIsB ? b : dbuf.data() + off;
      fn(d, a, b, count);
      size_t wrong = 0, first = count;
      for (size_t i = 0; i < count; ++i) {
        const unsigned char* got = d + i * es;
        const unsigned char* want = expect.data() + i * es;
        if (std::memcmp(got, want, es) == 0) continue;
        if ((op == recclSum || op == recclProd || op == recclAvg) && isNan(type, got) && isNan(type, want)) continue;
        if (wrong++ == 0) first = i;
      }
      EXPECT_EQ(wrong, 0u) << isaName(isa) << " " << typeName(type) << " " << opName(op) << " count=" << count
                           << " " << layoutName(layout) << " first wrong element " << first;
      if (layout != Layout::kDstIsA && layout != Layout::kDstIsB) {
        unsigned char* base = dbuf.data();
        for (size_t i = 0; i < off; ++i) ASSERT_EQ(base[i], 0xA5) << "write before dst";
        for (size_t i = off + count * es; i < dbuf.size(); ++i) ASSERT_EQ(base[i], 0xA5) << "write past dst end";
      }
    }
  }
}

// The two-output kernel writes the one-output kernel's exact bits (checked above against the
// reference) to both outputs, with dst aliasing a or b as the allreduce uses it, and nothing
// outside either output.
TEST_P(ReduceKernelTest, TwoOutputsMatchOneOutput) {
  auto [isa, type, op] = GetParam();
  if (!isaSupported(isa)) GTEST_SKIP() << "this CPU lacks " << isaName(isa);
  ReduceFn fn = kernelFor(isa, type, op);
  Reduce2Fn fn2 = kernel2For(isa, type, op);
  ASSERT_NE(fn, nullptr);
  ASSERT_NE(fn2, nullptr);
  const size_t es = typeSize(type);
  std::mt19937_64 rng(4321 + 97 * type + 13 * op);
  for (size_t count : kCounts) {
    for (Layout layout : {Layout::kOutOfPlace, Layout::kDstIsA, Layout::kDstIsB, Layout::kUnaligned}) {
      const size_t pad = 64;
      std::vector<unsigned char> abuf(count * es + 2 * pad), bbuf(count * es + 2 * pad),
          dbuf(count * es + 2 * pad, 0xA5), d2buf(count * es + 2 * pad, 0x5A), expect(count * es);
      size_t off = layout == Layout::kUnaligned ? pad + 1 : pad;
      size_t off2 = layout == Layout::kUnaligned ? pad + 5 : pad;
      unsigned char* a = abuf.data() + off;
      unsigned char* b = bbuf.data() + (layout == Layout::kUnaligned ? pad + 3 : pad);
      fill(type, a, count, rng);
      fill(type, b, count, rng);
      fn(expect.data(), a, b, count);
      unsigned char* d = layout == Layout::kDstIsA ? a : layout == Layout::kDstIsB ? b : dbuf.data() + off;
      unsigned char* d2 = d2buf.data() + off2;
      fn2(d, d2, a, b, count);
      EXPECT_EQ(std::memcmp(d, expect.data(), count * es), 0)
          << isaName(isa) << " " << typeName(type) << " " << opName(op) << " count=" << count << " "
          << layoutName(layout) << ": first output differs from the one-output kernel";
      EXPECT_EQ(std::memcmp(d2, expect.data(), count * es), 0)
          << isaName(isa) << " " << typeName(type) << " " << opName(op) << " count=" << count << " "
          << layoutName(layout) << ": second output differs from the one-output kernel";
      for (size_t i = 0; i < off2; ++i) ASSERT_EQ(d2buf[i], 0x5A) << "write before dst2";
      for (size_t i = off2 + count * es; i < d2buf.size(); ++i) ASSERT_EQ(d2buf[i], 0x5A) << "write past dst2 end";
      if (layout != Layout::kDstIsA && layout != Layout::kDstIsB) {
        for (size_t i = 0; i < off; ++i) ASSERT_EQ(dbuf[i], 0xA5) << "write before dst";
        for (size_t i = off + count * es; i < dbuf.size(); ++i) ASSERT_EQ(dbuf[i], 0xA5) << "write past dst end";
      }
    }
  }
}

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  auto [isa, type, op] = info.param;
  return std::string(isaName(isa)) + "_" + typeName(type) + "_" + opName(op);
}

INSTANTIATE_TEST_SUITE_P(
    AllKernels, ReduceKernelTest,
    ::testing::Combine(::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512),
                       ::testing::Values(recclInt8, recclUint8, recclInt32, recclUint32, recclInt64,
                                         recclUint64, recclFloat16, recclFloat32, recclFloat64,
                                         recclBfloat16),
                       ::testing::Values(recclSum, recclProd, recclMax, recclMin, recclAvg)),
    paramName);

TEST(ReduceDispatch, KernelForEveryValidPairAndNullOtherwise) {
  for (int t = 0; t < recclNumTypes; ++t)
    for (int o = 0; o < recclNumOps; ++o)
      EXPECT_NE(kernel(recclDataType_t(t), recclRedOp_t(o)), nullptr) << t << "," << o;
  EXPECT_EQ(kernel(recclDataType_t(recclNumTypes), recclSum), nullptr);
  EXPECT_EQ(kernel(recclDataType_t(-1), recclSum), nullptr);
  EXPECT_EQ(kernel(recclFloat32, recclRedOp_t(recclNumOps)), nullptr);
  EXPECT_EQ(kernel(recclFloat32, recclAvg), kernel(recclFloat32, recclSum));
  EXPECT_EQ(kernel(recclInt32, recclSum), kernelFor(selectedIsa(), recclInt32, recclSum));
  for (int t = 0; t < recclNumTypes; ++t)
    for (int o = 0; o < recclNumOps; ++o)
      EXPECT_NE(kernel2(recclDataType_t(t), recclRedOp_t(o)), nullptr) << t << "," << o;
  EXPECT_EQ(kernel2(recclDataType_t(recclNumTypes), recclSum), nullptr);
  EXPECT_EQ(kernel2(recclFloat32, recclRedOp_t(recclNumOps)), nullptr);
  EXPECT_EQ(kernel2(recclFloat32, recclAvg), kernel2(recclFloat32, recclSum));
  EXPECT_EQ(kernel2(recclInt32, recclSum), kernel2For(selectedIsa(), recclInt32, recclSum));
  EXPECT_STREQ(isaName(), isaName(selectedIsa()));
  EXPECT_TRUE(isaSupported(Isa::kScalar));
}

TEST(ReduceDispatch, NamesAndSizes) {
  EXPECT_STREQ(typeName(recclFloat16), "half");
  EXPECT_STREQ(typeName(recclFloat32), "float");
  EXPECT_STREQ(typeName(recclBfloat16), "bfloat16");
  EXPECT_STREQ(opName(recclAvg), "avg");
  EXPECT_EQ(typeSize(recclInt64), 8u);
  EXPECT_EQ(typeSize(recclBfloat16), 2u);
  EXPECT_EQ(typeSize(recclDataType_t(42)), 0u);
  EXPECT_FALSE(validType(10));
  EXPECT_FALSE(validOp(-1));
}

// More ranks than a small integer type counts (the API takes up to 65536): the divisor is the rank
// count itself, not the count wrapped into the type (int8: 128 -> -128 flips the sign; uint8:
// 256 -> 0 divides by zero).
TEST(ReduceAvg, IntegersDivideByRankCountsPastTheirRange) {
  int8_t i8[] = {-128, 127, -1, 100};
  finalizeAvg(i8, 4, recclInt8, 128);
  EXPECT_EQ(i8[0], -1);
  EXPECT_EQ(i8[1], 0);
  EXPECT_EQ(i8[2], 0);
  EXPECT_EQ(i8[3], 0);
  int8_t i8b[] = {-128, 127};
  finalizeAvg(i8b, 2, recclInt8, 100);
  EXPECT_EQ(i8b[0], -1);
  EXPECT_EQ(i8b[1], 1);
  uint8_t u8[] = {255, 200};
  finalizeAvg(u8, 2, recclUint8, 256);
  EXPECT_EQ(u8[0], 0);
  EXPECT_EQ(u8[1], 0);
  uint8_t u8b[] = {255};
  finalizeAvg(u8b, 1, recclUint8, 200);
  EXPECT_EQ(u8b[0], 1);
  int32_t i32[] = {INT32_MIN, 65535};
  finalizeAvg(i32, 2, recclInt32, 65536);
  EXPECT_EQ(i32[0], -32768);
  EXPECT_EQ(i32[1], 0);
}

TEST(ReduceAvg, IntegersTruncateFloatsRoundOnce) {
  int32_t i32[] = {-7, 7, 9, -1};
  finalizeAvg(i32, 4, recclInt32, 2);
  EXPECT_EQ(i32[0], -3);
  EXPECT_EQ(i32[1], 3);
  EXPECT_EQ(i32[2], 4);
  EXPECT_EQ(i32[3], 0);
  uint8_t u8[] = {255, 3};
  finalizeAvg(u8, 2, recclUint8, 4);
  EXPECT_EQ(u8[0], 63);
  EXPECT_EQ(u8[1], 0);
  int64_t i64[] = {INT64_MIN};
  finalizeAvg(i64, 1, recclInt64, 3);
  EXPECT_EQ(i64[0], INT64_MIN / 3);
  uint64_t u64[] = {UINT64_MAX};
  finalizeAvg(u64, 1, recclUint64, 65536);
  EXPECT_EQ(u64[0], UINT64_MAX / 65536);
  float f[] = {1.0f, 10.0f};
  finalizeAvg(f, 2, recclFloat32, 3);
  EXPECT_EQ(f[0], 1.0f / 3.0f);
  EXPECT_EQ(f[1], 10.0f / 3.0f);
  double d[] = {1.0};
  finalizeAvg(d, 1, recclFloat64, 3);
  EXPECT_EQ(d[0], 1.0 / 3.0);
  uint16_t h[] = {ref::floatToHalf(3.0f)};
  finalizeAvg(h, 1, recclFloat16, 3);
  EXPECT_EQ(h[0], ref::floatToHalf(1.0f));
  uint16_t bf[] = {ref::floatToBf16(1.0f)};
  finalizeAvg(bf, 1, recclBfloat16, 3);
  EXPECT_EQ(bf[0], ref::floatToBf16(1.0f / 3.0f));
}

}  // namespace
}  // namespace reccl::reduce
