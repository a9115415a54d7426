#include "reccl/inject/fault_drop.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <net/if.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <vector>

#include "fault_drop.skel.h"
#include "reccl/common/log.h"
#include "reccl/netlink/netns.h"
#include "reccl/netlink/netns_guard.h"

namespace reccl::inject {

namespace {

constexpr const char* kPinRules = "rules";
constexpr const char* kPinStats = "stats";
constexpr const char* kPinMeta = "meta";
constexpr const char* kPinIngress = "prog_ingress";
constexpr const char* kPinEgress = "prog_egress";
constexpr const char* kPinNames[] = {kPinRules, kPinStats, kPinMeta, kPinIngress, kPinEgress};

std::string pinPath(const std::string& dir, const char* name) { return dir + "/" + name; }

// bpffs is not mounted on a fresh machine; pins need it.
Status ensureBpffs() {
  struct statfs st {};
  if (::statfs(kBpffsRoot, &st) == 0 && st.f_type == BPF_FS_MAGIC) return {};
  if (::mount("bpf", kBpffsRoot, "bpf", 0, "mode=0700") != 0)
    return Status::FromErrno(errno, std::string("mount bpffs on ") + kBpffsRoot);
  return {};
}

Status mkdirs(const std::string& path) {
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    std::string part = path.substr(0, pos);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST)
      return Status::FromErrno(errno, "mkdir " + part);
  }
  return {};
}

// Serializes attach/detach of all devices between processes: two `reccl inject drop` on the
// same device must not both load a program.
class PinLock {
 public:
  static Result<PinLock> take() {
    RECCL_TRY(ensureBpffs());
    RECCL_TRY(mkdirs(kPinRoot));
    UniqueFd fd(::open(kPinRoot, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd) return Status::FromErrno(errno, std::string("open ") + kPinRoot);
    if (::flock(fd.get(), LOCK_EX) != 0) return Status::FromErrno(errno, "flock pin directory");
    PinLock l;
    l.fd_ = std::move(fd);
    return l;
  }

 private:
  UniqueFd fd_;  // closing it drops the lock
};

struct SkelDeleter {
  void operator()(fault_drop* s) const noexcept { fault_drop__destroy(s); }
};

Result<UniqueFd> objGet(const std::string& path) {
  int fd = bpf_obj_get(path.c_str());
  if (fd < 0) return Status::FromErrno(errno, "open pinned " + path);
  return UniqueFd(fd);
}

void unpinAll(const std::string& dir) {
  for (const char* name : kPinNames) {
    std::string p = pinPath(dir, name);
    if (::unlink(p.c_str()) != 0 && errno != ENOENT)
      RECCL_WARN(kLogInject, "unpin %s: %s", p.c_str(), std::strerror(errno));
  }
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT)
    RECCL_WARN(kLogInject, "rmdir %s: %s", dir.c_str(), std::strerror(errno));
  // Remove the namespace directory too once its last device is gone.
  std::string parent = dir.substr(0, dir.rfind('/'));
  if (parent != kPinRoot) ::rmdir(parent.c_str());
  // And the pin root with its parent once nothing is pinned at all, so a host without injected
  // faults carries no reccl folder in the BPF filesystem (rmdir fails harmlessly while in use).
  if (::rmdir(kPinRoot) == 0) {
    std::string top(kPinRoot);
    ::rmdir(top.substr(0, top.rfind('/')).c_str());
  }
}

bpf_tc_hook makeHook(int ifindex, bpf_tc_attach_point point) {
  bpf_tc_hook hook;
  std::memset(&hook, 0, sizeof(hook));
  hook.sz = sizeof(hook);
  hook.ifindex = ifindex;
  hook.attach_point = point;
  return hook;
}

bpf_tc_opts makeOpts(int progFd) {
  bpf_tc_opts opts;
  std::memset(&opts, 0, sizeof(opts));
  opts.sz = sizeof(opts);
  opts.handle = kTcHandle;
  opts.priority = kTcPriority;
  opts.prog_fd = progFd;
  return opts;
}

