// Proves the BPF build path end to end: clang -target bpf -> skeleton -> load into this kernel ->
// attach -> ring buffer event seen by userspace.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <memory>

#include "reccl/common/log.h"
#include "reccl_bpf/smoke.h"
#include "smoke.skel.h"

namespace {

struct SkelDeleter {
  void operator()(smoke* s) const { smoke::destroy(s); }
};
struct RingDeleter {
  void operator()(ring_buffer* r) const { ring_buffer__free(r); }
};

struct Seen {
  int count = 0;
  reccl_smoke_event last{};
};

int onEvent(void* ctx, void* data, size_t size) {
  auto* seen = static_cast<Seen*>(ctx);
  if (size < sizeof(reccl_smoke_event)) return 0;
  seen->last = *static_cast<reccl_smoke_event*>(data);
  seen->count++;
  return 0;
}

TEST(BpfSmoke, LoadsAttachesAndReportsAnEvent) {
  if (geteuid() != 0) GTEST_SKIP() << "loading BPF programs needs root (CAP_BPF + CAP_PERFMON)";
  reccl::logCaptureLibbpf();
  std::unique_ptr<smoke, SkelDeleter> skel(smoke::open());
  ASSERT_TRUE(skel) << "open smoke skeleton";
  skel->rodata->target_tgid = static_cast<__u32>(getpid());
  skel->rodata->target_syscall_nr = SYS_getppid;
  ASSERT_EQ(smoke::load(skel.get()), 0) << "load into this kernel";
  ASSERT_EQ(smoke::attach(skel.get()), 0) << "attach raw tracepoint sys_enter";

  Seen seen;
  std::unique_ptr<ring_buffer, RingDeleter> rb(
      ring_buffer__new(bpf_map__fd(skel->maps.events), onEvent, &seen, nullptr));
  ASSERT_TRUE(rb);

  const long cookie = 0x5eed1234;
  pid_t parent = static_cast<pid_t>(syscall(SYS_getppid, cookie));
  EXPECT_EQ(parent, getppid());
  for (int i = 0; i < 20 && seen.count == 0; ++i) ring_buffer__poll(rb.get(), 50);

  ASSERT_GE(seen.count, 1) << "no event reached userspace within 1 s";
  EXPECT_EQ(seen.last.tgid, static_cast<__u32>(getpid()));
  EXPECT_EQ(seen.last.tid, static_cast<__u32>(syscall(SYS_gettid)));
  EXPECT_EQ(seen.last.cookie, static_cast<__u64>(cookie));
  EXPECT_GT(seen.last.ts_ns, 0u);
}

}  // namespace
