// ncclNetPlugin_v8: the table NCCL looks up in libnccl-net-reccl.so (NCCL_NET_PLUGIN=reccl).
// Each entry point turns the plugin's Status results into NCCL's codes and logs the reason
// through NCCL's logger; nothing throws across the boundary.
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "nccl_net_abi.h"
#include "net_conn.h"
#include "net_device.h"
#include "reccl/common/log.h"
#include "reccl/common/params.h"
#include "reccl/nccl_net_plugin.h"

namespace reccl::nccl_net {
namespace {

static_assert(sizeof(recclUniqueId) == NCCL_NET_HANDLE_MAXSIZE, "a listen handle is a reccl unique id");

struct PluginState {
  std::atomic<ncclDebugLogger_t> logger{nullptr};  // read by every failure's log line
  std::mutex mu;                                  // guards what follows
  std::vector<NetDevice> devices;  // after init
  // connect() is called again until it returns a comm, with the same handle: the handle is
  // wholly the unique id, so a pending connection is found by the handle's address.
  struct Connecting {
    recclUniqueId id;
    std::unique_ptr<NetConn> conn;
    std::chrono::steady_clock::time_point polled;
  };
  std::map<const void*, Connecting> connecting;
};

// NCCL polls a connect it waits for without pause and stops when it aborts, freeing the handle:
// a pending connect not polled for this long is one it gave up.
constexpr auto kAbandonedConnect = std::chrono::seconds(10);

PluginState& plugin() {
  static PluginState* s = new PluginState;  // outlives NCCL's calls at exit
  return *s;
}

void logLine(ncclDebugLogLevel level, const std::string& text) {
  ncclDebugLogger_t logger = plugin().logger.load();
  if (logger) logger(level, NCCL_NET, __FILE__, __LINE__, "%s", text.c_str());
  else if (level <= NCCL_LOG_WARN) std::fprintf(stderr, "NET/reccl: %s\n", text.c_str());
}

ncclResult_t ncclCodeOf(Errc e) {
  switch (e) {
    case Errc::kOk: return ncclSuccess;
    case Errc::kPeerFailure:
    case Errc::kLinkFailure:
    case Errc::kProtocol:
    case Errc::kTimeout: return ncclRemoteError;
    case Errc::kInvalidArgument: return ncclInvalidArgument;
    case Errc::kInvalidUsage: return ncclInvalidUsage;
    case Errc::kSystem:
    case Errc::kPermission:
    case Errc::kNotFound: return ncclSystemError;
    default: return ncclInternalError;
  }
}

ncclResult_t failed(const char* call, const Status& why) {
  logLine(NCCL_LOG_WARN, std::string("NET/reccl: ") + call + ": " + why.ToString());
  return ncclCodeOf(why.code());
}

// Every entry point runs inside: nothing throws across the C boundary, not even while the
// failure is being reported (that path allocates too).
template <typename F>
ncclResult_t guarded(const char* call, F&& f) noexcept {
  try {
    try {
      return f();
    } catch (const std::bad_alloc&) {
      return failed(call, Status(Errc::kSystem, "out of memory"));
    } catch (const std::exception& e) {
      return failed(call, Status(Errc::kInternal, e.what()));
    }
  } catch (...) {
    if (ncclDebugLogger_t logger = plugin().logger.load())
      logger(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, "NET/reccl: %s: failed, and reporting why failed too", call);
    return ncclInternalError;
  }
}

struct ListenComm {
  recclUniqueId id;
  std::string homeNic;  // its device's (per-NIC devices)
  std::unique_ptr<NetConn> accepting;
};

// Device `dev`, or why there is none; plugin().mu held.
Result<const NetDevice*> deviceLocked(int dev) {
  const auto& ds = plugin().devices;
  if (dev < 0 || static_cast<size_t>(dev) >= ds.size())
    return Status(Errc::kInvalidArgument, "no device " + std::to_string(dev) + " (the plugin has " +
                                              std::to_string(ds.size()) + " after init, from 0)");
  return &ds[static_cast<size_t>(dev)];
}

// Device `dev`'s home NIC ("" for the fused device), or why there is no such device.
Result<std::string> homeNicOf(int dev) {
  std::lock_guard lk(plugin().mu);
  RECCL_ASSIGN_OR_RETURN(const NetDevice* d, deviceLocked(dev));
  return d->homeNic;
}

// Host memory needs no registration here (reccl copies through its own registered slots): every
// region gets this one non-null handle, which NCCL hands back and nothing reads.
char registeredHostMemory;

NetConn* connOf(void* comm, NetConn::Role role) {
  auto* c = static_cast<NetConn*>(comm);
  return c && c->role() == role ? c : nullptr;
}

ncclResult_t netInit(ncclDebugLogger_t logger) {
  return guarded("init", [&] {
    plugin().logger.store(logger);
    // reccl's own lines go to NCCL's log too (RECCL_DEBUG still picks which).
    if (logger) {
      logSetSink([logger](LogLevel level, std::string_view line) {
        auto from = line.find("reccl ");
        std::string text(from == std::string_view::npos ? line : line.substr(from));
        ncclDebugLogLevel l = level == LogLevel::kWarn ? NCCL_LOG_WARN
                              : level == LogLevel::kTrace ? NCCL_LOG_TRACE
                              : level == LogLevel::kVersion ? NCCL_LOG_VERSION
                                                            : NCCL_LOG_INFO;
        logger(l, NCCL_NET, __FILE__, __LINE__, "%s", text.c_str());
      });
    }
    auto ds = discoverDevices();
    if (!ds.ok()) return failed("init", ds.status());
    std::string names;
    for (const auto& d : *ds) names += (names.empty() ? "" : ", ") + d.name + " " + std::to_string(d.speedMbps) + " Mbit/s";
    logLine(NCCL_LOG_INFO, "NET/reccl: " + std::to_string(ds->size()) + " device(s) (RECCL_NET_DEVICES=" +
                               params::NetDevices() + "): " + names + "; each connection fails over across the NICs");
    std::lock_guard lk(plugin().mu);
    plugin().devices = std::move(*ds);
    return ncclSuccess;
  });
}

ncclResult_t netDevices(int* ndev) {
  return guarded("devices", [&] {
    if (!ndev) return failed("devices", Status(Errc::kInvalidArgument, "ndev: null pointer"));
    std::lock_guard lk(plugin().mu);
    *ndev = static_cast<int>(plugin().devices.size());
    return ncclSuccess;
  });
}

ncclResult_t netGetProperties(int dev, ncclNetProperties_v8_t* props) {
  return guarded("getProperties", [&] {
    if (!props) return failed("getProperties", Status(Errc::kInvalidArgument, "props: null pointer"));
    std::lock_guard lk(plugin().mu);
    auto found = deviceLocked(dev);
    if (!found.ok()) return failed("getProperties", found.status());
    const NetDevice& d = **found;
    std::memset(props, 0, sizeof(*props));
    // NCCL keeps the pointers: they hold until the next init (NCCL calls it once).
    props->name = const_cast<char*>(d.name.c_str());
    props->pciPath = d.pciPath.empty() ? nullptr : const_cast<char*>(d.pciPath.c_str());
    props->guid = static_cast<uint64_t>(dev);
    props->ptrSupport = NCCL_PTR_HOST;
    props->regIsGlobal = 0;
    props->speed = d.speedMbps;
    props->port = 1;
    props->latency = 0;
    props->maxComms = 65536;
    props->maxRecvs = 1;
    props->netDeviceType = NCCL_NET_DEVICE_HOST;
    props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
    return ncclSuccess;
  });
}

ncclResult_t netListen(int dev, void* handle, void** listenComm) {
  return guarded("listen", [&] {
    if (!handle || !listenComm) return failed("listen", Status(Errc::kInvalidArgument, "handle or listenComm: null pointer"));
    auto home = homeNicOf(dev);
    if (!home.ok()) return failed("listen", home.status());
    auto lc = std::make_unique<ListenComm>();
    lc->homeNic = *home;
    recclResult_t r = recclGetUniqueId(&lc->id);
    if (r != recclSuccess)
      return failed("listen", Status(Errc::kSystem, std::string("reccl unique id: ") + recclGetLastError(nullptr)));
    std::memcpy(handle, &lc->id, sizeof(lc->id));
    *listenComm = lc.release();
    return ncclSuccess;
  });
}

// Starts or polls one side of a connection: *comm stays NULL until it is made.
ncclResult_t pollConn(const char* call, std::unique_ptr<NetConn>& conn, void** comm) {
  auto ready = conn->ready();
  if (!ready.ok()) {
    conn.reset();
    return failed(call, ready.status());
  }
  if (*ready) *comm = conn.release();
  return ncclSuccess;
}

ncclResult_t netConnect(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v8_t** /*sendDevComm*/) {
  return guarded("connect", [&] {
    if (!handle || !sendComm) return failed("connect", Status(Errc::kInvalidArgument, "handle or sendComm: null pointer"));
    *sendComm = nullptr;
    auto home = homeNicOf(dev);
    if (!home.ok()) return failed("connect", home.status());
    std::unique_ptr<NetConn> conn;
    std::vector<std::unique_ptr<NetConn>> abandoned;  // ended outside the lock
    const auto now = std::chrono::steady_clock::now();
    {
      std::lock_guard lk(plugin().mu);
      auto& pending = plugin().connecting;
      auto it = pending.find(handle);
      if (it != pending.end()) {
        // The same address with other bytes: a handle NCCL freed and reused, its connect abandoned.
        if (std::memcmp(&it->second.id, handle, sizeof(recclUniqueId)) == 0) conn = std::move(it->second.conn);
        else abandoned.push_back(std::move(it->second.conn));
        pending.erase(it);
      }
      for (auto p = pending.begin(); p != pending.end();) {
        if (now - p->second.polled < kAbandonedConnect) {
          ++p;
          continue;
        }
        abandoned.push_back(std::move(p->second.conn));
        p = pending.erase(p);
      }
    }
    abandoned.clear();
    if (!conn) {
      recclUniqueId id;
      std::memcpy(&id, handle, sizeof(id));
      auto started = NetConn::start(NetConn::Role::kSend, id, *home);
      if (!started.ok()) return failed("connect", started.status());
      conn = std::move(*started);
    }
    ncclResult_t r = pollConn("connect", conn, sendComm);
    if (conn) {
      std::lock_guard lk(plugin().mu);
      auto& slot = plugin().connecting[handle];
      std::memcpy(&slot.id, handle, sizeof(recclUniqueId));
      slot.conn = std::move(conn);
      slot.polled = now;
    }
    return r;
  });
}

ncclResult_t netAccept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v8_t** /*recvDevComm*/) {
  return guarded("accept", [&] {
    auto* lc = static_cast<ListenComm*>(listenComm);
    if (!lc || !recvComm) return failed("accept", Status(Errc::kInvalidArgument, "listenComm or recvComm: null pointer"));
    *recvComm = nullptr;
    if (!lc->accepting) {
      auto started = NetConn::start(NetConn::Role::kRecv, lc->id, lc->homeNic);
      if (!started.ok()) return failed("accept", started.status());
      lc->accepting = std::move(*started);
    }
    return pollConn("accept", lc->accepting, recvComm);
  });
}

ncclResult_t netRegMr(void* comm, void* /*data*/, size_t /*size*/, int type, void** mhandle) {
  return guarded("regMr", [&] {
    if (!comm || !mhandle) return failed("regMr", Status(Errc::kInvalidArgument, "comm or mhandle: null pointer"));
    if (type != NCCL_PTR_HOST)
      return failed("regMr", Status(Errc::kInvalidArgument, "memory of type " + std::to_string(type) +
                                                                " (the plugin takes host memory only, NCCL_PTR_HOST)"));
    *mhandle = &registeredHostMemory;
    return ncclSuccess;
  });
}

ncclResult_t netRegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) {
  return guarded("regMrDmaBuf", [] {
    return failed("regMrDmaBuf", Status(Errc::kUnsupported, "dma-buf memory is not supported (host memory only)"));
  });
}