Status libbpfError(int err, const std::string& what) { return Status::FromErrno(-err, what); }

Status detachLocked(const std::string& netns, const std::string& dev);

// Inside the target namespace: the device's ifindex there.
Result<int> ifindexIn(const std::string& dev) {
  unsigned idx = ::if_nametoindex(dev.c_str());
  if (idx == 0) return Status::FromErrno(errno, "device " + dev);
  return static_cast<int>(idx);
}

// The prog id our filter has on one hook, 0 when none. Caller is inside the namespace. A device
// without a clsact qdisc is the common case here, so libbpf's "no qdisc" complaint is muted.
uint32_t queryFilterProgId(int ifindex, bpf_tc_attach_point point) {
  bpf_tc_hook hook = makeHook(ifindex, point);
  bpf_tc_opts opts = makeOpts(0);
  LibbpfQuiet quiet;
  int err = bpf_tc_query(&hook, &opts);
  return err == 0 ? opts.prog_id : 0;
}

uint32_t pinnedProgId(const std::string& path) {
  int fd = bpf_obj_get(path.c_str());
  if (fd < 0) return 0;
  bpf_prog_info info;
  std::memset(&info, 0, sizeof(info));
  uint32_t len = sizeof(info);
  uint32_t id = bpf_obj_get_info_by_fd(fd, &info, &len) == 0 ? info.id : 0;
  ::close(fd);
  return id;
}

// Pins exist and the device's hooks still run the pinned programs (the device may have been
// deleted and re-created since, e.g. by a testbed restart).
Result<bool> pinsLive(const ResolvedTarget& t, const std::string& dir) {
  uint32_t ing = pinnedProgId(pinPath(dir, kPinIngress));
  uint32_t egr = pinnedProgId(pinPath(dir, kPinEgress));
  if (ing == 0 || egr == 0) return false;
  RECCL_ASSIGN_OR_RETURN(auto guard, netlink::NetnsGuard::enter(t.netns));
  RECCL_ASSIGN_OR_RETURN(int ifindex, ifindexIn(t.dev));
  return queryFilterProgId(ifindex, BPF_TC_INGRESS) == ing &&
         queryFilterProgId(ifindex, BPF_TC_EGRESS) == egr;
}

// Pins of namespaces that are gone (a testbed torn down after a crash, before anyone ran
// `clear`) would keep their programs and maps loaded forever; every attach sweeps them.
// Caller holds the PinLock.
// The entries of a pin directory, "." and ".." left out.
std::vector<std::string> pinDirEntries(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  return out;
}

// Caller holds the PinLock.
Result<std::vector<std::string>> detachNetnsLocked(const std::string& netns) {
  const std::string nsDir = std::string(kPinRoot) + "/" + (netns.empty() ? std::string("_root") : netns);
  std::vector<std::string> devs = pinDirEntries(nsDir);
  Status first;
  for (const auto& dev : devs) {
    Status s = detachLocked(netns, dev);
    if (!s.ok() && first.ok()) first = s;
  }
  ::rmdir(nsDir.c_str());
  if (!first.ok()) return first;
  return devs;
}

void sweepStalePins() {
  for (const auto& name : pinDirEntries(kPinRoot)) {
    if (name == "_root" || netlink::netnsExists(name)) continue;
    if (detachNetnsLocked(name).ok())
      RECCL_INFO(kLogInject, "removed stale fault_drop pins of vanished netns %s", name.c_str());
  }
}

