// The scheduling of a process's threads by name, read back from the kernel: tests that check
// which threads run at SCHED_FIFO (the detector's, the failover control threads).
#pragma once

#include <dirent.h>
#include <sched.h>
#include <sys/types.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace reccl::test {

struct ThreadSched {
  pid_t tid = 0;
  int policy = -1;    // SCHED_OTHER, SCHED_FIFO, ...; -1: unreadable
  int priority = -1;  // sched_priority; -1: unreadable
};

// The threads of `pid` (0: this process) whose comm is `name`.
inline std::vector<ThreadSched> threadsNamed(pid_t pid, const std::string& name) {
  std::vector<ThreadSched> out;
  const std::string task = (pid ? "/proc/" + std::to_string(pid) : std::string("/proc/self")) + "/task/";
  DIR* d = opendir(task.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    std::ifstream in(task + e->d_name + "/comm");
    std::string comm;
    if (e->d_name[0] == '.' || !std::getline(in, comm) || comm != name) continue;
    ThreadSched t;
    t.tid = static_cast<pid_t>(std::atoi(e->d_name));
    t.policy = sched_getscheduler(t.tid);
    sched_param sp{};
    if (sched_getparam(t.tid, &sp) == 0) t.priority = sp.sched_priority;
    out.push_back(t);
  }
  closedir(d);
  return out;
}

}  // namespace reccl::test
