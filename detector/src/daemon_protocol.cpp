#include "reccl/detector/daemon_protocol.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

namespace reccl::detector {

using nlohmann::json;

Status sendMessage(int sock, const std::string& text, int fd) {
  if (text.size() > kDaemonMaxMessage) return Status(Errc::kInvalidArgument, "message too large");
  iovec iov{const_cast<char*>(text.data()), text.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = ctl;
    msg.msg_controllen = sizeof(ctl);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  for (;;) {
    ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n >= 0) return Status::Ok();
    if (errno == EINTR) continue;
    return Status::FromErrno(errno, "detectord: send");
  }
}

Result<std::string> recvMessage(int sock, UniqueFd* fd, size_t maxBytes) {
  // One byte more than allowed, so an over-long message shows as MSG_TRUNC even at the limit.
  std::string buf(std::min(maxBytes, kDaemonMaxMessage) + 1, '\0');
  iovec iov{buf.data(), buf.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  // Room for a few descriptors, so that a sender's extra ones arrive here and are closed.
  alignas(cmsghdr) char ctl[CMSG_SPACE(4 * sizeof(int))] = {};
  msg.msg_control = ctl;
  msg.msg_controllen = sizeof(ctl);
  ssize_t n;
  do {
    n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Status(Errc::kTimeout, "detectord: nothing to read");
    return Status::FromErrno(errno, "detectord: recv");
  }
  if (n == 0) return Status(Errc::kAborted, "detectord: peer closed the connection");
  // Every descriptor received is owned here: the first goes to *fd, the rest are closed (a
  // message carries at most one; more is a protocol error, never a leak).
  size_t fds = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0)) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i, ++fds) {
      int got;
      std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (fd && fds == 0)
        fd->reset(got);
      else
        close(got);
    }
  }
  if (fds > 1) {
    if (fd) fd->reset();
    return Status(Errc::kProtocol, "detectord: more than one descriptor in a message");
  }
  // The kernel closed the descriptors that did not fit.
  if (msg.msg_flags & MSG_CTRUNC) return Status(Errc::kProtocol, "detectord: more than one descriptor in a message");
  if ((msg.msg_flags & MSG_TRUNC) || static_cast<size_t>(n) > maxBytes)
    return Status(Errc::kProtocol, "detectord: message longer than " + std::to_string(maxBytes) + " bytes");
  buf.resize(static_cast<size_t>(n));
  return buf;
}

