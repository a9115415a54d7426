// The NIC poll, the fault source of last resort: IFF_UP && IFF_RUNNING of each rail NIC
// (SIOCGIFFLAGS, no privileges) every RECCL_FAILOVER_POLL_MS; a rail it declared down comes back
// only after the NIC stayed up for RECCL_HOLDDOWN_MS. The decision per look is pure
// (nicPollStep, table-tested); this holds the socket and the per-rail state (monitor thread).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "reccl/common/status.h"

namespace reccl::failover {

struct NicPollState {
  bool down = false;        // declared down by the poll (it owns bringing the rail back)
  uint64_t upSinceNs = 1;   // physically up since (0: down at the last look)
};
enum class NicPollVerdict { kNone, kDown, kBackUp };
// One look at a NIC: down at once when it is not up and running; back up once it has been for
// holdDownNs.
NicPollVerdict nicPollStep(NicPollState& s, bool physicallyUp, uint64_t nowNs, uint64_t holdDownNs) noexcept;

class NicPoll {
 public:
  NicPoll(int nrails, int64_t holdDownMs);
  ~NicPoll();
  NicPoll(const NicPoll&) = delete;
  NicPoll& operator=(const NicPoll&) = delete;
  Status open();
  // One look at every rail NIC named (loopback skipped). With `active` false only the rails the
  // poll still holds down are looked at (it hands them back after the hold-down, then stops).
  // onChange(rail, up) for every rail declared down or back up, in rail order.
  void poll(const std::vector<std::string>& nicNames, uint64_t nowNs, bool active,
            const std::function<void(int rail, bool up)>& onChange);
  bool holdsDown(int rail) const { return state_[rail].down; }
  bool holdsAny() const;
  // Takes over from another source: the rails down now stay down until the poll has seen them up
  // for the hold-down.
  void takeOver(uint64_t railsUp);

 private:
  std::vector<NicPollState> state_;
  uint64_t holdDownNs_;
  int sock_ = -1;
};

}  // namespace reccl::failover
