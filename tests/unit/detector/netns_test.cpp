// Opening a namespace by path never blocks and never opens what is not a network namespace:
// a FIFO, a device, a regular file or another kind of namespace is refused by name, from the
// O_PATH descriptor, before any open() that could block or have side effects.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "reccl/detector/netns.h"

namespace reccl::detector {
namespace {

struct TempFifo {
  std::string path = "/tmp/reccl-netns-fifo-" + std::to_string(getpid());
  TempFifo() { mkfifo(path.c_str(), 0600); }
  ~TempFifo() { unlink(path.c_str()); }
};

TEST(Netns, AFifoIsRefusedWithoutOpeningIt) {
  TempFifo fifo;
  auto pending = std::async(std::launch::async, [&] { return openNetns(fifo.path).status(); });
  if (pending.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    // Blocked in open(): a writer releases it, so the test fails instead of hanging.
    UniqueFd w(open(fifo.path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
    FAIL() << "openNetns blocked on a FIFO";
  }
  Status st = pending.get();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Errc::kInvalidArgument);
  EXPECT_NE(st.message().find("not a namespace file"), std::string::npos) << st.ToString();
}

struct BadPath {
  const char* path;
  const char* error;
};

void PrintTo(const BadPath& b, std::ostream* os) { *os << b.path; }

class NetnsBadPath : public ::testing::TestWithParam<BadPath> {};

TEST_P(NetnsBadPath, IsRefusedByName) {
  auto ns = openNetns(GetParam().path);
  ASSERT_FALSE(ns.ok());
  EXPECT_NE(ns.status().message().find(GetParam().error), std::string::npos) << ns.status().ToString();
  auto fd = openNetnsFd(GetParam().path);
  EXPECT_FALSE(fd.ok());
}

INSTANTIATE_TEST_SUITE_P(Paths, NetnsBadPath,
                         ::testing::Values(BadPath{"/dev/null", "not a namespace file"},
                                           BadPath{"/proc/self/stat", "not a namespace file"},
                                           BadPath{"/proc/self/ns/uts", "not a network namespace"},
                                           BadPath{"/proc", "not a namespace file"},
                                           BadPath{"/nonexistent/ns", "no network namespace"}));

TEST(Netns, TheOwnNamespaceByPathIsTheOwnOneAndItsDescriptorIsKeptForClients) {
  auto own = ownNetnsIno();
  ASSERT_TRUE(own.ok());
  auto byPath = openNetns("/proc/self/ns/net");
  ASSERT_TRUE(byPath.ok()) << byPath.status().ToString();
  EXPECT_EQ(byPath->ino, own.value());
  EXPECT_TRUE(byPath->own());
  auto fd = openNetnsFd("");
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_TRUE(fd->valid());
  auto back = netnsFromFd(std::move(fd).value(), "mine");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ino, own.value());
  EXPECT_EQ(back->spec, "mine");
}

TEST(Netns, AHandedOverDescriptorMustBeANetworkNamespaceOpenForReading) {
  auto opath = netnsFromFd(UniqueFd(open("/proc/self/ns/net", O_PATH | O_CLOEXEC)), "p");
  ASSERT_FALSE(opath.ok());
  EXPECT_NE(opath.status().message().find("O_PATH"), std::string::npos);
  auto uts = netnsFromFd(UniqueFd(open("/proc/self/ns/uts", O_RDONLY | O_CLOEXEC)), "u");
  ASSERT_FALSE(uts.ok());
  EXPECT_NE(uts.status().message().find("not a network namespace"), std::string::npos);
  TempFifo fifo;
  auto f = netnsFromFd(UniqueFd(open(fifo.path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)), "f");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("not a namespace file"), std::string::npos);
  EXPECT_FALSE(netnsFromFd(UniqueFd(), "none").ok());
}

}  // namespace
}  // namespace reccl::detector
