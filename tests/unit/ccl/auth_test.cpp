// Connection authentication and rendezvous safety: what a stranger who knows the launcher's
// public values can do (nothing), what a captured hello is worth on another connection
// (nothing), how wrong or unsafe secrets are reported, and that two jobs on one rendezvous
// address never go on as one.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/comm_access.h"
#include "ccl_test_util.h"
#include "core/auth.h"
#include "core/handshake.h"
#include "core/launch_env.h"
#include "core/wire.h"
#include "failover/migration/migrate_wire.h"
#include "worker_procs.h"

namespace {

using namespace reccl;
using Ms = std::chrono::milliseconds;
using test::ScopedEnv;

core::Key keyOf(uint8_t b) {
  core::Key k;
  k.fill(std::byte{b});
  return k;
}

core::Nonce nonceOf(uint8_t b) {
  core::Nonce n;
  n.fill(std::byte{b});
  return n;
}

Result<core::LaunchEnv> launchEnv(const std::map<std::string, std::string>& m) {
  return core::parseLaunchEnv([&m](const char* n) -> const char* {
    auto it = m.find(n);
    return it == m.end() ? nullptr : it->second.c_str();
  });
}

// The value the library used as its job secret before: a hash of the launcher's public values.
uint64_t launcherDerivedValue(const std::string& addr, uint16_t port, int nranks) {
  return core::fnv1a64("secret:" + addr + ":" + std::to_string(port) + "/" + std::to_string(nranks));
}

TEST(AuthWire, ChallengeRoundTripAndRejects) {
  std::array<std::byte, core::kChallengeBytes> c;
  core::encodeChallenge(core::AuthPurpose::kData, nonceOf(7), c);
  auto n = core::decodeChallenge(c, core::AuthPurpose::kData);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(*n, nonceOf(7));
  EXPECT_FALSE(core::decodeChallenge(c, core::AuthPurpose::kBootstrap).ok());  // another port's
  EXPECT_FALSE(core::decodeChallenge(std::span(c).first(20), core::AuthPurpose::kData).ok());
  auto bad = c;
  bad[0] = std::byte{0};
  EXPECT_FALSE(core::decodeChallenge(bad, core::AuthPurpose::kData).ok());
  bad = c;
  bad[4] = std::byte{2};  // protocol version 2
  auto v2 = core::decodeChallenge(bad, core::AuthPurpose::kData);
  ASSERT_FALSE(v2.ok());
  EXPECT_NE(v2.status().message().find("version"), std::string::npos);
}

// A hello and its MAC open only under the key and the challenge they were made for: a captured
// hello replayed on another connection (another challenge) is refused, as is one made with any
// other key.
TEST(AuthWire, AHelloOpensOnlyUnderItsKeyAndChallenge) {
  core::Hello h;
  h.kind = core::HelloKind::kTcpData;
  h.commId = 5;
  h.srcRank = 1;
  h.dstRank = 0;
  h.nranks = 2;
  std::array<std::byte, core::kAuthHelloBytes> sealed;
  core::Session s = core::sealHello(h, keyOf(1), nonceOf(2), sealed);
  EXPECT_EQ(s.server, nonceOf(2));
  auto ok = core::openAuthHello(sealed, keyOf(1), nonceOf(2));
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->nonce, s.client);
  EXPECT_EQ(core::openAuthHello(sealed, keyOf(1), nonceOf(3)).status().code(), Errc::kPermission);  // replayed
  EXPECT_EQ(core::openAuthHello(sealed, keyOf(9), nonceOf(2)).status().code(), Errc::kPermission);  // other key
  auto flipped = sealed;
  flipped[24] ^= std::byte{1};  // the source rank, under the MAC
  EXPECT_FALSE(core::openAuthHello(flipped, keyOf(1), nonceOf(2)).ok());
  // Two seals of one hello under one challenge differ (fresh client nonce each time).
  std::array<std::byte, core::kAuthHelloBytes> again;
  core::Session s2 = core::sealHello(h, keyOf(1), nonceOf(2), again);
  EXPECT_NE(s.client, s2.client);
  EXPECT_NE(sealed, again);
  // The acceptor's proof is bound to both nonces and to its label: a hello's MAC is no proof.
  core::Tag p = core::proofTag(keyOf(1), s.client, s.server);
  EXPECT_TRUE(core::verifyProofTag(keyOf(1), s.client, s.server, p));
  EXPECT_FALSE(core::verifyProofTag(keyOf(1), s2.client, s.server, p));
  EXPECT_FALSE(core::verifyProofTag(keyOf(9), s.client, s.server, p));
  EXPECT_FALSE(core::verifyProofTag(keyOf(1), s.client, s.server, std::span(sealed).subspan(core::kHelloBytes)));
}

