// Typed access to the RECCL_* table in params.def. Values are read from the environment on
// each call (cheap; callers cache what sits on a hot path). validateAll() checks every set
// variable against its type and allowed values (communicator init refuses what it finds); a
// getter that meets an invalid value anyway reports it once and uses the default.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>

#include "reccl/common/status.h"

namespace reccl::params {

#define X_Int int64_t
#define X_Str std::string
#define X_Bool bool
#define X(kind, name, env, def, allowed, help) X_##kind name();
#include "reccl/common/params.def"
#undef X
#undef X_Int
#undef X_Str
#undef X_Bool

// Parses "512K", "64M", "1G", "4096" into bytes/counts.
Result<int64_t> parseSize(std::string_view text);
// Checks `value` against a variable's kind ("Int", "Str", "Bool") and allowed spec
// (params.def); the error names the variable, the value and what is allowed.
Status checkValue(std::string_view env, std::string_view kind, std::string_view allowed, std::string_view value);
// Every RECCL_* variable that is set, checked: the first invalid one as recclInvalidUsage.
Status validateAll();
// How many bootstrap roots a launcher-made communicator of `nranks` ranks uses:
// ceil(nranks / RECCL_RANKS_PER_ROOT), at least 1, at most min(nranks, maxRoots); 1 when the
// variable is 0.
int bootstrapRootsFor(int nranks, int maxRoots);
// One row of the table, as params.def spells it.
struct ParamInfo {
  const char* kind;  // "Int", "Str" or "Bool"
  const char* env;
  const char* def;
  const char* allowed;
  const char* help;
};
std::span<const ParamInfo> table();
// Writes the table (name, default, allowed values, help) as text or as a Markdown table.
void printTable(FILE* out, bool markdown);

}  // namespace reccl::params