ncclResult_t netDeregMr(void* /*comm*/, void* /*mhandle*/) { return ncclSuccess; }

ncclResult_t netIsend(void* sendComm, void* data, int size, int tag, void* /*mhandle*/, void** request) {
  return guarded("isend", [&] {
    NetConn* c = connOf(sendComm, NetConn::Role::kSend);
    if (!c || !request) return failed("isend", Status(Errc::kInvalidArgument, "not a send comm, or request: null pointer"));
    if (size < 0 || (size > 0 && !data))
      return failed("isend", Status(Errc::kInvalidArgument, "size " + std::to_string(size) + " with data " +
                                                                (data ? "set" : "null")));
    auto r = c->post(data, static_cast<size_t>(size), tag);
    if (!r.ok()) return failed("isend", r.status());
    *request = *r;
    return ncclSuccess;
  });
}

ncclResult_t netIrecv(void* recvComm, int n, void** data, int* sizes, int* tags, void** /*mhandles*/, void** request) {
  return guarded("irecv", [&] {
    NetConn* c = connOf(recvComm, NetConn::Role::kRecv);
    if (!c || !request || !sizes || !tags || !data)
      return failed("irecv", Status(Errc::kInvalidArgument, "not a receive comm, or a null pointer argument"));
    if (n != 1)
      return failed("irecv", Status(Errc::kInvalidArgument, std::to_string(n) +
                                                                " grouped receives (the device offers maxRecvs 1)"));
    if (sizes[0] < 0 || (sizes[0] > 0 && !data[0]))
      return failed("irecv", Status(Errc::kInvalidArgument, "size " + std::to_string(sizes[0]) + " with data " +
                                                                (data[0] ? "set" : "null")));
    auto r = c->post(data[0], static_cast<size_t>(sizes[0]), tags[0]);
    if (!r.ok()) return failed("irecv", r.status());
    *request = *r;
    return ncclSuccess;
  });
}