TEST(AuthWire, TheCommunicatorSecretOpensOnlyForItsConnection) {
  core::CommSecret cs{keyOf(4), 0x1122334455667788ull};
  std::array<std::byte, core::kSealedCommSecretBytes> box;
  core::sealCommSecret(cs, keyOf(1), nonceOf(2), nonceOf(3), box);
  auto open = core::openCommSecret(box, keyOf(1), nonceOf(2), nonceOf(3));
  ASSERT_TRUE(open.ok()) << open.status().message();
  EXPECT_EQ(open->key, cs.key);
  EXPECT_EQ(open->commId, cs.commId);
  EXPECT_FALSE(core::openCommSecret(box, keyOf(9), nonceOf(2), nonceOf(3)).ok());  // wrong job secret
  EXPECT_FALSE(core::openCommSecret(box, keyOf(1), nonceOf(3), nonceOf(2)).ok());  // another connection's
  // Sealed under an all-zero key (no job secret) it still opens for its connection alone.
  core::sealCommSecret(cs, core::Key{}, nonceOf(2), nonceOf(3), box);
  EXPECT_TRUE(core::openCommSecret(box, core::Key{}, nonceOf(2), nonceOf(3)).ok());
  EXPECT_FALSE(core::openCommSecret(box, core::Key{}, nonceOf(5), nonceOf(3)).ok());
}

TEST(AuthWire, RootFramesAreBounded) {
  std::array<std::byte, core::kRootFrameHeaderBytes> b;
  core::encodeRootFrameHeader({core::RootFrame::kRefused, 40}, b);
  auto h = core::decodeRootFrameHeader(b, 1000);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->type, core::RootFrame::kRefused);
  EXPECT_EQ(h->length, 40u);
  core::encodeRootFrameHeader({core::RootFrame::kRefused, core::kMaxRefusalBytes + 1}, b);
  EXPECT_FALSE(core::decodeRootFrameHeader(b, 1000).ok());
  core::encodeRootFrameHeader({core::RootFrame::kTable, 5000}, b);
  EXPECT_FALSE(core::decodeRootFrameHeader(b, 1000).ok());
  core::encodeRootFrameHeader({core::RootFrame::kTable, 10}, b);  // shorter than key + tag
  EXPECT_FALSE(core::decodeRootFrameHeader(b, 1000).ok());
}

TEST(AuthLaunchEnv, TheJobIdIsPublicAndTheKeyComesOnlyFromASecret) {
  std::map<std::string, std::string> base = {
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}};
  auto a = launchEnv(base);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(core::isZeroKey(a->bootKey));
  EXPECT_TRUE(a->secretFrom.empty());
  auto other = base;
  other["TORCHELASTIC_RUN_ID"] = "job-b";
  EXPECT_NE(launchEnv(other)->jobId, a->jobId);  // the launcher's job id tells jobs apart
  auto withSecret = base;
  withSecret["RECCL_JOB_SECRET"] = "s3cret";
  auto s = launchEnv(withSecret);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(core::isZeroKey(s->bootKey));
  EXPECT_EQ(s->secretFrom, "RECCL_JOB_SECRET");
  EXPECT_EQ(s->jobId, a->jobId);  // the secret is not part of the public id
  withSecret["RECCL_JOB_SECRET"] = "s3cret2";
  EXPECT_NE(launchEnv(withSecret)->bootKey, s->bootKey);
}

