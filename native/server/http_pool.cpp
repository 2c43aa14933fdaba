// See http_pool.h.
#include "http_pool.h"

#include <algorithm>
#include <thread>
#include <utility>

namespace server {

bool lazy_pool::enqueue(std::function<void()> fn) {
  std::unique_lock<std::mutex> lock(m_);
  if (stopping_) return false;
  if (!idle_.empty()) {
    worker* w = idle_.back();
    idle_.pop_back();
    w->job = std::move(fn);
    w->wake.notify_one();
    return true;
  }
  if (live_ < max_threads_) {
    ++live_;
    ++started_;
    auto w = std::make_unique<worker>();
    std::thread([this, w = std::move(w), first = std::move(fn)]() mutable { run(std::move(w), std::move(first)); })
        .detach();
    return true;
  }
  queued_.push_back(std::move(fn));
  return true;
}

void lazy_pool::run(std::unique_ptr<worker> w, std::function<void()> job) {
  std::unique_lock<std::mutex> lock(m_, std::defer_lock);
  for (;;) {
    job();
    job = nullptr;
    lock.lock();
    if (!queued_.empty()) {
      job = std::move(queued_.front());
      queued_.pop_front();
      lock.unlock();
      continue;
    }
    if (!stopping_) {
      idle_.push_back(w.get());
      const bool handed = w->wake.wait_for(lock, idle_exit_, [&] { return w->job != nullptr || stopping_; });
      // Timed out with more than `keep` threads alive: end, unless work came meanwhile.
      while (!handed && !w->job && !stopping_ && live_ <= keep_) w->wake.wait(lock);
      if (!w->job) idle_.erase(std::remove(idle_.begin(), idle_.end(), w.get()), idle_.end());
    }
    if (!w->job) {
      if (--live_ == 0) all_ended_.notify_all();
      return;
    }
    job = std::move(w->job);
    w->job = nullptr;
    lock.unlock();
  }
}

void lazy_pool::shutdown() {
  std::unique_lock<std::mutex> lock(m_);
  stopping_ = true;
  for (worker* w : idle_) w->wake.notify_one();
  all_ended_.wait(lock, [&] { return live_ == 0; });
}

size_t lazy_pool::threads_started() const {
  std::lock_guard<std::mutex> lock(m_);
  return started_;
}

}  // namespace server
