// Migration of connections: migrator threads serve a queue of jobs (connections this rank moves,
// standbys it opens) and of handshakes peers open to it; a job picks a rail, takes the standby or
// asks the transport for a link on that rail, runs the handshake ({epoch, receiver's step} both
// ways, the transport's records between), and commits: the old path retired, the new one made
// from the link, the unacknowledged steps resent from the sender's slots. The far end serves the
// same handshake passively and commits on the request. The steps in order:
//   migrator_pool.cpp  the threads (migrator_queue.h: their queue)
//   run_job.cpp        one job: route, rail choice per try, give up after RECCL_FAILOVER_TIMEOUT_MS
//   handshake.cpp      the initiator's handshake (direct, standby and relay routes) and the passive end's
//   early_request.cpp  a fault's move over a standby begun on the monitor thread
//   commit.cpp         the switch of a port to its new path, and the resend
//   migration_log.cpp  the failover line and the counters
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "core/wire.h"
#include "failover/conn_table.h"
#include "failover/migration/job.h"
#include "failover/migration/migrate_wire.h"
#include "failover/migration/migrator_queue.h"
#include "reccl/common/deadline.h"
#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"
#include "transport/path_factory.h"

namespace reccl::failover {

struct FailoverContext;

// The data hello this rank sends on a new link to `dstRank` (communicator, ranks, channel; an
// epoch > 1 marks a migration, core/failover_part.h).
core::Hello dataHello(const FailoverContext& ctx, int dstRank, uint32_t channel, uint32_t epoch);
// The request's fields that say who asks and for what (connection, role, reason, rail, epoch,
// this rank's healthy rails); a migration's receiver adds its steps.
void fillRequest(MigrateRequest* req, const FailoverContext& ctx, const Conn& c, MigrateReason reason, int rail,
                 uint32_t epoch);

// A fault's move begun on the monitor thread (Migration::beginEarly): the connection's standby
// taken, its rail claimed and the request out on it at `epoch` (the connection's busy count held
// until the reply is read).
struct EarlyRequest {
  std::unique_ptr<transport::Link> link;
  int rail = -1;
  uint32_t epoch = 0;
  uint64_t startNs = 0;  // the monitor began
  uint64_t pathNs = 0;   // standby taken
  uint64_t sentNs = 0;   // request sent
};

// Lock rule: poolMu_ guards the thread list (taken with the queue's lock released, never inside
// it). A connection's commits serialize on Conn::mu, taken with no other failover lock held but
// the rail picker's never inside it.
class Migration {
 public:
  explicit Migration(FailoverContext& ctx) : ctx_(ctx) {}
  ~Migration();
  Migration(const Migration&) = delete;
  Migration& operator=(const Migration&) = delete;

  // Two migrator threads wait from the start: a fault's jobs (one per connection on the rail,
  // usually 2+) start at once instead of after a thread creation each.
  void start();
  // After FailoverContext::stop is set: wake() has every migrator thread leave its wait; stop()
  // also joins them.
  void wake() noexcept;
  void stop() noexcept;

  // One job per connection at a time: one asked for while a job of its connection is queued or
  // running is queued when that one ends (Conn::jobs, JobSlot).
  void enqueue(Job j);
  // The same for a fault's move, on the monitor thread (early_request.cpp): when the
  // connection's slot is free, the policy's route is the direct one and its standby is usable,
  // the request goes out on the standby here and the job comes back, for the monitor to read the
  // reply when the standby's descriptor turns readable (concludeEarly); else the job is queued as
  // usual (nullopt). Never waits: a connection whose lock is held is the migrator thread's.
  std::optional<Job> beginEarly(Job j);
  // The reply of a request beginEarly sent is there (or its time, kEarlyReplyMs, is up: `replied`
  // false): read it and commit, on the monitor thread. A move that does not commit is queued
  // for a migrator thread, which carries on as for any failed try. A sender's old path, which
  // the commit leaves to its engine to reap, goes to `drainLater`: the caller drains it once
  // every reply there is committed, so that no commit waits for another's engine.
  void concludeEarly(Job j, bool replied, std::vector<channel::Path*>& drainLater);
  static constexpr int64_t kEarlyReplyMs = 1000;
  // A standby job (the standby upkeep's; Conn::standbyMaking keeps it to one): behind every move.
  void queueStandby(const ConnId& id, uint64_t nowNs);
  // A migration hello the data listener proved: its handshake is served on a migrator thread.
  Status onMigrationHello(UniqueFd fd, const core::Hello& h);

