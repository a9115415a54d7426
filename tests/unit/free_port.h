// A TCP port for a test's rendezvous (and the one after it, which a second communicator of the
// test worker takes), out of the kernel's ephemeral range: no connection of a test running beside
// this one is given it before the test binds it.
#pragma once

#include <cstdint>

#include "reccl/common/free_port.h"

namespace reccl::test {

// 0 when none is free: the caller's bind then fails and says so.
inline uint16_t freePort() {
  int port = freePortOutsideEphemeralRange(2);
  return port > 0 ? static_cast<uint16_t>(port) : 0;
}

}  // namespace reccl::test