// Caller holds the PinLock.
Status attachAndPin(const ResolvedTarget& t, const std::string& dir) {
  logCaptureLibbpf();
  std::unique_ptr<fault_drop, SkelDeleter> skel(fault_drop__open_and_load());
  if (!skel) return Status::FromErrno(errno, "load fault_drop bpf program");

  bool createdQdisc = false;
  {
    RECCL_ASSIGN_OR_RETURN(auto guard, netlink::NetnsGuard::enter(t.netns));
    RECCL_ASSIGN_OR_RETURN(int ifindex, ifindexIn(t.dev));
    bpf_tc_hook hook = makeHook(ifindex, static_cast<bpf_tc_attach_point>(BPF_TC_INGRESS | BPF_TC_EGRESS));
    int err = bpf_tc_hook_create(&hook);
    if (err != 0 && err != -EEXIST) return libbpfError(err, "create clsact qdisc on " + t.toString());
    createdQdisc = err == 0;
    struct {
      bpf_tc_attach_point point;
      bpf_program* prog;
      const char* name;
    } hooks[] = {{BPF_TC_INGRESS, skel->progs.fault_drop_ingress, "ingress"},
                 {BPF_TC_EGRESS, skel->progs.fault_drop_egress, "egress"}};
    for (auto& h : hooks) {
      bpf_tc_hook one = makeHook(ifindex, h.point);
      bpf_tc_opts opts = makeOpts(bpf_program__fd(h.prog));
      opts.flags = BPF_TC_F_REPLACE;
      err = bpf_tc_attach(&one, &opts);
      if (err != 0) {
        Status st = libbpfError(err, std::string("attach tc ") + h.name + " on " + t.toString());
        if (createdQdisc) bpf_tc_hook_destroy(&hook);
        return st;
      }
    }
  }

  reccl_fault_meta meta{RECCL_FAULT_DROP_ABI_VERSION, createdQdisc ? 1u : 0u};
  uint32_t zero = 0;
  if (bpf_map_update_elem(bpf_map__fd(skel->maps.meta), &zero, &meta, BPF_ANY) != 0)
    return Status::FromErrno(errno, "write fault_drop meta");

  RECCL_TRY(mkdirs(dir));
  struct {
    int fd;
    const char* name;
  } pins[] = {{bpf_map__fd(skel->maps.rules), kPinRules},
              {bpf_map__fd(skel->maps.stats), kPinStats},
              {bpf_map__fd(skel->maps.meta), kPinMeta},
              {bpf_program__fd(skel->progs.fault_drop_ingress), kPinIngress},
              {bpf_program__fd(skel->progs.fault_drop_egress), kPinEgress}};
  for (auto& p : pins) {
    std::string path = pinPath(dir, p.name);
    if (bpf_obj_pin(p.fd, path.c_str()) != 0) {
      Status st = Status::FromErrno(errno, "pin " + path);
      (void)detachLocked(t.netns, t.dev);
      return st;
    }
  }
  RECCL_INFO(kLogInject, "attached fault_drop to %s (pins in %s)", t.toString().c_str(), dir.c_str());
  return {};
}

}  // namespace

std::string faultDropPinDir(const std::string& netns, const std::string& dev) {
  return std::string(kPinRoot) + "/" + (netns.empty() ? std::string("_root") : netns) + "/" + dev;
}

bool faultDropPinned(const std::string& netns, const std::string& dev) {
  std::string dir = faultDropPinDir(netns, dev);
  return ::access(pinPath(dir, kPinRules).c_str(), F_OK) == 0;
}

Result<FaultDropDevice> FaultDropDevice::open(const ResolvedTarget& target) {
  std::string dir = faultDropPinDir(target.netns, target.dev);
  if (!faultDropPinned(target.netns, target.dev))
    return Status{Errc::kNotFound, "no drop rules on " + target.toString()};
  FaultDropDevice d;
  d.target_ = target;
  RECCL_ASSIGN_OR_RETURN(d.rules_, objGet(pinPath(dir, kPinRules)));
  RECCL_ASSIGN_OR_RETURN(d.stats_, objGet(pinPath(dir, kPinStats)));
  return d;
}

