// Session: eval / truncate / snapshot around a KvCache; see session.h.
#include "model/session.h"

#include <string>

namespace ds4::model {

Session::Session(std::shared_ptr<Model> model) : model_(std::move(model)), kv_(model_->new_cache()) {}

int64_t Session::n_past() const {
    std::lock_guard<std::mutex> lock(mu_);
    return kv_->n_past();
}

void Session::eval(const int32_t* tokens, int64_t n, float* logits) {
    std::lock_guard<std::mutex> lock(mu_);
    model_->eval(*kv_, tokens, n, logits);
}

void Session::truncate(int64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    if (n < 0 || n > kv_->n_past()) {
        throw Error("truncate(" + std::to_string(n) + "): n_past must be in [0, " + std::to_string(kv_->n_past()) +
                    "]");
    }
    kv_->truncate(n);
}

std::shared_ptr<const Session::Snapshot> Session::snapshot() const {
    std::lock_guard<std::mutex> lock(mu_);
    auto snap = std::make_shared<Snapshot>();
    snap->model = model_;
    snap->kv = kv_->snapshot();
    return snap;
}

void Session::restore(const Snapshot& snap) {
    std::lock_guard<std::mutex> lock(mu_);
    if (snap.model != model_) throw Error("restore: the snapshot was taken from a session of another model");
    if (snap.kv.type != kv_->type()) throw Error("restore: the snapshot's KV type differs from this session's");
    kv_->restore(snap.kv);
}

}  // namespace ds4::model
