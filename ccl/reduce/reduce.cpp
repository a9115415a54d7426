// Kernel dispatch (cpuid once, capped by RECCL_REDUCE_ISA), type/op names and the avg finalizer.
#include "reduce.h"

#include <strings.h>

#include <cstring>

#include "kernel_table.h"
#include "reccl/common/log.h"
#include "reccl/common/params.h"
#include "reduce_isa.h"
#include "scalar_ops.h"

namespace reccl::reduce {
namespace {

constexpr size_t kTypeSizes[recclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};

bool cpuHas(Isa isa) noexcept {
  __builtin_cpu_init();
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    case Isa::kAvx512:
      // libgcc's probe also checks that the OS saves the ZMM state (XGETBV).
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx2") &&
             __builtin_cpu_supports("f16c");
  }
  return false;
}

Isa pickIsa() noexcept {
  Isa best = cpuHas(Isa::kAvx512) ? Isa::kAvx512 : cpuHas(Isa::kAvx2) ? Isa::kAvx2 : Isa::kScalar;
  std::string cap = params::ReduceIsa();
  if (cap.empty()) return best;
  Isa capIsa;
  if (!strcasecmp(cap.c_str(), "scalar")) {
    capIsa = Isa::kScalar;
  } else if (!strcasecmp(cap.c_str(), "avx2")) {
    capIsa = Isa::kAvx2;
  } else if (!strcasecmp(cap.c_str(), "avx512")) {
    capIsa = Isa::kAvx512;
  } else {
    RECCL_WARN(kLogInit, "ignoring RECCL_REDUCE_ISA=%s: expected scalar, avx2 or avx512", cap.c_str());
    return best;
  }
  return capIsa < best ? capIsa : best;
}

const KernelTable* tableFor(Isa isa) noexcept {
  if (!isaSupported(isa)) return nullptr;
  switch (isa) {
    case Isa::kScalar: return &scalarKernels();
    case Isa::kAvx2: return &avx2Kernels();
    case Isa::kAvx512: return &avx512Kernels();
  }
  return nullptr;
}

template <typename T>
void divideInts(void* buf, size_t count, int nranks) {
  auto* p = static_cast<unsigned char*>(buf);
  for (size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    v = detail::divideByRanks(v, nranks);  // truncating, as NCCL
    std::memcpy(p + i * sizeof(T), &v, sizeof(T));
  }
}

template <typename T>
void divideFloats(void* buf, size_t count, int nranks) {
  auto* p = static_cast<unsigned char*>(buf);
  const T n = static_cast<T>(nranks);
  for (size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    v = v / n;
    std::memcpy(p + i * sizeof(T), &v, sizeof(T));
  }
}

template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void divideHalves(void* buf, size_t count, int nranks) {
  auto* p = static_cast<unsigned char*>(buf);
  const float n = static_cast<float>(nranks);
  for (size_t i = 0; i < count; ++i) {
    uint16_t v;
    std::memcpy(&v, p + i * 2, 2);
    v = Narrow(Widen(v) / n);
    std::memcpy(p + i * 2, &v, 2);
  }
}

}  // namespace

bool isaSupported(Isa isa) noexcept {
  static const bool supported[3] = {true, cpuHas(Isa::kAvx2), cpuHas(Isa::kAvx512)};
  int i = static_cast<int>(isa);
  return i >= 0 && i < 3 && supported[i];
}

const char* isaName(Isa isa) noexcept {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "unknown";
}

Isa selectedIsa() noexcept {
  static const Isa isa = pickIsa();
  return isa;
}

const char* isaName() noexcept { return isaName(selectedIsa()); }

ReduceFn kernelFor(Isa isa, recclDataType_t type, recclRedOp_t op) noexcept {
  if (!validType(type) || !validOp(op)) return nullptr;
  const KernelTable* table = tableFor(isa);
  if (!table) return nullptr;
  return table->fn[type][op == recclAvg ? recclSum : op].one;
}

Reduce2Fn kernel2For(Isa isa, recclDataType_t type, recclRedOp_t op) noexcept {
  if (!validType(type) || !validOp(op)) return nullptr;
  const KernelTable* table = tableFor(isa);
  if (!table) return nullptr;
  return table->fn[type][op == recclAvg ? recclSum : op].two;
}

ReduceFn kernel(recclDataType_t type, recclRedOp_t op) noexcept {
  static const KernelTable* table = tableFor(selectedIsa());
  if (!validType(type) || !validOp(op)) return nullptr;
  return table->fn[type][op == recclAvg ? recclSum : op].one;
}

Reduce2Fn kernel2(recclDataType_t type, recclRedOp_t op) noexcept {
  static const KernelTable* table = tableFor(selectedIsa());
  if (!validType(type) || !validOp(op)) return nullptr;
  return table->fn[type][op == recclAvg ? recclSum : op].two;
}

void finalizeAvg(void* buf, size_t count, recclDataType_t type, int nranks) noexcept {
  if (nranks <= 1 || !validType(type)) return;
  switch (type) {
    case recclInt8: return divideInts<int8_t>(buf, count, nranks);
    case recclUint8: return divideInts<uint8_t>(buf, count, nranks);
    case recclInt32: return divideInts<int32_t>(buf, count, nranks);
    case recclUint32: return divideInts<uint32_t>(buf, count, nranks);
    case recclInt64: return divideInts<int64_t>(buf, count, nranks);
    case recclUint64: return divideInts<uint64_t>(buf, count, nranks);
    case recclFloat16: return divideHalves<detail::halfToFloatScalar, detail::floatToHalfScalar>(buf, count, nranks);
    case recclBfloat16: return divideHalves<detail::bf16ToFloatScalar, detail::floatToBf16Scalar>(buf, count, nranks);
    case recclFloat32: return divideFloats<float>(buf, count, nranks);
    case recclFloat64: return divideFloats<double>(buf, count, nranks);
    default: return;
  }
}

size_t typeSize(recclDataType_t type) noexcept { return validType(type) ? kTypeSizes[type] : 0; }

}  // namespace reccl::reduce
