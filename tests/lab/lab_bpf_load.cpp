// Loads one program of the link detector alone with libbpf's full log (verifier output
// included) on stderr: what the detector's probe hides on purpose. For the lab, where a hook
// that should load does not: `lab_bpf_load fentry_ib_dispatch`.
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "reccl_bpf/link_event.h"
#include "link_detector.skel.h"
#include "reccl/detector/bpf_source.h"

namespace {
int printAll(enum libbpf_print_level, const char* fmt, va_list ap) { return std::vfprintf(stderr, fmt, ap); }
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PROGRAM\n", argv[0]);
    return 64;
  }
  libbpf_set_print(printAll);
  link_detector* skel = link_detector::open();
  if (!skel) {
    std::fprintf(stderr, "open skeleton: %s\n", std::strerror(errno));
    return 1;
  }
  // The detector's settings (BpfSource's defaults), so the same code paths are verified.
  skel->rodata->report_rdma = 1;
  skel->rodata->linkwatch_event_addr = reccl::detector::kallsymsAddress("linkwatch_event");
  skel->rodata->delayed_work_timer_fn_addr = reccl::detector::kallsymsAddress("delayed_work_timer_fn");
  bpf_program* target = nullptr;
  bpf_program* p;
  bpf_object__for_each_program(p, skel->obj) {
    bool me = std::strcmp(bpf_program__name(p), argv[1]) == 0;
    bpf_program__set_autoload(p, me);
    if (me) target = p;
  }
  if (!target) {
    std::fprintf(stderr, "program: no program named '%s' in link_detector\n", argv[1]);
    link_detector::destroy(skel);
    return 64;
  }
  int rc = 0;
  if (int err = link_detector::load(skel); err) {
    std::fprintf(stderr, "%s: load: %s\n", argv[1], std::strerror(-err));
    rc = 1;
  } else if (bpf_link* l = bpf_program__attach(target)) {
    std::printf("%s: loaded and attached\n", argv[1]);
    bpf_link__destroy(l);
  } else {
    std::fprintf(stderr, "%s: attach: %s\n", argv[1], std::strerror(errno));
    rc = 1;
  }
  link_detector::destroy(skel);
  return rc;
}
