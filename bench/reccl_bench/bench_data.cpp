#include "bench_data.h"

#include <algorithm>
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

bool sumsInputs(recclRedOp_t op) { return op == recclSum || op == recclAvg || op == reduce::kPreMulSum; }

// Half-width k of the input range [-k, k] (or [0, 2k] for unsigned types).
int64_t inputBound(const DataSpec& d) {
  int64_t k = 100;
  if (collReduces(d.coll) && sumsInputs(d.op) && isFloat(d.type)) {
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
    return hashed(rank, index);
  }
  // The value of any spec but a product's.
  int64_t hashed(int rank, size_t index) const noexcept {
    const uint64_t h = mix((uint64_t(rank) << 40) ^ uint64_t(index) ^ typeBits_);
    // A multiply-shift maps the hash's top half onto [0, 2k]: no division per element.
    const auto v = int64_t(((h >> 32) * uint64_t(2 * k_ + 1)) >> 32);
    return unsigned_ ? v : v - k_;
  }

 private:
  bool prod_, unsigned_;
  int nranks_;
  int64_t k_;
  uint64_t typeBits_;
};

// Stores n values as elements of `type` (each converted by conv) from out on.
template <class T, class Conv>
void store(const double* v, size_t n, void* out, Conv conv) {
  auto* p = static_cast<unsigned char*>(out);
  for (size_t j = 0; j < n; ++j) {
    const T x = conv(v[j]);
    std::memcpy(p + j * sizeof(T), &x, sizeof(T));
  }
}

// n exact values as elements of t: the type's switch once per run of values, not per element.
void encode(recclDataType_t t, const double* v, size_t n, void* out) {
  auto wrap = [](double x) { return uint64_t(int64_t(x)); };
  switch (t) {
    case recclInt8: return store<int8_t>(v, n, out, [&](double x) { return int8_t(uint8_t(wrap(x))); });
    case recclUint8: return store<uint8_t>(v, n, out, [&](double x) { return uint8_t(wrap(x)); });
    case recclInt32: return store<int32_t>(v, n, out, [&](double x) { return int32_t(uint32_t(wrap(x))); });
    case recclUint32: return store<uint32_t>(v, n, out, [&](double x) { return uint32_t(wrap(x)); });
    case recclInt64: return store<int64_t>(v, n, out, [](double x) { return int64_t(x); });
    case recclUint64: return store<uint64_t>(v, n, out, wrap);
    case recclFloat16: return store<uint16_t>(v, n, out, [](double x) { return reduce::floatToHalf(float(x)); });
    case recclBfloat16: return store<uint16_t>(v, n, out, [](double x) { return reduce::floatToBfloat16(float(x)); });
    case recclFloat32: return store<float>(v, n, out, [](double x) { return float(x); });
    case recclFloat64: return store<double>(v, n, out, [](double x) { return x; });
    default: return;
  }
}
void encode(recclDataType_t t, double v, void* out) { encode(t, &v, 1, out); }

}  // namespace

double preMulScalar(int rank) noexcept { return rank % 2 == 0 ? 1.0 : 2.0; }
void preMulScalar(recclDataType_t type, int rank, void* out) noexcept { encode(type, preMulScalar(rank), out); }

namespace {

// Writes a reduction to out from its accumulators: acc, the sum or product modulo 2^64 of the
// integer inputs (which truncated to the type equals the type's wrapped arithmetic in any order),
// for integer types; facc, the exact value, for float types.
void storeReduction(const DataSpec& d, uint64_t acc, double facc, void* out) {
  const recclDataType_t t = d.type;
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

// Elements per block of a check or a fill: a block's values are computed one rank at a time in a
// tight loop and compared with one memcmp (a run of checks is rank count x element count hashes).
constexpr size_t kBlock = 1024;

// The reduction of elements [first, first + n) for a summing op (n <= kBlock): a float
// type's exact sums in double, an integer type's modulo 2^64.
void expectedSumBlock(const DataSpec& d, const Inputs& in, size_t first, size_t n, unsigned char* out) {
  const size_t es = reduce::typeSize(d.type);
  if (isFloat(d.type)) {
    double facc[kBlock];
    std::fill_n(facc, n, 0.0);
    for (int r = 0; r < d.nranks; ++r) {
      const double scale = d.op == reduce::kPreMulSum ? preMulScalar(r) : 1.0;
      for (size_t j = 0; j < n; ++j) facc[j] += double(in.hashed(r, first + j)) * scale;
    }
    if (d.op != recclAvg) return encode(d.type, facc, n, out);
    for (size_t j = 0; j < n; ++j) storeReduction(d, 0, facc[j], out + j * es);
    return;
  }
  uint64_t acc[kBlock];
  std::fill_n(acc, n, uint64_t(0));
  for (int r = 0; r < d.nranks; ++r) {
    const uint64_t scale = d.op == reduce::kPreMulSum ? uint64_t(preMulScalar(r)) : 1;
    for (size_t j = 0; j < n; ++j) acc[j] += uint64_t(in.hashed(r, first + j)) * scale;
  }
  for (size_t j = 0; j < n; ++j) storeReduction(d, acc[j], 0, out + j * es);
}

// The reduction of the exact integers ranks contribute at `index` of their send buffers.
void expectedReduction(const DataSpec& d, const Inputs& in, size_t index, void* out) {
  if (d.op == recclMax || d.op == recclMin) {
    double best = in(0, index);
    for (int r = 1; r < d.nranks; ++r) {
      double v = in(r, index);
      best = d.op == recclMax ? (v > best ? v : best) : (v < best ? v : best);
    }
    return encode(d.type, best, out);
  }
  if (sumsInputs(d.op)) return expectedSumBlock(d, in, index, 1, static_cast<unsigned char*>(out));
  uint64_t acc = 1;  // products
  double facc = 1.0;
  for (int r = 0; r < d.nranks; ++r) {
    const double v = in(r, index);
    acc *= uint64_t(int64_t(v));
    facc *= v;
  }
  storeReduction(d, acc, facc, out);
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
  double v[kBlock];
  for (size_t first = 0; first < shape.sendCount; first += kBlock) {
    const size_t n = std::min(kBlock, shape.sendCount - first);
    for (size_t j = 0; j < n; ++j) v[j] = in(rank, first + j);
    encode(d.type, v, n, p + first * es);
  }
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
  const bool sumBlocks = collReduces(d.coll) && sumsInputs(d.op);
  // Where rank's output starts in the reduction of every rank's whole input.
  const size_t offset = d.coll == Coll::kReduceScatter && d.nranks > 0 ? size_t(rank) * (shape.count / size_t(d.nranks)) : 0;
  auto* p = static_cast<const unsigned char*>(recv);
  size_t wrong = 0;
  unsigned char want[kBlock * 8];
  const Inputs in(d);
  for (size_t first = 0; first < shape.recvCount; first += kBlock) {
    const size_t n = std::min(kBlock, shape.recvCount - first);
    if (sumBlocks) {
      expectedSumBlock(d, in, offset + first, n, want);
    } else {
      for (size_t j = 0; j < n; ++j) expectedAt(d, in, rank, shape, first + j, want + j * es);
    }
    const unsigned char* got = p + first * es;
    if (std::memcmp(want, got, n * es) == 0) continue;
    for (size_t j = 0; j < n; ++j) {
      if (std::memcmp(want + j * es, got + j * es, es) == 0) continue;
      if (avgFloat && ulpDistance(d.type, want + j * es, got + j * es) <= 2) continue;
      if (wrong++ == 0 && firstWrong) *firstWrong = first + j;
    }
  }
  return wrong;
}

}  // namespace reccl::bench