namespace {
// Names come from the kernel (interface names) and need not be UTF-8: replaced, never a throw.
std::string dumpText(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// The keys are known, their types are checked with the json's own is_*(): nothing here throws
// on a well-formed JSON text, and whatever is not a well-formed object is kProtocol.
Result<uint64_t> uintField(const json& j, const char* key, bool required) {
  if (!j.contains(key)) {
    if (required) return Status(Errc::kProtocol, std::string("detectord: request without '") + key + "'");
    return uint64_t{0};
  }
  const json& v = j[key];
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    return Status(Errc::kProtocol, std::string("detectord: '") + key + "' is not a non-negative integer");
  return v.get<uint64_t>();
}

// An unsigned field read as T: absent, `absent`; a float, a negative number or one past T's range
// is kProtocol naming the key (nlohmann's own conversion of such a number would truncate it, or,
// for a float out of T's range, be undefined).
template <class T>
Result<T> uintFieldAs(const json& j, const char* key, T absent) {
  if (!j.contains(key)) return absent;
  RECCL_ASSIGN_OR_RETURN(uint64_t v, uintField(j, key, true));
  if (v > std::numeric_limits<T>::max())
    return Status(Errc::kProtocol, std::string("detectord: '") + key + "' is out of range");
  return static_cast<T>(v);
}

Result<std::string> stringField(const json& j, const char* key) {
  if (!j.contains(key)) return std::string();
  if (!j[key].is_string()) return Status(Errc::kProtocol, std::string("detectord: '") + key + "' is not a string");
  return j[key].get<std::string>();
}
}  // namespace

const char* daemonOpName(DaemonOp op) {
  switch (op) {
    case DaemonOp::kHello: return "hello";
    case DaemonOp::kWatch: return "watch";
    case DaemonOp::kUnwatch: return "unwatch";
    case DaemonOp::kStatus: return "status";
    case DaemonOp::kMap: return "map";
    case DaemonOp::kPing: return "ping";
  }
  return "?";
}

namespace {
std::optional<DaemonOp> opNamed(const std::string& op) {
  for (DaemonOp o : {DaemonOp::kHello, DaemonOp::kWatch, DaemonOp::kUnwatch, DaemonOp::kStatus, DaemonOp::kMap,
                     DaemonOp::kPing})
    if (op == daemonOpName(o)) return o;
  return std::nullopt;
}
}  // namespace

Result<DaemonRequest> decodeRequest(std::string_view text, std::optional<DaemonOp>* known) {
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status(Errc::kProtocol, "detectord: request is not a JSON object");
  if (!j.contains("op") || !j["op"].is_string()) return Status(Errc::kProtocol, "detectord: request without an 'op' string");
  const std::string& op = j["op"].get_ref<const std::string&>();
  std::optional<DaemonOp> o = opNamed(op);
  if (!o) return Status(Errc::kInvalidArgument, "unknown op '" + op.substr(0, 64) + "'");
  if (known) *known = o;
  DaemonRequest r;
  r.op = *o;
  switch (*o) {
    case DaemonOp::kHello: {
      RECCL_ASSIGN_OR_RETURN(uint64_t v, uintField(j, "version", false));
      r.version = static_cast<int>(std::min<uint64_t>(v, INT32_MAX));
      break;
    }
    case DaemonOp::kWatch: {
      RECCL_ASSIGN_OR_RETURN(r.watch.netns, stringField(j, "netns"));
      RECCL_ASSIGN_OR_RETURN(r.watch.ifname, stringField(j, "dev"));
      if (r.watch.netns.size() > kDaemonMaxNetnsLabel)
        return Status(Errc::kInvalidArgument, "netns: name longer than " + std::to_string(kDaemonMaxNetnsLabel) + " bytes");
      // The device name is checked like a command-line watch ("dev: bad interface name").
      RECCL_TRY(parseWatchSpec(r.watch.ifname).status());
      break;
    }
    case DaemonOp::kUnwatch: {
      RECCL_ASSIGN_OR_RETURN(uint64_t ino, uintField(j, "netns_ino", true));
      RECCL_ASSIGN_OR_RETURN(uint64_t ifindex, uintField(j, "ifindex", true));
      if (ino > UINT32_MAX || ifindex > UINT32_MAX)
        return Status(Errc::kInvalidArgument, "unwatch: netns_ino or ifindex out of range");
      r.link = {static_cast<uint32_t>(ino), static_cast<uint32_t>(ifindex)};
      break;
    }
    case DaemonOp::kStatus:
    case DaemonOp::kMap:
      break;
    case DaemonOp::kPing: {
      RECCL_ASSIGN_OR_RETURN(r.seq, uintField(j, "seq", false));
      break;
    }
  }
  return r;
}

std::string eventToJson(const LinkEvent& e) {
  json j{{"op", "event"},
         {"version", kDaemonProtocolVersion},
         {"type", linkEventTypeName(e.type)},
         {"netns", e.netns},
         {"netns_ino", e.link.netnsIno},
         {"ifindex", e.link.ifindex},
         {"ifname", e.ifname},
         {"slot", e.slot},
         {"kind", kindName(e.kind)},
         {"source", sourceName(e.source)},
         {"signal_ns", e.signalNs},
         {"emit_ns", e.emitNs},
         {"penalty", e.penalty},
         {"flaps", e.flaps}};
  return dumpText(j);
}

namespace {
Result<LinkEvent> eventFromJsonOrThrow(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("op", "") != "event")
    return Status(Errc::kProtocol, "detectord: not an event message");
  LinkEvent e;
  std::string type = j.value("type", "");
  if (type == "link_down")
    e.type = LinkEventType::kLinkDown;
  else if (type == "link_up")
    e.type = LinkEventType::kLinkUp;
  else if (type == "link_degraded")
    e.type = LinkEventType::kLinkDegraded;
  else
    return Status(Errc::kProtocol, "detectord: unknown event type '" + type + "'");
  e.netns = j.value("netns", "");
  RECCL_ASSIGN_OR_RETURN(e.link.netnsIno, uintFieldAs<uint32_t>(j, "netns_ino", 0));
  RECCL_ASSIGN_OR_RETURN(e.link.ifindex, uintFieldAs<uint32_t>(j, "ifindex", 0));
  e.ifname = j.value("ifname", "");
  RECCL_ASSIGN_OR_RETURN(e.slot, uintFieldAs<uint32_t>(j, "slot", RECCL_LINK_NO_SLOT));
  std::string kind = j.value("kind", "none");
  for (int k = 0; k < RECCL_LINK_KIND_COUNT; ++k)
    if (kind == kindName(static_cast<LinkKind>(k))) e.kind = static_cast<LinkKind>(k);
  if (auto s = sourceFromName(j.value("source", ""))) e.source = *s;
  RECCL_ASSIGN_OR_RETURN(e.signalNs, uintFieldAs<uint64_t>(j, "signal_ns", 0));
  RECCL_ASSIGN_OR_RETURN(e.emitNs, uintFieldAs<uint64_t>(j, "emit_ns", 0));
  if (j.contains("penalty") && !j["penalty"].is_number())
    return Status(Errc::kProtocol, "detectord: 'penalty' is not a number");
  e.penalty = j.value("penalty", 0.0);
  RECCL_ASSIGN_OR_RETURN(e.flaps, uintFieldAs<uint64_t>(j, "flaps", 0));
  return e;
}
}  // namespace

