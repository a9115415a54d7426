#include "core/launch_env.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "reccl/common/params.h"
#include "reccl/common/unique_fd.h"

namespace reccl::core {
namespace {

Result<int> parseInt(const EnvLookup& env, const char* name, int lo, int hi) {
  const char* v = env(name);
  if (!v || !*v) return Status(Errc::kNotFound, std::string(name) + " is not set");
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || end == v || errno == ERANGE)
    return Status(Errc::kInvalidUsage, std::string(name) + "=" + v + " is not a whole number");
  if (x < lo || x > hi)
    return Status(Errc::kInvalidUsage, std::string(name) + "=" + v + " is out of range [" + std::to_string(lo) + ", " +
                                           std::to_string(hi) + "]");
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
    return Status(Errc::kInvalidUsage,
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
      return Status(Errc::kInvalidUsage, "RECCL_COMM_ID=" + s + " is not host:port");
    out.rootHost = s.substr(0, colon);
    portText = s.substr(colon + 1);
  } else {
    const char* a = env("MASTER_ADDR");
    const char* p = env("MASTER_PORT");
    if (!a || !*a || !p || !*p)
      return Status(Errc::kInvalidUsage,
                    "no rendezvous address: set MASTER_ADDR and MASTER_PORT, or RECCL_COMM_ID=host:port");
    out.rootHost = a;
    portText = p;
  }
  char* end = nullptr;
  long port = std::strtol(portText.c_str(), &end, 10);
  if (portText.empty() || *end != '\0' || port < 1 || port > 65535)
    return Status(Errc::kInvalidUsage, "rendezvous port " + portText + " is not a port number in [1, 65535]");
  out.rootPort = static_cast<uint16_t>(port);

  // Every rank derives the same job id without talking to the others: the rendezvous address,
  // the world size and whatever job identity the launcher gives. It tells jobs apart; the
  // secret, when there is one, is what keeps others out.
  std::string material = out.rootHost + ":" + portText + "/" + std::to_string(out.nranks);
  for (const char* id : {"TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "SLURM_JOB_ID", "SLURM_STEP_ID",
                         "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid", "PMI_JOBID"})
    if (const char* v = env(id); v && *v) material += std::string("/") + id + "=" + v;
  out.jobId = fnv1a64("job:" + material);

  const char* inline_ = env("RECCL_JOB_SECRET");
  const char* file = env("RECCL_JOB_SECRET_FILE");
  if (inline_ && *inline_ && file && *file)
    return Status(Errc::kInvalidUsage, "RECCL_JOB_SECRET and RECCL_JOB_SECRET_FILE are both set: set one");
  std::string secret;
  if (inline_ && *inline_) {
    secret = inline_;
    out.secretFrom = "RECCL_JOB_SECRET";
  } else if (file && *file) {
    auto s = readJobSecretFile(file);
    if (!s.ok()) return Status(Errc::kInvalidUsage, "RECCL_JOB_SECRET_FILE=" + std::string(file) + ": " + s.status().message());
    secret = std::move(s).value();
    out.secretFrom = "RECCL_JOB_SECRET_FILE";
  }
  if (!secret.empty()) {
    out.bootKey = deriveJobKey(std::as_bytes(std::span(secret.data(), secret.size())));
    std::fill(secret.begin(), secret.end(), '\0');
  }
  return out;
}

Result<std::string> readJobSecretFile(const std::string& path) {
  // O_NONBLOCK: a FIFO in its place must not hang the rank in open().
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) return Status::FromErrno(errno, "cannot open");
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return Status::FromErrno(errno, "cannot stat");
  if (!S_ISREG(st.st_mode)) return Status(Errc::kInvalidArgument, "not a regular file");
  if (st.st_uid != geteuid()) return Status(Errc::kPermission, "not owned by this user (uid " + std::to_string(geteuid()) + ")");
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    char mode[8];
    snprintf(mode, sizeof(mode), "%03o", st.st_mode & 0777);
    return Status(Errc::kPermission, std::string("its group or others have access (mode ") + mode + "): chmod 600 it");
  }
  if (st.st_size < 1 || st.st_size > 4096) return Status(Errc::kInvalidArgument, "must hold 1 B to 4 KiB");
  std::string s(static_cast<size_t>(st.st_size), '\0');
  ssize_t n = pread(fd.get(), s.data(), s.size(), 0);
  if (n != st.st_size) return Status::FromErrno(n < 0 ? errno : EIO, "cannot read");
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  if (s.empty()) return Status(Errc::kInvalidArgument, "holds only a newline");
  return s;
}

}  // namespace reccl::core
