// The names and ranges of the C API's types and ops, apart from the kernels: the channel layer's
// mismatch messages and the wire fuzzers use them without the reduction code.
#include "reduce.h"

namespace reccl::reduce {
namespace {

constexpr const char* kTypeNames[recclNumTypes] = {"int8",  "uint8", "int32",  "uint32", "int64",
                                                   "uint64", "half", "float", "double", "bfloat16"};
constexpr const char* kOpNames[recclNumOps] = {"sum", "prod", "max", "min", "avg"};

}  // namespace

const char* typeName(recclDataType_t type) noexcept { return validType(type) ? kTypeNames[type] : "unknown"; }
const char* opName(recclRedOp_t op) noexcept {
  return validOp(op) ? kOpNames[op] : op == kPreMulSum ? "premulsum" : "unknown";
}
bool validType(int type) noexcept { return type >= 0 && type < recclNumTypes; }
bool validOp(int op) noexcept { return op >= 0 && op < recclNumOps; }

}  // namespace reccl::reduce
