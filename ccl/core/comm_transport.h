// Which transport carries a communicator's traffic between hosts (RECCL_TRANSPORT,
// docs/verbs.md): each rank puts its RDMA report in its rank info at bootstrap
// (fillTransportReport), and every rank decides alike from the rank table (chooseTransport).
// Without the verbs transport built (no libibverbs-dev), auto means sockets and verbs is an error.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/wire.h"
#include "reccl/common/status.h"
#include "transport/path_factory.h"

namespace reccl::core {

inline constexpr uint8_t kTransportAuto = 0, kTransportVerbs = 1, kTransportSocket = 2;

// RECCL_TRANSPORT into `info->transport`; with auto or verbs, whether every one of `nics`
// (this rank's rails) maps to an ACTIVE RDMA port (`rdmaReady`, else `rdmaWhy`). Errors: a bad
// RECCL_TRANSPORT value, naming it.
Status fillTransportReport(RankInfo* info, const std::vector<NicInfo>& nics);

struct TransportChoice {
  bool verbs = false;
  std::string why;  // one line for the INFO log
};
// Pure: rank 0's RECCL_TRANSPORT over every rank's report. auto: verbs when every rank is ready,
// else sockets (why names the first rank that is not, and its rail); verbs: kUnsupported naming
// that rank and rail; socket: sockets.
Result<TransportChoice> chooseTransport(const std::vector<RankInfo>& table);

// The verbs path factory over this rank's rails (`nics`, index = rail), with `tcp` as its side
// channel (outlives it). kUnsupported without the verbs transport built.
Result<std::unique_ptr<transport::PathFactory>> makeVerbsPaths(transport::PathFactory* tcp,
                                                               const std::vector<NicInfo>& nics);

}  // namespace reccl::core
