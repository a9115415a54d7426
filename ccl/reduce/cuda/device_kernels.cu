// The device reduction kernels and their table. The element operations are element_ops.h's (the
// CPU's own), so the two tables cannot disagree on a (type, op); float16 uses the hardware's
// conversions, with the portable rule for NaNs, where the two differ.
#include <cuda_fp16.h>

#include <atomic>
#include <cstdint>

#include "cuda/device_reduce.h"
#include "element_ops.h"

namespace reccl::reduce::cuda {
namespace {

using namespace detail;

constexpr int kThreads = 256;
constexpr int kUnroll = 4;   // vectors per thread in flight: two loads each before any store
constexpr int kMaxDevices = 64;

// float16 <-> float32: the conversion instructions, except NaN, which keeps its payload (quieted)
// as on the CPU; the instructions would give the canonical NaN.
__device__ __forceinline__ float widenHalf(uint16_t h) {
  if ((h & 0x7FFFu) > 0x7C00u) return halfToFloatScalar(h);
  return __half2float(__ushort_as_half(h));
}
__device__ __forceinline__ uint16_t narrowHalf(float f) {
  if (f != f) return floatToHalfScalar(f);
  return __half_as_ushort(__float2half_rn(f));
}
// bfloat16 rounding is four integer operations either way: the portable one, so subnormal and
// NaN handling cannot depend on the instruction's.
__device__ __forceinline__ uint16_t narrowBf16(float f) { return floatToBf16Scalar(f); }

template <typename F32Op>
struct DevHalf {
  using Store = uint16_t;
  static __device__ __forceinline__ uint16_t op(uint16_t a, uint16_t b) {
    return narrowHalf(F32Op::op(widenHalf(a), widenHalf(b)));
  }
};
template <typename F32Op>
struct DevBf16 {
  using Store = uint16_t;
  static __device__ __forceinline__ uint16_t op(uint16_t a, uint16_t b) {
    return narrowBf16(F32Op::op(bf16ToFloatScalar(a), bf16ToFloatScalar(b)));
  }
};

// A kernel's element operation as a value: a (type, op) of the table, or avg's sum followed by
// finalizeAvg's division in the same pass (nranks comes at run time), so avg streams memory once.
template <typename Op>
struct Binary {
  using Store = typename Op::Store;
  __device__ __forceinline__ Store operator()(Store a, Store b) const { return Op::op(a, b); }
};
template <typename SumOp, typename Div>
struct SumThenDivide {
  using Store = typename SumOp::Store;
  int n;
  // The sum is rounded to the type first, as the CPU's sum kernel stores it before finalizeAvg.
  __device__ __forceinline__ Store operator()(Store a, Store b) const { return Div::op(SumOp::op(a, b), n); }
};

template <typename T>
union Pack {
  uint4 u;
  T e[kVectorBytes / sizeof(T)];
};

// 16-byte vectors, grid-stride, kUnroll vectors per thread per round. dst may alias a or b
// exactly: each thread reads a vector before it writes the same vector.
template <typename F>
__global__ void __launch_bounds__(kThreads) reduceVectors(uint4* dst, const uint4* a, const uint4* b, size_t nvec, F f) {
  using T = typename F::Store;
  constexpr int kE = kVectorBytes / sizeof(T);
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < nvec; i += kUnroll * stride) {
    Pack<T> x[kUnroll], y[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      x[u].u = a[i + u * stride];
      y[u].u = b[i + u * stride];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int e = 0; e < kE; ++e) x[u].e[e] = f(x[u].e[e], y[u].e[e]);
      dst[i + u * stride] = x[u].u;
    }
  }
  for (; i < nvec; i += stride) {
    Pack<T> x, y;
    x.u = a[i];
    y.u = b[i];
#pragma unroll
    for (int e = 0; e < kE; ++e) x.e[e] = f(x.e[e], y.e[e]);
    dst[i] = x.u;
  }
}

// One element per thread and round: heads, tails, and buffers whose alignments differ. kAligned:
// every pointer is aligned to the element (else byte loads, as the CPU's memcpy).
template <typename F, bool kAligned>
__global__ void __launch_bounds__(kThreads) reduceElements(void* dst, const void* a, const void* b, size_t count, F f) {
  using T = typename F::Store;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    if constexpr (kAligned) {
      static_cast<T*>(dst)[i] = f(static_cast<const T*>(a)[i], static_cast<const T*>(b)[i]);
    } else {
      T x, y;
      memcpy(&x, static_cast<const unsigned char*>(a) + i * sizeof(T), sizeof(T));
      memcpy(&y, static_cast<const unsigned char*>(b) + i * sizeof(T), sizeof(T));
      T r = f(x, y);
      memcpy(static_cast<unsigned char*>(dst) + i * sizeof(T), &r, sizeof(T));
    }
  }
}

// Enough resident threads to keep every multiprocessor's memory pipeline full.
unsigned blocksFor(size_t work) {
  static std::atomic<int> sms[kMaxDevices];
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) dev = 0;
  int n = sms[dev].load(std::memory_order_relaxed);
  if (n == 0) {
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) n = 32;
    sms[dev].store(n, std::memory_order_relaxed);
  }
  size_t want = (work + kThreads - 1) / kThreads;
  size_t cap = size_t(n) * (2048 / kThreads);
  return unsigned(want < 1 ? 1 : want < cap ? want : cap);
}

bool aligned(const void* p, size_t to) { return reinterpret_cast<uintptr_t>(p) % to == 0; }