TEST(AuthLaunchEnv, SecretFilesOthersCanReadAreRefused) {
  char dir[] = "/tmp/reccl-auth-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/secret";
  {
    std::ofstream f(path);
    f << "from-a-file\n";
  }
  std::map<std::string, std::string> env = {{"RANK", "0"},
                                            {"WORLD_SIZE", "2"},
                                            {"MASTER_ADDR", "10.0.0.1"},
                                            {"MASTER_PORT", "29500"},
                                            {"RECCL_JOB_SECRET_FILE", path}};
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  auto open = launchEnv(env);
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.status().code(), Errc::kInvalidUsage);
  EXPECT_NE(open.status().message().find("RECCL_JOB_SECRET_FILE"), std::string::npos) << open.status().message();
  EXPECT_NE(open.status().message().find("chmod 600"), std::string::npos) << open.status().message();
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  auto ok = launchEnv(env);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->secretFrom, "RECCL_JOB_SECRET_FILE");
  // The same secret inline gives the same key (the trailing newline is not part of it).
  auto inl = env;
  inl.erase("RECCL_JOB_SECRET_FILE");
  inl["RECCL_JOB_SECRET"] = "from-a-file";
  EXPECT_EQ(launchEnv(inl)->bootKey, ok->bootKey);
  // Both at once, a FIFO (never blocks) and a missing file are refused naming the variable.
  auto both = env;
  both["RECCL_JOB_SECRET"] = "x";
  EXPECT_FALSE(launchEnv(both).ok());
  std::string fifo = std::string(dir) + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  env["RECCL_JOB_SECRET_FILE"] = fifo;
  auto f = launchEnv(env);
  EXPECT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("not a regular file"), std::string::npos) << f.status().message();
  env["RECCL_JOB_SECRET_FILE"] = std::string(dir) + "/absent";
  EXPECT_FALSE(launchEnv(env).ok());
  unlink(fifo.c_str());
  unlink(path.c_str());
  rmdir(dir);
}