Result<FaultDropDevice> FaultDropDevice::openOrAttach(const ResolvedTarget& target) {
  RECCL_ASSIGN_OR_RETURN(auto lock, PinLock::take());
  std::string dir = faultDropPinDir(target.netns, target.dev);
  if (faultDropPinned(target.netns, target.dev)) {
    RECCL_ASSIGN_OR_RETURN(bool live, pinsLive(target, dir));
    if (live) return open(target);
    RECCL_INFO(kLogInject, "stale fault_drop pins for %s, re-attaching", target.toString().c_str());
    RECCL_TRY(detachLocked(target.netns, target.dev));
  }
  sweepStalePins();
  RECCL_TRY(attachAndPin(target, dir));
  return open(target);
}

Result<int> FaultDropDevice::findSlotFor(const DropRule& rule) const {
  int freeSlot = -1;
  for (int slot = 0; slot < RECCL_FAULT_DROP_MAX_RULES; ++slot) {
    RECCL_ASSIGN_OR_RETURN(reccl_fault_rule cur, readSlot(slot));
    if (!cur.enabled) {
      if (freeSlot < 0) freeSlot = slot;
      continue;
    }
    if (fromBpfRule(cur).sameMatch(rule)) return slot;
  }
  if (freeSlot < 0)
    return Status{Errc::kExists, "all " + std::to_string(RECCL_FAULT_DROP_MAX_RULES) +
                                     " drop rules of " + target_.toString() + " are in use"};
  return freeSlot;
}

Result<int> FaultDropDevice::upsertRule(const DropRule& rule) {
  RECCL_ASSIGN_OR_RETURN(reccl_fault_rule bpfRule, toBpfRule(rule));
  RECCL_ASSIGN_OR_RETURN(int slot, findSlotFor(rule));
  RECCL_TRY(writeSlot(slot, bpfRule));
  return slot;
}

Result<reccl_fault_rule> FaultDropDevice::readSlot(int slot) const {
  uint32_t key = static_cast<uint32_t>(slot);
  reccl_fault_rule r{};
  if (bpf_map_lookup_elem(rules_.get(), &key, &r) != 0)
    return Status::FromErrno(errno, "read drop rule " + std::to_string(slot));
  return r;
}

Status FaultDropDevice::writeSlot(int slot, const reccl_fault_rule& rule) {
  uint32_t key = static_cast<uint32_t>(slot);
  if (bpf_map_update_elem(rules_.get(), &key, &rule, BPF_ANY) != 0)
    return Status::FromErrno(errno, "write drop rule " + std::to_string(slot));
  return {};
}

Result<bool> FaultDropDevice::anyRuleEnabled() const {
  for (int slot = 0; slot < RECCL_FAULT_DROP_MAX_RULES; ++slot) {
    RECCL_ASSIGN_OR_RETURN(reccl_fault_rule cur, readSlot(slot));
    if (cur.enabled) return true;
  }
  return false;
}

Result<reccl_fault_stats> FaultDropDevice::readCounters(uint32_t key) const {
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return libbpfError(ncpu, "count possible cpus");
  std::vector<reccl_fault_stats> perCpu(static_cast<size_t>(ncpu));
  if (bpf_map_lookup_elem(stats_.get(), &key, perCpu.data()) != 0)
    return Status::FromErrno(errno, "read drop counters");
  reccl_fault_stats sum{};
  for (const auto& s : perCpu) {
    sum.seen += s.seen;
    sum.dropped += s.dropped;
  }
  return sum;
}

Result<FaultDropStats> FaultDropDevice::readStats() const {
  FaultDropStats out;
  for (int slot = 0; slot < RECCL_FAULT_DROP_MAX_RULES; ++slot) {
    RECCL_ASSIGN_OR_RETURN(reccl_fault_rule cur, readSlot(slot));
    if (!cur.enabled) continue;
    RECCL_ASSIGN_OR_RETURN(reccl_fault_stats c, readCounters(static_cast<uint32_t>(slot)));
    out.rules.push_back({slot, fromBpfRule(cur), c});
  }
  RECCL_ASSIGN_OR_RETURN(out.ingressAll, readCounters(RECCL_FAULT_STATS_INGRESS_ALL));
  RECCL_ASSIGN_OR_RETURN(out.egressAll, readCounters(RECCL_FAULT_STATS_EGRESS_ALL));
  return out;
}

