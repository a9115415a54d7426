// AVX-512 (F + BW) kernels. This unit alone is compiled with -mavx512f -mavx512bw; it is entered
// only after the dispatcher has checked cpuid and the OS's register state, and it exposes nothing
// but its (constant-initialized) table.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernel_table.h"

namespace reccl::reduce {
namespace {

using V = __m512i;
constexpr size_t kVecBytes = 64;

inline __m512 ps(V v) { return _mm512_castsi512_ps(v); }
inline __m512d pd(V v) { return _mm512_castsi512_pd(v); }
inline V si(__m512 v) { return _mm512_castps_si512(v); }
inline V si(__m512d v) { return _mm512_castpd_si512(v); }

// ---- float32 / float64 element ops (see scalar_ops.h for the semantics) ----
inline __m512 addF(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
inline __m512 mulF(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
inline __m512 maxF(__m512 a, __m512 b) {
  __m512 r = ps(_mm512_and_si512(si(a), si(b)));  // equal operands: +0 beats -0
  r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_GT_OQ), r, a);
  r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(b, a, _CMP_GT_OQ), r, b);
  r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q), r, b);
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), r, a);
}
inline __m512 minF(__m512 a, __m512 b) {
  __m512 r = ps(_mm512_or_si512(si(a), si(b)));  // equal operands: -0 beats +0
  r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), r, a);
  r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(b, a, _CMP_LT_OQ), r, b);
  r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q), r, b);
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), r, a);
}
inline __m512d maxD(__m512d a, __m512d b) {
  __m512d r = pd(_mm512_and_si512(si(a), si(b)));
  r = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(a, b, _CMP_GT_OQ), r, a);
  r = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(b, a, _CMP_GT_OQ), r, b);
  r = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(b, b, _CMP_UNORD_Q), r, b);
  return _mm512_mask_blend_pd(_mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q), r, a);
}
inline __m512d minD(__m512d a, __m512d b) {
  __m512d r = pd(_mm512_or_si512(si(a), si(b)));
  r = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(a, b, _CMP_LT_OQ), r, a);
  r = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(b, a, _CMP_LT_OQ), r, b);
  r = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(b, b, _CMP_UNORD_Q), r, b);
  return _mm512_mask_blend_pd(_mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q), r, a);
}

struct F32Sum { static V op(V a, V b) { return si(addF(ps(a), ps(b))); } };
struct F32Prod { static V op(V a, V b) { return si(mulF(ps(a), ps(b))); } };
struct F32Max { static V op(V a, V b) { return si(maxF(ps(a), ps(b))); } };
struct F32Min { static V op(V a, V b) { return si(minF(ps(a), ps(b))); } };
struct F64Sum { static V op(V a, V b) { return si(_mm512_add_pd(pd(a), pd(b))); } };
struct F64Prod { static V op(V a, V b) { return si(_mm512_mul_pd(pd(a), pd(b))); } };
struct F64Max { static V op(V a, V b) { return si(maxD(pd(a), pd(b))); } };
struct F64Min { static V op(V a, V b) { return si(minD(pd(a), pd(b))); } };

// ---- float16: widen (vcvtph2ps), float32 op, round to nearest-even ----
template <__m512 (*F)(__m512, __m512)>
struct HalfOp {
  static V op(V a, V b) {
    __m512 alo = _mm512_cvtph_ps(_mm512_castsi512_si256(a));
    __m512 ahi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(a, 1));
    __m512 blo = _mm512_cvtph_ps(_mm512_castsi512_si256(b));
    __m512 bhi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(b, 1));
    __m256i rlo = _mm512_cvtps_ph(F(alo, blo), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256i rhi = _mm512_cvtps_ph(F(ahi, bhi), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm512_inserti64x4(_mm512_castsi256_si512(rlo), rhi, 1);
  }
};

