#include "api/handover.h"

#include <algorithm>

#include "api/api_result.h"

namespace reccl::api {

recclResult_t handOver(recclComm_t comm, core::Comm& parent, const Handover& h, const CommConfig& cfg,
                       core::UniqueIdData* out) {
  const int me = parent.rank();
  const int leader = h.members.front();
  const auto nmembers = static_cast<int32_t>(h.members.size());
  const int64_t ms = cfg.bootstrapTimeoutMs != CommConfig::kUnset ? cfg.bootstrapTimeoutMs
                                                                  : parent.options().bootstrapTimeoutMs;
  // A recclCommAbort or recclCommDestroy of comm meanwhile ends the handover's waits at once.
  const Deadline d = Deadline::afterMs(ms).cancellable(&comm->closing);
  core::ShrinkNote note;
  if (me == leader) {
    auto id = startDetachedRoot();
    if (!id.ok()) return fail(id.status().Wrap(h.call + ": starting the rendezvous"));
    note.nranks = nmembers;
    note.excluded = h.digest;
    note.id = *id;
    core::wipeKey(id->bootKey);
    for (int r : h.members) {
      if (r == me) continue;
      if (Status s = parent.sendShrinkNote(r, h.serial, note, d); !s.ok()) {
        core::wipeKey(note.id.bootKey);
        return fail(s.Wrap(h.call));
      }
    }
  } else {
    auto got = parent.takeShrinkNote(h.digest, h.serial, leader, d);
    if (!got.ok()) return fail(got.status().Wrap(h.call));
    note = *got;
    core::wipeKey(got->id.bootKey);
    if (note.nranks != nmembers || note.excluded != h.digest) {
      core::wipeKey(note.id.bootKey);
      return fail(recclInvalidUsage, h.call + ": rank " + std::to_string(leader) + " leaves " +
                                         std::to_string(note.nranks) + " ranks, this rank " + std::to_string(nmembers) +
                                         ": " + h.mismatch);
    }
  }
  *out = note.id;
  core::wipeKey(note.id.bootKey);
  return recclSuccess;
}

}  // namespace reccl::api
