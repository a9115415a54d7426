// Typed access to the RECCL_* table in params.def. Values are read from the environment on
// each call (cheap; callers cache what sits on a hot path). A malformed value is reported once
// with the variable's name and the default is used.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "reccl/common/status.h"

namespace reccl::params {

#define X_Int int64_t
#define X_Str std::string
#define X_Bool bool
#define X(kind, name, env, def, help) X_##kind name();
#include "reccl/common/params.def"
#undef X
#undef X_Int
#undef X_Str
#undef X_Bool

// Parses "512K", "64M", "1G", "4096" into bytes/counts.
Result<int64_t> parseSize(std::string_view text);
// Writes the table (name, default, help) as text or as a Markdown table.
void printTable(FILE* out, bool markdown);

}  // namespace reccl::params