ncclResult_t netIflush(void*, int, void**, int*, void**, void** request) {
  // Only receives into GPU memory need a flush (NCCL asks for one only with GPU Direct), and the
  // device takes host memory only.
  if (request) *request = nullptr;
  return guarded("iflush", [] {
    return failed("iflush", Status(Errc::kInvalidUsage, "no flush for host memory (the device takes host memory only)"));
  });
}

ncclResult_t netTest(void* request, int* done, int* sizes) {
  return guarded("test", [&] {
    auto* req = static_cast<NetRequest*>(request);
    if (!req || !done) return failed("test", Status(Errc::kInvalidArgument, "request or done: null pointer"));
    size_t bytes = 0;
    auto r = req->conn->test(req, &bytes);
    if (!r.ok()) return failed("test", r.status());
    *done = *r ? 1 : 0;
    if (*r && sizes) sizes[0] = static_cast<int>(bytes);
    return ncclSuccess;
  });
}

ncclResult_t netCloseSend(void* sendComm) {
  return guarded("closeSend", [&] {
    delete connOf(sendComm, NetConn::Role::kSend);
    return ncclSuccess;
  });
}

ncclResult_t netCloseRecv(void* recvComm) {
  return guarded("closeRecv", [&] {
    delete connOf(recvComm, NetConn::Role::kRecv);
    return ncclSuccess;
  });
}

