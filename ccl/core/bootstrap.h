// Rendezvous: a root gathers every rank's RankInfo and sends the full table back, with the
// communicator's key and id sealed for each rank (core/auth.h). Every connection starts with
// the root's challenge; a rank answers with its hello and a MAC under the job's bootstrap key.
// Strangers, foreign jobs and wrong secrets are refused with a message saying why, without
// disturbing the ranks that belong.
//
// Two jobs that share a rendezvous address and world size look alike on the wire. They never
// merge: the root's listener is exclusive (the second job's rank 0 cannot bind it), and any rank
// that claims a rank already taken fails the bootstrap, or, once the communicator formed, the
// communicator (a root kept for the communicator's lifetime sees such late claims).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "core/auth.h"
#include "core/wire.h"
#include "reccl/common/deadline.h"
#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"
#include "transport/socket_util.h"

namespace reccl::core {

// The root outlives the ranks' own bootstrap deadline a little, so a rank that times out reports
// the timeout rather than the root hanging up on it.
inline constexpr int64_t kRootGraceMs = 1000;

// A rank stopped while it waits (SIGSTOP) keeps its socket open: the root's wait still ends.
inline constexpr int64_t kRootWaitPastDeadlineMs = 24ll * 3600 * 1000;

struct BootstrapConfig {
  uint32_t addr = 0;  // network order; 0: any
  uint16_t port = 0;  // 0: pick one
  uint64_t jobId = 0;
  Key bootKey{};
  // For the rank table to go out. Past it the root still waits while a rank that joined waits
  // for the table (bounded by that rank's own deadline, which may be longer: a communicator's
  // config), at most kRootWaitPastDeadlineMs; with no rank waiting it fails at once.
  Deadline deadline = Deadline::never();
  // Keep serving after the table went out (refusing everyone, failing the communicator on a
  // late claim of this job's ranks) until stop(): for roots at a launcher's fixed address.
  bool lingerUntilStopped = false;
};

class BootstrapRoot {
 public:
  // The listening socket is created (exclusively) before this returns, so its address can be
  // handed out; `bound` receives it.
  static Result<std::shared_ptr<BootstrapRoot>> start(const BootstrapConfig& cfg, transport::Endpoint* bound);
  ~BootstrapRoot();
  BootstrapRoot(const BootstrapRoot&) = delete;
  BootstrapRoot& operator=(const BootstrapRoot&) = delete;

  // Called (from the root's thread) when a rank of this job claims a rank after the table went
  // out: another job is on this address. A claim that came before the hook was set is reported
  // at once. Set to empty before its target goes away.
  void onLateClaim(std::function<void(const Status&)> fn);
  // Stops the thread and closes the listener; waits for the thread unless called from it.
  void stop();
  // Process-wide count of refused connections (for tests).
  static uint64_t refusedTotal();
  // How many rank tables (and blocks, to a block's leader) this root sent (for tests).
  int tablesSent() const { return tablesOut_.load(); }
  int blocksSent() const { return blocksOut_.load(); }
  // While the rank table has not gone out: which of the ranks this root gathers never brought
  // their records ("gathering 8 ranks, never reached by ranks 1, 4-7"), for a rank of this
  // process whose own wait timed out to say who kept it waiting. Empty before the first hello,
  // once the table went out, or when the root's thread is busy sending (it does not wait).
  std::string whoIsMissing() const;
  // The root this process started for `jobId` on `port` if it still runs (recclGetUniqueId's,
  // which no communicator holds), or null.
  static std::shared_ptr<BootstrapRoot> inThisProcess(uint64_t jobId, uint16_t port);

 private:
  struct Client;
  BootstrapRoot() = default;
  void run();
  void onAccept();
  void onReadable(Client& c);
  void onHello(Client& c, const Hello& h);
  void onRecords(Client& c);
  void onFull(Client& c);
  void refuse(Client& c, const std::string& why);
  void failAll(const std::string& why);
  void sendFrame(Client& c, RootFrame type, std::span<const std::byte> payload, Deadline by);
  // How many ranks' records this root gathers; the gathered ones, [first, end), as a rank table.
  int expected() const;
  std::string missingText() const;  // whoIsMissing()'s text, on the root's thread
  std::vector<std::byte> gathered(int first, int end) const;
  size_t recordsMost(const Client& c) const;  // the longest records c may send
  Deadline sendBy() const;
  void sendBlock();
  // The table and the communicator's secret, sealed for each client but `skip`; then done.
  void sendTables(std::span<const std::byte> blob, const CommSecret& secret, const Client* skip);

  BootstrapConfig cfg_;
  UniqueFd listen_;
  UniqueFd stopEvent_;
  std::thread thread_;
  std::mutex lateMu_;
  std::function<void(const Status&)> late_;
  Status lateClaim_;  // the first late claim, kept for a hook set after it
  // Written by the root's thread, which holds stateMu_ while it handles its events (not while it
  // polls), so whoIsMissing() reads a consistent state from another thread.
  mutable std::mutex stateMu_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::vector<Client*> owner_;  // rank -> its client
  std::vector<bool> came_;       // rank -> its records reached this root (it may have left since)
  int nranks_ = 0;
  int nroots_ = 0;  // recclCommInitRankScalable's roots; 0: this is the only root
  int index_ = 0;   // which of them this one is
  int have_ = 0;    // ranks whose records are here
  bool blockSent_ = false;
  std::atomic<int> tablesOut_{0};
  std::atomic<int> blocksOut_{0};
  bool tableSent_ = false;
  bool failed_ = false;
  std::string failure_;  // why, told to every rank that comes after
};

// Client side: connects to the root, authenticates, sends this rank's info, returns the table
// and the communicator's key and id. makeInfo gets the local address used towards the root (to
// exclude the bootstrap NIC).
//
// Several roots (recclCommInitRankScalable: `ids` holds one unique id per root, in the same order
// on every rank) split the ranks into consecutive blocks, one per root (rankBlock), so no root
// holds a connection per rank or sends the table to every rank. A rank joins its block's root. A
// block's root, once its block is complete, sends the block to the block's leader (its first
// rank; kBlock); the leader joins root 0 with the whole block, takes the table of every rank and
// the communicator's secret from it as root 0's own ranks do, and brings both back to its root
// (kFull, sealed and MACed under that root's key and connection), which hands them to the rest of
// its block and closes the leader's connection: the leader's yes (a refusal says why instead).
// Root 0 sees its own block's ranks and one leader per other block. A missing leader fails its
// block at the bootstrap timeout, as a missing rank does; one that leaves, or a member that
// leaves after the block went out, fails the block at once.
struct BootstrapResult {
  std::vector<RankInfo> table;
  CommSecret comm;
};
Result<BootstrapResult> bootstrapExchange(std::span<const UniqueIdData> ids, int rank, int nranks,
                                          const std::function<Result<RankInfo>(uint32_t localAddr)>& makeInfo,
                                          Deadline deadline);

}  // namespace reccl::core
