// Internal to the C API: what a recclComm_t points at. The core communicator once it exists, the
// settings it was made with (recclCommSplit's children inherit them), and the state of work a
// non-blocking communicator runs on a thread of its own (its init, its finalize).
//
// Who touches what: `impl` is written once, by the thread that settles a finished init (blocking
// init: the caller), before `state` becomes kReady (release); others read it only after seeing a
// state past kInitializing (acquire). `pending` and `failure` are guarded by settleMu. The thread
// of a pending operation touches only its PendingOp (and, for finalize, `impl` inside
// core::Comm::run and `device` through api/launch.h, which recclCommAbort fails and waits out).
// `device` (the stream layer, made on the first call with a CUDA stream or device buffers) is
// guarded by deviceMu.
//
// Closing (recclCommAbort, recclCommDestroy) while another thread is inside a call on the handle
// (a watchdog's abort): every call on a handle holds a CallTicket for as long as it uses the
// handle, the close marks the handle closing (calls entering from then on are refused) and frees
// the communicator only once the calls inside have left. The handle's shell stays, closed, among
// the last kTombstones closed handles (bury()): a call that loaded the handle before the close
// and enters after it, or a second close, finds it closed and is refused by name instead of
// touching freed memory.
#pragma once

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "api/api_result.h"
#include "api/red_ops.h"
#include "api/cost_model.h"
#include "api/registrations.h"
#include "core/comm.h"
#include "core/wire.h"
#include "reccl/common/status.h"
#include "reccl/reccl.h"
#include "stream/queue.h"

namespace reccl::api {

// recclConfig_t after validation; kUnset fields take the environment's value (RECCL_*).
struct CommConfig {
  static constexpr int kUnset = RECCL_CONFIG_UNDEF_INT;
  bool blocking = true;
  int nChannels = kUnset;
  int timeoutMs = kUnset;
  int bootstrapTimeoutMs = kUnset;
  std::string name;
  // Not a recclConfig_t field: the CUDA device current on the thread that made the communicator
  // (-1: none, host ranks; recclCommCuDevice). A split's or shrink's children keep the parent's.
  int cudaDevice = -1;
  // Not a recclConfig_t field either: core::CommOptions::homeNic (the NCCL net plugin's per-NIC
  // devices; "": none). Children keep it.
  std::string homeNic;
};

// Reads and checks a caller's recclConfig_t (NULL: `inherit`); the message names the field.
Status readConfig(const recclConfig_t* config, const CommConfig& inherit, CommConfig* out);
// The RECCL_* settings with the config's fields laid over them.
Status commOptions(const CommConfig& cfg, core::CommOptions* out);

// One operation a non-blocking communicator runs on a thread of its own.
struct PendingOp {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;                 // the operation finished (status is final)
  bool abandoned = false;            // the handle was aborted: the thread frees what it made
  // Set with `abandoned`: an init's waits (bootstrap, first connections) end at their next poll
  // slice (Deadline::kCancelPollMs) instead of at their deadline (core::CommOptions::cancelInit).
  std::shared_ptr<std::atomic<bool>> cancel = std::make_shared<std::atomic<bool>>(false);
  // The handle gives the operation up (mu held): its thread frees what it makes and stops waiting.
  void abandon() {
    abandoned = true;
    cancel->store(true, std::memory_order_release);
  }
  Status status;
  std::unique_ptr<core::Comm> made;  // init's result, moved into the handle when settled
};

}  // namespace reccl::api

struct recclComm {
  // kRevoked: recclCommRevoke stopped it (api/revoke.cpp); shrink and close follow.
  enum State : int { kInitializing, kReady, kFailed, kFinalizing, kFinalized, kRevoked };
  std::atomic<int> state{kReady};
  std::unique_ptr<reccl::core::Comm> impl;
  reccl::api::CommConfig config;
  std::mutex settleMu;
  std::shared_ptr<reccl::api::PendingOp> pending;
  reccl::Status failure;  // kFailed: the init's error; kFinalized: finalize's, if it failed
  reccl::api::RedOpTable redOps;  // recclRedOpCreatePreMulSum's ops on this communicator
  reccl::api::Registrations registrations;  // recclCommRegister's
  reccl::api::Registrations windows{"win"};  // recclCommWindowRegister's (api/windows.cpp)
  reccl::api::CostModel cost;  // what its host calls took (recclGroupSimulateEnd)
  // Declared after impl so it is torn down first: its worker runs collectives on impl.
  std::mutex deviceMu;
  std::unique_ptr<reccl::stream::Queue> device;
  // The calls inside the C API on this handle (reccl::api::CallTicket), and which close, if any,
  // has begun (reccl::api::Closer).
  std::atomic<int> calls{0};
  std::atomic<int> closer{0};
  std::atomic<bool> abortRequested{false};  // a recclCommAbort met a destroy in progress
  // An abort began (recclCommAbort, or a destroy that gave up waiting): ends the waits that a
  // destroy lets finish (a shrink's or a revoked split's handover).
  std::atomic<bool> aborting{false};
  std::atomic<bool> buried{false};          // closed: only the shell is left (bury())
  std::mutex callsMu;
  std::condition_variable callsCv;
};