Result<WatchedLink> watchReplyFromJson(const WatchSpec& spec, const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status(Errc::kProtocol, "detectord: watch reply is not a JSON object");
  if (!j.contains("ok") || !j["ok"].is_boolean()) return Status(Errc::kProtocol, "detectord: watch reply without 'ok'");
  if (!j["ok"].get<bool>()) {
    RECCL_ASSIGN_OR_RETURN(std::string err, stringField(j, "error"));
    return Status(Errc::kInvalidArgument, err.empty() ? std::string("watch refused") : err);
  }
  WatchedLink w;
  w.netns = spec.netns;
  w.ifname = spec.ifname;
  RECCL_ASSIGN_OR_RETURN(w.slot, uintFieldAs<uint32_t>(j, "slot", RECCL_LINK_NO_SLOT));
  RECCL_ASSIGN_OR_RETURN(w.key.netnsIno, uintFieldAs<uint32_t>(j, "netns_ino", 0));
  RECCL_ASSIGN_OR_RETURN(w.key.ifindex, uintFieldAs<uint32_t>(j, "ifindex", 0));
  return w;
}

Result<LinkEvent> eventFromJson(const std::string& text) {
  // A field of the wrong type makes nlohmann throw; that is a malformed message, an error code here.
  try {
    return eventFromJsonOrThrow(text);
  } catch (const std::exception& e) {
    return Status(Errc::kProtocol, std::string("detectord: malformed event: ") + e.what());
  }
}

std::string statusToJson(const DetectorStatus& st, int clients) {
  json j{{"op", "status"}, {"version", kDaemonProtocolVersion}, {"mode", st.mode}, {"clients", clients}};
  json sources = json::array();
  for (const auto& s : st.sources) sources.push_back({{"name", s.name}, {"active", s.active}, {"reason", s.reason}});
  j["sources"] = sources;
  json links = json::array();
  for (const auto& l : st.links)
    links.push_back({{"netns", l.watch.netns},
                     {"netns_ino", l.watch.key.netnsIno},
                     {"ifindex", l.watch.key.ifindex},
                     {"ifname", l.watch.ifname},
                     {"slot", l.watch.slot},
                     {"state", linkStateName(l.status.state)},
                     {"physical_up", l.status.physicalUp},
                     {"suppressed", l.status.suppressed},
                     {"penalty", l.status.penalty},
                     {"flaps", l.status.flaps},
                     {"epoch", l.epoch}});
  j["links"] = links;
  json ports = json::array();
  for (const auto& p : st.rdmaPorts) {
    json o{{"rdma_device", p.dev}, {"port", p.port}, {"ifname", p.netdev}, {"sequence_errors", p.sequenceErrors},
           {"degraded_verdicts", p.verdicts}};
    if (p.packets) o["packets"] = *p.packets;
    ports.push_back(std::move(o));
  }
  j["rdma_ports"] = ports;
  const auto& c = st.counters;
  json sig = json::object();
  for (int i = 1; i < RECCL_LINK_SRC_COUNT; ++i)
    if (c.signals[i]) sig[sourceName(static_cast<LinkSource>(i))] = c.signals[i];
  j["counters"] = {{"signals", sig},
                   {"events", c.events},
                   {"queue_overflows", c.queueOverflows},
                   {"ringbuf_drops", c.bpf.ringbufDrops},
                   {"ringbuf_records", c.bpf.events},
                   {"ringbuf_consumed", c.bpf.consumed},
                   {"abi_rejects", c.bpf.abiRejects},
                   {"linkwatch_wakeups", c.linkwatchWakeups},
                   {"scan_runs", c.bpf.scanRuns},
                   {"rtnetlink_overruns", c.rtnlOverruns},
                   {"neighbours_probed", c.neighboursProbed},
                   {"debounced", c.stateMachine.debounced},
                   {"stale", c.stateMachine.stale},
                   {"suppressed_ups", c.stateMachine.suppressedUps}};
  return dumpText(j);
}

}  // namespace reccl::detector
