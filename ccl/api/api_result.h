// Internal to the C API: Status -> recclResult_t in one place, this thread's last error, and the
// guard that keeps every C++ exception on this side of the boundary.
#pragma once

#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "reccl/common/status.h"
#include "reccl/reccl.h"

namespace reccl::api {

recclResult_t toResult(const Status& s) noexcept;
// Records s's message as this thread's last error and returns its code.
recclResult_t fail(const Status& s);
recclResult_t fail(recclResult_t r, const std::string& msg);
inline recclResult_t finish(const Status& s) { return s.ok() ? recclSuccess : fail(s); }
// This thread's last error text (recclGetLastError).
std::string& lastError() noexcept;

// The exception being handled, as a Status; call it only inside a catch block.
inline Status caughtException() noexcept {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return Status(Errc::kSystem, "out of memory");
  } catch (const std::exception& e) {
    return Status(Errc::kInternal, std::string("internal error: ") + e.what());
  } catch (...) {
    return Status(Errc::kInternal, "internal error");
  }
}

template <typename F>
recclResult_t guarded(F&& f) noexcept {
  try {
    return f();
  } catch (...) {
    return fail(caughtException());
  }
}

// C callers may pass any int in an enum parameter; reading such a value as the enum type is
// undefined in C++, so the raw bits are read before validation.
template <typename E>
int rawEnum(const E& e) noexcept {
  int v;
  static_assert(sizeof(E) == sizeof(int));
  std::memcpy(&v, &e, sizeof(v));
  return v;
}

}  // namespace reccl::api

#define RECCL_CHECK(x)                 \
  do {                                 \
    recclResult_t r_ = (x);            \
    if (r_ != recclSuccess) return r_; \
  } while (0)
