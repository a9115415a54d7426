#include "failover/health/nic_poll.h"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace reccl::failover {

NicPollVerdict nicPollStep(NicPollState& s, bool physicallyUp, uint64_t nowNs, uint64_t holdDownNs) noexcept {
  if (!physicallyUp) {
    s.upSinceNs = 0;
    if (s.down) return NicPollVerdict::kNone;
    s.down = true;
    return NicPollVerdict::kDown;
  }
  if (!s.down) return NicPollVerdict::kNone;
  // Hold-down: the NIC must stay up this long before traffic goes back to it.
  if (s.upSinceNs == 0) s.upSinceNs = nowNs;
  if (nowNs - s.upSinceNs < holdDownNs) return NicPollVerdict::kNone;
  s.down = false;
  return NicPollVerdict::kBackUp;
}

NicPoll::NicPoll(int nrails, int64_t holdDownMs)
    : state_(static_cast<size_t>(std::max(nrails, 1))),
      holdDownNs_(static_cast<uint64_t>(std::max<int64_t>(0, holdDownMs)) * 1000000ull) {}

NicPoll::~NicPoll() {
  if (sock_ >= 0) close(sock_);
}

Status NicPoll::open() {
  sock_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock_ < 0) return Status::FromErrno(errno, "failover: socket for NIC state");
  return Status::Ok();
}

void NicPoll::poll(const std::vector<std::string>& nicNames, uint64_t nowNs, bool active,
                   const std::function<void(int rail, bool up)>& onChange) {
  const int n = static_cast<int>(std::min(state_.size(), nicNames.size()));
  for (int r = 0; r < n; ++r) {
    const std::string& name = nicNames[r];
    if (name == "lo" || (!active && !state_[r].down)) continue;
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
    bool up = false;
    if (ioctl(sock_, SIOCGIFFLAGS, &ifr) == 0) up = (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
    switch (nicPollStep(state_[r], up, nowNs, holdDownNs_)) {
      case NicPollVerdict::kDown: onChange(r, false); break;
      case NicPollVerdict::kBackUp: onChange(r, true); break;
      case NicPollVerdict::kNone: break;
    }
  }
}

bool NicPoll::holdsAny() const {
  return std::any_of(state_.begin(), state_.end(), [](const NicPollState& s) { return s.down; });
}

void NicPoll::takeOver(uint64_t railsUp) {
  for (size_t r = 0; r < state_.size(); ++r) {
    state_[r].down = !((railsUp >> r) & 1u);
    state_[r].upSinceNs = 0;
  }
}

}  // namespace reccl::failover