// ---- bfloat16: widen by shift, float32 op, round to nearest-even (NaNs quieted) ----
inline __m512 bf16Widen(__m256i h) { return ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
inline __m256i bf16Round(__m512 x) {
  V u = si(x);
  V lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  V r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
  V quietNan = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  r = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), r, quietNan);
  return _mm512_cvtepi32_epi16(r);
}
template <__m512 (*F)(__m512, __m512)>
struct Bf16Op {
  static V op(V a, V b) {
    __m256i rlo = bf16Round(F(bf16Widen(_mm512_castsi512_si256(a)), bf16Widen(_mm512_castsi512_si256(b))));
    __m256i rhi = bf16Round(F(bf16Widen(_mm512_extracti64x4_epi64(a, 1)),
                              bf16Widen(_mm512_extracti64x4_epi64(b, 1))));
    return _mm512_inserti64x4(_mm512_castsi256_si512(rlo), rhi, 1);
  }
};

// ---- integers: sum/prod wrap, max/min signed or unsigned ----
struct I8Sum { static V op(V a, V b) { return _mm512_add_epi8(a, b); } };
struct I8Prod {  // no 8-bit multiply: even and odd bytes through 16-bit multiplies
  static V op(V a, V b) {
    V even = _mm512_and_si512(_mm512_mullo_epi16(a, b), _mm512_set1_epi16(0x00FF));
    V odd = _mm512_slli_epi16(_mm512_mullo_epi16(_mm512_srli_epi16(a, 8), _mm512_srli_epi16(b, 8)), 8);
    return _mm512_or_si512(even, odd);
  }
};
struct I8Max { static V op(V a, V b) { return _mm512_max_epi8(a, b); } };
struct I8Min { static V op(V a, V b) { return _mm512_min_epi8(a, b); } };
struct U8Max { static V op(V a, V b) { return _mm512_max_epu8(a, b); } };
struct U8Min { static V op(V a, V b) { return _mm512_min_epu8(a, b); } };
struct I32Sum { static V op(V a, V b) { return _mm512_add_epi32(a, b); } };
struct I32Prod { static V op(V a, V b) { return _mm512_mullo_epi32(a, b); } };
struct I32Max { static V op(V a, V b) { return _mm512_max_epi32(a, b); } };
struct I32Min { static V op(V a, V b) { return _mm512_min_epi32(a, b); } };
struct U32Max { static V op(V a, V b) { return _mm512_max_epu32(a, b); } };
struct U32Min { static V op(V a, V b) { return _mm512_min_epu32(a, b); } };
struct I64Sum { static V op(V a, V b) { return _mm512_add_epi64(a, b); } };
struct I64Prod { static V op(V a, V b) { return _mm512_mullox_epi64(a, b); } };
struct I64Max { static V op(V a, V b) { return _mm512_max_epi64(a, b); } };
struct I64Min { static V op(V a, V b) { return _mm512_min_epi64(a, b); } };
struct U64Max { static V op(V a, V b) { return _mm512_max_epu64(a, b); } };
struct U64Min { static V op(V a, V b) { return _mm512_min_epu64(a, b); } };

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
    _mm512_storeu_si512(d + off, r);
    if constexpr (kTwo) _mm512_storeu_si512(d2 + off, r);
  };
  size_t i = 0;
  for (; i + 2 * kVecBytes <= bytes; i += 2 * kVecBytes) {
    V x0 = _mm512_loadu_si512(pa + i);
    V x1 = _mm512_loadu_si512(pa + i + kVecBytes);
    V y0 = _mm512_loadu_si512(pb + i);
    V y1 = _mm512_loadu_si512(pb + i + kVecBytes);
    put(i, Op::op(x0, y0));
    put(i + kVecBytes, Op::op(x1, y1));
  }
  for (; i + kVecBytes <= bytes; i += kVecBytes)
    put(i, Op::op(_mm512_loadu_si512(pa + i), _mm512_loadu_si512(pb + i)));
  if (i < bytes) {
    alignas(kVecBytes) unsigned char ta[kVecBytes] = {}, tb[kVecBytes] = {}, tr[kVecBytes];
    std::memcpy(ta, pa + i, bytes - i);
    std::memcpy(tb, pb + i, bytes - i);
    _mm512_store_si512(tr, Op::op(_mm512_load_si512(ta), _mm512_load_si512(tb)));
    std::memcpy(d + i, tr, bytes - i);
    if constexpr (kTwo) std::memcpy(d2 + i, tr, bytes - i);
  }
}

#include "simd_kernel_table.inc"  // apply, apply2 and kTable over this unit's ops

}  // namespace

const KernelTable& avx512Kernels() noexcept { return kTable; }

}  // namespace reccl::reduce
