#include "reccl/common/params.h"

#include <strings.h>
#include <cstring>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <vector>

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
#define X(kind, name, env, def, allowed, help) \
  X_##kind name() { return X_GET_##kind(env, def); }
#include "reccl/common/params.def"
#undef X

namespace {

constexpr ParamInfo kTable[] = {
#define X(kind, name, env, def, allowed, help) {#kind, env, def, allowed, help},
#include "reccl/common/params.def"
#undef X
};

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    size_t i = s.find(sep);
    out.push_back(s.substr(0, i));
    if (i == std::string_view::npos) return out;
    s.remove_prefix(i + 1);
  }
}

// One alternative of an Int spec: "7", "lo..", "..hi", "lo..hi", each optionally "/N".
bool inRange(int64_t v, std::string_view alt) {
  int64_t multiple = 1;
  if (size_t slash = alt.find('/'); slash != std::string_view::npos) {
    multiple = parseSize(alt.substr(slash + 1)).value();
    alt = alt.substr(0, slash);
  }
  if (multiple > 0 && v % multiple != 0) return false;
  size_t dots = alt.find("..");
  if (dots == std::string_view::npos) return v == parseSize(alt).value();
  auto lo = alt.substr(0, dots), hi = alt.substr(dots + 2);
  if (!lo.empty() && v < parseSize(lo).value()) return false;
  if (!hi.empty() && v > parseSize(hi).value()) return false;
  return true;
}

// "0|100..100000" -> "0, or 100 to 100000"; "4K..64M/64" -> "4K to 64M, a multiple of 64".
std::string describeInt(std::string_view allowed) {
  std::string out;
  for (auto alt : split(allowed, '|')) {
    if (!out.empty()) out += ", or ";
    std::string_view mult;
    if (size_t slash = alt.find('/'); slash != std::string_view::npos) {
      mult = alt.substr(slash + 1);
      alt = alt.substr(0, slash);
    }
    size_t dots = alt.find("..");
    if (dots == std::string_view::npos) {
      out += alt;
    } else {
      auto lo = alt.substr(0, dots), hi = alt.substr(dots + 2);
      if (hi.empty())
        out += "at least " + std::string(lo);
      else if (lo.empty())
        out += "at most " + std::string(hi);
      else
        out += std::string(lo) + " to " + std::string(hi);
    }
    if (!mult.empty()) out += ", a multiple of " + std::string(mult);
  }
  return out;
}

std::string unitOf(std::string_view env) {
  if (env.ends_with("_MS")) return " ms";
  if (env.ends_with("_US")) return " us";
  if (env.ends_with("_BYTES") || env.ends_with("_SIZE")) return " bytes";
  return "";
}

}  // namespace

Status checkValue(std::string_view env, std::string_view kind, std::string_view allowed, std::string_view value) {
  auto bad = [&](const std::string& want) {
    return Status(Errc::kInvalidUsage, std::string(env) + "=" + std::string(value) + " is not valid: " + want);
  };
  if (kind == "Bool") {
    for (const char* ok : {"1", "0", "true", "false", "yes", "no"})
      if (strcasecmp(std::string(value).c_str(), ok) == 0) return Status::Ok();
    return bad("expected 1/0, true/false or yes/no");
  }
  if (kind == "Int") {
    auto v = parseSize(value);
    if (!v.ok()) return bad("expected a whole number (K, M, G suffixes allowed), allowed: " + describeInt(allowed) + unitOf(env));
    if (allowed.empty()) return Status::Ok();
    for (auto alt : split(allowed, '|'))
      if (inRange(*v, alt)) return Status::Ok();
    return bad("allowed: " + describeInt(allowed) + unitOf(env));
  }
  if (allowed.empty()) return Status::Ok();
  // Words in capitals match in any case (RECCL_DEBUG=info, as NCCL takes it); others exactly.
  auto words = split(allowed, '|');
  for (auto w : words) {
    bool caps = std::none_of(w.begin(), w.end(), [](char c) { return c >= 'a' && c <= 'z'; });
    if (w.size() == value.size() && (caps ? strncasecmp(w.data(), value.data(), w.size()) == 0 : w == value))
      return Status::Ok();
  }
  std::string list;
  for (auto w : words) {
    if (w.empty()) continue;
    if (!list.empty()) list += ", ";
    list += w;
  }
  return bad("expected one of " + list);
}

std::span<const ParamInfo> table() { return kTable; }

int bootstrapRootsFor(int nranks, int maxRoots) {
  const int64_t perRoot = RanksPerRoot();
  if (perRoot <= 0 || nranks <= 1) return 1;
  return static_cast<int>(std::clamp<int64_t>((nranks + perRoot - 1) / perRoot, 1, std::min(nranks, maxRoots)));
}

Status validateAll() {
  for (const ParamInfo& e : kTable) {
    const char* v = std::getenv(e.env);
    if (!v || !*v) continue;  // unset or empty: the default
    RECCL_TRY(checkValue(e.env, e.kind, e.allowed, v));
  }
  return Status::Ok();
}

namespace {
// A table cell's text: a '|' ("auto|verbs|socket") would end the cell.
std::string markdownCell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}
}  // namespace

void printTable(FILE* out, bool markdown) {
  if (markdown) std::fprintf(out, "| variable | default | allowed | meaning |\n|---|---|---|---|\n");
  for (const ParamInfo& e : kTable) {
    std::string allowed = std::strcmp(e.kind, "Int") == 0 ? describeInt(e.allowed) + unitOf(e.env)
                          : std::strcmp(e.kind, "Bool") == 0 ? "0 or 1"
                          : *e.allowed                    ? std::string(e.allowed)
                                                          : "text";
    if (markdown)
      std::fprintf(out, "| `%s` | `%s` | %s | %s |\n", e.env, markdownCell(e.def).c_str(),
                   markdownCell(allowed).c_str(), markdownCell(e.help).c_str());
    else
      std::fprintf(out, "  %-28s %-10s [%s] %s\n", e.env, (*e.def ? e.def : "\"\""), allowed.c_str(), e.help);
  }
}

}  // namespace reccl::params
