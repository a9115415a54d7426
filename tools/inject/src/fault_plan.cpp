#include "reccl/inject/fault_plan.h"
#include "reccl/inject/quoted.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

namespace reccl::inject {

using nlohmann::json;

const char* actionName(ActionKind k) noexcept {
  switch (k) {
    case ActionKind::kLinkDown: return "link-down";
    case ActionKind::kLinkUp: return "link-up";
    case ActionKind::kCarrierOff: return "carrier-off";
    case ActionKind::kCarrierOn: return "carrier-on";
    case ActionKind::kDrop: return "drop";
    case ActionKind::kBlackhole: return "blackhole";
    case ActionKind::kClear: return "clear";
  }
  return "?";
}

Result<ActionKind> parseActionName(std::string_view text) {
  for (ActionKind k : {ActionKind::kLinkDown, ActionKind::kLinkUp, ActionKind::kCarrierOff,
                       ActionKind::kCarrierOn, ActionKind::kDrop, ActionKind::kBlackhole,
                       ActionKind::kClear})
    if (text == actionName(k)) return k;
  return Status{Errc::kInvalidArgument, "unknown action " + quoteInput(std::string(text))};
}

bool actionIsUndoable(ActionKind k) noexcept {
  return k == ActionKind::kLinkDown || k == ActionKind::kCarrierOff || k == ActionKind::kDrop ||
         k == ActionKind::kBlackhole;
}

int64_t FaultPlan::endMs() const noexcept {
  int64_t end = 0;
  for (const auto& a : actions) end = std::max(end, a.atMs + a.durationMs);
  return end;
}

Status validateFlap(const FlapSpec& s) {
  if (s.periodMs < 2 || s.periodMs > kMaxPlanMs)
    return {Errc::kInvalidArgument, "period must be in [2, " + std::to_string(kMaxPlanMs) + "] ms"};
  int64_t down = s.downMs == 0 ? s.periodMs / 2 : s.downMs;
  if (down <= 0 || down >= s.periodMs)
    return {Errc::kInvalidArgument, "down time must be in (0, period) ms"};
  if (s.count < 1 || s.count > static_cast<int64_t>(kMaxPlanActions / 2))
    return {Errc::kInvalidArgument,
            "count must be in [1, " + std::to_string(kMaxPlanActions / 2) + "]"};
  if (s.jitterMs < 0 || s.jitterMs * 4 >= std::min(down, s.periodMs - down))
    return {Errc::kInvalidArgument,
            "jitter must be >= 0 and below a quarter of the shorter of down time and up time"};
  if (s.periodMs * s.count > kMaxPlanMs)
    return {Errc::kInvalidArgument, "flap lasts longer than 24 h"};
  return {};
}

Result<std::vector<PlanAction>> expandFlap(const Target& target, const FlapSpec& spec,
                                           int64_t startMs, int source) {
  RECCL_TRY(validateFlap(spec));
  int64_t down = spec.downMs == 0 ? spec.periodMs / 2 : spec.downMs;
  std::mt19937_64 rng(spec.seed);
  std::uniform_int_distribution<int64_t> jitter(-spec.jitterMs, spec.jitterMs);
  std::vector<PlanAction> out;
  for (int64_t i = 0; i < spec.count; ++i) {
    int64_t base = startMs + i * spec.periodMs;
    PlanAction off, on;
    off.kind = spec.carrier ? ActionKind::kCarrierOff : ActionKind::kLinkDown;
    on.kind = spec.carrier ? ActionKind::kCarrierOn : ActionKind::kLinkUp;
    off.target = on.target = target;
    off.source = on.source = source;
    off.atMs = std::max<int64_t>(0, base + (spec.jitterMs ? jitter(rng) : 0));
    on.atMs = base + down + (spec.jitterMs ? jitter(rng) : 0);
    out.push_back(off);
    out.push_back(on);
  }
  return out;
}

namespace {

class PlanParser {
 public:
  Result<FaultPlan> parse(std::string_view text) {
    if (text.size() > kMaxPlanBytes)
      return fail("plan", "is larger than " + std::to_string(kMaxPlanBytes) + " bytes");
    json doc;
    try {
      doc = json::parse(text.begin(), text.end());
    } catch (const json::parse_error& e) {
      // nlohmann's text says where ("parse error at line 3, column 5: ..."), after its own tag.
      std::string what = e.what();
      if (size_t tag = what.find("] "); what.rfind("[json.exception", 0) == 0 && tag != std::string::npos)
        what.erase(0, tag + 2);
      return Status{Errc::kInvalidArgument, "plan: not valid JSON: " + what};
    }
    const json* actions = &doc;
    if (doc.is_object()) {
      for (auto it = doc.begin(); it != doc.end(); ++it)
        if (it.key() != "version" && it.key() != "actions")
          return fail("plan", "unknown key " + quoteInput(it.key()));
      if (doc.contains("version")) {
        const json& v = doc["version"];
        if (!v.is_number_integer() || v.get<int64_t>() != 1)
          return fail("version", "must be 1");
      }
      if (!doc.contains("actions")) return fail("plan", "has no 'actions' list");
      actions = &doc["actions"];
    }
    if (!actions->is_array()) return fail("actions", "must be a list");
    if (actions->empty()) return fail("actions", "is empty");
    if (actions->size() > kMaxPlanActions)
      return fail("actions", "has more than " + std::to_string(kMaxPlanActions) + " entries");
    FaultPlan plan;
    for (size_t i = 0; i < actions->size(); ++i) {
      Status st = parseAction((*actions)[i], static_cast<int>(i), plan);
      if (!st.ok()) return st;
      if (plan.actions.size() > kMaxPlanActions)
        return fail("actions", "expands to more than " + std::to_string(kMaxPlanActions) + " actions");
    }
    return plan;
  }

