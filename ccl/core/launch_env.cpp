#include "core/launch_env.h"

#include <cstdlib>

#include "reccl/common/params.h"

namespace reccl::core {
namespace {

Result<int> parseInt(const EnvLookup& env, const char* name, int lo, int hi) {
  const char* v = env(name);
  if (!v || !*v) return Status(Errc::kNotFound, std::string(name) + " is not set");
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < lo || x > hi)
    return Status(Errc::kInvalidArgument, std::string(name) + "=" + v + " is not a valid number");
  return static_cast<int>(x);
}

struct Source {
  const char* name;
  const char* rank;
  const char* size;
  const char* localRank;
  const char* localSize;
};

constexpr Source kSources[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"ompi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
};

}  // namespace

uint64_t fnv1a64(const std::string& s) noexcept {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

Result<LaunchEnv> parseLaunchEnv(const EnvLookup& env) {
  LaunchEnv out;
  const Source* src = nullptr;
  for (const auto& s : kSources) {
    const char* r = env(s.rank);
    if (r && *r) {
      src = &s;
      break;
    }
  }
  if (!src)
    return Status(Errc::kNotFound,
                  "no launcher environment: set RANK/WORLD_SIZE (torchrun), OMPI_COMM_WORLD_*, PMI_* or SLURM_*");
  out.source = src->name;
  RECCL_ASSIGN_OR_RETURN(out.nranks, parseInt(env, src->size, 1, 1 << 16));
  RECCL_ASSIGN_OR_RETURN(out.rank, parseInt(env, src->rank, 0, out.nranks - 1));
  if (auto lr = parseInt(env, src->localRank, 0, out.nranks - 1); lr.ok()) out.localRank = *lr;
  if (auto ls = parseInt(env, src->localSize, 1, out.nranks); ls.ok()) out.localNranks = *ls;

  const char* commId = env("RECCL_COMM_ID");
  std::string portText;
  if (commId && *commId) {
    std::string s(commId);
    auto colon = s.rfind(':');
    if (colon == std::string::npos || colon == 0)
      return Status(Errc::kInvalidArgument, "RECCL_COMM_ID=" + s + " is not host:port");
    out.rootHost = s.substr(0, colon);
    portText = s.substr(colon + 1);
  } else {
    const char* a = env("MASTER_ADDR");
    const char* p = env("MASTER_PORT");
    if (!a || !*a || !p || !*p)
      return Status(Errc::kNotFound, "no rendezvous address: set MASTER_ADDR and MASTER_PORT, or RECCL_COMM_ID=host:port");
    out.rootHost = a;
    portText = p;
  }
  char* end = nullptr;
  long port = std::strtol(portText.c_str(), &end, 10);
  if (portText.empty() || *end != '\0' || port < 1 || port > 65535)
    return Status(Errc::kInvalidArgument, "rendezvous port " + portText + " is not a valid port");
  out.rootPort = static_cast<uint16_t>(port);

  // Every rank must derive the same secret without talking to the others: an explicit
  // RECCL_JOB_SECRET, else the launcher's job identity. It keeps strays and other jobs out; it
  // is not a defence against someone who can read this job's environment.
  std::string material;
  if (const char* js = env("RECCL_JOB_SECRET"); js && *js) {
    material = js;
  } else {
    material = out.rootHost + ":" + portText + "/" + std::to_string(out.nranks);
    for (const char* id : {"TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "OMPI_MCA_orte_ess_jobid", "PMI_JOBID"})
      if (const char* v = env(id); v && *v) material += std::string("/") + v;
  }
  out.secret = fnv1a64("secret:" + material);
  out.commId = fnv1a64("comm:" + material);
  return out;
}

}  // namespace reccl::core
