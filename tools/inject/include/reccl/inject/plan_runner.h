// Runs a fault plan on a millisecond timeline and logs each action as one JSON line with both
// clocks, so that benchmarks can line up injection with detection and recovery:
//   {"event":"action","seq":0,"source":0,"action":"link-down","undo":false,
//    "netns":"tb-h0","dev":"rail0","side":"switch","device":"tb-fab/h0r0","at_ms":500,
//    "scheduled_mono_ns":..,"start_mono_ns":..,"done_mono_ns":..,"effect_mono_ns":..,
//    "start_realtime_ns":..,"late_ns":..,"ok":true}
// plus "plan-start" (T0 on both clocks), "restore" and "plan-end" (lateness percentiles) lines.
// Every fault is undone at the end, when the stop fd becomes readable (SIGINT/SIGTERM through a
// signalfd) and when an action fails.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/inject/fault_plan.h"

namespace reccl::inject {

struct PlanRunOptions {
  bool force = false;       // lift the mgmt0 / root-namespace refusals
  std::string logPath;      // JSON lines; empty: none
  int stopFd = -1;          // readable -> stop early and restore
  int64_t spinNs = 100'000; // busy-wait this long before each action
  bool realtime = true;     // try SCHED_FIFO for the timing thread
  int64_t leadMs = 10;      // T0 = end of preparation + lead
  // Hold one queue per tap whose carrier the plan changes, attached before T0 (FaultSession's
  // holdTapQueues): rtnetlink then hears of a carrier change only through link-watch, as from a
  // physical NIC's driver. Off by default, where a plan's carrier action is the one-shot
  // `carrier-off` command's (rtnetlink told at once by the queue's attach and close).
  bool holdTapQueues = false;
};

struct ActionRecord {
  int seq = 0;
  int source = 0;
  ActionKind kind = ActionKind::kLinkDown;
  bool undo = false;
  int64_t atMs = 0;
  int64_t scheduledNs = 0;  // CLOCK_MONOTONIC
  int64_t startNs = 0;
  int64_t doneNs = 0;
  // When the action took hold as far as this host can tell: startNs for a syscall that acts at
  // once (a link or drop action, a tap carrier through a held queue); doneNs for a one-shot tap
  // carrier action, which changes the carrier only after the attached queue's RCU wait
  // (docs/inject.md, "Timing"), and for a lab cable (lab_cable.h), whose request waits for the
  // runner outside the VM and is done once the carrier reads as asked.
  int64_t effectNs = 0;
  int64_t startRealtimeNs = 0;
  Status status;
};

struct PlanRunResult {
  std::vector<ActionRecord> records;
  int64_t t0MonoNs = 0;
  int64_t t0RealtimeNs = 0;
  bool stopped = false;       // the stop fd fired
  int failed = 0;             // actions that returned an error
  Status restoreStatus;
  Status logStatus;           // the first failed write of the log (PlanRunOptions::logPath)
  std::string schedPolicy;
  // start - scheduled, over all executed actions (ns).
  int64_t lateP50Ns = 0, lateP99Ns = 0, lateMaxNs = 0;
  // done - scheduled: when the action had taken effect as far as the kernel's answer goes.
  int64_t doneP50Ns = 0, doneP99Ns = 0, doneMaxNs = 0;
};

// Validates the plan's targets first (kNotFound / kPermission / kInvalidArgument, nothing
// changed), then runs it. Failed actions are counted in the result, not returned as an error.
Result<PlanRunResult> runPlan(const FaultPlan& plan, const PlanRunOptions& opts);

// p in [0,1] of an unsorted sample (nearest rank); 0 for an empty one.
int64_t percentileNs(std::vector<int64_t> v, double p);

}  // namespace reccl::inject
