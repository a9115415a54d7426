#include "bench_data.h"

#include <cmath>
#include <cstring>

#include "reduce/reduce.h"

namespace reccl::bench {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

bool isUnsigned(recclDataType_t t) { return t == recclUint8 || t == recclUint32 || t == recclUint64; }
bool isFloat(recclDataType_t t) {
  return t == recclFloat16 || t == recclFloat32 || t == recclFloat64 || t == recclBfloat16;
}

// Largest integer below which every integer is exact in the type (floats); ints wrap anyway.
double exactLimit(recclDataType_t t) {
  switch (t) {
    case recclBfloat16: return 256;
    case recclFloat16: return 2048;
    case recclFloat32: return 16777216.0;
    case recclFloat64: return 9007199254740992.0;
    default: return 1e18;
  }
}

// Half-width k of the input range [-k, k] (or [0, 2k] for unsigned types).
int64_t inputBound(const DataSpec& d) {
  int64_t k = 100;
  const bool sums = d.op == recclSum || d.op == recclAvg || d.op == reduce::kPreMulSum;
  if (collReduces(d.coll) && sums && isFloat(d.type)) {
    // A mulsum's scalar doubles an odd rank's input.
    const double scale = d.op == reduce::kPreMulSum ? 2.0 : 1.0;
    double perRank = exactLimit(d.type) / (2.0 * scale * (d.nranks > 0 ? d.nranks : 1));
    if (perRank < double(k)) k = int64_t(perRank);
    if (k < 1) k = 1;
  }
  return k;
}

// inputValue with its per-spec work (the bound, the collective's kind) done once: a check calls
// it ranks x elements times.
class Inputs {
 public:
  explicit Inputs(const DataSpec& d)
      : prod_(collReduces(d.coll) && d.op == recclProd),
        unsigned_(isUnsigned(d.type)),
        nranks_(d.nranks),
        k_(inputBound(d)),
        typeBits_(uint64_t(d.type) << 56) {}

  double operator()(int rank, size_t index) const noexcept {
    if (prod_) {
      // Products stay +-1 or +-2 for any number of ranks: one rank contributes 2, one -1.
      if (nranks_ > 0 && index % size_t(nranks_) == size_t(rank)) return 2;
      if (!unsigned_ && nranks_ > 1 && (index + 1) % size_t(nranks_) == size_t(rank)) return -1;
      return 1;
    }
    const uint64_t h = mix((uint64_t(rank) << 40) ^ uint64_t(index) ^ typeBits_);
    // A multiply-shift maps the hash's top half onto [0, 2k]: no division per element.
    const auto v = int64_t(((h >> 32) * uint64_t(2 * k_ + 1)) >> 32);
    return double(unsigned_ ? v : v - k_);
  }

 private:
  bool prod_, unsigned_;
  int nranks_;
  int64_t k_;
  uint64_t typeBits_;
};

void encode(recclDataType_t t, double v, void* out) {
  int64_t i = static_cast<int64_t>(v);
  switch (t) {
    case recclInt8: { auto x = int8_t(uint8_t(uint64_t(i))); std::memcpy(out, &x, 1); return; }
    case recclUint8: { auto x = uint8_t(uint64_t(i)); std::memcpy(out, &x, 1); return; }
    case recclInt32: { auto x = int32_t(uint32_t(uint64_t(i))); std::memcpy(out, &x, 4); return; }
    case recclUint32: { auto x = uint32_t(uint64_t(i)); std::memcpy(out, &x, 4); return; }
    case recclInt64: { std::memcpy(out, &i, 8); return; }
    case recclUint64: { auto x = uint64_t(i); std::memcpy(out, &x, 8); return; }
    case recclFloat16: { uint16_t h = reduce::floatToHalf(float(v)); std::memcpy(out, &h, 2); return; }
    case recclBfloat16: { uint16_t h = reduce::floatToBfloat16(float(v)); std::memcpy(out, &h, 2); return; }
    case recclFloat32: { float f = float(v); std::memcpy(out, &f, 4); return; }
    case recclFloat64: { std::memcpy(out, &v, 8); return; }
    default: return;
  }
}

}  // namespace

double preMulScalar(int rank) noexcept { return rank % 2 == 0 ? 1.0 : 2.0; }
void preMulScalar(recclDataType_t type, int rank, void* out) noexcept { encode(type, preMulScalar(rank), out); }

