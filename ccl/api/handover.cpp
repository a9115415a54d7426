#include "api/handover.h"

#include <string>

namespace reccl::api {

Result<core::UniqueIdData> handOver(recclComm_t comm, core::Comm& parent, const Handover& h, const CommConfig& cfg,
                                    const std::atomic<bool>* alsoCancel) {
  const int me = parent.rank();
  const int leader = h.members.front();
  const auto nmembers = static_cast<int32_t>(h.members.size());
  const int64_t ms = cfg.bootstrapTimeoutMs != CommConfig::kUnset ? cfg.bootstrapTimeoutMs
                                                                  : parent.options().bootstrapTimeoutMs;
  // A recclCommAbort or recclCommDestroy of comm (or of the child) meanwhile ends the
  // handover's waits at once.
  Deadline d = Deadline::afterMs(ms).cancellable(&comm->closing);
  if (alsoCancel) d = d.cancellable(alsoCancel);
  core::ShrinkNote note;
  if (me == leader) {
    auto id = startDetachedRoot();
    if (!id.ok()) return id.status().Wrap(h.call + ": starting the rendezvous");
    note.nranks = nmembers;
    note.excluded = h.digest;
    note.id = *id;
    core::wipeKey(id->bootKey);
    for (int r : h.members) {
      if (r == me) continue;
      if (Status s = parent.sendShrinkNote(r, h.serial, note, d); !s.ok()) {
        core::wipeKey(note.id.bootKey);
        return s.Wrap(h.call);
      }
    }
  } else {
    auto got = parent.takeShrinkNote(h.digest, h.serial, leader, d);
    if (!got.ok()) return got.status().Wrap(h.call);
    note = *got;
    core::wipeKey(got->id.bootKey);
    if (note.nranks != nmembers || note.excluded != h.digest) {
      core::wipeKey(note.id.bootKey);
      return Status(Errc::kInvalidUsage, h.call + ": rank " + std::to_string(leader) + " leaves " +
                                             std::to_string(note.nranks) + " ranks, this rank " +
                                             std::to_string(nmembers) + ": " + h.mismatch);
    }
  }
  Result<core::UniqueIdData> out = note.id;
  core::wipeKey(note.id.bootKey);
  return out;
}

}  // namespace reccl::api
