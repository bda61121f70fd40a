// ThreadPool: spin-then-sleep workers; see thread_pool.h.
#include "backend/cpu/thread_pool.h"

#include <algorithm>
#include <map>

namespace ds4::backend::cpu {

namespace {
// ~10-50 µs of polling before sleeping: long enough to catch the next op of a forward pass,
// short enough not to burn a shared core while the model is idle.
constexpr int kSpinIterations = 20000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}
}  // namespace

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(std::max(1, n_threads)), shares_(std::make_unique<Share[]>(static_cast<size_t>(n_threads_))) {
    threads_.reserve(static_cast<size_t>(n_threads_ - 1));
    try {
        for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
    } catch (...) {
        // Joinable threads must not be destroyed: stop and join those that started.
        {
            std::lock_guard<std::mutex> lock(mu_);
            stop_ = true;
        }
        wake_.notify_all();
        for (std::thread& t : threads_) t.join();
        throw;
    }
}

std::shared_ptr<ThreadPool> ThreadPool::shared(int n_threads) {
    static std::mutex mu;
    static std::map<int, std::weak_ptr<ThreadPool>> pools;
    n_threads = std::max(1, n_threads);
    std::lock_guard<std::mutex> lock(mu);
    std::shared_ptr<ThreadPool> pool = pools[n_threads].lock();
    if (!pool) {
        pool = std::make_shared<ThreadPool>(n_threads);
        pools[n_threads] = pool;
    }
    return pool;
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
}

void ThreadPool::worker(int index) {
    uint64_t seen = 0;
    for (;;) {
        bool ready = false;
        for (int i = 0; i < kSpinIterations; ++i) {
            if (generation_.load(std::memory_order_acquire) != seen) {
                ready = true;
                break;
            }
            cpu_relax();
        }
        if (!ready) {
            std::unique_lock<std::mutex> lock(mu_);
            wake_.wait(lock, [&] { return stop_ || generation_.load() != seen; });
            if (stop_) return;
        }
        seen = generation_.load(std::memory_order_acquire);
        (*job_)(index, n_threads_);
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            std::lock_guard<std::mutex> lock(mu_);  // pairs with the caller's wait predicate
            done_.notify_one();
        }
    }
}

void ThreadPool::run(FnRef<void(int, int)> fn) {
    std::lock_guard<std::mutex> use(use_mu_);
    run_locked(fn);
}

void ThreadPool::run_locked(FnRef<void(int, int)> fn) {
    if (n_threads_ == 1) {
        fn(0, 1);
        return;
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        job_ = &fn;
        pending_.store(n_threads_ - 1, std::memory_order_relaxed);
        generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    fn(0, n_threads_);
    for (int i = 0; i < kSpinIterations; ++i) {
        if (pending_.load(std::memory_order_acquire) == 0) return;
        cpu_relax();
    }
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
}

void ThreadPool::parallel_for(int64_t n, FnRef<void(int64_t, int64_t)> fn) {
    if (n <= 0) return;
    const int parts = static_cast<int>(std::min<int64_t>(n, n_threads_));
    if (parts == 1) {
        fn(0, n);
        return;
    }
    std::lock_guard<std::mutex> use(use_mu_);
    run_locked([&](int t, int) {
        if (t >= parts) return;
        const int64_t begin = n * t / parts;
        const int64_t end = n * (t + 1) / parts;
        fn(begin, end);
    });
}

namespace {
// Takes the first (front) or the last unit of a share; false when it is empty.
bool take(std::atomic<uint64_t>& range, bool front, int64_t& unit) {
    uint64_t v = range.load(std::memory_order_relaxed);
    for (;;) {
        const uint64_t begin = v >> 32, end = v & 0xFFFFFFFFu;
        if (begin >= end) return false;
        const uint64_t next = front ? (begin + 1) << 32 | end : begin << 32 | (end - 1);
        if (range.compare_exchange_weak(v, next, std::memory_order_relaxed)) {
            unit = static_cast<int64_t>(front ? begin : end - 1);
            return true;
        }
    }
}
}  // namespace

void ThreadPool::for_each_unit(int64_t n_units, FnRef<void(int, int64_t)> fn) {
    if (n_units <= 0) return;
    if (n_units == 1 || n_threads_ == 1) {
        for (int64_t u = 0; u < n_units; ++u) fn(0, u);
        return;
    }
    const auto n = static_cast<uint64_t>(n_units), threads = static_cast<uint64_t>(n_threads_);
    std::lock_guard<std::mutex> use(use_mu_);
    for (uint64_t t = 0; t < threads; ++t) {
        shares_[t].range.store((n * t / threads) << 32 | n * (t + 1) / threads, std::memory_order_relaxed);
    }
    run_locked([&](int t, int) {  // run_locked() publishes the shares to the workers
        int64_t u;
        while (take(shares_[static_cast<size_t>(t)].range, true, u)) fn(t, u);
        for (int i = 1; i < n_threads_; ++i) {
            auto& other = shares_[static_cast<size_t>((t + i) % n_threads_)].range;
            while (take(other, false, u)) fn(t, u);
        }
    });
}

}  // namespace ds4::backend::cpu
