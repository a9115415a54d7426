// AVX2 + F16C kernels. This unit alone is compiled with -mavx2 -mf16c; it is entered only after
// the dispatcher has checked cpuid, and it exposes nothing but its (constant-initialized) table.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernel_table.h"

namespace reccl::reduce {
namespace {

using V = __m256i;
constexpr size_t kVecBytes = 32;

inline __m256 ps(V v) { return _mm256_castsi256_ps(v); }
inline __m256d pd(V v) { return _mm256_castsi256_pd(v); }
inline V si(__m256 v) { return _mm256_castps_si256(v); }
inline V si(__m256d v) { return _mm256_castpd_si256(v); }

// ---- float32 / float64 element ops (see scalar_ops.h for the semantics) ----
inline __m256 addF(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
inline __m256 mulF(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
inline __m256 maxF(__m256 a, __m256 b) {
  __m256 r = _mm256_and_ps(a, b);  // equal operands: +0 beats -0
  r = _mm256_blendv_ps(r, a, _mm256_cmp_ps(a, b, _CMP_GT_OQ));
  r = _mm256_blendv_ps(r, b, _mm256_cmp_ps(b, a, _CMP_GT_OQ));
  r = _mm256_blendv_ps(r, b, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  return _mm256_blendv_ps(r, a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}
inline __m256 minF(__m256 a, __m256 b) {
  __m256 r = _mm256_or_ps(a, b);  // equal operands: -0 beats +0
  r = _mm256_blendv_ps(r, a, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
  r = _mm256_blendv_ps(r, b, _mm256_cmp_ps(b, a, _CMP_LT_OQ));
  r = _mm256_blendv_ps(r, b, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  return _mm256_blendv_ps(r, a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}
inline __m256d maxD(__m256d a, __m256d b) {
  __m256d r = _mm256_and_pd(a, b);
  r = _mm256_blendv_pd(r, a, _mm256_cmp_pd(a, b, _CMP_GT_OQ));
  r = _mm256_blendv_pd(r, b, _mm256_cmp_pd(b, a, _CMP_GT_OQ));
  r = _mm256_blendv_pd(r, b, _mm256_cmp_pd(b, b, _CMP_UNORD_Q));
  return _mm256_blendv_pd(r, a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
}
inline __m256d minD(__m256d a, __m256d b) {
  __m256d r = _mm256_or_pd(a, b);
  r = _mm256_blendv_pd(r, a, _mm256_cmp_pd(a, b, _CMP_LT_OQ));
  r = _mm256_blendv_pd(r, b, _mm256_cmp_pd(b, a, _CMP_LT_OQ));
  r = _mm256_blendv_pd(r, b, _mm256_cmp_pd(b, b, _CMP_UNORD_Q));
  return _mm256_blendv_pd(r, a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
}

struct F32Sum { static V op(V a, V b) { return si(addF(ps(a), ps(b))); } };
struct F32Prod { static V op(V a, V b) { return si(mulF(ps(a), ps(b))); } };
struct F32Max { static V op(V a, V b) { return si(maxF(ps(a), ps(b))); } };
struct F32Min { static V op(V a, V b) { return si(minF(ps(a), ps(b))); } };
struct F64Sum { static V op(V a, V b) { return si(_mm256_add_pd(pd(a), pd(b))); } };
struct F64Prod { static V op(V a, V b) { return si(_mm256_mul_pd(pd(a), pd(b))); } };
struct F64Max { static V op(V a, V b) { return si(maxD(pd(a), pd(b))); } };
struct F64Min { static V op(V a, V b) { return si(minD(pd(a), pd(b))); } };

// ---- float16: F16C widen, float32 op, round to nearest-even ----
template <__m256 (*F)(__m256, __m256)>
struct HalfOp {
  static V op(V a, V b) {
    __m256 alo = _mm256_cvtph_ps(_mm256_castsi256_si128(a));
    __m256 ahi = _mm256_cvtph_ps(_mm256_extracti128_si256(a, 1));
    __m256 blo = _mm256_cvtph_ps(_mm256_castsi256_si128(b));
    __m256 bhi = _mm256_cvtph_ps(_mm256_extracti128_si256(b, 1));
    __m128i rlo = _mm256_cvtps_ph(F(alo, blo), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m128i rhi = _mm256_cvtps_ph(F(ahi, bhi), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(rlo), rhi, 1);
  }
};

// ---- bfloat16: widen by shift, float32 op, round to nearest-even (NaNs quieted) ----
inline __m256 bf16Widen(__m128i h) { return ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
inline V bf16Round(__m256 x) {  // 32-bit lanes holding the bf16 value in their low half
  V u = si(x);
  V lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  V r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
  V quietNan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(r, quietNan, si(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
}
template <__m256 (*F)(__m256, __m256)>
struct Bf16Op {
  static V op(V a, V b) {
    V rlo = bf16Round(F(bf16Widen(_mm256_castsi256_si128(a)), bf16Widen(_mm256_castsi256_si128(b))));
    V rhi = bf16Round(F(bf16Widen(_mm256_extracti128_si256(a, 1)), bf16Widen(_mm256_extracti128_si256(b, 1))));
    // packus works per 128-bit lane; the permute restores element order.
    return _mm256_permute4x64_epi64(_mm256_packus_epi32(rlo, rhi), 0xD8);
  }
};

// ---- integers: sum/prod wrap, max/min signed or unsigned ----
struct I8Sum { static V op(V a, V b) { return _mm256_add_epi8(a, b); } };
struct I8Prod {  // no 8-bit multiply: even and odd bytes through 16-bit multiplies
  static V op(V a, V b) {
    V even = _mm256_and_si256(_mm256_mullo_epi16(a, b), _mm256_set1_epi16(0x00FF));
    V odd = _mm256_slli_epi16(_mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8)), 8);
    return _mm256_or_si256(even, odd);
  }
};
struct I8Max { static V op(V a, V b) { return _mm256_max_epi8(a, b); } };
struct I8Min { static V op(V a, V b) { return _mm256_min_epi8(a, b); } };
struct U8Max { static V op(V a, V b) { return _mm256_max_epu8(a, b); } };
struct U8Min { static V op(V a, V b) { return _mm256_min_epu8(a, b); } };
struct I32Sum { static V op(V a, V b) { return _mm256_add_epi32(a, b); } };
struct I32Prod { static V op(V a, V b) { return _mm256_mullo_epi32(a, b); } };
struct I32Max { static V op(V a, V b) { return _mm256_max_epi32(a, b); } };
struct I32Min { static V op(V a, V b) { return _mm256_min_epi32(a, b); } };
struct U32Max { static V op(V a, V b) { return _mm256_max_epu32(a, b); } };
struct U32Min { static V op(V a, V b) { return _mm256_min_epu32(a, b); } };
struct I64Sum { static V op(V a, V b) { return _mm256_add_epi64(a, b); } };
struct I64Prod {  // low 64 bits of the product from 32x32->64 pieces
  static V op(V a, V b) {
    V lo = _mm256_mul_epu32(a, b);
    V cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b),
                               _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)));
    return _mm256_add_epi64(lo, _mm256_slli_epi64(cross, 32));
  }
};
inline V gt64(V a, V b) { return _mm256_cmpgt_epi64(a, b); }
inline V gtU64(V a, V b) {
  const V bias = _mm256_set1_epi64x(INT64_MIN);
  return _mm256_cmpgt_epi64(_mm256_xor_si256(a, bias), _mm256_xor_si256(b, bias));
}
struct I64Max { static V op(V a, V b) { return _mm256_blendv_epi8(b, a, gt64(a, b)); } };
struct I64Min { static V op(V a, V b) { return _mm256_blendv_epi8(a, b, gt64(a, b)); } };
struct U64Max { static V op(V a, V b) { return _mm256_blendv_epi8(b, a, gtU64(a, b)); } };
struct U64Min { static V op(V a, V b) { return _mm256_blendv_epi8(a, b, gtU64(a, b)); } };

// Two vectors per iteration, then one, then a zero-padded stack copy for the tail, so the tail
// gets exactly the vector semantics. Each block is loaded before it is stored: dst may alias a/b.
// kTwo also stores every result to dst2 (the fused reduce-and-copy: the result is written to both
// while it is in a register, instead of a second pass over dst).
template <typename Op, size_t kElem, bool kTwo>
void applyImpl(void* dst, void* dst2, const void* a, const void* b, size_t count) {
  auto* d = static_cast<unsigned char*>(dst);
  auto* d2 = static_cast<unsigned char*>(dst2);
  auto* pa = static_cast<const unsigned char*>(a);
  auto* pb = static_cast<const unsigned char*>(b);
  const size_t bytes = count * kElem;
  auto put = [&](size_t off, V r) {
    _mm256_storeu_si256(reinterpret_cast<V*>(d + off), r);
    if constexpr (kTwo) _mm256_storeu_si256(reinterpret_cast<V*>(d2 + off), r);
  };
  size_t i = 0;
  for (; i + 2 * kVecBytes <= bytes; i += 2 * kVecBytes) {
    V x0 = _mm256_loadu_si256(reinterpret_cast<const V*>(pa + i));
    V x1 = _mm256_loadu_si256(reinterpret_cast<const V*>(pa + i + kVecBytes));
    V y0 = _mm256_loadu_si256(reinterpret_cast<const V*>(pb + i));
    V y1 = _mm256_loadu_si256(reinterpret_cast<const V*>(pb + i + kVecBytes));
    put(i, Op::op(x0, y0));
    put(i + kVecBytes, Op::op(x1, y1));
  }
  for (; i + kVecBytes <= bytes; i += kVecBytes) {
    V x = _mm256_loadu_si256(reinterpret_cast<const V*>(pa + i));
    V y = _mm256_loadu_si256(reinterpret_cast<const V*>(pb + i));
    put(i, Op::op(x, y));
  }
  if (i < bytes) {
    alignas(kVecBytes) unsigned char ta[kVecBytes] = {}, tb[kVecBytes] = {}, tr[kVecBytes];
    std::memcpy(ta, pa + i, bytes - i);
    std::memcpy(tb, pb + i, bytes - i);
    _mm256_store_si256(reinterpret_cast<V*>(tr),
                       Op::op(_mm256_load_si256(reinterpret_cast<const V*>(ta)),
                              _mm256_load_si256(reinterpret_cast<const V*>(tb))));
    std::memcpy(d + i, tr, bytes - i);
    if constexpr (kTwo) std::memcpy(d2 + i, tr, bytes - i);
  }
}

#include "simd_kernel_table.inc"  // apply, apply2 and kTable over this unit's ops

}  // namespace

const KernelTable& avx2Kernels() noexcept { return kTable; }

}  // namespace reccl::reduce
