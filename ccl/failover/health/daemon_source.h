// The node daemon reccl-detectord as a fault source of a communicator's monitor: one client
// connection that watches this rank's rail NICs in the rank's own network namespace, turns the
// daemon's LinkDown / LinkUp / LinkDegraded into rail signals, and reads the daemon's link-state
// array (mapped read-only) with one load per rail per monitor tick. No detector types leak out of
// here, so code including it needs neither libbpf nor the detector's headers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "reccl/common/status.h"

namespace reccl::failover {

struct RailNic {
  int rail = 0;
  std::string ifname;  // in this process's network namespace
};

struct RailSignal {
  enum class Kind : uint8_t { kDown, kUp, kDegraded };
  Kind kind = Kind::kDown;
  int rail = 0;
  uint64_t signalNs = 0;  // first signal, CLOCK_MONOTONIC (the kernel's timestamp for BPF hooks)
  std::string source;     // the daemon's source ("rawtp_linkwatch", "rtnetlink", ...) or "link-state"
};

class DaemonSource {
 public:
  // Connects to the daemon on socketPath, which must answer every request within timeoutMs,
  // and watches each NIC (by /proc/PID/ns/net, so the daemon resolves this process's namespace).
  // kNotFound: no daemon there. The link-state array is mapped when the daemon offers it.
  static Result<std::unique_ptr<DaemonSource>> open(const std::string& socketPath, const std::vector<RailNic>& nics,
                                                     int timeoutMs);
  ~DaemonSource();
  DaemonSource(const DaemonSource&) = delete;
  DaemonSource& operator=(const DaemonSource&) = delete;

  // Readable when the daemon sent something (or hung up).
  int fd() const noexcept;
  // Appends the events that arrived, without waiting. An error means the daemon is gone (or
  // spoke garbage): the caller drops this object; the events that came before the error are in
  // *out all the same.
  Status receive(std::vector<RailSignal>* out);
  // Liveness, without blocking (every monitor tick): pings the daemon every pingMs; an error when
  // a pong is later than max(2 * pingMs, timeoutMs): the daemon hangs, drop it as if it died.
  // pingMs <= 0: no pings.
  Status keepAlive(int pingMs);
  // The rails whose link the mapped array shows not usable now (admin down or no carrier), to
  // reconcile the rail state when this source is dropped. Empty without the map.
  std::vector<int> railsDownInMap() const;
  // One load of each watched link's epoch in the mapped array; a moved epoch while the device is
  // not usable (admin down or no carrier) is a down signal with source "link-state". Catches a
  // fault whose event the daemon's userspace has not sent yet (stalled or busy daemon).
  void checkLinkState(std::vector<RailSignal>* out);
  // The daemon's state machine per watched rail (true: up), to take over from another source.
  Result<std::vector<std::pair<int, bool>>> railStates();
  // The daemon's active sources, from its hello ("rawtp_linkwatch,tp_qdisc_reset,...").
  const std::string& sources() const noexcept;
  bool mapped() const noexcept;

 private:
  struct Impl;
  explicit DaemonSource(std::unique_ptr<Impl> impl);
  Result<std::vector<std::pair<int, bool>>> railStatesOf(const std::string& statusJson) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace reccl::failover