TEST(AuthLaunchEnv, OutOfRangeRanksSayTheRange) {
  auto r = launchEnv({{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::kInvalidUsage);
  EXPECT_NE(r.status().message().find("RANK=4 is out of range [0, 3]"), std::string::npos) << r.status().message();
  auto w = launchEnv({{"RANK", "0"}, {"WORLD_SIZE", "many"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}});
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("WORLD_SIZE=many is not a whole number"), std::string::npos)
      << w.status().message();
  auto none = launchEnv({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Errc::kInvalidUsage);
}

// Two ranks as threads from a launcher environment each (recclCommInitFromEnv's path).
class EnvComms {
 public:
  EnvComms(int n, uint16_t port, const std::map<std::string, std::string>& extra = {}) : comms_(n, nullptr), rcs_(n) {
    std::vector<std::thread> ts;
    errs_.resize(n);
    for (int r = 0; r < n; ++r) {
      std::map<std::string, std::string> m = {{"RANK", std::to_string(r)},
                                              {"WORLD_SIZE", std::to_string(n)},
                                              {"MASTER_ADDR", "127.0.0.1"},
                                              {"MASTER_PORT", std::to_string(port)}};
      for (auto& [k, v] : extra) m[k] = v;
      auto env = launchEnv(m);
      if (!env.ok()) {
        rcs_[r] = recclInvalidUsage;
        errs_[r] = env.status().message();
        continue;
      }
      ts.emplace_back([this, r, e = *env] {
        rcs_[r] = api::initFromLaunchEnv(&comms_[r], e);
        if (rcs_[r] != recclSuccess) errs_[r] = recclGetLastError(nullptr);
      });
    }
    for (auto& t : ts) t.join();
  }
  ~EnvComms() {
    std::vector<std::thread> ts;
    for (auto c : comms_)
      if (c) ts.emplace_back([c] { recclCommDestroy(c); });
    for (auto& t : ts) t.join();
  }
  recclResult_t rc(int r) const { return rcs_[r]; }
  const std::string& error(int r) const { return errs_[r]; }
  recclComm_t operator[](int r) const { return comms_[r]; }
  // Every rank's allreduce of 1..n is exact.
  bool allReduceWorks() {
    std::vector<recclResult_t> rcs(comms_.size());
    std::vector<std::thread> ts;
    for (size_t r = 0; r < comms_.size(); ++r)
      ts.emplace_back([&, r] {
        std::vector<int32_t> x(1000, static_cast<int32_t>(r) + 1);
        rcs[r] = recclAllReduce(x.data(), x.data(), x.size(), recclInt32, recclSum, comms_[r], nullptr);
        int32_t want = static_cast<int32_t>(comms_.size() * (comms_.size() + 1) / 2);
        if (rcs[r] == recclSuccess && x[999] != want) rcs[r] = recclInternalError;
      });
    for (auto& t : ts) t.join();
    for (auto rc : rcs)
      if (rc != recclSuccess) return false;
    return true;
  }

 private:
  std::vector<recclComm_t> comms_;
  std::vector<recclResult_t> rcs_;
  std::vector<std::string> errs_;
};

// The attack from the security review: a process that can reach a rank's data port computes
// what the launcher environment makes public and asks for a migration. Before, the hello carried
// that value as its secret and was answered with the receiver's step counters; now it carries no
// secret, and without the communicator's key neither the old value, nor a key made from the
// public values, nor a missing MAC opens the connection. Nothing is answered and the job goes on.
TEST(CclAuth, AForgedMigrationHelloWithTheLauncherDerivedValueIsRefused) {
  ScopedEnv shm("RECCL_SHM_DISABLE", "1");
  uint16_t port = test::freePort();
  EnvComms comms(2, port);
  ASSERT_EQ(comms.rc(0), recclSuccess) << comms.error(0);
  ASSERT_EQ(comms.rc(1), recclSuccess) << comms.error(1);
  core::Comm* victim = api::commImpl(comms[1]);
  uint16_t dataPort = victim->dataEndpoint().port;
  uint64_t before = victim->refusedConnections();
  auto env = launchEnv({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                        {"MASTER_PORT", std::to_string(port)}});
  ASSERT_TRUE(env.ok());
  uint64_t derived = launcherDerivedValue("127.0.0.1", port, 2);
  std::string material = "127.0.0.1:" + std::to_string(port) + "/2";
  std::vector<core::Key> guesses = {core::Key{},
                                    core::deriveJobKey(std::as_bytes(std::span(material.data(), material.size())))};
  std::memcpy(guesses[0].data(), &derived, sizeof(derived));
  for (size_t g = 0; g < guesses.size(); ++g) {
    int fd = test::rawConnect(htonl(INADDR_LOOPBACK), dataPort);
    ASSERT_GE(fd, 0);
    core::ByteIo io = core::socketIo(fd, Deadline::afterMs(10000));
    core::Hello h;
    h.kind = core::HelloKind::kTcpData;
    h.jobId = g == 0 ? derived : env->jobId;
    h.commId = derived;
    h.srcRank = 0;
    h.dstRank = 1;
    h.nranks = 2;
    h.channel = 0;
    h.epoch = 1000;  // a migration's epoch
    failover::MigrateRequest req;
    req.conn = {0, 1, 0};
    req.initiator = failover::Role::kSender;
    req.epoch = 1000;
    std::array<std::byte, failover::kMigrateRequestBytes> rb;
    failover::encodeMigrateRequest(req, rb);
    auto session = core::sendAuthHello(io, h, guesses[g], core::AuthPurpose::kData, rb);
    ASSERT_TRUE(session.ok()) << session.status().message();
    // The acceptor closes without a byte: no proof, no reply, no counters.
    std::array<std::byte, 64> answer;
    ssize_t n = recv(fd, answer.data(), answer.size(), 0);
    EXPECT_LE(n, 0) << "guess " << g << ": the data port answered a forged hello";
    close(fd);
  }
  for (auto end = std::chrono::steady_clock::now() + Ms(10000);
       victim->refusedConnections() < before + guesses.size() && std::chrono::steady_clock::now() < end;)
    std::this_thread::sleep_for(Ms(5));
  EXPECT_EQ(victim->refusedConnections(), before + guesses.size());
  EXPECT_TRUE(comms.allReduceWorks());
  EXPECT_EQ(victim->stats().failovers, 0u);
}

TEST(CclAuth, RanksWithDifferentJobSecretsAreToldSo) {
  ScopedEnv boot("RECCL_BOOTSTRAP_TIMEOUT_MS", "3000");
  uint16_t port = test::freePort();
  // Rank 0 (the root) has one secret; rank 1 another. Rank 1 must learn why at once.
  std::vector<recclComm_t> comms(2, nullptr);
  std::vector<recclResult_t> rcs(2);
  std::vector<std::string> errs(2);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r) {
    auto env = launchEnv({{"RANK", std::to_string(r)},
                          {"WORLD_SIZE", "2"},
                          {"MASTER_ADDR", "127.0.0.1"},
                          {"MASTER_PORT", std::to_string(port)},
                          {"RECCL_JOB_SECRET", r == 0 ? "alpha" : "beta"}});
    ASSERT_TRUE(env.ok());
    ts.emplace_back([&, r, e = *env] {
      rcs[r] = api::initFromLaunchEnv(&comms[r], e);
      if (rcs[r] != recclSuccess) errs[r] = recclGetLastError(nullptr);
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(rcs[1], recclInvalidUsage) << errs[1] << " (rank 0: " << errs[0] << ")";
  EXPECT_NE(errs[1].find("job secret differs"), std::string::npos) << errs[1] << " (rank 0: " << errs[0] << ")";
  EXPECT_NE(rcs[0], recclSuccess) << "rank 0 formed a communicator its peer never joined";
  for (auto c : comms)
    if (c) recclCommDestroy(c);
}

TEST(CclAuth, AJobSecretGuardsTheWholeCommunicator) {
  uint16_t port = test::freePort();
  EnvComms comms(3, port, {{"RECCL_JOB_SECRET", "gamma"}});
  for (int r = 0; r < 3; ++r) ASSERT_EQ(comms.rc(r), recclSuccess) << comms.error(r);
  EXPECT_TRUE(comms.allReduceWorks());
}

// Two jobs launched with the same rendezvous address and world size (no launcher job id to tell
// them apart) never compute together.
namespace twojobs {
// Job A computes until it is broken: no run of fixed length ends before the test is done with it.
const std::vector<std::string> kEnv = {"WORKER_ITERS=100000000", "WORKER_COUNT=64", "RECCL_BOOTSTRAP_TIMEOUT_MS=8000",
                                       "RECCL_DEBUG=NONE"};
bool saysShared(const std::string& err) {
  return err.find("in use") != std::string::npos || err.find("claimed twice") != std::string::npos ||
         err.find("two jobs share") != std::string::npos;
}
// Waits for process `name` of the two jobs, which must fail in time; what it said on stderr
// (spawned with dir/name for it).
std::string failure(test::Workers& w, pid_t pid, const test::ScratchDir& dir, const std::string& name) {
  int code = w.wait(pid, Ms(30000));
  std::string err = test::readFile(dir / name);
  EXPECT_NE(code, -1) << name << " hung";
  EXPECT_NE(code, 0) << name << " went on: " << err;
  return err;
}
}  // namespace twojobs

// Job A is up and computing when job B starts: B's rank 0 cannot take the address, B's rank 1
// reaches A's root after A's communicator formed and is refused, and A (which may now hold a
// stranger's rank) fails, saying why. Each step is waited for, so each message is the one due.
TEST(CclAuth, ASecondJobOnARunningJobsAddressFailsAndStopsTheFirst) {
  test::ScratchDir d("reccl-twojobs");
  ASSERT_TRUE(d.ok());
  test::Workers w;  // after the directory: its processes are gone before the directory goes
  uint16_t port = test::freePort();
  std::vector<std::string> a = twojobs::kEnv;
  a.push_back("WORKER_READY_FILE=" + d / "ready");
  pid_t a0 = w.spawn(0, 2, port, a, d / "a0");
  pid_t a1 = w.spawn(1, 2, port, a, d / "a1");
  ASSERT_TRUE(test::waitForFile(d / "ready", Ms(30000))) << "job A did not come up";

  pid_t b0 = w.spawn(0, 2, port, twojobs::kEnv, d / "b0");
  std::string e = twojobs::failure(w, b0, d, "b0");
  EXPECT_NE(e.find("is in use"), std::string::npos) << "b0: " << e;

  pid_t b1 = w.spawn(1, 2, port, twojobs::kEnv, d / "b1");
  e = twojobs::failure(w, b1, d, "b1");
  EXPECT_NE(e.find("tried to join after the communicator formed"), std::string::npos) << "b1: " << e;

  std::string e0 = twojobs::failure(w, a0, d, "a0"), e1 = twojobs::failure(w, a1, d, "a1");
  EXPECT_TRUE(twojobs::saysShared(e0) || twojobs::saysShared(e1)) << "a0: " << e0 << "\na1: " << e1;
}

// Both jobs start at once. Which rank 0 takes the address and which rank 1 reaches it first is
// chance, and so is which messages are due: a process of one job may fail only because its peer,
// in the other job's communicator, was stopped (and the second rank 0 may take the address after
// the first one exited, then wait out its bootstrap deadline alone). What holds in every order:
// every process fails within its deadline, and one that saw both jobs says the address is shared.
TEST(CclAuth, TwoJobsStartingAtOnceOnOneAddressAllFail) {
  test::ScratchDir d("reccl-twojobs");
  ASSERT_TRUE(d.ok());
  test::Workers w;
  uint16_t port = test::freePort();
  const std::vector<std::string> names = {"a0", "a1", "b0", "b1"};
  std::vector<pid_t> pids;
  for (const auto& n : names) pids.push_back(w.spawn(n[1] - '0', 2, port, twojobs::kEnv, d / n));
  bool told = false;
  std::string all;
  for (size_t i = 0; i < names.size(); ++i) {
    std::string err = twojobs::failure(w, pids[i], d, names[i]);
    told = told || twojobs::saysShared(err);
    all += names[i] + ": " + err + "\n";
  }
  EXPECT_TRUE(told) << "no process said the address is shared:\n" << all;
}

// With the launcher's job ids set (torchrun's run id here), the second job is foreign to the
// first one's root: it is refused with that reason and the first job is not disturbed.
TEST(CclAuth, AJobWithAnotherLauncherIdIsRefusedAndTheFirstGoesOn) {
  test::ScratchDir d("reccl-foreign");
  ASSERT_TRUE(d.ok());
  test::Workers w;
  uint16_t port = test::freePort();
  // Job A computes until the test has seen B refused, however fast the machine.
  const std::string stop = d / "stop", ready = d / "ready";
  std::vector<std::string> a = {"WORKER_ITERS=100000000", "WORKER_COUNT=1000", "TORCHELASTIC_RUN_ID=job-a",
                                "WORKER_UNTIL_FILE=" + stop, "WORKER_READY_FILE=" + ready};
  std::vector<std::string> b = {"WORKER_ITERS=3", "WORKER_COUNT=1000", "TORCHELASTIC_RUN_ID=job-b",
                                "RECCL_BOOTSTRAP_TIMEOUT_MS=5000"};
  pid_t a0 = w.spawn(0, 2, port, a);
  pid_t a1 = w.spawn(1, 2, port, a);
  ASSERT_TRUE(test::waitForFile(ready, Ms(30000))) << "job A did not come up";
  pid_t b1 = w.spawn(1, 2, port, b, d / "b1");
  pid_t b0 = w.spawn(0, 2, port, b, d / "b0");
  EXPECT_NE(w.wait(b0, Ms(30000)), 0);
  EXPECT_NE(w.wait(b1, Ms(30000)), 0);
  std::string e1 = test::readFile(d / "b1");
  EXPECT_NE(e1.find("serves another job"), std::string::npos) << e1;
  FILE* f = fopen(stop.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  EXPECT_EQ(w.wait(a0, Ms(60000)), 0);
  EXPECT_EQ(w.wait(a1, Ms(60000)), 0);
}

}  // namespace
