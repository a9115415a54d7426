// The public scalar float16/bfloat16 conversions (round to nearest-even), for tests, benchmarks
// and the data checks of reccl-bench. Same code the scalar kernels inline.
#include "reduce.h"
#include "scalar_ops.h"

namespace reccl::reduce {

float halfToFloat(uint16_t h) noexcept { return detail::halfToFloatScalar(h); }
uint16_t floatToHalf(float f) noexcept { return detail::floatToHalfScalar(f); }
float bfloat16ToFloat(uint16_t b) noexcept { return detail::bf16ToFloatScalar(b); }
uint16_t floatToBfloat16(float f) noexcept { return detail::floatToBf16Scalar(f); }

}  // namespace reccl::reduce
