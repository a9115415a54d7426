#include <bpf/libbpf.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
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

TEST(Params, EveryDefaultIsAllowed) {
  ASSERT_GE(params::table().size(), 40u);
  for (const auto& p : params::table()) {
    if (!*p.def) continue;
    EXPECT_TRUE(params::checkValue(p.env, p.kind, p.allowed, p.def).ok()) << p.env << "=" << p.def;
  }
}

// Every kind of bad value is refused naming the variable, the value and what is allowed; the
// table's own syntax (every range parses) is checked on the way.
TEST(Params, InvalidValuesAreRefusedNamingVariableValueAndRange) {
  for (const auto& p : params::table()) {
    std::string kind = p.kind;
    std::vector<std::string> bad;
    if (kind == "Int") bad = {"abc", "12X", ""};
    if (kind == "Bool") bad = {"maybe", "2"};
    if (kind == "Str" && *p.allowed) bad = {"bogus-value"};
    for (const auto& v : bad) {
      if (v.empty()) continue;
      Status s = params::checkValue(p.env, p.kind, p.allowed, v);
      EXPECT_EQ(s.code(), Errc::kInvalidUsage) << p.env << "=" << v;
      EXPECT_NE(s.message().find(std::string(p.env) + "=" + v), std::string::npos) << s.message();
    }
  }
  struct Case {
    const char* env;
    const char* value;
    bool ok;
    const char* says;
  };
  const Case cases[] = {
      {"RECCL_TIMEOUT_MS", "-1", false, "at least 1 ms"},
      {"RECCL_TIMEOUT_MS", "0", false, "at least 1 ms"},
      {"RECCL_TIMEOUT_MS", "1", true, ""},
      {"RECCL_FAILOVER_TIMEOUT_MS", "-5", false, "at least 1 ms"},
      {"RECCL_CHUNK_SIZE", "4100", false, "a multiple of 64"},
      {"RECCL_CHUNK_SIZE", "1K", false, "4K to 64M"},
      {"RECCL_CHUNK_SIZE", "1M", true, ""},
      {"RECCL_SLOTS", "257", false, "1 to 256"},
      {"RECCL_FAILOVER_SLICE_US", "50", false, "0, or 100 to 100000 us"},
      {"RECCL_FAILOVER_SLICE_US", "0", true, ""},
      {"RECCL_FAILOVER_SLICE_US", "100", true, ""},
      {"RECCL_FAILOVER_RT_PRIO", "100", false, "0 to 99"},
      {"RECCL_FAILOVER_SOCKET_PRIORITY", "7", false, "0 to 6"},
      {"RECCL_FAILOVER_SOCKET_PRIORITY", "0", true, ""},
      {"RECCL_ALGO", "RING", false, "expected one of ring, rd"},
      {"RECCL_ALGO", "", true, ""},
      {"RECCL_DEBUG", "info", true, ""},
      {"RECCL_DETECTOR", "ebpf", false, "auto, daemon, bpf, netlink, poll, none"},
      {"RECCL_SHM_DISABLE", "yes", true, ""},
  };
  for (const auto& c : cases) {
    const params::ParamInfo* p = nullptr;
    for (const auto& e : params::table())
      if (std::string(e.env) == c.env) p = &e;
    ASSERT_NE(p, nullptr) << c.env;
    Status s = params::checkValue(p->env, p->kind, p->allowed, c.value);
    EXPECT_EQ(s.ok(), c.ok) << c.env << "=" << c.value << ": " << s.message();
    if (!c.ok) {
      EXPECT_NE(s.message().find(c.says), std::string::npos) << s.message();
    }
  }
}

TEST(Params, ValidateAllFindsASetVariableOutOfRange) {
  EXPECT_TRUE(params::validateAll().ok());
  setenv("RECCL_STALL_TIMEOUT_MS", "-3", 1);
  Status s = params::validateAll();
  unsetenv("RECCL_STALL_TIMEOUT_MS");
  EXPECT_EQ(s.code(), Errc::kInvalidUsage);
  EXPECT_NE(s.message().find("RECCL_STALL_TIMEOUT_MS=-3"), std::string::npos) << s.message();
  EXPECT_TRUE(params::validateAll().ok());
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

// `reccl params --markdown`: every row has the header's four cells, whatever '|' the values hold
// ("auto|verbs|socket").
TEST(Params, MarkdownTableRowsKeepTheirFourCells) {
  char* text = nullptr;
  size_t size = 0;
  FILE* out = open_memstream(&text, &size);
  ASSERT_NE(out, nullptr);
  reccl::params::printTable(out, true);
  std::fclose(out);
  std::string all(text, size);
  std::free(text);
  size_t rows = 0, start = 0;
  while (start < all.size()) {
    size_t end = all.find('\n', start);
    std::string line = all.substr(start, end - start);
    start = end == std::string::npos ? all.size() : end + 1;
    size_t bars = 0;
    for (size_t i = 0; i < line.size(); ++i)
      if (line[i] == '|' && (i == 0 || line[i - 1] != '\\')) ++bars;
    EXPECT_EQ(bars, 5u) << line;
    ++rows;
  }
  EXPECT_GT(rows, 40u);
}

// A libbpf message for this thread's logger: libbpf warns that the bytes are no ELF object.
void provokeLibbpfWarning() {
  static const char kGarbage[] = "not an ELF object";
  bpf_object* o = bpf_object__open_mem(kGarbage, sizeof kGarbage, nullptr);
  if (o) bpf_object__close(o);
}

// A thread that quiets libbpf (a feature probe) silences its own messages only: another thread's
// warning in the meantime, and its own afterwards, still reach the log.
TEST(Log, LibbpfQuietSilencesOnlyItsOwnThread) {
  std::mutex mu;
  std::vector<std::string> lines;
  reccl::logSetSink([&](reccl::LogLevel, std::string_view line) {
    std::lock_guard lk(mu);
    if (line.find("libbpf: ") != std::string_view::npos) lines.emplace_back(line);
  });
  auto count = [&] {
    std::lock_guard lk(mu);
    return lines.size();
  };
  std::promise<void> quiet, otherDone;
  std::thread prober([&] {
    reccl::LibbpfQuiet q;
    quiet.set_value();
    otherDone.get_future().wait();
    provokeLibbpfWarning();  // dropped
  });
  quiet.get_future().wait();
  provokeLibbpfWarning();
  const size_t whileQuiet = count();
  otherDone.set_value();
  prober.join();
  const size_t afterProber = count();
  provokeLibbpfWarning();
  const size_t after = count();
  reccl::logSetSink(nullptr);
  EXPECT_GT(whileQuiet, 0u) << "a thread not probing lost its libbpf warning";
  EXPECT_EQ(afterProber, whileQuiet) << "the probing thread's warning got through";
  EXPECT_GT(after, afterProber) << "libbpf stayed quiet after the probe ended";
  for (const auto& l : lines) EXPECT_EQ(l.find("libbpf: libbpf: "), std::string::npos) << l;
}
