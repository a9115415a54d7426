#include "reccl/common/params.h"

#include <strings.h>
#include <cstring>

#include <cstdlib>
#include <mutex>
#include <set>

#include "reccl/common/log.h"

namespace reccl::params {
namespace {

void warnOnce(const char* env, const char* value, const char* def) {
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard lk(mu);
  if (warned.insert(env).second)
    RECCL_WARN(kLogInit, "ignoring %s=%s: not a valid value, using default %s", env, value, def);
}

const char* raw(const char* env, const char* def) {
  const char* v = std::getenv(env);
  return (v && *v) ? v : def;
}

int64_t readInt(const char* env, const char* def) {
  const char* v = raw(env, def);
  auto r = parseSize(v);
  if (r.ok()) return r.value();
  warnOnce(env, v, def);
  return parseSize(def).value();
}

bool readBool(const char* env, const char* def) {
  const char* v = raw(env, def);
  if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes")) return true;
  if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no")) return false;
  warnOnce(env, v, def);
  return readBool("", def);
}

}  // namespace

Result<int64_t> parseSize(std::string_view text) {
  if (text.empty()) return Status(Errc::kInvalidArgument, "empty number");
  int64_t value = 0;
  size_t i = 0;
  bool neg = false;
  if (text[0] == '-') {
    neg = true;
    i = 1;
  }
  size_t digits = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits) {
    if (value > (INT64_MAX - 9) / 10) return Status(Errc::kInvalidArgument, "number too large");
    value = value * 10 + (text[i] - '0');
  }
  if (digits == 0) return Status(Errc::kInvalidArgument, "not a number: " + std::string(text));
  int64_t mult = 1;
  if (i < text.size()) {
    switch (text[i]) {
      case 'k': case 'K': mult = 1LL << 10; break;
      case 'm': case 'M': mult = 1LL << 20; break;
      case 'g': case 'G': mult = 1LL << 30; break;
      default: return Status(Errc::kInvalidArgument, "bad suffix in " + std::string(text));
    }
    ++i;
    if (i < text.size() && (text[i] == 'B' || text[i] == 'b')) ++i;
  }
  if (i != text.size()) return Status(Errc::kInvalidArgument, "trailing text in " + std::string(text));
  if (value > INT64_MAX / mult) return Status(Errc::kInvalidArgument, "number too large");
  return neg ? -value * mult : value * mult;
}

#define X_GET_Int(env, def) readInt(env, def)
#define X_GET_Str(env, def) std::string(raw(env, def))
#define X_GET_Bool(env, def) readBool(env, def)
#define X_Int int64_t
#define X_Str std::string
#define X_Bool bool
#define X(kind, name, env, def, help) \
  X_##kind name() { return X_GET_##kind(env, def); }
#include "reccl/common/params.def"
#undef X

void printTable(FILE* out, bool markdown) {
  if (markdown) std::fprintf(out, "| variable | default | meaning |\n|---|---|---|\n");
#define X(kind, name, env, def, help)                                              \
  if (markdown)                                                                    \
    std::fprintf(out, "| `%s` | `%s` | %s |\n", env, def, help);                   \
  else                                                                             \
    std::fprintf(out, "  %-28s %-10s %s\n", env, (*def ? def : "\"\""), help);
#include "reccl/common/params.def"
#undef X
}

}  // namespace reccl::params
