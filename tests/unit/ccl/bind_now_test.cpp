// libreccl.so and the programs linked with it are bound at load (-z now, CMakeLists.txt): the
// dynamic linker's lazy resolver would otherwise run on a fault's path, the first time a
// failover calls each library function. Read from the loaded objects' dynamic sections, so a
// library found elsewhere (LD_LIBRARY_PATH) is judged too.
#include <elf.h>
#include <gtest/gtest.h>
#include <link.h>

#include <string>
#include <vector>

#include "reccl/reccl.h"

namespace reccl {
namespace {

struct Loaded {
  std::string name;  // "" for the program itself
  bool bindNow = false;
};

int collect(dl_phdr_info* info, size_t, void* out) {
  Loaded l;
  l.name = info->dlpi_name ? info->dlpi_name : "";
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
    const auto* d = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    for (; d->d_tag != DT_NULL; ++d) {
      if (d->d_tag == DT_BIND_NOW) l.bindNow = true;
      if (d->d_tag == DT_FLAGS && (d->d_un.d_val & DF_BIND_NOW)) l.bindNow = true;
      if (d->d_tag == DT_FLAGS_1 && (d->d_un.d_val & DF_1_NOW)) l.bindNow = true;
    }
  }
  static_cast<std::vector<Loaded>*>(out)->push_back(l);
  return 0;
}

TEST(BindNow, LibrecclAndItsProgramAreBoundAtLoad) {
  int version = 0;
  ASSERT_EQ(recclGetVersion(&version), recclSuccess);  // keeps libreccl.so needed
  std::vector<Loaded> objs;
  dl_iterate_phdr(collect, &objs);
  ASSERT_FALSE(objs.empty());
  EXPECT_TRUE(objs[0].bindNow) << "the test program was linked without -z now";
  bool found = false;
  for (const auto& o : objs) {
    if (o.name.find("/libreccl.so") == std::string::npos) continue;
    found = true;
    EXPECT_TRUE(o.bindNow) << o.name << " was linked without -z now";
  }
  EXPECT_TRUE(found) << "libreccl.so is not loaded";
}

}  // namespace
}  // namespace reccl
