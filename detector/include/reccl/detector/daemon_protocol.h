// Wire protocol between reccl-detectord and its clients: one JSON object per SOCK_SEQPACKET
// message (so message boundaries are the kernel's), file descriptors passed with SCM_RIGHTS.
//
//   client -> daemon                      daemon -> client
//   {"op":"hello","version":1}            {"op":"hello","version":1,"mode":..,"sources":[..]}
//   {"op":"watch","netns":N,"dev":D}      {"op":"watch","ok":true,"slot":S,"netns_ino":I,"ifindex":X}
//                                         or {"op":"watch","ok":false,"error":"..."}
//   {"op":"unwatch","netns_ino":I,"ifindex":X}  {"op":"unwatch","ok":true}
//   {"op":"status"}                       {"op":"status",...}  (see statusToJson)
//   {"op":"map"}                          {"op":"map","ok":true,"slots":N,"slot_size":64} + fd
//                                         (an fd of the link-state array; map it PROT_READ)
//                                         {"op":"event",...}  at any time, for watched links
#pragma once

#include <string>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"
#include "reccl/detector/detector.h"

namespace reccl::detector {

constexpr int kDaemonProtocolVersion = 1;
constexpr size_t kDaemonMaxMessage = 256 * 1024;

// One message; fd >= 0 is passed along with it.
Status sendMessage(int sock, const std::string& json, int fd = -1);
// Receives one message (blocking unless the socket is non-blocking). An orderly close by the
// peer is kAborted; nothing waiting on a non-blocking socket is kTimeout. A received fd lands in *fd (when fd != nullptr).
Result<std::string> recvMessage(int sock, UniqueFd* fd = nullptr);

std::string eventToJson(const LinkEvent& e);
Result<LinkEvent> eventFromJson(const std::string& text);
std::string statusToJson(const DetectorStatus& st, int clients);

}  // namespace reccl::detector
