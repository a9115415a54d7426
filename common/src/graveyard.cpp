#include "reccl/common/graveyard.h"

#include <pthread.h>

#include <string>

namespace reccl {

std::shared_ptr<Graveyard> Graveyard::start(const char* threadName) {
  std::shared_ptr<Graveyard> g(new Graveyard());
  g->st_ = std::make_shared<State>();
  g->thread_ = std::thread([st = g->st_, name = std::string(threadName)] {
    pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
    run(st);
  });
  return g;
}

Graveyard::~Graveyard() {
  if (!closed_) close(Deadline::afterMs(0));
}

void Graveyard::add(std::unique_ptr<Grave> g) {
  {
    std::lock_guard lk(st_->mu);
    // Behind what is still queued while the thread runs, closed or not: it leaves its loop only
    // with the queue empty, under this lock.
    if (!st_->done) {
      st_->queue.push_back(std::move(g));
      st_->cv.notify_all();
      return;
    }
  }
  g.reset();  // the thread has ended: here and now
}

void Graveyard::run(std::shared_ptr<State> st) {
  std::unique_lock lk(st->mu);
  for (;;) {
    if (!st->queue.empty()) {
      std::unique_ptr<Grave> g = std::move(st->queue.front());
      st->queue.pop_front();
      st->busy = true;
      lk.unlock();
      g.reset();
      lk.lock();
      st->busy = false;
      st->cv.notify_all();
      continue;
    }
    if (st->closing) break;
    st->cv.wait(lk);
  }
  st->done = true;
  st->cv.notify_all();
}

size_t Graveyard::close(Deadline deadline) {
  closed_ = true;
  size_t left = 0;
  {
    std::unique_lock lk(st_->mu);
    st_->closing = true;
    st_->cv.notify_all();
    auto ended = [&] { return st_->done; };
    if (deadline.isNever())
      st_->cv.wait(lk, ended);
    else
      st_->cv.wait_until(lk, deadline.at(), ended);
    if (!st_->done) left = st_->queue.size() + (st_->busy ? 1 : 0);
  }
  if (!thread_.joinable()) return left;
  if (left == 0) {
    thread_.join();  // it has left its loop: returns at once
  } else {
    thread_.detach();  // it holds the state and ends itself when the rest is destroyed
  }
  return left;
}

}  // namespace reccl
