// The thread pool of ml_server's HTTP side (docs/server.md, "HTTP hardening"). cpp-httplib's own
// ThreadPool starts every thread at once and wakes them in turn, so over time each of its threads
// touches its stack and its malloc arena: with a pool sized for hundreds of idle keep-alive
// connections, memory would grow with the pool instead of with the load. This one starts a thread
// only when none is idle (up to max_threads), and gives work to the thread idle the shortest time,
// so that the memory in use follows the peak number of connections served at once. A thread idle
// for idle_exit ends (keeping `keep` of them), so a burst of connections leaves no threads behind.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <httplib.h>

namespace server {

class lazy_pool : public httplib::TaskQueue {
 public:
  lazy_pool(size_t max_threads, size_t keep, std::chrono::milliseconds idle_exit)
      : max_threads_(max_threads < 1 ? 1 : max_threads), keep_(keep), idle_exit_(idle_exit) {}
  ~lazy_pool() override { shutdown(); }
  lazy_pool(const lazy_pool&) = delete;
  lazy_pool& operator=(const lazy_pool&) = delete;

  bool enqueue(std::function<void()> fn) override;  // false once shutting down
  // Runs what is queued, then waits for every thread to end.
  void shutdown() override;
  size_t threads_started() const;  // in all, since the pool was made

 private:
  struct worker {
    std::condition_variable wake;
    std::function<void()> job;  // set by enqueue while the worker is idle
  };
  void run(std::unique_ptr<worker> w, std::function<void()> first);

  const size_t max_threads_, keep_;
  const std::chrono::milliseconds idle_exit_;
  mutable std::mutex m_;
  std::condition_variable all_ended_;
  std::deque<std::function<void()>> queued_;  // when every thread is busy
  std::vector<worker*> idle_;                 // a stack: the last one in is woken first
  size_t live_ = 0;                           // threads running (detached; shutdown waits for 0)
  size_t started_ = 0;
  bool stopping_ = false;
};

}  // namespace server
