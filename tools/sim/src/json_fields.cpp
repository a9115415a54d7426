#include "json_fields.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace reccl::sim {

using nlohmann::json;

namespace {
std::string num(double v) {
  if (v == std::numeric_limits<double>::infinity()) return "inf";
  char b[32];
  std::snprintf(b, sizeof b, "%.15g", v);
  return b;
}
}  // namespace

JsonFields::JsonFields(const json& obj, std::string where, std::string root)
    : obj_(obj), where_(std::move(where)), root_(std::move(root)) {
  if (!obj_.is_object()) status_ = {Errc::kInvalidArgument, (where_.empty() ? root_ : where_) + ": must be an object"};
}

bool JsonFields::has(const std::string& key) { return obj_.is_object() && obj_.contains(key); }

const json* JsonFields::get(const std::string& key) {
  if (!obj_.is_object()) return nullptr;
  auto it = obj_.find(key);
  if (it == obj_.end()) return nullptr;
  read_.insert(key);
  return &*it;
}

void JsonFields::fail(const std::string& key, const std::string& what) {
  if (status_.ok()) status_ = {Errc::kInvalidArgument, path(key) + ": " + what};
}

void JsonFields::number(const std::string& key, double& out, double lo, double hi, bool loOpen) {
  const json* j = get(key);
  if (!j || !status_.ok()) return;
  std::string range = (loOpen ? "(" : "[") + num(lo) + ", " + num(hi) + "]";
  if (!j->is_number()) return fail(key, "must be a number in " + range);
  double v = j->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi || (loOpen && v == lo)) return fail(key, "must be a number in " + range);
  out = v;
}

void JsonFields::integer(const std::string& key, int64_t& out, int64_t lo, int64_t hi) {
  const json* j = get(key);
  if (!j || !status_.ok()) return;
  std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (!j->is_number_integer()) return fail(key, "must be an integer in " + range);
  int64_t v = j->get<int64_t>();
  if (j->is_number_unsigned() && j->get<uint64_t>() > uint64_t(hi)) return fail(key, "must be an integer in " + range);
  if (v < lo || v > hi) return fail(key, "must be an integer in " + range);
  out = v;
}

void JsonFields::integer(const std::string& key, int& out, int lo, int hi) {
  int64_t v = out;
  integer(key, v, lo, hi);
  out = int(v);
}

void JsonFields::boolean(const std::string& key, bool& out) {
  const json* j = get(key);
  if (!j || !status_.ok()) return;
  if (!j->is_boolean()) return fail(key, "must be true or false");
  out = j->get<bool>();
}

void JsonFields::text(const std::string& key, std::string& out) {
  const json* j = get(key);
  if (!j || !status_.ok()) return;
  if (!j->is_string()) return fail(key, "must be a string");
  out = j->get<std::string>();
}

void JsonFields::dist(const std::string& key, Dist& out) {
  const json* j = get(key);
  if (!j || !status_.ok()) return;
  auto d = parseDist(*j, path(key));
  if (!d.ok()) {
    status_ = d.status();
    return;
  }
  out = std::move(d.value());
}

Status JsonFields::finish() {
  if (!status_.ok()) return status_;
  for (auto it = obj_.begin(); it != obj_.end(); ++it)
    if (!read_.count(it.key()))
      return {Errc::kInvalidArgument, (where_.empty() ? root_ : where_) + ": unknown key \"" + it.key() + "\""};
  return {};
}

}  // namespace reccl::sim
