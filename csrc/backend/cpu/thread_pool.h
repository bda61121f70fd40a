// A small fixed thread pool for the CPU backend: the calling thread plus n-1 workers.
//
// Ops are short (tens of microseconds for a decode step's matmul), so a worker spins briefly
// on the job counter before sleeping on a condition variable: waking a sleeping thread costs
// more than most ops. The spin is short because these machines are shared: a long spin would
// take cycles from other processes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ds4::backend::cpu {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);  // total threads, the caller included; >= 1
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Calls fn(thread_index, size()) once on every thread (the caller is index 0) and returns
    // when all calls have returned. fn must not throw. Not reentrant: one run at a time.
    void run(const std::function<void(int, int)>& fn);

    // Splits [0, n) into size() contiguous ranges of near-equal length and calls
    // fn(begin, end) for each non-empty one.
    void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

    // Calls fn(thread_index, unit) once for each unit in [0, n_units), threads taking the next
    // unit from a shared counter as they finish: a thread that starts late or runs slower (a
    // woken worker, a noisy neighbour) takes fewer units instead of holding the others at the
    // end. Each thread sees its units in ascending order.
    void for_each_unit(int64_t n_units, const std::function<void(int, int64_t)>& fn);

private:
    void worker(int index);

    int n_threads_;
    std::vector<std::thread> threads_;
    const std::function<void(int, int)>* job_ = nullptr;
    std::atomic<uint64_t> generation_{0};  // bumped once per run()
    std::atomic<int> pending_{0};          // workers still inside the current job
    std::mutex mu_;
    std::condition_variable wake_;         // workers sleep here between jobs
    std::condition_variable done_;         // the caller sleeps here if workers are slow
    bool stop_ = false;
};

}  // namespace ds4::backend::cpu
