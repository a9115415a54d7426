#include "reccl/inject/drop_rule.h"
#include "reccl/inject/quoted.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <vector>

namespace reccl::inject {

Result<uint32_t> parseDirection(std::string_view text) {
  if (text == "ingress") return uint32_t{kIngress};
  if (text == "egress") return uint32_t{kEgress};
  if (text == "both") return uint32_t{kBothDirections};
  return Status{Errc::kInvalidArgument,
                "direction must be ingress, egress or both, not " + quoteInput(std::string(text))};
}

const char* directionName(uint32_t dirs) noexcept {
  switch (dirs) {
    case kIngress: return "ingress";
    case kEgress: return "egress";
    case kBothDirections: return "both";
    default: return "none";
  }
}

namespace {

Status badFlow(std::string_view text, const std::string& why) {
  return {Errc::kInvalidArgument, "flow " + quoteInput(std::string(text)) + ": " + why +
                                      " (expected proto:src:sport:dst:dport, * for any)"};
}

bool parseUint(std::string_view s, uint32_t max, uint32_t* out) {
  if (s.empty() || s.size() > 10) return false;
  uint32_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v > max) return false;
  *out = v;
  return true;
}

}  // namespace

Result<FlowMatch> parseFlow(std::string_view text) {
  FlowMatch f;
  if (text.empty() || text == "*") return f;
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t colon = text.find(':', start);
    parts.push_back(text.substr(start, colon == std::string_view::npos ? colon : colon - start));
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  if (parts.size() != 5) return badFlow(text, "needs 5 fields");
  auto wild = [](std::string_view s) { return s == "*" || s.empty(); };

  if (!wild(parts[0])) {
    uint32_t p = 0;
    if (parts[0] == "tcp") p = IPPROTO_TCP;
    else if (parts[0] == "udp") p = IPPROTO_UDP;
    else if (parts[0] == "icmp") p = IPPROTO_ICMP;
    else if (!parseUint(parts[0], 255, &p)) return badFlow(text, "unknown protocol");
    f.proto = static_cast<uint8_t>(p);
    f.fields |= RECCL_FAULT_MATCH_PROTO;
  }
  for (int i : {1, 3}) {
    if (wild(parts[i])) continue;
    in_addr a{};
    std::string s(parts[i]);
    if (inet_pton(AF_INET, s.c_str(), &a) != 1) return badFlow(text, "bad IPv4 address " + quoteInput(s));
    if (i == 1) {
      f.saddr = ntohl(a.s_addr);
      f.fields |= RECCL_FAULT_MATCH_SADDR;
    } else {
      f.daddr = ntohl(a.s_addr);
      f.fields |= RECCL_FAULT_MATCH_DADDR;
    }
  }
  for (int i : {2, 4}) {
    if (wild(parts[i])) continue;
    uint32_t port = 0;
    if (!parseUint(parts[i], 65535, &port)) return badFlow(text, "bad port " + quoteInput(std::string(parts[i])));
    if (i == 2) {
      f.sport = static_cast<uint16_t>(port);
      f.fields |= RECCL_FAULT_MATCH_SPORT;
    } else {
      f.dport = static_cast<uint16_t>(port);
      f.fields |= RECCL_FAULT_MATCH_DPORT;
    }
  }
  bool hasPorts = f.fields & (RECCL_FAULT_MATCH_SPORT | RECCL_FAULT_MATCH_DPORT);
  if (hasPorts && (!(f.fields & RECCL_FAULT_MATCH_PROTO) ||
                   (f.proto != IPPROTO_TCP && f.proto != IPPROTO_UDP)))
    return badFlow(text, "ports need proto tcp or udp");
  return f;
}

std::string flowToString(const FlowMatch& f) {
  if (f.any()) return "*";
  std::string s;
  if (!(f.fields & RECCL_FAULT_MATCH_PROTO)) s = "*";
  else if (f.proto == IPPROTO_TCP) s = "tcp";
  else if (f.proto == IPPROTO_UDP) s = "udp";
  else if (f.proto == IPPROTO_ICMP) s = "icmp";
  else s = std::to_string(f.proto);
  auto addr = [](bool set, uint32_t a) {
    if (!set) return std::string("*");
    in_addr in{htonl(a)};
    char buf[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &in, buf, sizeof(buf));
    return std::string(buf);
  };
  auto port = [](bool set, uint16_t p) { return set ? std::to_string(p) : std::string("*"); };
  s += ":" + addr(f.fields & RECCL_FAULT_MATCH_SADDR, f.saddr);
  s += ":" + port(f.fields & RECCL_FAULT_MATCH_SPORT, f.sport);
  s += ":" + addr(f.fields & RECCL_FAULT_MATCH_DADDR, f.daddr);
  s += ":" + port(f.fields & RECCL_FAULT_MATCH_DPORT, f.dport);
  return s;
}

Result<uint64_t> rateToThreshold(double rate) {
  if (!std::isfinite(rate) || rate < 0.0 || rate > 1.0) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%g", rate);
    return Status{Errc::kInvalidArgument, std::string("rate must be in [0,1], not ") + buf};
  }
  return static_cast<uint64_t>(std::llround(rate * static_cast<double>(RECCL_FAULT_THRESHOLD_ALWAYS)));
}

double thresholdToRate(uint64_t threshold) noexcept {
  return static_cast<double>(threshold) / static_cast<double>(RECCL_FAULT_THRESHOLD_ALWAYS);
}

std::string DropRule::toString() const {
  char buf[48];
  std::snprintf(buf, sizeof(buf), " rate %g", rate);
  return std::string(directionName(dirs)) + " " + flowToString(flow) + buf;
}

Result<reccl_fault_rule> toBpfRule(const DropRule& rule) {
  RECCL_ASSIGN_OR_RETURN(uint64_t threshold, rateToThreshold(rule.rate));
  if (rule.dirs == 0 || (rule.dirs & ~uint32_t{kBothDirections}))
    return Status{Errc::kInvalidArgument, "direction mask is invalid"};
  reccl_fault_rule r{};
  r.enabled = 1;
  r.dirs = rule.dirs;
  r.threshold = threshold;
  r.match = rule.flow.fields;
  r.proto = rule.flow.proto;
  r.saddr = htonl(rule.flow.saddr);
  r.daddr = htonl(rule.flow.daddr);
  r.sport = htons(rule.flow.sport);
  r.dport = htons(rule.flow.dport);
  return r;
}

DropRule fromBpfRule(const reccl_fault_rule& r) {
  DropRule d;
  d.dirs = r.dirs;
  d.rate = thresholdToRate(r.threshold);
  d.flow.fields = r.match;
  d.flow.proto = r.proto;
  d.flow.saddr = ntohl(r.saddr);
  d.flow.daddr = ntohl(r.daddr);
  d.flow.sport = ntohs(r.sport);
  d.flow.dport = ntohs(r.dport);
  return d;
}

}  // namespace reccl::inject