namespace {

// The reduction of the exact integers ranks contribute at `index` of their send buffers.
void expectedReduction(const DataSpec& d, const Inputs& in, size_t index, void* out) {
  const recclDataType_t t = d.type;
  if (d.op == recclMax || d.op == recclMin) {
    double best = in(0, index);
    for (int r = 1; r < d.nranks; ++r) {
      double v = in(r, index);
      best = d.op == recclMax ? (v > best ? v : best) : (v < best ? v : best);
    }
    return encode(t, best, out);
  }
  // Integers: sums and products modulo 2^64 then truncated to the type, which equals the wrapped
  // arithmetic of the type in any order.
  uint64_t acc = d.op == recclProd ? 1 : 0;
  double facc = d.op == recclProd ? 1.0 : 0.0;
  for (int r = 0; r < d.nranks; ++r) {
    double v = in(r, index);
    if (d.op == reduce::kPreMulSum) v *= preMulScalar(r);  // exact: a small integer times 1 or 2
    if (d.op == recclProd) {
      acc *= uint64_t(int64_t(v));
      facc *= v;
    } else {
      acc += uint64_t(int64_t(v));
      facc += v;
    }
  }
  if (!isFloat(t)) {
    // From the 64-bit pattern, not a double (which would lose bits of a wrapped int64).
    switch (t) {
      case recclInt8: { auto x = int8_t(uint8_t(acc)); if (d.op == recclAvg) x = int8_t(x / d.nranks); std::memcpy(out, &x, 1); break; }
      case recclUint8: { auto x = uint8_t(acc); if (d.op == recclAvg) x = uint8_t(x / unsigned(d.nranks)); std::memcpy(out, &x, 1); break; }
      case recclInt32: { auto x = int32_t(uint32_t(acc)); if (d.op == recclAvg) x = int32_t(x / d.nranks); std::memcpy(out, &x, 4); break; }
      case recclUint32: { auto x = uint32_t(acc); if (d.op == recclAvg) x = x / uint32_t(d.nranks); std::memcpy(out, &x, 4); break; }
      case recclInt64: { auto x = int64_t(acc); if (d.op == recclAvg) x = x / d.nranks; std::memcpy(out, &x, 8); break; }
      case recclUint64: { auto x = acc; if (d.op == recclAvg) x = x / uint64_t(d.nranks); std::memcpy(out, &x, 8); break; }
      default: break;
    }
    return;
  }
  encode(t, facc, out);  // exact by the choice of inputs
  if (d.op != recclAvg) return;
  // avg: the exact sum divided once in the type's working precision (float32 for the halves).
  switch (t) {
    case recclFloat16: { uint16_t h; std::memcpy(&h, out, 2); h = reduce::floatToHalf(reduce::halfToFloat(h) / float(d.nranks)); std::memcpy(out, &h, 2); return; }
    case recclBfloat16: { uint16_t h; std::memcpy(&h, out, 2); h = reduce::floatToBfloat16(reduce::bfloat16ToFloat(h) / float(d.nranks)); std::memcpy(out, &h, 2); return; }
    case recclFloat32: { float f; std::memcpy(&f, out, 4); f /= float(d.nranks); std::memcpy(out, &f, 4); return; }
    case recclFloat64: { double f; std::memcpy(&f, out, 8); f /= double(d.nranks); std::memcpy(out, &f, 8); return; }
    default: return;
  }
}

// Distance in units in the last place between two finite floats of the type (bits as given).
uint64_t ulpDistance(recclDataType_t t, const void* a, const void* b) {
  auto ordered = [](uint64_t bits, int width) -> int64_t {
    uint64_t sign = uint64_t(1) << (width - 1);
    int64_t mag = int64_t(bits & (sign - 1));
    return (bits & sign) ? -mag : mag;
  };
  uint64_t x = 0, y = 0;
  size_t es = reduce::typeSize(t);
  std::memcpy(&x, a, es);
  std::memcpy(&y, b, es);
  int64_t dx = ordered(x, int(es * 8)), dy = ordered(y, int(es * 8));
  return dx > dy ? uint64_t(dx - dy) : uint64_t(dy - dx);
}

}  // namespace

double inputValue(const DataSpec& d, int rank, size_t index) noexcept { return Inputs(d)(rank, index); }

void fillInput(const DataSpec& d, int rank, const Shape& shape, void* send) noexcept {
  const size_t es = reduce::typeSize(d.type);
  auto* p = static_cast<unsigned char*>(send);
  const Inputs in(d);
  for (size_t i = 0; i < shape.sendCount; ++i) encode(d.type, in(rank, i), p + i * es);
}

namespace {

void expectedAt(const DataSpec& d, const Inputs& in, int rank, const Shape& shape, size_t index, void* out) {
  const size_t per = d.nranks > 0 ? shape.count / size_t(d.nranks) : 0;
  switch (d.coll) {
    case Coll::kAllReduce:
    case Coll::kReduce:
      return expectedReduction(d, in, index, out);
    case Coll::kReduceScatter:
      return expectedReduction(d, in, size_t(rank) * per + index, out);
    case Coll::kAllGather:
      return encode(d.type, in(int(index / per), index % per), out);
    case Coll::kBroadcast:
      return encode(d.type, in(d.root, index), out);
    case Coll::kAllToAll: {
      int from = int(index / per);
      return encode(d.type, in(from, size_t(rank) * per + index % per), out);
    }
    case Coll::kSendRecv:
      return encode(d.type, in((rank - 1 + d.nranks) % d.nranks, index), out);
    case Coll::kGather:  // checked at root alone
      return encode(d.type, in(int(index / per), index % per), out);
    case Coll::kScatter:
      return encode(d.type, in(d.root, size_t(rank) * per + index), out);
  }
}

}  // namespace

void expectedElement(const DataSpec& d, int rank, const Shape& shape, size_t index, void* out) noexcept {
  expectedAt(d, Inputs(d), rank, shape, index, out);
}

size_t countWrong(const DataSpec& d, int rank, const Shape& shape, const void* recv, size_t* firstWrong) noexcept {
  if ((d.coll == Coll::kReduce || d.coll == Coll::kGather) && rank != d.root) return 0;
  const size_t es = reduce::typeSize(d.type);
  const bool avgFloat = collReduces(d.coll) && d.op == recclAvg && isFloat(d.type);
  auto* p = static_cast<const unsigned char*>(recv);
  size_t wrong = 0;
  unsigned char want[8];
  const Inputs in(d);
  for (size_t i = 0; i < shape.recvCount; ++i) {
    expectedAt(d, in, rank, shape, i, want);
    if (std::memcmp(want, p + i * es, es) == 0) continue;
    if (avgFloat && ulpDistance(d.type, want, p + i * es) <= 2) continue;
    if (wrong++ == 0 && firstWrong) *firstWrong = i;
  }
  return wrong;
}

}  // namespace reccl::bench
