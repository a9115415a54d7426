#include "api/pmix_rendezvous.h"

#ifdef RECCL_HAVE_PMIX
#include <dlfcn.h>
#include <pmix.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#endif

#include <string>
#include <vector>

namespace reccl::api {

#ifndef RECCL_HAVE_PMIX

Result<std::vector<std::string>> pmixShareRootAddresses(int, const std::vector<int>&, const std::string&, int64_t) {
  return Status(Errc::kInvalidUsage,
                "the launcher offers PMIx, but this libreccl was built without it (libpmix-dev): set RECCL_COMM_ID=host:port "
                "(a host every rank reaches, a free port) or MASTER_ADDR and MASTER_PORT");
}

#else

namespace {

constexpr const char* kLibName = "libpmix.so.2";

// The few entry points used, resolved once. The library stays loaded for the process's life:
// PMIx keeps threads of its own.
struct Pmix {
  decltype(&PMIx_Init) init = nullptr;
  decltype(&PMIx_Finalize) finalize = nullptr;
  decltype(&PMIx_Put) put = nullptr;
  decltype(&PMIx_Commit) commit = nullptr;
  decltype(&PMIx_Fence_nb) fenceNb = nullptr;
  decltype(&PMIx_Get) get = nullptr;
  decltype(&PMIx_Error_string) errorString = nullptr;
  decltype(&PMIx_Value_destruct) valueDestruct = nullptr;
  std::string loadError;
};

const Pmix& pmix() {
  static const Pmix lib = [] {
    Pmix p;
    // RTLD_GLOBAL: PMIx's own plugins resolve their symbols from it.
    void* h = dlopen(kLibName, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      const char* e = dlerror();
      p.loadError = e ? e : "dlopen failed";
      return p;
    }
    auto sym = [&](const char* name) {
      void* s = dlsym(h, name);
      if (!s && p.loadError.empty()) p.loadError = std::string("no symbol ") + name;
      return s;
    };
    p.init = reinterpret_cast<decltype(p.init)>(sym("PMIx_Init"));
    p.finalize = reinterpret_cast<decltype(p.finalize)>(sym("PMIx_Finalize"));
    p.put = reinterpret_cast<decltype(p.put)>(sym("PMIx_Put"));
    p.commit = reinterpret_cast<decltype(p.commit)>(sym("PMIx_Commit"));
    p.fenceNb = reinterpret_cast<decltype(p.fenceNb)>(sym("PMIx_Fence_nb"));
    p.get = reinterpret_cast<decltype(p.get)>(sym("PMIx_Get"));
    p.errorString = reinterpret_cast<decltype(p.errorString)>(sym("PMIx_Error_string"));
    p.valueDestruct = reinterpret_cast<decltype(p.valueDestruct)>(sym("PMIx_Value_destruct"));
    return p;
  }();
  return lib;
}

std::string pmixError(const Pmix& p, pmix_status_t rc) {
  const char* s = p.errorString ? p.errorString(rc) : nullptr;
  return std::string(s ? s : "unknown error") + " (" + std::to_string(rc) + ")";
}

// One fence's completion, shared with PMIx's callback: a fence that outlives its deadline
// completes into memory that is still there.
struct FenceWait {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  pmix_status_t status = PMIX_SUCCESS;
};

void fenceDone(pmix_status_t status, void* cbdata) {
  auto* held = static_cast<std::shared_ptr<FenceWait>*>(cbdata);
  {
    std::lock_guard lk((*held)->mu);
    (*held)->status = status;
    (*held)->done = true;
  }
  (*held)->cv.notify_all();
  delete held;
}

void setInfo(pmix_info_t* info, const char* key, pmix_data_type_t type) {
  std::memset(info, 0, sizeof(*info));
  std::strncpy(info->key, key, PMIX_MAX_KEYLEN);
  info->value.type = type;
}

// Each rendezvous of this process gets a key of its own; every rank runs them in the same order.
std::atomic<int> gRound{0};

}  // namespace

Result<std::vector<std::string>> pmixShareRootAddresses(int rank, const std::vector<int>& rootRanks,
                                                        const std::string& mine, int64_t timeoutMs) {
  const Pmix& p = pmix();
  if (!p.loadError.empty())
    return Status(Errc::kInvalidUsage, std::string("the launcher offers PMIx (PMIX_NAMESPACE is set), but ") + kLibName +
                                           " cannot be loaded: " + p.loadError +
                                           "; install libpmix2, or set RECCL_COMM_ID=host:port (or MASTER_ADDR and MASTER_PORT)");
  pmix_proc_t me;
  std::memset(&me, 0, sizeof me);
  if (pmix_status_t rc = p.init(&me, nullptr, 0); rc != PMIX_SUCCESS)
    return Status(Errc::kInvalidUsage, "PMIx_Init failed: " + pmixError(p, rc) +
                                           ": the launcher's PMIx server is not reachable; set RECCL_COMM_ID=host:port");
  // From here on every path finalizes (PMIx counts inits, so an application's own stays valid).
  struct Finalizer {
    const Pmix& p;
    bool armed = true;
    ~Finalizer() {
      if (armed) p.finalize(nullptr, 0);
    }
  } finalizer{p};
  // Without a server to reach, PMIx starts this process as a singleton of a namespace of its own.
  const char* launcherNs = std::getenv("PMIX_NAMESPACE");
  if (!launcherNs || std::strncmp(me.nspace, launcherNs, PMIX_MAX_NSLEN) != 0)
    return Status(Errc::kInvalidUsage, std::string("PMIx_Init reached no launcher (namespace ") + me.nspace +
                                           ", the environment says " + (launcherNs ? launcherNs : "none") +
                                           "): PMIX_SERVER_URI* is missing or stale; set RECCL_COMM_ID=host:port");
  if (static_cast<int64_t>(me.rank) != rank)
    return Status(Errc::kInvalidUsage, "PMIx says this process is rank " + std::to_string(me.rank) +
                                           " but the launcher's environment says " + std::to_string(rank));
  const std::string key = "reccl.bootstrap.root." + std::to_string(gRound.fetch_add(1));
  if (!mine.empty()) {
    pmix_value_t v;
    std::memset(&v, 0, sizeof v);
    v.type = PMIX_STRING;
    v.data.string = const_cast<char*>(mine.c_str());
    if (pmix_status_t rc = p.put(PMIX_GLOBAL, key.c_str(), &v); rc != PMIX_SUCCESS)
      return Status(Errc::kSystem, "PMIx_Put(" + key + ") failed: " + pmixError(p, rc));
    if (pmix_status_t rc = p.commit(); rc != PMIX_SUCCESS)
      return Status(Errc::kSystem, "PMIx_Commit failed: " + pmixError(p, rc));
  }
  pmix_proc_t all;
  std::memset(&all, 0, sizeof all);
  std::memcpy(all.nspace, me.nspace, sizeof all.nspace);
  all.rank = PMIX_RANK_WILDCARD;
  pmix_info_t info[2];
  setInfo(&info[0], PMIX_COLLECT_DATA, PMIX_BOOL);
  info[0].value.data.flag = true;
  setInfo(&info[1], PMIX_TIMEOUT, PMIX_INT);
  info[1].value.data.integer = static_cast<int>((timeoutMs + 999) / 1000);
  auto wait = std::make_shared<FenceWait>();
  auto* held = new std::shared_ptr<FenceWait>(wait);
  if (pmix_status_t rc = p.fenceNb(&all, 1, info, 2, fenceDone, held); rc != PMIX_SUCCESS) {
    delete held;
    return Status(Errc::kSystem, "PMIx_Fence_nb failed: " + pmixError(p, rc));
  }
  {
    std::unique_lock lk(wait->mu);
    if (!wait->cv.wait_for(lk, std::chrono::milliseconds(timeoutMs), [&] { return wait->done; })) {
      finalizer.armed = false;  // the fence is still out; finalizing would wait for it
      return Status(Errc::kTimeout, "PMIx fence of namespace " + std::string(me.nspace) + " did not complete within " +
                                        std::to_string(timeoutMs) + " ms (RECCL_BOOTSTRAP_TIMEOUT_MS): a rank never arrived");
    }
    if (wait->status != PMIX_SUCCESS)
      return Status(Errc::kPeerFailure, "PMIx fence failed: " + pmixError(p, wait->status));
  }
  std::vector<std::string> out;
  for (int r : rootRanks) {
    if (r == rank) {
      out.push_back(mine);
      continue;
    }
    pmix_proc_t root;
    std::memset(&root, 0, sizeof root);
    std::memcpy(root.nspace, me.nspace, sizeof root.nspace);
    root.rank = static_cast<pmix_rank_t>(r);
    pmix_value_t* val = nullptr;
    if (pmix_status_t rc = p.get(&root, key.c_str(), nullptr, 0, &val); rc != PMIX_SUCCESS || !val)
      return Status(Errc::kPeerFailure, "PMIx_Get(" + key + ") of rank " + std::to_string(r) + " failed: " + pmixError(p, rc));
    const bool isString = val->type == PMIX_STRING && val->data.string;
    if (isString) out.emplace_back(val->data.string);
    p.valueDestruct(val);
    std::free(val);
    if (!isString) return Status(Errc::kProtocol, "PMIx: rank " + std::to_string(r) + "'s " + key + " is not a string");
  }
  return out;
}

#endif

}  // namespace reccl::api