  // The initiator's handshake on a new link, shared by the direct, standby and relay routes:
  // (hello +) request out, reply in, commit. `via`: the relay rank the link goes through (-1:
  // direct). On kDone, *moved says what the commit did.
  Attempt handshake(Conn& c, int rail, const Job& j, bool withHello, std::unique_ptr<transport::Link> link, int via,
                    Deadline deadline, Status* err, Moved* moved, Timeline* tl);
  // Its two halves. propose: the epoch, then (hello +) request and this end's record out; kDone:
  // sent, *epoch holds it and the connection stays busy until conclude. With mayWait false the
  // connection's lock is only tried (kNotReady when held) and a moot job is kStale.
  // conclude: the reply and the peer's record in, commit.
  Attempt propose(Conn& c, int rail, const Job& j, bool withHello, transport::Link& link, Deadline deadline,
                  bool mayWait, uint32_t* epoch, Status* err, Timeline* tl);
  Attempt conclude(Conn& c, int rail, const Job& j, std::unique_ptr<transport::Link> link, int via, uint32_t epoch,
                   Deadline deadline, Status* err, Moved* moved, Timeline* tl,
                   std::vector<channel::Path*>* drainLater = nullptr);
  // The passive end of a handshake whose request has been read (a new link, or a standby).
  void servePassive(std::unique_ptr<transport::Link> link, const core::Hello& h, const MigrateRequest& req,
                    Timeline tl);
  // The failover line (WARN) and the counters, at each end of a committed move.
  void log(const Conn& c, const Job& j, const Moved& m, int rail, bool initiated, uint64_t commitNs,
           const Timeline* tl = nullptr);

 private:
  void startThread();  // under poolMu_
  void loop();
  void push(Job j);  // onto the queue (its connection's JobSlot claimed)
  std::shared_ptr<EarlyRequest> proposeEarly(Conn& c, const Job& j);
  // A handshake over: the connection's pending epoch and busy count released.
  Attempt release(Conn& c, uint32_t epoch, Attempt a);
  // INFO: the standby taken for a move did not carry it (the move goes on without it).
  void logStandbyFailed(const Conn& c, int rail, const Status& err);
  void runJob(const Job& j);
  // One try on `rail`: over `standby` when given (the handshake only), else a new link.
  Attempt attempt(Conn& c, int rail, const Job& j, Deadline deadline, std::unique_ptr<transport::Link> standby,
                  Status* err, Moved* moved, Timeline* tl);
  void handlePassive(PassiveHello p);
  // Switches c's port to a path made from `link` at `epoch` (c.mu held). `reply` (passive end) is
  // sent on the link before its path starts. `via`: the relay rank (-1: direct). A sender's old
  // path is drained here, or, with `drainLater`, handed to the caller to drain (the port keeps
  // it; the new path does not wait for it).
  Result<Moved> commit(Conn& c, std::unique_ptr<transport::Link> link, uint32_t epoch, int rail, int via,
                       MigrateReason reason, uint64_t peerReceived, uint64_t peerApplied, MigrateReply* reply,
                       std::vector<channel::Path*>* drainLater = nullptr);
  void unrecoverable(Conn& c, const Status& s);
  // The peer cannot take a move: its communicator failed (a peer-failed reply) or nothing listens
  // there any more (a refused connect: its process exited). No rail or retry can help, so this
  // communicator fails now, naming the peer, unless it is stopping or failed already.
  void failWithPeer(Conn& c, const Status& peerFailed);

  FailoverContext& ctx_;
  MigratorQueue queue_;
  std::mutex poolMu_;
  std::vector<std::thread> pool_;  // under poolMu_
};

}  // namespace reccl::failover
