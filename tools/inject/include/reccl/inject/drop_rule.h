// A gray-failure rule for the tc program in bpf/fault_drop.bpf.c: which direction, which flow,
// what fraction of packets to drop. Parsing and conversion to the BPF ABI are pure (unit-tested).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "reccl/common/status.h"
#include "reccl_bpf/fault_drop.h"

namespace reccl::inject {

enum Direction : uint32_t {
  kIngress = RECCL_FAULT_DIR_INGRESS,
  kEgress = RECCL_FAULT_DIR_EGRESS,
  kBothDirections = RECCL_FAULT_DIR_INGRESS | RECCL_FAULT_DIR_EGRESS,
};

// "ingress", "egress" or "both".
Result<uint32_t> parseDirection(std::string_view text);
const char* directionName(uint32_t dirs) noexcept;

// A 5-tuple with wildcards; addresses and ports in host order here, converted on the way in.
struct FlowMatch {
  uint32_t fields = 0;  // RECCL_FAULT_MATCH_*
  uint8_t proto = 0;
  uint32_t saddr = 0;
  uint32_t daddr = 0;
  uint16_t sport = 0;
  uint16_t dport = 0;

  bool any() const noexcept { return fields == 0; }
  bool operator==(const FlowMatch&) const = default;
};

// "proto:src:sport:dst:dport" where proto is tcp, udp, icmp or a number, src/dst are IPv4
// addresses, ports numbers, and any field may be '*'. "*" alone (or empty) matches everything.
Result<FlowMatch> parseFlow(std::string_view text);
std::string flowToString(const FlowMatch& f);

// Rate in [0,1] -> threshold compared with bpf_get_prandom_u32().
Result<uint64_t> rateToThreshold(double rate);
double thresholdToRate(uint64_t threshold) noexcept;

struct DropRule {
  uint32_t dirs = kBothDirections;
  double rate = 0.0;
  FlowMatch flow;

  // Two rules with the same direction and flow occupy the same slot (a rate change is an update).
  bool sameMatch(const DropRule& o) const noexcept { return dirs == o.dirs && flow == o.flow; }
  std::string toString() const;  // "egress udp:*:*:10.100.0.2:5000 rate 0.01"
};

Result<reccl_fault_rule> toBpfRule(const DropRule& rule);
DropRule fromBpfRule(const reccl_fault_rule& r);

}  // namespace reccl::inject