template <typename F>
cudaError_t launch(F f, void* dst, const void* a, const void* b, size_t count, cudaStream_t stream) {
  using T = typename F::Store;
  if (count == 0) return cudaSuccess;
  if (!vectorPath(dst, a, b, sizeof(T))) {
    if (aligned(dst, sizeof(T)) && aligned(a, sizeof(T)) && aligned(b, sizeof(T)))
      reduceElements<F, true><<<blocksFor(count), kThreads, 0, stream>>>(dst, a, b, count, f);
    else
      reduceElements<F, false><<<blocksFor(count), kThreads, 0, stream>>>(dst, a, b, count, f);
    return cudaGetLastError();
  }
  // The three pointers share one offset within 16 bytes: a scalar head up to the boundary, the
  // vectors, a scalar tail.
  constexpr size_t kE = kVectorBytes / sizeof(T);
  size_t misalign = reinterpret_cast<uintptr_t>(a) % kVectorBytes;
  size_t head = misalign ? (kVectorBytes - misalign) / sizeof(T) : 0;
  if (head > count) head = count;
  if (head) reduceElements<F, true><<<1, kThreads, 0, stream>>>(dst, a, b, head, f);
  size_t nvec = (count - head) / kE;
  auto* d = static_cast<T*>(dst) + head;
  auto* pa = static_cast<const T*>(a) + head;
  auto* pb = static_cast<const T*>(b) + head;
  if (nvec)
    reduceVectors<F><<<blocksFor(nvec / kUnroll + 1), kThreads, 0, stream>>>(
        reinterpret_cast<uint4*>(d), reinterpret_cast<const uint4*>(pa), reinterpret_cast<const uint4*>(pb), nvec, f);
  size_t done = nvec * kE;
  if (size_t tail = count - head - done)
    reduceElements<F, true><<<1, kThreads, 0, stream>>>(d + done, pa + done, pb + done, tail, f);
  return cudaGetLastError();
}

template <typename Op>
cudaError_t launchOp(void* dst, const void* a, const void* b, size_t count, cudaStream_t stream) {
  return launch(Binary<Op>{}, dst, a, b, count, stream);
}

// avg's division, reduce.cpp's finalizeAvg element for element.
template <typename T>
struct IntDiv {
  static __device__ T op(T v, int n) { return divideByRanks(v, n); }
};
template <typename T>
struct FloatDiv {
  static __device__ T op(T v, int n) { return v / T(n); }
};
struct HalfDiv {
  static __device__ uint16_t op(uint16_t v, int n) { return narrowHalf(widenHalf(v) / float(n)); }
};
struct Bf16Div {
  static __device__ uint16_t op(uint16_t v, int n) { return narrowBf16(bf16ToFloatScalar(v) / float(n)); }
};

template <typename SumOp, typename Div>
cudaError_t launchAvg(void* dst, const void* a, const void* b, size_t count, int nranks, cudaStream_t stream) {
  if (nranks <= 1) return launch(Binary<SumOp>{}, dst, a, b, count, stream);  // finalizeAvg divides by nothing
  return launch(SumThenDivide<SumOp, Div>{nranks}, dst, a, b, count, stream);
}

DeviceKernelTable makeTable() {
  DeviceKernelTable t{};
  forEachElementOp<DevHalf, DevBf16>(
      [&t]<typename Op>(recclDataType_t type, recclRedOp_t op) { t.fn[type][op] = launchOp<Op>; });
  // The sum operations are forEachElementOp's for recclSum, type by type.
  t.avg[recclInt8] = launchAvg<IntSum<int8_t>, IntDiv<int8_t>>;
  t.avg[recclUint8] = launchAvg<IntSum<uint8_t>, IntDiv<uint8_t>>;
  t.avg[recclInt32] = launchAvg<IntSum<int32_t>, IntDiv<int32_t>>;
  t.avg[recclUint32] = launchAvg<IntSum<uint32_t>, IntDiv<uint32_t>>;
  t.avg[recclInt64] = launchAvg<IntSum<int64_t>, IntDiv<int64_t>>;
  t.avg[recclUint64] = launchAvg<IntSum<uint64_t>, IntDiv<uint64_t>>;
  t.avg[recclFloat16] = launchAvg<DevHalf<FSum<float>>, HalfDiv>;
  t.avg[recclBfloat16] = launchAvg<DevBf16<FSum<float>>, Bf16Div>;
  t.avg[recclFloat32] = launchAvg<FSum<float>, FloatDiv<float>>;
  t.avg[recclFloat64] = launchAvg<FSum<double>, FloatDiv<double>>;
  return t;
}

bool validType(int t) { return t >= 0 && t < recclNumTypes; }
bool validOp(int o) { return o >= 0 && o < recclNumOps; }

}  // namespace

const DeviceKernelTable& deviceKernels() noexcept {
  static const DeviceKernelTable table = makeTable();
  return table;
}

DeviceReduceFn deviceKernel(recclDataType_t type, recclRedOp_t op) noexcept {
  if (!validType(type) || !validOp(op)) return nullptr;
  return deviceKernels().fn[type][op == recclAvg ? recclSum : op];
}

bool vectorPath(const void* dst, const void* a, const void* b, size_t elemBytes) noexcept {
  auto off = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % kVectorBytes; };
  return elemBytes > 0 && off(dst) == off(a) && off(a) == off(b) && off(a) % elemBytes == 0;
}

cudaError_t launchReduce(void* dst, const void* a, const void* b, size_t count, recclDataType_t type,
                         recclRedOp_t op, int nranks, cudaStream_t stream) noexcept {
  DeviceReduceFn fn = deviceKernel(type, op);
  if (!fn || nranks < 1) return cudaErrorInvalidValue;
  if (op == recclAvg) return deviceKernels().avg[type](dst, a, b, count, nranks, stream);
  return fn(dst, a, b, count, stream);
}

}  // namespace reccl::reduce::cuda
