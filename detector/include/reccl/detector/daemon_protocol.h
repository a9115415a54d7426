// Wire protocol between reccl-detectord and its clients: one JSON object per SOCK_SEQPACKET
// message (so message boundaries are the kernel's), file descriptors passed with SCM_RIGHTS.
// Every message the daemon sends carries "version" (kDaemonProtocolVersion); the schema of each
// is in docs/detector.md ("Wire protocol").
//
//   client -> daemon                           daemon -> client
//   {"op":"hello","version":2}                 {"op":"hello","version":2,"mode":..,"sources":[..]}
//   {"op":"watch","netns":N,"dev":D} + ns fd   {"op":"watch","ok":true,"slot":S,"netns_ino":I,"ifindex":X,..}
//                                              or {"op":"watch","ok":false,"error":"..."}
//   {"op":"unwatch","netns_ino":I,"ifindex":X} {"op":"unwatch","ok":true}
//   {"op":"status"}                            {"op":"status",...}  (see statusToJson)
//   {"op":"map"}                               {"op":"map","ok":true,"slots":N,"slot_size":64} + fd
//                                              (an fd of the link-state array; map it PROT_READ)
//   {"op":"ping","seq":N}                      {"op":"ping","seq":N}
//                                              {"op":"event",...}  at any time, for watched links
//
// A watch names its namespace by an open descriptor of it (nsfs, opened for reading), passed
// with the request: the daemon never opens a path a client chose, so a client can watch only a
// namespace it could open itself, and learns nothing about files it cannot see. "netns" is only
// the namespace's display name.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"
#include "reccl/detector/detector.h"

namespace reccl::detector {

constexpr int kDaemonProtocolVersion = 2;
constexpr size_t kDaemonMaxMessage = 256 * 1024;
// Longest request the daemon reads (its requests are a few dozen bytes); longer ones are refused.
constexpr size_t kDaemonMaxRequest = 4096;
// Longest display name of a watched namespace.
constexpr size_t kDaemonMaxNetnsLabel = 256;

// One message; fd >= 0 is passed along with it.
Status sendMessage(int sock, const std::string& json, int fd = -1);
// Receives one message of at most maxBytes (blocking unless the socket is non-blocking). An
// orderly close by the peer is kAborted; nothing waiting on a non-blocking socket is kTimeout; a
// longer message, or more than one descriptor, is kProtocol. A received fd lands in *fd (when fd
// != nullptr; else it is closed).
Result<std::string> recvMessage(int sock, UniqueFd* fd = nullptr, size_t maxBytes = kDaemonMaxMessage);

enum class DaemonOp { kHello, kWatch, kUnwatch, kStatus, kMap, kPing };

// A request as the daemon reads it: decoded and checked here, so the daemon's loop only acts.
struct DaemonRequest {
  DaemonOp op = DaemonOp::kPing;
  int version = 0;   // hello: the client's protocol version (0: not given)
  WatchSpec watch;   // watch: display name of the namespace and device name (checked)
  LinkKey link;      // unwatch
  uint64_t seq = 0;  // ping
};

// kProtocol: not a request at all (not JSON, not an object, no "op" string, a field of the wrong
// type): the daemon answers with an error and drops such a client. kInvalidArgument: a request
// with a bad value (unknown op, bad device name, namespace label too long): answered with an
// error, the client stays. Either way `*op` (when given) is the request's op once it was one the
// daemon knows, so that the refusal of a bad value answers in its name.
Result<DaemonRequest> decodeRequest(std::string_view text, std::optional<DaemonOp>* op = nullptr);
const char* daemonOpName(DaemonOp op);

// The client's decoders: a message that is not JSON, a field of the wrong type, or a number
// that is not an integer in its field's range is kProtocol naming the field (never a throw or a
// conversion of it). A refused watch is kInvalidArgument with the daemon's message.
std::string eventToJson(const LinkEvent& e);
Result<LinkEvent> eventFromJson(const std::string& text);
Result<WatchedLink> watchReplyFromJson(const WatchSpec& spec, const std::string& text);
std::string statusToJson(const DetectorStatus& st, int clients);

}  // namespace reccl::detector
