// A small fixed thread pool for the CPU backend: the calling thread plus n-1 workers.
//
// One pool per process serves every model of a thread count (ThreadPool::shared): a target and
// its draft model then take turns on the same cores, op by op, instead of two pools fighting
// over them. Calls from several threads are serialised (one job at a time).
//
// Ops are short (tens of microseconds for a decode step's matmul), so a worker spins briefly
// on the job counter before sleeping on a condition variable: waking a sleeping thread costs
// more than most ops. The spin is short because these machines are shared: a long spin would
// take cycles from other processes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace ds4::backend::cpu {

// A reference to a callable that outlives the call it is passed to: unlike std::function it
// never copies the callable, so handing the pool a lambda allocates nothing (an op's lambda
// captures more than std::function keeps inline, and a decode step runs hundreds of ops).
template <class Sig>
class FnRef;

template <class R, class... Args>
class FnRef<R(Args...)> {
public:
    template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FnRef>>>
    FnRef(F&& f) : obj_(const_cast<void*>(static_cast<const void*>(&f))), call_(&invoke<std::remove_reference_t<F>>) {}
    R operator()(Args... args) const { return call_(obj_, std::forward<Args>(args)...); }

private:
    template <class F>
    static R invoke(void* obj, Args... args) { return (*static_cast<F*>(obj))(std::forward<Args>(args)...); }
    void* obj_;
    R (*call_)(void*, Args...);
};

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);  // total threads, the caller included; >= 1
    // The process's pool of n_threads threads, made on first use and kept while anyone holds it.
    static std::shared_ptr<ThreadPool> shared(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Calls fn(thread_index, size()) once on every thread (the caller is index 0) and returns
    // when all calls have returned. fn must not throw nor use the pool (not reentrant); calls
    // from other threads wait for the current one.
    void run(FnRef<void(int, int)> fn);

    // Splits [0, n) into size() contiguous ranges of near-equal length and calls
    // fn(begin, end) for each non-empty one.
    void parallel_for(int64_t n, FnRef<void(int64_t, int64_t)> fn);

    // Calls fn(thread_index, unit) once for each unit in [0, n_units) (n_units < 2^32). Each
    // thread owns a contiguous share and takes its units in ascending order, so it streams
    // through memory without jumps (a jump stalls until the prefetchers catch up); a thread
    // whose share is done takes units from the back of the others' (descending), so one that
    // starts late or runs slower (a woken worker, a noisy neighbour) holds nobody up.
    void for_each_unit(int64_t n_units, FnRef<void(int, int64_t)> fn);

private:
    void worker(int index);
    void run_locked(FnRef<void(int, int)> fn);  // with use_mu_ held

    int n_threads_;
    std::vector<std::thread> threads_;
    const FnRef<void(int, int)>* job_ = nullptr;
    std::atomic<uint64_t> generation_{0};  // bumped once per run()
    std::atomic<int> pending_{0};          // workers still inside the current job
    std::mutex use_mu_;                    // one job at a time, whoever calls
    std::mutex mu_;
    std::condition_variable wake_;         // workers sleep here between jobs
    std::condition_variable done_;         // the caller sleeps here if workers are slow
    bool stop_ = false;
    // for_each_unit: each thread's remaining share of units, [begin, end) as begin << 32 | end.
    struct alignas(64) Share {
        std::atomic<uint64_t> range{0};
    };
    std::unique_ptr<Share[]> shares_;
};

}  // namespace ds4::backend::cpu