ncclResult_t netCloseListen(void* listenComm) {
  return guarded("closeListen", [&] {
    delete static_cast<ListenComm*>(listenComm);
    return ncclSuccess;
  });
}

ncclResult_t netGetDeviceMr(void*, void*, void**) {
  return guarded("getDeviceMr", [] {
    return failed("getDeviceMr", Status(Errc::kUnsupported, "no device offload (netDeviceType is host)"));
  });
}

ncclResult_t netIrecvConsumed(void*, int, void*) { return ncclSuccess; }

}  // namespace
}  // namespace reccl::nccl_net

extern "C" {

// Not const: NCCL declares it as a writable object it reads through dlsym.
__attribute__((visibility("default"))) ncclNet_v8_t ncclNetPlugin_v8 = {
    "reccl",
    reccl::nccl_net::netInit,
    reccl::nccl_net::netDevices,
    reccl::nccl_net::netGetProperties,
    reccl::nccl_net::netListen,
    reccl::nccl_net::netConnect,
    reccl::nccl_net::netAccept,
    reccl::nccl_net::netRegMr,
    reccl::nccl_net::netRegMrDmaBuf,
    reccl::nccl_net::netDeregMr,
    reccl::nccl_net::netIsend,
    reccl::nccl_net::netIrecv,
    reccl::nccl_net::netIflush,
    reccl::nccl_net::netTest,
    reccl::nccl_net::netCloseSend,
    reccl::nccl_net::netCloseRecv,
    reccl::nccl_net::netCloseListen,
    reccl::nccl_net::netGetDeviceMr,
    reccl::nccl_net::netIrecvConsumed,
};

__attribute__((visibility("default"))) int recclNetCommStats(void* comm, recclCommStats_t* stats) {
  auto* c = static_cast<reccl::nccl_net::NetConn*>(comm);
  if (!c || !stats) return -1;
  try {
    return c->stats(stats) ? 0 : -1;
  } catch (...) {
    return -1;
  }
}

}  // extern "C"
