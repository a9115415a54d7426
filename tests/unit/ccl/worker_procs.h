// Ranks as separate processes of ccl_test_worker, started from a launcher environment
// (torchrun variables), and raw sockets for tests that play a stranger on a rank's ports.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "../free_port.h"

extern char** environ;

namespace reccl::test {

class Workers {
 public:
  // Starts rank `rank` of `n` rendezvousing at 127.0.0.1:port; `extra` adds or overrides
  // variables; stderr goes to `errFile` when given.
  pid_t spawn(int rank, int n, uint16_t port, const std::vector<std::string>& extra, const std::string& errFile = "") {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) env.emplace_back(*e);
    env.push_back("RANK=" + std::to_string(rank));
    env.push_back("WORLD_SIZE=" + std::to_string(n));
    env.push_back("MASTER_ADDR=127.0.0.1");
    env.push_back("MASTER_PORT=" + std::to_string(port));
    for (auto& x : extra) env.push_back(x);
    std::vector<char*> envp;
    for (auto& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string path = RECCL_TEST_WORKER_PATH;
    char* argv[] = {path.data(), nullptr};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (!errFile.empty()) posix_spawn_file_actions_addopen(&fa, 2, errFile.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, path.c_str(), &fa, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return -1;
    pids_.push_back(pid);
    return pid;
  }
  // Exit code (128 + signal when killed by one), or -1 if it did not exit by the deadline (then
  // it is killed).
  int wait(pid_t pid, std::chrono::milliseconds limit) {
    auto until = std::chrono::steady_clock::now() + limit;
    for (;;) {
      int st = 0;
      if (waitpid(pid, &st, WNOHANG) == pid) {
        forget(pid);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      if (std::chrono::steady_clock::now() > until) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        forget(pid);
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  ~Workers() {
    for (pid_t p : pids_) {
      kill(p, SIGKILL);
      waitpid(p, nullptr, 0);
    }
  }

 private:
  void forget(pid_t p) { std::erase(pids_, p); }
  std::vector<pid_t> pids_;
};

// A blocking TCP connection to addr (network order):port, or -1.
inline int rawConnect(uint32_t addr, uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = addr;
  sa.sin_port = htons(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A fresh directory under /tmp for a test's files (the ranks' stderr, flag files), removed with
// everything in it when the test ends, failed or not.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix) {
    std::string t = "/tmp/" + prefix + "-XXXXXX";
    if (mkdtemp(t.data())) path_ = t;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  bool ok() const { return !path_.empty(); }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Whether `path` exists within `limit` (a rank's WORKER_READY_FILE).
inline bool waitForFile(const std::string& path, std::chrono::milliseconds limit) {
  for (auto end = std::chrono::steady_clock::now() + limit;; std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
    if (access(path.c_str(), F_OK) == 0) return true;
    if (std::chrono::steady_clock::now() > end) return false;
  }
}

inline std::string readFile(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace reccl::test
