#include "reccl/testbed/testbed_state.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "reccl/testbed/testbed_layout.h"

namespace reccl::testbed {

using nlohmann::json;

namespace {

json nicJson(const NicState& n) {
  return {{"dev", n.dev}, {"address", n.address}, {"switch_port", n.switchPort}, {"bridge", n.bridge}};
}

NicState nicFrom(const json& j) {
  return {j.at("dev").get<std::string>(), j.at("address").get<std::string>(),
          j.at("switch_port").get<std::string>(), j.at("bridge").get<std::string>()};
}

Status ensureDir() {
  for (const char* d : {"/run/reccl", kStateDir}) {
    if (::mkdir(d, 0755) != 0 && errno != EEXIST) return Status::FromErrno(errno, std::string("mkdir ") + d);
  }
  return Status::Ok();
}

Status writeAll(int fd, const std::string& text, const std::string& path) {
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "write " + path);
    }
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

TestbedState TestbedState::fromSpec(const TestbedSpec& spec) {
  TestbedState st;
  st.spec = spec;
  st.status = "creating";
  st.ownerPid = ::getpid();
  st.createdUnixMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  st.fabricNetns = testbed::fabricNetns(spec.name);
  for (int h = 0; h < spec.hosts; ++h) {
    HostState hs;
    hs.index = h;
    hs.netns = hostNetns(spec.name, h);
    hs.mgmt = {kMgmtDev, mgmtAddress(h) + "/24", switchMgmtPort(h), kMgmtBridge};
    for (int r = 0; r < spec.rails; ++r) {
      hs.rails.push_back({railDev(r), railAddress(h, r) + "/24", switchRailPort(h, r), railDev(r)});
    }
    st.hosts.push_back(std::move(hs));
  }
  return st;
}

std::string TestbedState::toJson(int indent) const {
  json hostsJ = json::array();
  for (const HostState& h : hosts) {
    json rj = json::array();
    for (const NicState& r : h.rails) rj.push_back(nicJson(r));
    hostsJ.push_back({{"index", h.index}, {"netns", h.netns}, {"mgmt", nicJson(h.mgmt)}, {"rails", rj}});
  }
  json j = {{"name", spec.name},
            {"hosts", spec.hosts},
            {"rails", spec.rails},
            {"nic", nicKindName(spec.nic)},
            {"mtu", spec.mtu},
            {"wire_prio", spec.wirePrio},
            {"status", status},
            {"owner_pid", ownerPid},
            {"created_unix_ms", createdUnixMs},
            {"fabric_netns", fabricNetns},
            {"forwarder_pid", forwarderPid},
            {"forwarder_start_ticks", forwarderStartTicks},
            {"host_list", hostsJ}};
  return j.dump(indent);
}

Result<TestbedState> TestbedState::fromJson(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status{Errc::kProtocol, "testbed state is not a json object"};
  try {
    TestbedState st;
    st.spec.name = j.at("name").get<std::string>();
    st.spec.hosts = j.at("hosts").get<int>();
    st.spec.rails = j.at("rails").get<int>();
    RECCL_ASSIGN_OR_RETURN(st.spec.nic, parseNicKind(j.at("nic").get<std::string>()));
    st.spec.mtu = j.at("mtu").get<int>();
    st.spec.wirePrio = j.value("wire_prio", 0);  // a record without it: made before the option
    st.status = j.value("status", "");
    st.ownerPid = j.value("owner_pid", 0);
    st.createdUnixMs = j.value("created_unix_ms", int64_t{0});
    st.fabricNetns = j.value("fabric_netns", testbed::fabricNetns(st.spec.name));
    st.forwarderPid = j.value("forwarder_pid", 0);
    st.forwarderStartTicks = j.value("forwarder_start_ticks", uint64_t{0});
    for (const json& h : j.value("host_list", json::array())) {
      HostState hs;
      hs.index = h.at("index").get<int>();
      hs.netns = h.at("netns").get<std::string>();
      hs.mgmt = nicFrom(h.at("mgmt"));
      for (const json& r : h.at("rails")) hs.rails.push_back(nicFrom(r));
      st.hosts.push_back(std::move(hs));
    }
    return st;
  } catch (const json::exception& e) {
    return Status{Errc::kProtocol, std::string("testbed state: ") + e.what()};
  }
}

std::string statePath(std::string_view name) {
  return std::string(kStateDir) + "/" + std::string(name) + ".json";
}

Status claimState(const TestbedState& st) {
  RECCL_TRY(ensureDir());
  const std::string path = statePath(st.spec.name);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) {
      return {Errc::kExists, "testbed '" + st.spec.name + "' exists (" + path +
                                 "); remove it with: reccl testbed down --name " + st.spec.name};
    }
    return Status::FromErrno(errno, "create " + path);
  }
  Status s = writeAll(fd, st.toJson() + "\n", path);
  ::close(fd);
  return s;
}

Status saveState(const TestbedState& st) {
  RECCL_TRY(ensureDir());
  const std::string path = statePath(st.spec.name);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno(errno, "create " + tmp);
  Status s = writeAll(fd, st.toJson() + "\n", tmp);
  ::close(fd);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = Status::FromErrno(errno, "rename to " + path);
  if (!s.ok()) ::unlink(tmp.c_str());
  return s;
}

Result<TestbedState> loadState(std::string_view name) {
  const std::string path = statePath(name);
  std::ifstream in(path);
  if (!in) return Status{Errc::kNotFound, "testbed '" + std::string(name) + "' not found (" + path + ")"};
  std::stringstream ss;
  ss << in.rdbuf();
  auto st = TestbedState::fromJson(ss.str());
  if (!st.ok()) return st.status().Wrap(path);
  return st;
}

Status removeState(std::string_view name) {
  const std::string path = statePath(name);
  if (::unlink(path.c_str()) != 0) return Status::FromErrno(errno, "unlink " + path);
  return Status::Ok();
}

std::vector<std::string> listStates() {
  std::vector<std::string> names;
  DIR* dir = ::opendir(kStateDir);
  if (dir == nullptr) return names;
  while (dirent* e = ::readdir(dir)) {
    std::string_view n = e->d_name;
    constexpr std::string_view kExt = ".json";
    if (n.size() > kExt.size() && n.substr(n.size() - kExt.size()) == kExt) {
      names.emplace_back(n.substr(0, n.size() - kExt.size()));
    }
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace reccl::testbed