Status detachFaultDrop(const std::string& netns, const std::string& dev) {
  RECCL_ASSIGN_OR_RETURN(auto lock, PinLock::take());
  return detachLocked(netns, dev);
}

Result<std::vector<std::string>> detachFaultDropNetns(const std::string& netns) {
  if (pinDirEntries(kPinRoot).empty()) return std::vector<std::string>{};  // nothing ever pinned
  RECCL_ASSIGN_OR_RETURN(auto lock, PinLock::take());
  return detachNetnsLocked(netns);
}

std::vector<std::string> faultDropPinnedNetns() {
  std::vector<std::string> out;
  for (auto& name : pinDirEntries(kPinRoot)) {
    if (name != "_root") out.push_back(std::move(name));
  }
  return out;
}

namespace {

Status detachLocked(const std::string& netns, const std::string& dev) {
  std::string dir = faultDropPinDir(netns, dev);
  bool createdQdisc = false;
  {
    int fd = bpf_obj_get(pinPath(dir, kPinMeta).c_str());
    if (fd >= 0) {
      reccl_fault_meta meta{};
      uint32_t zero = 0;
      if (bpf_map_lookup_elem(fd, &zero, &meta) == 0) createdQdisc = meta.created_qdisc != 0;
      ::close(fd);
    }
  }
  bool nsGone = !netns.empty() && !netlink::netnsExists(netns);
  if (!nsGone) {
    auto guard = netlink::NetnsGuard::enter(netns);
    if (!guard) return guard.status();
    unsigned ifindex = ::if_nametoindex(dev.c_str());
    if (ifindex != 0) {
      uint32_t pinnedIds[] = {pinnedProgId(pinPath(dir, kPinIngress)),
                              pinnedProgId(pinPath(dir, kPinEgress))};
      bpf_tc_attach_point points[] = {BPF_TC_INGRESS, BPF_TC_EGRESS};
      bool removedAny = false;
      for (int i = 0; i < 2; ++i) {
        // Only our own program is removed; a filter someone else put at our handle stays.
        uint32_t id = queryFilterProgId(static_cast<int>(ifindex), points[i]);
        if (id == 0 || (pinnedIds[i] != 0 && id != pinnedIds[i])) continue;
        bpf_tc_hook hook = makeHook(static_cast<int>(ifindex), points[i]);
        bpf_tc_opts opts = makeOpts(0);
        int err = bpf_tc_detach(&hook, &opts);
        if (err != 0 && err != -ENOENT)
          return libbpfError(err, "detach tc filter from " + netns + "/" + dev);
        removedAny = true;
      }
      if (createdQdisc && removedAny) {
        bpf_tc_hook hook = makeHook(static_cast<int>(ifindex),
                                    static_cast<bpf_tc_attach_point>(BPF_TC_INGRESS | BPF_TC_EGRESS));
        int err = bpf_tc_hook_destroy(&hook);
        if (err != 0 && err != -ENOENT && err != -EINVAL)
          RECCL_WARN(kLogInject, "remove clsact qdisc of %s/%s: %s", netns.c_str(), dev.c_str(),
                     std::strerror(-err));
      }
    }
  }
  unpinAll(dir);
  return {};
}

}  // namespace

Result<bool> faultDropFilterPresent(const std::string& netns, const std::string& dev) {
  RECCL_ASSIGN_OR_RETURN(auto guard, netlink::NetnsGuard::enter(netns));
  RECCL_ASSIGN_OR_RETURN(int ifindex, ifindexIn(dev));
  return queryFilterProgId(ifindex, BPF_TC_INGRESS) != 0 ||
         queryFilterProgId(ifindex, BPF_TC_EGRESS) != 0;
}

}  // namespace reccl::inject
