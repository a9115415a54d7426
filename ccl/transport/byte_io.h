// A byte stream with its deadline bound in: what a handshake runs on (a socket, the relay pipe,
// a verbs path's side channel). Each call moves the whole span or fails.
#pragma once

#include <cstddef>
#include <functional>
#include <span>

#include "reccl/common/status.h"

namespace reccl::transport {

struct ByteIo {
  std::function<Status(std::span<const std::byte>)> send;
  std::function<Status(std::span<std::byte>)> recv;
};

}  // namespace reccl::transport
