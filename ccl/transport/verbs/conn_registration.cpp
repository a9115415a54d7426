#include "transport/verbs/conn_registration.h"

#include <cerrno>
#include <cstdlib>
#include <new>

namespace reccl::transport::verbs {

namespace {
constexpr size_t kAckBytes = 64;
}

Result<std::unique_ptr<ConnRegistration>> ConnRegistration::create(std::span<RailDevice* const> rails,
                                                                   const channel::ConnMemory& mem, ConnRole role) {
  if (!mem.valid()) return Status(Errc::kInvalidArgument, "verbs registration: connection memory not mapped");
  std::unique_ptr<ConnRegistration> r(new ConnRegistration());
  r->role_ = role;
  r->mem_ = &mem;
  void* ack = std::aligned_alloc(kAckBytes, kAckBytes);
  if (!ack) return Status(Errc::kSystem, "verbs registration: no memory for the ack word");
  r->ack_.reset(new (ack) std::atomic<uint64_t>(0));
  const int slotAccess = role == ConnRole::kReceiver ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE
                                                     : IBV_ACCESS_LOCAL_WRITE;
  for (RailDevice* dev : rails) {
    PerRail pr;
    pr.rail = dev->rail();
    ibv_mr* mr = ibv_reg_mr(dev->pd(), mem.slotFrame(1), r->slotBytes(), slotAccess);
    if (!mr) return Status::FromErrno(errno, "rdma: registering the slots on " + dev->port().device);
    pr.slots = MemoryRegion(mr, "slot registration");
    if (role == ConnRole::kSender) {
      mr = ibv_reg_mr(dev->pd(), ack, kAckBytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
      if (!mr) return Status::FromErrno(errno, "rdma: registering the ack word on " + dev->port().device);
      pr.ack = MemoryRegion(mr, "ack registration");
    }
    r->rails_.push_back(std::move(pr));
  }
  return r;
}

ConnRegistration::~ConnRegistration() {
  Status s = close();
  if (!s.ok()) RECCL_WARN(kLogNet, "rdma: %s", s.message().c_str());
}

size_t ConnRegistration::slotBytes() const noexcept {
  return size_t{mem_->slots()} * channel::slotStride(mem_->chunkBytes());
}

const ConnRegistration::PerRail* ConnRegistration::find(int rail) const noexcept {
  for (const PerRail& p : rails_)
    if (p.rail == rail) return &p;
  return nullptr;
}

Result<uint32_t> ConnRegistration::slotLkey(int rail) const {
  const PerRail* p = find(rail);
  if (!p || !p->slots) return Status(Errc::kNotFound, "verbs: slots not registered on rail " + std::to_string(rail));
  return p->slots->lkey;
}

Result<uint32_t> ConnRegistration::slotRkey(int rail) const {
  const PerRail* p = find(rail);
  if (!p || !p->slots) return Status(Errc::kNotFound, "verbs: slots not registered on rail " + std::to_string(rail));
  return p->slots->rkey;
}

Result<uint32_t> ConnRegistration::ackRkey(int rail) const {
  const PerRail* p = find(rail);
  if (!p || !p->ack) return Status(Errc::kNotFound, "verbs: no ack word registered on rail " + std::to_string(rail));
  return p->ack->rkey;
}

Result<ConnInfo> ConnRegistration::describe(int rail, uint32_t epoch) const {
  ConnInfo c;
  c.role = role_;
  c.rail = static_cast<uint16_t>(rail);
  c.epoch = epoch;
  c.slots = mem_->slots();
  c.chunkBytes = mem_->chunkBytes();
  if (role_ == ConnRole::kReceiver) {
    RECCL_ASSIGN_OR_RETURN(c.rkey, slotRkey(rail));
    c.addr = slotAddr();
  } else {
    RECCL_ASSIGN_OR_RETURN(c.rkey, ackRkey(rail));
    c.addr = ackAddr();
  }
  return c;
}

Status ConnRegistration::close() {
  Status first;
  for (PerRail& p : rails_)
    for (MemoryRegion* mr : {&p.slots, &p.ack}) {
      Status s = mr->close();
      if (!s.ok() && first.ok()) first = s;
    }
  rails_.clear();
  return first;
}

}  // namespace reccl::transport::verbs
