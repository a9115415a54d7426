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
  // An abort of comm (or of the child) meanwhile ends the handover's waits at once; a destroy of
  // comm waits for them, as for any call inside it.
  Deadline d = Deadline::afterMs(ms).cancellable(&comm->aborting);
  if (alsoCancel) d = d.cancellable(alsoCancel);
  if (d.cancelled()) return Status(Errc::kAborted, h.call + ": aborted before the handover began");
  core::ShrinkNote note;
  struct Wipe {
    core::ShrinkNote& n;
    ~Wipe() { core::wipeKey(n.id.bootKey); }
  } wipe{note};
  if (me == leader) {
    auto id = startDetachedRoot();
    if (!id.ok()) return id.status().Wrap(h.call + ": starting the rendezvous");
    note.nranks = nmembers;
    note.excluded = h.digest;
    note.id = *id;
    core::wipeKey(id->bootKey);
    for (int r : h.members) {
      if (r == me) continue;
      if (Status s = parent.sendShrinkNote(r, h.serial, note, d); !s.ok()) return s.Wrap(h.call);
    }
  } else {
    auto got = parent.takeShrinkNote(h.digest, h.serial, leader, d);
    if (!got.ok()) return got.status().Wrap(h.call);
    note = *got;
    core::wipeKey(got->id.bootKey);
    if (note.nranks != nmembers || note.excluded != h.digest)
      return Status(Errc::kInvalidUsage, h.call + ": rank " + std::to_string(leader) + " leaves " +
                                             std::to_string(note.nranks) + " ranks, this rank " +
                                             std::to_string(nmembers) + ": " + h.mismatch);
  }
  return note.id;  // a copy: `note` itself is wiped on the way out
}

}  // namespace reccl::api
