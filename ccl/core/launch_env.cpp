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
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},  // local size: slurmLocalSize
};

const char* nonEmpty(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  return v && *v ? v : nullptr;
}

// Tasks of this step on this node: srun's SLURM_STEP_TASKS_PER_NODE (the job's
// SLURM_TASKS_PER_NODE outside a step) at SLURM_NODEID; SLURM_NTASKS_PER_NODE (set only when
// asked for) as a last resort. -1: not known.
Result<int> slurmLocalSize(const EnvLookup& env, int nranks) {
  for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    const char* list = nonEmpty(env, name);
    if (!list) continue;
    auto node = parseInt(env, "SLURM_NODEID", 0, 1 << 20);
    if (!node.ok()) {
      if (node.status().code() == Errc::kNotFound) return -1;
      return node.status();
    }
    auto n = tasksOnNode(list, *node);
    if (!n.ok()) return Status(Errc::kInvalidUsage, std::string(name) + "=" + list + ": " + n.status().message());
    if (*n < 1 || *n > nranks)
      return Status(Errc::kInvalidUsage, std::string(name) + "=" + list + " gives node " + std::to_string(*node) + " " +
                                             std::to_string(*n) + " tasks, not in [1, " + std::to_string(nranks) + "]");
    return *n;
  }
  if (auto n = parseInt(env, "SLURM_NTASKS_PER_NODE", 1, nranks); n.ok()) return *n;
  return -1;
}

Result<long> parsePort(const std::string& text, const std::string& from) {
  char* end = nullptr;
  long port = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || port < 1 || port > 65535)
    return Status(Errc::kInvalidUsage, from + ": rendezvous port " + text + " is not a port number in [1, 65535]");
  return port;
}

}  // namespace

Result<std::string> firstHostOfNodeList(const std::string& list) {
  // The first entry ends at the first comma outside brackets; in it, each bracket expression
  // ("[07-09,11]") is replaced by its first number, zero padding kept.
  std::string out;
  size_t i = 0;
  while (i < list.size() && list[i] != ',') {
    char c = list[i];
    if (c == ']') return Status(Errc::kInvalidArgument, "unbalanced ']' in node list '" + list + "'");
    if (c != '[') {
      out += c;
      ++i;
      continue;
    }
    size_t close = list.find(']', i);
    if (close == std::string::npos) return Status(Errc::kInvalidArgument, "unbalanced '[' in node list '" + list + "'");
    std::string first = list.substr(i + 1, close - i - 1);
    first = first.substr(0, first.find_first_of(",-"));
    if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos)
      return Status(Errc::kInvalidArgument, "bracket of node list '" + list + "' does not start with a number");
    out += first;
    i = close + 1;
  }
  if (out.empty()) return Status(Errc::kInvalidArgument, "node list '" + list + "' names no host");
  return out;
}

Result<int> tasksOnNode(const std::string& list, int nodeIndex) {
  // Comma-separated "N" or "N(xM)" (N tasks on each of M nodes).
  long node = 0;
  size_t i = 0;
  while (i < list.size()) {
    size_t end = list.find(',', i);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(i, end - i);
    long tasks = 0, repeat = 1;
    char* p = nullptr;
    errno = 0;
    tasks = std::strtol(item.c_str(), &p, 10);
    if (p == item.c_str() || errno == ERANGE || tasks < 0)
      return Status(Errc::kInvalidArgument, "'" + item + "' is not a task count");
    if (*p == '(') {
      if (p[1] != 'x') return Status(Errc::kInvalidArgument, "'" + item + "' is not N(xM)");
      char* q = nullptr;
      repeat = std::strtol(p + 2, &q, 10);
      if (q == p + 2 || *q != ')' || q[1] != '\0' || repeat < 1)
        return Status(Errc::kInvalidArgument, "'" + item + "' is not N(xM)");
    } else if (*p != '\0') {
      return Status(Errc::kInvalidArgument, "'" + item + "' is not a task count");
    }
    if (nodeIndex < node + repeat) return static_cast<int>(tasks);
    node += repeat;
    i = end + 1;
  }
  return Status(Errc::kInvalidArgument, "node " + std::to_string(nodeIndex) + " is past the " + std::to_string(node) +
                                            " nodes it describes");
}

uint16_t torchrunAgentStorePort(const std::string& masterAddr, const std::string& masterPort, const std::string& runId,
                                const std::string& restart) noexcept {
  return static_cast<uint16_t>(20000 + fnv1a64("torchrun:" + masterAddr + ":" + masterPort + "/" + runId + "/" + restart) %
                                           10000);
}