namespace reccl::api {

// A call's hold on a handle for as long as the call uses it (file comment). False when the
// handle is closing or closed: the call must not touch it beyond this.
class CallTicket {
 public:
  explicit CallTicket(recclComm_t comm) noexcept;
  ~CallTicket();
  CallTicket(CallTicket&& o) noexcept : comm_(std::exchange(o.comm_, nullptr)) {}
  CallTicket(const CallTicket&) = delete;
  CallTicket& operator=(const CallTicket&) = delete;
  CallTicket& operator=(CallTicket&&) = delete;
  explicit operator bool() const noexcept { return comm_ != nullptr; }
  // Lets go before the end of the scope (the call is done with the handle).
  void release() noexcept;

 private:
  recclComm_t comm_;
};

// Why a call on a closing or closed handle is refused (recclInvalidUsage, naming the close).
recclResult_t refusedClosed();
// A C API function's whole body on `comm`, inside guarded(), holding a ticket on the handle:
// recclInvalidArgument when null, refusedClosed() when closing or closed. A body that takes the
// ticket (CallTicket&) may let it go early (release) or hand it to a thread of its own (move).
template <typename F>
recclResult_t guardedOn(recclComm_t comm, F&& fn) noexcept {
  return guarded([&]() -> recclResult_t {
    if (!comm) return fail(recclInvalidArgument, "comm: null communicator");
    CallTicket t(comm);
    if (!t) return refusedClosed();
    if constexpr (std::is_invocable_v<F&, CallTicket&>)
      return fn(t);
    else
      return fn();
  });
}

// Which close holds a handle.
enum Closer : int { kNoClose = 0, kDestroying = 1, kAborting = 2 };
// Marks the handle closing by `who`; kNoClose when this is the first close, else the close that
// began before (the handle then untouched).
Closer beginClose(recclComm_t comm, Closer who) noexcept;
// After beginClose: waits up to `limit` for the calls inside to leave (a destroy's first wait
// also stops when a recclCommAbort asks it to abort them: `untilAbortRequest`); the calls still
// inside then (0: none).
int waitCallsOut(recclComm_t comm, std::chrono::milliseconds limit, bool untilAbortRequest = false);
// A recclCommAbort on a handle another thread is destroying: that destroy's waits for the calls
// inside and for a pending init or finalize end, and it aborts them.
void requestAbort(recclComm_t comm) noexcept;
// Frees what the handle holds (the stream layer, then the communicator) and keeps its shell,
// closed, among the last kTombstones closed handles; a shell that falls off that list is freed.
inline constexpr size_t kTombstones = 4096;
void bury(recclComm_t comm);

// Moves a finished pending operation's outcome into the handle; returns the state after that.
int settle(recclComm_t comm);
// The core communicator when comm can take work now; else an error naming why (NULL, init still
// running, init failed, finalized, revoked). `revokedOk`: a revoked one is returned too (what
// recclCommShrink and a revoked comm's recclCommSplit need of it is the listener, which a revoke
// leaves up).
recclResult_t usable(recclComm_t comm, core::Comm** out, bool revokedOk = false);

// Creates the communicator for `rank` of `nranks` at the rendezvous in `id`: at once (blocking
// config) or on a thread of its own (recclInProgress, *comm set). `root`, when given, is a
// bootstrap root this rank holds for the communicator's lifetime.
recclResult_t startInit(recclComm_t* comm, const CommConfig& cfg, int nranks, const core::UniqueIdData& id, int rank,
                        std::shared_ptr<core::BootstrapRoot> root = nullptr);
// With one id per bootstrap root (recclCommInitRankScalable; core/bootstrap.h).
recclResult_t startInit(recclComm_t* comm, const CommConfig& cfg, int nranks, std::span<const core::UniqueIdData> ids,
                        int rank, std::shared_ptr<core::BootstrapRoot> root = nullptr);
// Where the rendezvous comes from when it is not known yet (recclCommShrink's handover): called
// once, on the init's thread when the config is non-blocking (its failure is then the init's,
// reported by recclCommGetAsyncError), and destroyed right after, so what it captured (a hold on
// the parent) is let go before the communicator is made. `cancel`: set when the new handle is
// aborted meanwhile (null for a blocking config, whose handle does not exist yet).
using IdSource = std::function<Result<core::UniqueIdData>(const std::atomic<bool>* cancel)>;
// startInit with the rendezvous from `idFrom`: a non-blocking config returns recclInProgress at
// once and runs `idFrom` too on the init's thread.
recclResult_t startInitAfter(recclComm_t* comm, const CommConfig& cfg, int nranks, int rank, IdSource idFrom,
                             std::shared_ptr<core::BootstrapRoot> root = nullptr);
// The same with one id per bootstrap root.
using IdsSource = std::function<Result<core::RendezvousIds>(const std::atomic<bool>* cancel)>;
recclResult_t startInitFrom(recclComm_t* comm, const CommConfig& cfg, int nranks, int rank, IdsSource idFrom,
                            std::shared_ptr<core::BootstrapRoot> root = nullptr);

// The address ranks reach this host's bootstrap root at (network order): RECCL_BOOTSTRAP_IFNAME's,
// else the first non-loopback interface's, else loopback.
Result<uint32_t> bootstrapAddress();

// A bootstrap root for a new unique id, listening on the address ranks reach this host at
// (RECCL_BOOTSTRAP_IFNAME's, else the first non-loopback interface's); detached: it serves until
// its rank table went out or its deadline passed.
Result<core::UniqueIdData> startDetachedRoot();

}  // namespace reccl::api
