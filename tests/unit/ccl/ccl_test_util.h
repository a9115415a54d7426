// Helpers for ranks-as-threads tests: a communicator per rank from recclCommInitAll and a runner
// that executes one function per rank concurrently.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "reccl/reccl.h"

namespace reccl::test {

// Sets an environment variable for the scope of a test (before communicators are created).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_.c_str(), old_.c_str(), 1);
    else
      unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

class Comms {
 public:
  explicit Comms(int n) : comms_(n, nullptr) {
    rc_ = recclCommInitAll(comms_.data(), n, nullptr);
    if (rc_ != recclSuccess) err_ = recclGetLastError(nullptr);
  }
  ~Comms() {
    std::vector<std::thread> ts;
    for (auto c : comms_)
      if (c) ts.emplace_back([c] { recclCommDestroy(c); });
    for (auto& t : ts) t.join();
  }
  bool ok() const { return rc_ == recclSuccess; }
  const std::string& error() const { return err_; }
  int size() const { return static_cast<int>(comms_.size()); }
  recclComm_t operator[](int i) const { return comms_[i]; }
  // Detaches rank i (the caller destroyed or aborted it).
  void forget(int i) { comms_[i] = nullptr; }

  // Runs fn(rank, comm) on every rank in its own thread; returns each rank's result.
  std::vector<recclResult_t> run(const std::function<recclResult_t(int, recclComm_t)>& fn) {
    std::vector<recclResult_t> rcs(comms_.size(), recclSuccess);
    std::vector<std::thread> ts;
    for (int i = 0; i < size(); ++i) ts.emplace_back([&, i] { rcs[i] = fn(i, comms_[i]); });
    for (auto& t : ts) t.join();
    return rcs;
  }

 private:
  std::vector<recclComm_t> comms_;
  recclResult_t rc_;
  std::string err_;
};

}  // namespace reccl::test
