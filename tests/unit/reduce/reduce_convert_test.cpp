// float16 / bfloat16 conversions: all 65536 bit patterns each way against an independent
// reference (and against the CPU's F16C instructions where present), plus every rounding tie.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "reduce.h"
#include "reference.h"

namespace reccl::reduce {
namespace {

namespace ref = testref;

__attribute__((target("f16c"))) float f16cToFloat(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) uint16_t f16cToHalf(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
bool haveF16c() { return __builtin_cpu_supports("f16c"); }

TEST(HalfConvert, ToFloatAllPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float got = halfToFloat(uint16_t(h));
    ASSERT_EQ(ref::bits(got), ref::bits(ref::halfToFloat(uint16_t(h)))) << std::hex << "half 0x" << h;
  }
}

TEST(HalfConvert, RoundTripAllPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    uint16_t want = ref::halfIsNan(uint16_t(h)) ? uint16_t(h | 0x200) : uint16_t(h);
    ASSERT_EQ(floatToHalf(halfToFloat(uint16_t(h))), want) << std::hex << "half 0x" << h;
  }
}

// For every half value: the float exactly halfway to the next half (a tie) and one float ulp
// either side of it, which is where round-to-nearest-even can go wrong.
TEST(HalfConvert, FromFloatTiesAndNeighboursAllPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    if (ref::halfIsNan(uint16_t(h)) || (h & 0x7FFF) >= 0x7C00) continue;
    double lo = ref::halfToFloat(uint16_t(h));
    double hi = (h & 0x7FFF) == 0x7BFF ? std::copysign(65536.0, lo)
                                       : double(ref::halfToFloat(uint16_t(h + 1)));
    float mid = float((lo + hi) / 2);  // exact: halves have 11 significant bits
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY), std::nextafter(mid, -INFINITY)}) {
      ASSERT_EQ(floatToHalf(f), ref::floatToHalf(f)) << "float " << f << " half 0x" << std::hex << h;
    }
  }
}

TEST(HalfConvert, FromFloatStridedSweepOverAllFloats) {
  // Every 1021st float32 bit pattern (about 4M values, all exponents, NaNs included).
  for (uint64_t u = 0; u < (1ull << 32); u += 1021) {
    float f = ref::fromBits(uint32_t(u));
    ASSERT_EQ(floatToHalf(f), ref::floatToHalf(f)) << std::hex << "float bits 0x" << u;
  }
}

TEST(HalfConvert, MatchesF16cInstructions) {
  if (!haveF16c()) GTEST_SKIP() << "this CPU lacks F16C";
  for (uint32_t h = 0; h < 65536; ++h)
    ASSERT_EQ(ref::bits(halfToFloat(uint16_t(h))), ref::bits(f16cToFloat(uint16_t(h)))) << std::hex << h;
  for (uint64_t u = 0; u < (1ull << 32); u += 1021) {
    float f = ref::fromBits(uint32_t(u));
    ASSERT_EQ(floatToHalf(f), f16cToHalf(f)) << std::hex << "float bits 0x" << u;
  }
}

TEST(Bfloat16Convert, ToFloatAndRoundTripAllPatterns) {
  for (uint32_t b = 0; b < 65536; ++b) {
    float f = bfloat16ToFloat(uint16_t(b));
    ASSERT_EQ(ref::bits(f), b << 16);
    bool nan = (b & 0x7F80) == 0x7F80 && (b & 0x7F);
    ASSERT_EQ(floatToBfloat16(f), nan ? uint16_t(b | 0x40) : uint16_t(b)) << std::hex << b;
  }
}

TEST(Bfloat16Convert, FromFloatTiesAndNeighboursAllPatterns) {
  for (uint32_t b = 0; b < 65536; ++b) {
    uint32_t mid = (b << 16) | 0x8000;  // halfway to the next bfloat16 (or a NaN payload)
    for (uint32_t u : {mid, mid - 1, mid + 1, b << 16, (b << 16) | 0xFFFF}) {
      float f = ref::fromBits(u);
      uint16_t got = floatToBfloat16(f);
      uint16_t want = ref::floatToBf16(f);
      ASSERT_EQ(got, want) << std::hex << "float bits 0x" << u;
    }
  }
}

TEST(Bfloat16Convert, FromFloatStridedSweepOverAllFloats) {
  for (uint64_t u = 0; u < (1ull << 32); u += 1021) {
    float f = ref::fromBits(uint32_t(u));
    ASSERT_EQ(floatToBfloat16(f), ref::floatToBf16(f)) << std::hex << "float bits 0x" << u;
  }
}

}  // namespace
}  // namespace reccl::reduce
