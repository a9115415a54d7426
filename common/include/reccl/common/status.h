// Status and Result: the error currency inside reccl. No exceptions cross layer boundaries.
#pragma once

#include <cerrno>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace reccl {

// Kept apart on purpose (as UCX does): a link failure is recoverable by failover, a peer failure
// is not.
enum class Errc {
  kOk = 0,
  kInvalidArgument,   // caller passed something wrong; message names the argument
  kSystem,            // a syscall failed; message carries the errno text
  kInternal,          // a bug in reccl
  kTimeout,           // a deadline passed
  kLinkFailure,       // a path (NIC, cable, connection) failed; failover may recover
  kPeerFailure,       // a remote process is gone or misbehaves; fatal for the communicator
  kUnsupported,       // this kernel/machine lacks the feature
  kAborted,           // the operation was aborted by the user
  kProtocol,          // a malformed or foreign message was received
  kNotFound,          // a named thing (netns, device, file) does not exist
  kExists,            // a named thing already exists
  kPermission,        // not allowed (not root, missing capability)
  kInvalidUsage,      // each call is valid alone but they do not fit together (ranks disagree,
                      // calls in the wrong order); message says what differs
  kDevice,            // the GPU or its driver failed a call; message names the call and the error
};

const char* errcName(Errc e) noexcept;

class [[nodiscard]] Status {
 public:
  Status() noexcept = default;
  Status(Errc code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() noexcept { return {}; }
  // "what: strerror(err)"; maps EPERM/EACCES, ENOENT, EEXIST, ETIMEDOUT to their Errc.
  static Status FromErrno(int err, std::string_view what);

  bool ok() const noexcept { return code_ == Errc::kOk; }
  explicit operator bool() const noexcept { return ok(); }
  Errc code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  // "timeout: waiting for rank 3" style one-liner.
  std::string ToString() const;
  // Prefixes context: Status("x").Wrap("bootstrap") -> "bootstrap: x".
  Status Wrap(std::string_view context) const&;

 private:
  Errc code_ = Errc::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  T& operator*() & { return value(); }
  Status status() const { return ok() ? Status::Ok() : std::get<1>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace reccl

#define RECCL_CONCAT_INNER_(a, b) a##b
#define RECCL_CONCAT_(a, b) RECCL_CONCAT_INNER_(a, b)

// Returns the Status from the enclosing function when expr fails.
#define RECCL_TRY(expr)                                   \
  do {                                                    \
    ::reccl::Status reccl_try_status_ = (expr);           \
    if (!reccl_try_status_.ok()) return reccl_try_status_; \
  } while (0)

// RECCL_ASSIGN_OR_RETURN(auto fd, openThing()); returns the Status on failure.
#define RECCL_ASSIGN_OR_RETURN(lhs, expr)                                       \
  auto RECCL_CONCAT_(reccl_result_, __LINE__) = (expr);                         \
  if (!RECCL_CONCAT_(reccl_result_, __LINE__).ok())                             \
    return RECCL_CONCAT_(reccl_result_, __LINE__).status();                     \
  lhs = std::move(RECCL_CONCAT_(reccl_result_, __LINE__)).value()
