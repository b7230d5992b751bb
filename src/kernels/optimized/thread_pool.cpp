#include "kernels/optimized/thread_pool.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace hf2pte::kernels {

namespace {

// One parallel region at a time. Its chunks are claimed dynamically through
// one atomic word (generation | chunk count | next chunk), so a worker that
// the OS has not scheduled (the machine is shared, or oversubscribed) costs
// nothing: the caller takes the remaining chunks itself instead of spinning
// for a worker that never arrives. The caller only waits for chunks a worker
// already started.
class Pool {
  static constexpr int kCountBits = 20;
  static constexpr uint64_t kCountMask = (uint64_t(1) << kCountBits) - 1;
  static constexpr int kGenShift = 2 * kCountBits;

 public:
  explicit Pool(int threads) : threads_(std::max(threads, 1)) {
    for (int t = 1; t < threads_; ++t) workers_.emplace_back([this] { work(); });
  }
  ~Pool() {
    stop_.store(true);
    state_.fetch_add(uint64_t(1) << kGenShift);
    state_.notify_all();
    for (auto& w : workers_) w.join();
  }
  int threads() const { return threads_; }

  void run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    const int64_t units = (n + grain - 1) / grain;
    const int64_t parts = std::min<int64_t>(units, 2 * int64_t(threads_));
    if (threads_ == 1 || parts <= 1) {
      fn(0, n);
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn, n_ = n, grain_ = grain, units_ = units;
    done_.store(0, std::memory_order_relaxed);
    const uint64_t gen = (state_.load(std::memory_order_relaxed) >> kGenShift) + 1;
    state_.store((gen << kGenShift) | (uint64_t(parts) << kCountBits), std::memory_order_release);
    state_.notify_all();
    claim_all(gen);
    for (int spin = 0; done_.load(std::memory_order_acquire) != parts; ++spin) {
      if (spin < 2000) _mm_pause();
      else std::this_thread::yield();
    }
  }

 private:
  /// Runs chunks of generation `gen` until none is left.
  void claim_all(uint64_t gen) {
    uint64_t s = state_.load(std::memory_order_acquire);
    for (;;) {
      const uint64_t parts = (s >> kCountBits) & kCountMask, next = s & kCountMask;
      if ((s >> kGenShift) != gen || next >= parts) return;
      if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) continue;
      const int64_t b = units_ * int64_t(next) / int64_t(parts) * grain_;
      const int64_t e = std::min(n_, units_ * int64_t(next + 1) / int64_t(parts) * grain_);
      if (b < e) (*fn_)(b, e);
      done_.fetch_add(1, std::memory_order_release);
      s = state_.load(std::memory_order_acquire);
    }
  }

  void work() {
    uint64_t seen_gen = 0;
    for (;;) {
      uint64_t s = state_.load(std::memory_order_acquire);
      for (int spin = 0; (s >> kGenShift) == seen_gen; ++spin) {
        if (spin < 20000) {
          _mm_pause();
        } else {
          state_.wait(s);
        }
        s = state_.load(std::memory_order_acquire);
      }
      if (stop_.load()) return;
      seen_gen = s >> kGenShift;
      claim_all(seen_gen);
    }
  }

  int threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::atomic<uint64_t> state_{0};
  std::atomic<int64_t> done_{0};
  std::atomic<bool> stop_{false};
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, grain_ = 1, units_ = 0;
};

int g_threads = 0;  // 0: hardware concurrency
std::unique_ptr<Pool> g_pool;
std::mutex g_pool_mu;

Pool& pool() {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  if (!g_pool) g_pool = std::make_unique<Pool>(g_threads > 0 ? g_threads : int(std::max(1u, std::thread::hardware_concurrency())));
  return *g_pool;
}

}  // namespace

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  pool().run(n, std::max<int64_t>(grain, 1), fn);
}

int pool_threads() { return pool().threads(); }

void set_pool_threads(int threads) {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  g_threads = threads;
  g_pool.reset();
}

}  // namespace hf2pte::kernels
