#include "reccl/testbed/testbed_spec.h"

#include <string>

namespace reccl::testbed {

const char* nicKindName(NicKind k) noexcept { return k == NicKind::kTap ? "tap" : "veth"; }

Result<NicKind> parseNicKind(std::string_view s) {
  if (s == "veth") return NicKind::kVeth;
  if (s == "tap") return NicKind::kTap;
  return Status{Errc::kInvalidArgument, "--nic must be veth or tap, not '" + std::string(s) + "'"};
}

Status validateTestbedName(std::string_view name) {
  auto bad = [&](const char* why) {
    return Status{Errc::kInvalidArgument, "--name '" + std::string(name) + "' " + why};
  };
  if (name.empty()) return bad("is empty");
  if (name.size() > kMaxNameLen) return bad("is longer than 12 characters");
  auto lowerOrDigit = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!lowerOrDigit(name[0])) return bad("must start with [a-z0-9]");
  for (char c : name) {
    if (!lowerOrDigit(c) && c != '-') return bad("may hold only [a-z0-9-]");
  }
  return Status::Ok();
}

Status validateSpec(const TestbedSpec& spec) {
  RECCL_TRY(validateTestbedName(spec.name));
  if (spec.hosts < 1 || spec.hosts > kMaxHosts) {
    return {Errc::kInvalidArgument,
            "--hosts " + std::to_string(spec.hosts) + " out of range [1, 64]"};
  }
  if (spec.rails < 1 || spec.rails > kMaxRails) {
    return {Errc::kInvalidArgument, "--rails " + std::to_string(spec.rails) + " out of range [1, 8]"};
  }
  if (spec.mtu < 68 || spec.mtu > 65535) {
    return {Errc::kInvalidArgument, "--mtu " + std::to_string(spec.mtu) + " out of range [68, 65535]"};
  }
  if (spec.wirePrio < 0 || spec.wirePrio > kMaxWirePrio) {
    return {Errc::kInvalidArgument, "--wire-prio " + std::to_string(spec.wirePrio) + " out of range [0, 99]"};
  }
  // The priority is the tap forwarder's; a veth testbed has no forwarder, and accepting the
  // option there would let a measurement claim a setting it never had.
  if (spec.wirePrio != 0 && spec.nic != NicKind::kTap) {
    return {Errc::kInvalidArgument, "--wire-prio " + std::to_string(spec.wirePrio) +
                                        " applies to tap NICs only (--nic tap); a veth testbed has no forwarder"};
  }
  return Status::Ok();
}

}  // namespace reccl::testbed
