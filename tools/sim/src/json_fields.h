// Reads one JSON object's fields into typed values, latching the first error with the field's
// full path ("job.restart_s: must be a number >= 0"); finish() refuses keys nobody asked for, so
// a typo never passes silently.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "reccl/common/status.h"
#include "reccl/sim/dist.h"

namespace reccl::sim {

class JsonFields {
 public:
  // `where` is the object's own path ("" at the top, called `root` in messages); a non-object is
  // an error at once.
  JsonFields(const nlohmann::json& obj, std::string where, std::string root = "scenario");

  std::string path(const std::string& key) const { return where_.empty() ? key : where_ + "." + key; }
  bool has(const std::string& key);
  const nlohmann::json* get(const std::string& key);  // marks the key as read; nullptr when absent

  // Each leaves `out` unchanged when the key is absent. Bounds are inclusive unless named open.
  void number(const std::string& key, double& out, double lo, double hi, bool loOpen = false);
  void integer(const std::string& key, int64_t& out, int64_t lo, int64_t hi);
  void integer(const std::string& key, int& out, int lo, int hi);
  void boolean(const std::string& key, bool& out);
  void text(const std::string& key, std::string& out);
  void dist(const std::string& key, Dist& out);

  void fail(const std::string& key, const std::string& what);
  bool ok() const { return status_.ok(); }
  // The first error, or an unknown key.
  Status finish();

 private:
  const nlohmann::json& obj_;
  std::string where_;
  std::string root_;
  std::set<std::string> read_;
  Status status_;
};

}  // namespace reccl::sim
