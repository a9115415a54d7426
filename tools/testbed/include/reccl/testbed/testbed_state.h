// The record of a testbed kept at /run/reccl/testbed/<name>.json, so that `exec`, `run`, the
// injector and tests can look names and addresses up, and `down` finds the forwarder after a crash.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/testbed/testbed_spec.h"

namespace reccl::testbed {

inline constexpr const char* kStateDir = "/run/reccl/testbed";

struct NicState {
  std::string dev;         // host-side name: mgmt0, rail<k>
  std::string address;     // "10.100.0.1/24"
  std::string switchPort;  // fabric-side name: h<i>m, h<i>r<k>
  std::string bridge;      // mgmt, rail<k>
};

struct HostState {
  int index = 0;
  std::string netns;
  NicState mgmt;
  std::vector<NicState> rails;
};

struct TestbedState {
  TestbedSpec spec;
  std::string status;  // "creating" while `up` runs, "up" after
  pid_t ownerPid = 0;  // the process that ran `up`
  int64_t createdUnixMs = 0;
  std::string fabricNetns;
  std::vector<HostState> hosts;
  pid_t forwarderPid = 0;           // tap mode
  uint64_t forwarderStartTicks = 0;  // /proc/<pid>/stat starttime: guards against pid reuse

  // Fills netns names, devices and addresses from spec.
  static TestbedState fromSpec(const TestbedSpec& spec);
  std::string toJson(int indent = 2) const;
  static Result<TestbedState> fromJson(const std::string& text);
};

std::string statePath(std::string_view name);
// Creates the state file exclusively: kExists when the testbed name is taken.
Status claimState(const TestbedState& st);
// Overwrites the state file atomically (write + rename).
Status saveState(const TestbedState& st);
Result<TestbedState> loadState(std::string_view name);
Status removeState(std::string_view name);
// Names with a state file, sorted.
std::vector<std::string> listStates();

}  // namespace reccl::testbed
