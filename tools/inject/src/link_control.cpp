#include "reccl/inject/link_control.h"

#include "reccl/netlink/link.h"
#include "reccl/netlink/tap.h"

namespace reccl::inject {

FdReaper::~FdReaper() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  pending_.clear();
}

void FdReaper::close(UniqueFd fd) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    pending_.push_back(std::move(fd));
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  cv_.notify_one();
}

void FdReaper::run() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [this] { return stop_ || !pending_.empty(); });
    std::vector<UniqueFd> batch;
    batch.swap(pending_);
    lk.unlock();
    batch.clear();  // the slow close happens here, off the timing thread
    lk.lock();
    if (stop_ && pending_.empty()) return;
  }
}

LinkControl::LinkControl(bool deferClose) {
  if (deferClose) reaper_ = std::make_unique<FdReaper>();
}

Result<netlink::NlSocket*> LinkControl::socketFor(const std::string& netns) {
  auto it = sockets_.find(netns);
  if (it == sockets_.end()) {
    RECCL_ASSIGN_OR_RETURN(auto nl, netlink::NlSocket::openInNetns(netns));
    it = sockets_.emplace(netns, std::move(nl)).first;
  }
  return &it->second;
}

Status LinkControl::setAdminUp(const ResolvedTarget& t, bool up) {
  RECCL_ASSIGN_OR_RETURN(netlink::NlSocket * nl, socketFor(t.netns));
  return netlink::setLinkUp(*nl, t.dev, up).Wrap(t.toString());
}

Status LinkControl::setCarrier(const ResolvedTarget& t, bool on) {
  if (!isTapKind(t.kind))
    return {Errc::kInvalidArgument,
            "carrier-off/on needs a tap nic; " + t.toString() + " is a " +
                (t.kind.empty() ? std::string("device of unknown kind") : t.kind) +
                " (use link-down/link-up)"};
  RECCL_ASSIGN_OR_RETURN(UniqueFd q, netlink::attachTapQueue(t.netns, t.dev));
  RECCL_TRY(netlink::setTapCarrier(q.get(), on).Wrap(t.toString()));
  if (reaper_) reaper_->close(std::move(q));
  return {};
}

Result<netlink::LinkInfo> LinkControl::query(const ResolvedTarget& t) {
  RECCL_ASSIGN_OR_RETURN(netlink::NlSocket * nl, socketFor(t.netns));
  return netlink::getLink(*nl, t.dev);
}

}  // namespace reccl::inject