uint16_t slurmStepPort(const std::string& jobId, const std::string& stepId) noexcept {
  return static_cast<uint16_t>(20000 + fnv1a64("slurm-step:" + jobId + "." + stepId) % 10000);
}

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
  if (src->localSize) {
    if (auto ls = parseInt(env, src->localSize, 1, out.nranks); ls.ok()) out.localNranks = *ls;
  } else {
    RECCL_ASSIGN_OR_RETURN(out.localNranks, slurmLocalSize(env, out.nranks));
  }

  std::string portText;
  if (const char* commId = nonEmpty(env, "RECCL_COMM_ID")) {
    std::string s(commId);
    auto colon = s.rfind(':');
    if (colon == std::string::npos || colon == 0)
      return Status(Errc::kInvalidUsage, "RECCL_COMM_ID=" + s + " is not host:port");
    out.rootHost = s.substr(0, colon);
    portText = s.substr(colon + 1);
    out.addressFrom = "RECCL_COMM_ID";
  } else {
    std::string hostFrom, portFrom;
    if (const char* a = nonEmpty(env, "MASTER_ADDR")) {
      out.rootHost = a;
      hostFrom = "MASTER_ADDR";
    }
    if (const char* p = nonEmpty(env, "MASTER_PORT")) {
      portText = p;
      portFrom = "MASTER_PORT";
    }
    // The tasks of an srun step (Slurm's own, or PMI ones srun started): task 0 runs on the
    // step's first node; the port comes from the job and step ids every task sees alike.
    const char* nodeList = nullptr;
    const char* listName = nullptr;
    if (out.source == "slurm" || (out.source == "pmi" && nonEmpty(env, "SLURM_STEP_ID"))) {
      for (const char* n : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})
        if ((nodeList = nonEmpty(env, n))) {
          listName = n;
          break;
        }
    }
    if (out.rootHost.empty() && nodeList) {
      auto first = firstHostOfNodeList(nodeList);
      if (!first.ok()) return Status(Errc::kInvalidUsage, std::string(listName) + ": " + first.status().message());
      out.rootHost = *first;
      hostFrom = listName;
      const char* me = nonEmpty(env, "SLURMD_NODENAME");
      if (out.rank == 0 && me && out.rootHost != me)
        return Status(Errc::kInvalidUsage, "task 0 runs on " + std::string(me) + ", not on the step's first node " +
                                               out.rootHost + " (" + listName + "=" + nodeList +
                                               "): set MASTER_ADDR to task 0's host, or RECCL_COMM_ID=host:port");
    }
    // torchrun's agent serves its own store at MASTER_PORT when it tells its workers to use it
    // (static rendezvous; every rendezvous in later PyTorch): rank 0 cannot bind that port, so
    // the port comes from what every worker of this run sees alike.
    const char* agentStore = nonEmpty(env, "TORCHELASTIC_USE_AGENT_STORE");
    if (out.source == "torchrun" && portFrom == "MASTER_PORT" && agentStore && std::string(agentStore) == "True") {
      const char* run = nonEmpty(env, "TORCHELASTIC_RUN_ID");
      const char* restart = nonEmpty(env, "TORCHELASTIC_RESTART_COUNT");
      portText = std::to_string(torchrunAgentStorePort(out.rootHost, portText, run ? run : "", restart ? restart : ""));
      portFrom = "MASTER_PORT (torchrun's agent store holds it; derived from it)";
    }
    const char* jobId = nonEmpty(env, "SLURM_JOB_ID");
    if (portText.empty() && nodeList && jobId) {
      const char* step = nonEmpty(env, "SLURM_STEP_ID");
      portText = std::to_string(slurmStepPort(jobId, step ? step : ""));
      portFrom = "SLURM_JOB_ID/SLURM_STEP_ID";
    }
    if (out.rootHost.empty() && portText.empty() && nonEmpty(env, "PMIX_NAMESPACE") && nonEmpty(env, "PMIX_RANK")) {
      out.rendezvous = Rendezvous::kPmix;
      out.addressFrom = "PMIx";
    } else if (out.rootHost.empty() || portText.empty()) {
      std::string what = out.rootHost.empty() && portText.empty() ? "no rendezvous address"
                         : out.rootHost.empty() ? portFrom + " is set but no host is: set MASTER_ADDR"
                                                : hostFrom + " is set but no port is: set MASTER_PORT";
      return Status(Errc::kInvalidUsage,
                    what + " for " + out.source +
                        " ranks: set MASTER_ADDR and MASTER_PORT, or RECCL_COMM_ID=host:port (a host every rank reaches, "
                        "a free port); srun (SLURM_STEP_NODELIST, SLURM_JOB_ID) and PMIx launchers such as mpirun "
                        "(PMIX_NAMESPACE) need neither");
    } else {
      out.addressFrom = hostFrom == portFrom ? hostFrom : hostFrom + " and " + portFrom;
    }
  }
  if (out.rendezvous == Rendezvous::kAddress) {
    RECCL_ASSIGN_OR_RETURN(long port, parsePort(portText, out.addressFrom));
    out.rootPort = static_cast<uint16_t>(port);
  }

  // Every rank derives the same job id without talking to the others: the rendezvous address,
  // the world size and whatever job identity the launcher gives. It tells jobs apart; the
  // secret, when there is one, is what keeps others out.
  std::string material = (out.rendezvous == Rendezvous::kPmix ? std::string("pmix") : out.rootHost + ":" + portText) +
                         "/" + std::to_string(out.nranks);
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
