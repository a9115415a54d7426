// RAII owners of verbs objects. Each owns one pointer and destroys it with the matching ibv_*
// call; close() does it early and returns the result, so a caller can prove nothing was left
// behind (ibv_dealloc_pd fails with EBUSY while a memory region or QP still uses the PD).
// Destructors never throw: a failure there is logged once.
#pragma once

#include <infiniband/verbs.h>

#include <cerrno>
#include <span>
#include <string>
#include <utility>

#include "reccl/common/log.h"
#include "reccl/common/status.h"

namespace reccl::transport::verbs {

template <typename T, int (*Destroy)(T*)>
class VerbsHandle {
 public:
  VerbsHandle() noexcept = default;
  explicit VerbsHandle(T* p, const char* what) noexcept : p_(p), what_(what) {}
  VerbsHandle(VerbsHandle&& o) noexcept : p_(std::exchange(o.p_, nullptr)), what_(o.what_) {}
  VerbsHandle& operator=(VerbsHandle&& o) noexcept {
    if (this != &o) {
      (void)close();
      p_ = std::exchange(o.p_, nullptr);
      what_ = o.what_;
    }
    return *this;
  }
  VerbsHandle(const VerbsHandle&) = delete;
  VerbsHandle& operator=(const VerbsHandle&) = delete;
  ~VerbsHandle() {
    Status s = close();
    if (!s.ok()) RECCL_WARN(kLogNet, "rdma: %s", s.message().c_str());
  }

  T* get() const noexcept { return p_; }
  T* operator->() const noexcept { return p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }

  // Destroys the object now. On failure the object is given up all the same (its owner is
  // going), and the error says why: EBUSY means something still uses it.
  Status close() noexcept {
    if (!p_) return Status::Ok();
    int rc = Destroy(std::exchange(p_, nullptr));
    if (rc == 0) return Status::Ok();
    // The ibv_destroy/dealloc/dereg calls return an errno value (some providers -1 with errno).
    return Status::FromErrno(rc > 0 ? rc : errno, std::string("destroying the ") + what_);
  }

 private:
  T* p_ = nullptr;
  const char* what_ = "verbs object";
};

// The verbs devices of this machine (ibv_get_device_list); freed with the owner.
class DeviceList {
 public:
  // No verbs driver or no device is what most machines have: an empty list, not an error.
  static Result<DeviceList> get() {
    DeviceList d;
    int n = 0;
    d.list_ = ibv_get_device_list(&n);
    if (!d.list_) {
      if (errno == ENOSYS || errno == ENODEV || errno == ENOENT) return d;
      return Status::FromErrno(errno, "rdma: ibv_get_device_list");
    }
    d.n_ = n;
    return d;
  }
  DeviceList(DeviceList&& o) noexcept : list_(std::exchange(o.list_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceList& operator=(DeviceList&&) = delete;
  DeviceList(const DeviceList&) = delete;
  ~DeviceList() {
    if (list_) ibv_free_device_list(list_);
  }
  std::span<ibv_device* const> devices() const noexcept { return {list_, static_cast<size_t>(n_)}; }

 private:
  DeviceList() = default;
  ibv_device** list_ = nullptr;
  int n_ = 0;
};

using Context = VerbsHandle<ibv_context, ibv_close_device>;
using ProtectionDomain = VerbsHandle<ibv_pd, ibv_dealloc_pd>;
using MemoryRegion = VerbsHandle<ibv_mr, ibv_dereg_mr>;
using CompletionChannel = VerbsHandle<ibv_comp_channel, ibv_destroy_comp_channel>;
using CompletionQueue = VerbsHandle<ibv_cq, ibv_destroy_cq>;
using QueuePair = VerbsHandle<ibv_qp, ibv_destroy_qp>;

}  // namespace reccl::transport::verbs