 private:
  static Status fail(const std::string& where, const std::string& why) {
    return {Errc::kInvalidArgument, "plan: " + where + ": " + why};
  }

  static Status checkKeys(const json& obj, const std::string& where,
                          std::initializer_list<const char*> allowed) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool ok = false;
      for (const char* a : allowed) ok = ok || it.key() == a;
      if (!ok) return fail(where, "unknown key " + quoteInput(it.key()));
    }
    return {};
  }

  static Result<int64_t> getMs(const json& obj, const char* key, const std::string& where,
                               int64_t min, bool required, int64_t dflt = 0) {
    if (!obj.contains(key)) {
      if (required) return fail(where, std::string("'") + key + "' is missing");
      return dflt;
    }
    const json& v = obj[key];
    if (!v.is_number_integer()) return fail(where + "." + key, "must be an integer");
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(kMaxPlanMs))
      return fail(where + "." + key, "must be at most " + std::to_string(kMaxPlanMs));
    int64_t x = v.get<int64_t>();
    if (x < min || x > kMaxPlanMs)
      return fail(where + "." + key,
                  "must be in [" + std::to_string(min) + ", " + std::to_string(kMaxPlanMs) + "]");
    return x;
  }

  static Result<std::string> getString(const json& obj, const char* key, const std::string& where,
                                       bool required, const std::string& dflt = "") {
    if (!obj.contains(key)) {
      if (required) return fail(where, std::string("'") + key + "' is missing");
      return dflt;
    }
    const json& v = obj[key];
    if (!v.is_string()) return fail(where + "." + key, "must be a string");
    return v.get<std::string>();
  }

  static Result<Target> parseTarget(const json& t, const std::string& where) {
    if (!t.is_object()) return fail(where, "must be an object {netns, dev, side}");
    RECCL_TRY(checkKeys(t, where, {"netns", "dev", "side"}));
    Target out;
    RECCL_ASSIGN_OR_RETURN(out.netns, getString(t, "netns", where, true));
    RECCL_ASSIGN_OR_RETURN(out.dev, getString(t, "dev", where, true));
    RECCL_ASSIGN_OR_RETURN(std::string side, getString(t, "side", where, false, "host"));
    if (Status st = checkNetnsName(out.netns); !st.ok()) return fail(where + ".netns", st.message());
    if (Status st = checkDevName(out.dev); !st.ok()) return fail(where + ".dev", st.message());
    auto s = parseSide(side);
    if (!s) return fail(where + ".side", s.status().message());
    out.side = *s;
    return out;
  }

  Status parseAction(const json& a, int index, FaultPlan& plan) {
    std::string where = "actions[" + std::to_string(index) + "]";
    if (!a.is_object()) return fail(where, "must be an object");
    RECCL_TRY(checkKeys(a, where, {"at_ms", "action", "target", "duration_ms", "params"}));
    RECCL_ASSIGN_OR_RETURN(int64_t atMs, getMs(a, "at_ms", where, 0, true));
    RECCL_ASSIGN_OR_RETURN(std::string name, getString(a, "action", where, true));
    if (!a.contains("target")) return fail(where, "'target' is missing");
    RECCL_ASSIGN_OR_RETURN(Target target, parseTarget(a["target"], where + ".target"));
    RECCL_ASSIGN_OR_RETURN(int64_t durationMs, getMs(a, "duration_ms", where, 1, false));
    json empty = json::object();
    const json& params = a.contains("params") ? a["params"] : empty;
    std::string pw = where + ".params";
    if (!params.is_object()) return fail(pw, "must be an object");

    if (name == "flap") {
      if (durationMs != 0) return fail(where + ".duration_ms", "is not allowed for flap");
      RECCL_TRY(checkKeys(params, pw, {"period_ms", "count", "down_ms", "jitter_ms", "seed", "carrier"}));
      FlapSpec spec;
      RECCL_ASSIGN_OR_RETURN(spec.periodMs, getMs(params, "period_ms", pw, 2, true));
      RECCL_ASSIGN_OR_RETURN(spec.count, getMs(params, "count", pw, 1, true));
      RECCL_ASSIGN_OR_RETURN(spec.downMs, getMs(params, "down_ms", pw, 1, false));
      RECCL_ASSIGN_OR_RETURN(spec.jitterMs, getMs(params, "jitter_ms", pw, 0, false));
      RECCL_ASSIGN_OR_RETURN(int64_t seed, getMs(params, "seed", pw, 0, false, 1));
      spec.seed = static_cast<uint64_t>(seed);
      if (params.contains("carrier")) {
        if (!params["carrier"].is_boolean()) return fail(pw + ".carrier", "must be true or false");
        spec.carrier = params["carrier"].get<bool>();
      }
      if (spec.carrier && target.side != Side::kHost)
        return fail(where + ".target.side", "carrier flaps act on the host nic (a tap or a lab VM's nic)");
      if (Status st = validateFlap(spec); !st.ok()) return fail(pw, st.message());
      if (atMs + spec.periodMs * spec.count > kMaxPlanMs) return fail(where, "ends after 24 h");
      RECCL_ASSIGN_OR_RETURN(auto expanded, expandFlap(target, spec, atMs, index));
      plan.actions.insert(plan.actions.end(), expanded.begin(), expanded.end());
      return {};
    }

    auto kind = parseActionName(name);
    if (!kind) return fail(where + ".action", kind.status().message());
    PlanAction act;
    act.atMs = atMs;
    act.kind = *kind;
    act.target = std::move(target);
    act.durationMs = durationMs;
    act.source = index;
    if (durationMs != 0 && !actionIsUndoable(act.kind))
      return fail(where + ".duration_ms", std::string("is not allowed for ") + actionName(act.kind) +
                                              " (nothing to undo)");
    if (atMs + durationMs > kMaxPlanMs) return fail(where, "ends after 24 h");
    if ((act.kind == ActionKind::kCarrierOff || act.kind == ActionKind::kCarrierOn) &&
        act.target.side != Side::kHost)
      return fail(where + ".target.side", "carrier actions act on the host nic (a tap or a lab VM's nic)");

    if (act.kind == ActionKind::kDrop || act.kind == ActionKind::kBlackhole) {
      if (act.kind == ActionKind::kDrop) {
        RECCL_TRY(checkKeys(params, pw, {"rate", "direction", "flow"}));
        if (!params.contains("rate")) return fail(pw, "'rate' is missing");
        if (!params["rate"].is_number()) return fail(pw + ".rate", "must be a number");
        act.drop.rate = params["rate"].get<double>();
        if (auto t = rateToThreshold(act.drop.rate); !t) return fail(pw + ".rate", t.status().message());
      } else {
        RECCL_TRY(checkKeys(params, pw, {"direction", "flow"}));
        act.drop.rate = 1.0;
      }
      RECCL_ASSIGN_OR_RETURN(std::string dir, getString(params, "direction", pw, false, "both"));
      auto d = parseDirection(dir);
      if (!d) return fail(pw + ".direction", d.status().message());
      act.drop.dirs = *d;
      RECCL_ASSIGN_OR_RETURN(std::string flow, getString(params, "flow", pw, false, "*"));
      auto f = parseFlow(flow);
      if (!f) return fail(pw + ".flow", f.status().message());
      act.drop.flow = *f;
    } else {
      RECCL_TRY(checkKeys(params, pw, {}));
    }
    plan.actions.push_back(std::move(act));
    return {};
  }
};

}  // namespace

Result<FaultPlan> parsePlan(std::string_view text) {
  try {
    return PlanParser().parse(text);
  } catch (const std::exception& e) {
    // nlohmann throws on a few conversions; a plan never gets past here with one.
    return Status{Errc::kInvalidArgument, std::string("plan: ") + e.what()};
  }
}

Result<FaultPlan> loadPlanFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return Status{Errc::kNotFound, "plan file " + quoteInput(path) + " cannot be read: " + std::strerror(errno)};
  if (!S_ISREG(st.st_mode)) return Status{Errc::kInvalidArgument, "plan file " + quoteInput(path) + " is not a file"};
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status{Errc::kNotFound, "plan file " + quoteInput(path) + " cannot be read: " + std::strerror(errno)};
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxPlanBytes)
      return Status{Errc::kInvalidArgument, "plan file " + quoteInput(path) + " is larger than 1 MiB"};
  }
  auto plan = parsePlan(text);
  if (!plan) return Status{plan.status().code(), path + ": " + plan.status().message()};
  return plan;
}

}  // namespace reccl::inject
