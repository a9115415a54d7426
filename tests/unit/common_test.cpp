#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "reccl/common/log.h"
#include "reccl/common/params.h"
#include "reccl/common/status.h"

namespace reccl {
namespace {

TEST(Status, FromErrnoMapsCodeAndCarriesErrnoText) {
  Status s = Status::FromErrno(EEXIST, "create netns foo");
  EXPECT_EQ(s.code(), Errc::kExists);
  EXPECT_EQ(s.message(), "create netns foo: File exists");
  EXPECT_EQ(s.Wrap("testbed up").message(), "testbed up: create netns foo: File exists");
}

Result<int> half(int v) {
  if (v % 2) return Status(Errc::kInvalidArgument, "v is odd");
  return v / 2;
}

Status quarter(int v, int* out) {
  RECCL_ASSIGN_OR_RETURN(int h, half(v));
  RECCL_ASSIGN_OR_RETURN(*out, half(h));
  return Status::Ok();
}

TEST(Status, TryMacrosPropagateTheFirstError) {
  int out = 0;
  EXPECT_TRUE(quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = quarter(6, &out);
  EXPECT_EQ(s.code(), Errc::kInvalidArgument);
  EXPECT_EQ(s.ToString(), "invalid argument: v is odd");
}

TEST(Status, InvalidUsageIsItsOwnCode) {
  Status s(Errc::kInvalidUsage, "mismatched count across ranks: this rank has 1, rank 0 has 2");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.code(), Errc::kInvalidArgument);
  EXPECT_EQ(s.ToString(), "invalid usage: mismatched count across ranks: this rank has 1, rank 0 has 2");
  EXPECT_STREQ(errcName(Errc::kInvalidUsage), "invalid usage");
}

TEST(Params, ParseSizeAcceptsSuffixesAndRejectsGarbage) {
  EXPECT_EQ(params::parseSize("4096").value(), 4096);
  EXPECT_EQ(params::parseSize("512K").value(), 512 * 1024);
  EXPECT_EQ(params::parseSize("64M").value(), 64ll << 20);
  EXPECT_EQ(params::parseSize("1GB").value(), 1ll << 30);
  EXPECT_FALSE(params::parseSize("").ok());
  EXPECT_FALSE(params::parseSize("12X").ok());
  EXPECT_FALSE(params::parseSize("abc").ok());
  EXPECT_FALSE(params::parseSize("99999999999999999999").ok());
}

TEST(Params, EnvironmentOverridesDefaultAndBadValueFallsBack) {
  setenv("RECCL_SLOTS", "16", 1);
  EXPECT_EQ(params::Slots(), 16);
  setenv("RECCL_SLOTS", "sixteen", 1);
  EXPECT_EQ(params::Slots(), 8);  // default, with one warning naming the variable
  unsetenv("RECCL_SLOTS");
  EXPECT_EQ(params::ChunkSize(), 512 * 1024);
}

TEST(Log, LevelAndSubsystemFilter) {
  std::vector<std::string> lines;
  logSetSink([&](LogLevel, std::string_view l) { lines.emplace_back(l); });
  setenv("RECCL_DEBUG", "INFO", 1);
  setenv("RECCL_DEBUG_SUBSYS", "^NET", 1);
  logReloadEnv();
  RECCL_INFO(kLogInit, "hello %d", 42);
  RECCL_INFO(kLogNet, "filtered out");
  RECCL_TRACE(kLogInit, "too verbose");
  logSetSink(nullptr);
  unsetenv("RECCL_DEBUG");
  unsetenv("RECCL_DEBUG_SUBSYS");
  logReloadEnv();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("reccl info INIT: hello 42"), std::string::npos) << lines[0];
}

}  // namespace
}  // namespace reccl
