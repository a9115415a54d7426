// Helpers of the verbs lab test (lab_verbs_test.cpp), which runs as one rank per lab VM: the
// management-network side channel to the other VM, the rail devices, and directed connections
// (a send and a receive end per duplex) carrying checked streams of steps.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "channel/port.h"
#include "reccl/common/deadline.h"
#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"
#include "transport/verbs/conn_registration.h"
#include "transport/verbs/rail_device.h"
#include "transport/verbs/verbs_paths.h"
#include "transport/verbs/verbs_progress.h"

namespace reccl::lab {

using namespace reccl::transport::verbs;

int envInt(const char* name, int dflt);

// The other VM over the management network (rank 0 accepts on MASTER_ADDR:MASTER_PORT, rank 1
// connects): one connection for the whole program, every call with a deadline.
class Peer {
 public:
  static Result<Peer*> get();
  int rank() const noexcept { return rank_; }
  Status send(std::span<const std::byte> b);
  Status recv(std::span<std::byte> b, int timeoutMs = 90'000);
  // Sends this side's bytes and receives the other's (same length).
  Result<std::vector<std::byte>> exchange(std::span<const std::byte> mine, int timeoutMs = 90'000);
  Result<uint64_t> exchangeU64(uint64_t mine, int timeoutMs = 90'000);
  // Both sides reach the same point (the tag names it; a mismatch is an error).
  Status barrier(uint64_t tag, int timeoutMs = 90'000);

 private:
  int rank_ = 0;
  UniqueFd fd_;
};

// How many `kind` objects ("qp", "mr", ...) of this process the kernel lists on device `dev`
// (`rdma resource show KIND`): kernel-side proof that something was destroyed. -1 when the
// tool fails.
int rdmaResources(const std::string& kind, const std::string& dev);

// The VM's rail devices (LAB_RAIL_NICS), once each rail's IPv4 GID exists and its port is ACTIVE.
Result<std::vector<std::unique_ptr<RailDevice>>> openRails(int timeoutMs = 20'000);

// Payload of step `step` of stream `stream` from rank `rank`: length and bytes are functions of
// the three, so the receiver checks every byte without any other state.
size_t stepBytes(uint64_t step, size_t chunk) noexcept;
void fillStep(std::span<std::byte> out, int rank, int stream, uint64_t step) noexcept;
// The first byte that differs (-1: none).
long firstWrongByte(std::span<const std::byte> got, int rank, int stream, uint64_t step) noexcept;
channel::CollDesc stepDesc(uint64_t step, size_t bytes) noexcept;

// A duplex between the two VMs on one rail: this VM's send end (to the peer) and receive end
// (from the peer), each a port with its own slots registered on every rail.
struct Duplex {
  int stream = 0;  // same index on both VMs
  int rail = 0;
  QpSettings settings;
  std::unique_ptr<channel::SendPort> send;
  std::unique_ptr<channel::RecvPort> recv;
  std::unique_ptr<ConnRegistration> sendReg, recvReg;
  VerbsSendPath* sendPath = nullptr;  // owned by the ports
  VerbsRecvPath* recvPath = nullptr;
  std::vector<VerbsPath*> oldPaths;  // shut down by moveDuplex, kept by the ports, not yet retired
  uint64_t expectedDuplicates = 0;    // steps the peer resent that this end already had
  std::atomic<uint64_t> posted{0}, verified{0};
  Status sendResult, recvResult;
};

struct DuplexSpec {
  int rail = 0;
  QpSettings settings;
};

// Ports, registrations on every rail, QPs on each spec's rail, exchanged with the peer and
// connected, paths installed and added to `engine`. `env` is shared by all ports.
Result<std::vector<std::unique_ptr<Duplex>>> makeDuplexes(std::span<const DuplexSpec> specs,
                                                          std::span<const std::unique_ptr<RailDevice>> rails,
                                                          Peer& peer, VerbsProgress& engine, channel::PortEnv* env,
                                                          VerbsPathOptions opts, uint32_t slots, size_t chunk);

// Takes the duplexes' current paths out of the engine when it goes: declared after the duplexes,
// so that an early return never leaves the progress thread polling freed paths.
struct EngineDetach {
  VerbsProgress* engine;
  std::vector<std::unique_ptr<Duplex>>* duplexes;
  ~EngineDetach();
};

// Moves `d` onto rail `rail` the way failover would: both ends' old paths out of the engine and
// shut down (ERR); new QPs exchanged with the receiver's applied step; epochs bumped; the sender
// resends out of its slots (nothing registered).
// The sender resends from the receiver's applied step (the handshake's, as failover does) or from
// the last step acknowledged to it (acks lost with the old path make the receiver drop what it
// already has as duplicates). `resumedNs`: when the new paths started.
enum class ResendFrom { kPeerApplied, kOwnAcked };
Status moveDuplex(Duplex& d, int rail, std::span<const std::unique_ptr<RailDevice>> rails, Peer& peer,
                  VerbsProgress& engine, VerbsPathOptions opts, ResendFrom from, uint64_t* resumedNs = nullptr);
// Off the critical path after moves: the old paths retired (drained, QPs destroyed).
Status retireOld(Duplex& d);

// Aborts every wait of the ports sharing `env` when it goes: declared after a Streams, so that a
// failed assertion does not leave the stream threads waiting out their deadlines.
struct AbortOnExit {
  channel::PortEnv& env;
  ~AbortOnExit() { env.aborted.store(true); }
};

// Sends `steps` steps on d.send and checks `steps` steps from d.recv on two threads; each wait
// has `waitMs`. join() fills d.sendResult / d.recvResult.
class Streams {
 public:
  Streams(std::span<const std::unique_ptr<Duplex>> duplexes, int rank, uint64_t steps, int waitMs);
  ~Streams() { join(); }
  void join();

 private:
  std::vector<std::thread> threads_;
};

inline constexpr uint32_t kSlots = 8;

// One rank per lab VM: the peer, the rail devices, a progress engine; every test meets the
// other VM at a barrier named after it. Outside the lab (RECCL_TEST_LAB unset) it skips.
class VerbsLab : public ::testing::Test {
 protected:
  void SetUp() override;
  // The ports (and their retired paths and QPs) first, then the registrations, then the devices:
  // each close fails (EBUSY) if anything it owns was left behind.
  void closeAll(std::vector<std::unique_ptr<Duplex>>& ds);

  Peer* peer_ = nullptr;
  std::vector<std::unique_ptr<RailDevice>> rails_;
  std::unique_ptr<VerbsProgress> engine_;
};

}  // namespace reccl::lab
