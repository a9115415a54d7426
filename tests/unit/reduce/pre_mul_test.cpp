// reduce::PreMul, a PreMulSum's multiply fused into the reads of the input: for every type, its
// outputs have exactly the bits of the two-pass form (the product kernel against the scalar over
// the whole input, then the sum kernel), across block boundaries, with dst aliasing either
// operand, unaligned, and with nothing written outside the outputs.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "reduce.h"

namespace reccl::reduce {
namespace {

constexpr unsigned char kGuard = 0xA5;

std::vector<size_t> counts(size_t es) {
  const size_t per = PreMul::kBlockBytes / es;
  return {0, 1, 7, per - 1, per, per + 1, 3 * per + 5, 100003};
}

// Raw random bits: every float class (NaN payloads, infinities, subnormals) and every integer.
void fillRandom(unsigned char* p, size_t bytes, std::mt19937_64& rng) {
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(rng());
}

// The two-pass form: in * scalar over the whole input (the product kernel), then a + that.
std::vector<unsigned char> twoPass(recclDataType_t t, const unsigned char* a, const unsigned char* in,
                                   const unsigned char* scalar, size_t count) {
  const size_t es = typeSize(t);
  std::vector<unsigned char> scalars(count * es), scaled(count * es), out(count * es);
  for (size_t i = 0; i < count; ++i) std::memcpy(scalars.data() + i * es, scalar, es);
  kernel(t, recclProd)(scaled.data(), in, scalars.data(), count);
  if (!a) return scaled;
  kernel(t, recclSum)(out.data(), a, scaled.data(), count);
  return out;
}

class PreMulTest : public ::testing::TestWithParam<recclDataType_t> {};

TEST_P(PreMulTest, ScaleIsTheProductKernelAgainstTheScalar) {
  const recclDataType_t t = GetParam();
  const size_t es = typeSize(t);
  std::mt19937_64 rng(17 + t);
  for (size_t count : counts(es)) {
    for (bool inPlace : {false, true}) {
      std::vector<unsigned char> scalar(es), in(count * es + 1), out(count * es + 66, kGuard);
      fillRandom(scalar.data(), es, rng);
      fillRandom(in.data(), in.size(), rng);
      const auto want = twoPass(t, nullptr, in.data() + 1, scalar.data(), count);
      unsigned char* dst = inPlace ? in.data() + 1 : out.data() + 33;
      PreMul(t, scalar.data()).scale(dst, in.data() + 1, count);
      ASSERT_EQ(std::memcmp(dst, want.data(), count * es), 0)
          << typeName(t) << " count=" << count << (inPlace ? " in place" : "");
      for (size_t i = 0; !inPlace && i < out.size(); ++i) {
        if (i < 33 || i >= 33 + count * es) {
          ASSERT_EQ(out[i], kGuard) << "write outside out at byte " << i;
        }
      }
    }
  }
}

enum class Alias { kNone, kDstIsA, kDstIsIn };

TEST_P(PreMulTest, AddScaledHasTheBitsOfScalingFirstThenSumming) {
  const recclDataType_t t = GetParam();
  const size_t es = typeSize(t);
  std::mt19937_64 rng(1009 + t);
  for (size_t count : counts(es)) {
    for (Alias alias : {Alias::kNone, Alias::kDstIsA, Alias::kDstIsIn}) {
      for (bool two : {false, true}) {
        const size_t pad = 33;  // odd: nothing is aligned
        std::vector<unsigned char> scalar(es), a(count * es + 2 * pad), in(count * es + 2 * pad),
            d(count * es + 2 * pad, kGuard), d2(count * es + 2 * pad, kGuard);
        fillRandom(scalar.data(), es, rng);
        fillRandom(a.data(), a.size(), rng);
        fillRandom(in.data(), in.size(), rng);
        const auto want = twoPass(t, a.data() + pad, in.data() + pad, scalar.data(), count);
        unsigned char* dst = alias == Alias::kDstIsA ? a.data() + pad : alias == Alias::kDstIsIn ? in.data() + pad
                                                                                             : d.data() + pad;
        PreMul m(t, scalar.data());
        if (two)
          m.addScaled2(dst, d2.data() + pad, a.data() + pad, in.data() + pad, count);
        else
          m.addScaled(dst, a.data() + pad, in.data() + pad, count);
        const std::string what = std::string(typeName(t)) + " count=" + std::to_string(count) + " alias=" +
                                 std::to_string(static_cast<int>(alias)) + (two ? " addScaled2" : " addScaled");
        ASSERT_EQ(std::memcmp(dst, want.data(), count * es), 0) << what;
        if (two) {
          ASSERT_EQ(std::memcmp(d2.data() + pad, want.data(), count * es), 0) << what << ": second output";
        }
        for (size_t i = 0; i < d.size(); ++i) {
          const bool inside = i >= pad && i < pad + count * es;
          // d is the output only without aliasing; d2 only for addScaled2.
          const bool dWritten = inside && alias == Alias::kNone, d2Written = inside && two;
          if (!dWritten) {
            ASSERT_EQ(d[i], kGuard) << what << ": write outside the output, byte " << i;
          }
          if (!d2Written) {
            ASSERT_EQ(d2[i], kGuard) << what << ": write outside the second output, byte " << i;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryType, PreMulTest,
                         ::testing::Values(recclInt8, recclUint8, recclInt32, recclUint32, recclInt64, recclUint64,
                                           recclFloat16, recclFloat32, recclFloat64, recclBfloat16),
                         [](const ::testing::TestParamInfo<recclDataType_t>& p) { return typeName(p.param); });

TEST(PreMul, AnInvalidTypeWritesNothing) {
  const double scalar = 2;
  unsigned char in[16] = {1, 2, 3}, out[16];
  std::memset(out, kGuard, sizeof out);
  PreMul m(static_cast<recclDataType_t>(recclNumTypes), &scalar);
  m.scale(out, in, 4);
  m.addScaled(out, in, in, 4);
  for (unsigned char c : out) EXPECT_EQ(c, kGuard);
}

}  // namespace
}  // namespace reccl::reduce
