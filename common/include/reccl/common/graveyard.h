// Objects whose destruction may block in the kernel for long, destroyed in order on a thread of
// their own, so that the thread letting them go is never held up, and a close that waits for them
// with a deadline.
//
// The case it is for: a soft-RoCE (rxe) QP holds a reference for every packet it has queued for
// transmission, and its destroy waits until they are all freed. When the NIC's transmit queue does
// not move (a stalled virtio queue, a qdisc that holds its packets) that wait lasts tens of seconds
// per QP, in an uninterruptible kernel sleep that no deadline of ours can cut short. What is left
// when close()'s deadline passes is the thread's alone: it finishes it, in order, and ends itself.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "reccl/common/deadline.h"

namespace reccl {

class Graveyard {
 public:
  // Starts the thread (named `threadName`, at most 15 characters).
  static std::shared_ptr<Graveyard> start(const char* threadName);
  // close() with no time to wait, unless it was called.
  ~Graveyard();
  Graveyard(const Graveyard&) = delete;
  Graveyard& operator=(const Graveyard&) = delete;

  // `obj` is destroyed on the graveyard's thread, after everything buried before it; `finish(*obj)`
  // runs there first (a close that reports its own failure). After close() it still goes behind
  // what the thread has left; once the thread has ended, the caller's thread does both at once:
  // nothing buried is ever dropped.
  template <class T, class F>
  void bury(std::unique_ptr<T> obj, F finish) {
    if (obj) add(std::make_unique<Held<T, F>>(std::move(obj), std::move(finish)));
  }
  template <class T>
  void bury(std::unique_ptr<T> obj) {
    bury(std::move(obj), [](T&) {});
  }

  // No more burials; waits until everything buried is destroyed or `deadline` passes. Returns how
  // many objects were still waiting then, the one being destroyed included: 0 means the thread has
  // ended (it is joined); otherwise it goes on without anyone waiting and ends when it is done.
  size_t close(Deadline deadline);

 private:
  struct Grave {
    virtual ~Grave() = default;
  };
  template <class T, class F>
  struct Held final : Grave {
    Held(std::unique_ptr<T> o, F f) : obj(std::move(o)), finish(std::move(f)) {}
    ~Held() override { finish(*obj); }
    std::unique_ptr<T> obj;
    F finish;
  };
  // Shared by the graveyard and its thread: a thread left running after close() keeps it.
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::unique_ptr<Grave>> queue;  // oldest first
    bool busy = false;                         // the thread is destroying one
    bool closing = false;
    bool done = false;  // the thread has returned from its loop
  };
  Graveyard() = default;
  void add(std::unique_ptr<Grave> g);
  static void run(std::shared_ptr<State> st);

  std::shared_ptr<State> st_;
  std::thread thread_;
  bool closed_ = false;
};

}  // namespace reccl
