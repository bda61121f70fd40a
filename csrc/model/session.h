// A Session: one sequence being evaluated against a shared Model (DESIGN.md's Session).
//
// It owns its KV cache and keeps the Model (and so the mmap'd weights) alive. eval() appends
// tokens and returns the logits of every one; truncate() rewinds; snapshot()/restore() copy
// the valid part of the cache (cost: see state::KvSnapshot). Calls on one session are
// serialised by its own mutex, so a session used from two threads stays consistent.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "model/model.h"
#include "state/kv_cache.h"

namespace ds4::model {

class Session {
public:
    explicit Session(std::shared_ptr<Model> model);

    struct Snapshot {
        std::shared_ptr<const Model> model;  // restore() checks it is this session's model
        state::KvSnapshot kv;
    };

    const Model& model() const { return *model_; }
    int64_t n_past() const;
    int64_t n_ctx() const { return model_->n_ctx(); }

    // Appends tokens[0, n); logits[n, n_vocab]. Throws Error for an id outside the
    // vocabulary and state::ContextOverflow past n_ctx, leaving the session unchanged.
    void eval(const int32_t* tokens, int64_t n, float* logits);
    // Keeps the first n positions; throws Error unless 0 <= n <= n_past().
    void truncate(int64_t n);
    std::shared_ptr<const Snapshot> snapshot() const;
    // Throws Error if the snapshot comes from a session of another model or KV type.
    void restore(const Snapshot& snap);

private:
    std::shared_ptr<Model> model_;
    std::unique_ptr<state::KvCache> kv_;
    mutable std::mutex mu_;
};

}  // namespace ds4::model
