// Session: eval / rewind / snapshot around a state::State; see session.h.
#include "model/session.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ds4::model {

Session::Session(std::shared_ptr<Model> model) : model_(std::move(model)), st_(model_->new_state()) {}

int64_t Session::n_past() const {
    std::lock_guard<std::mutex> lock(mu_);
    return st_->n_past() + (pending_ >= 0 ? 1 : 0);
}

void Session::eval(const int32_t* tokens, int64_t n, float* logits, int64_t n_out) {
    std::lock_guard<std::mutex> lock(mu_);
    eval_locked(tokens, n, logits, n_out);
}

const std::vector<int32_t>& Session::with_pending(const int32_t* tokens, int64_t n) {
    rows_.clear();  // reused: a decode step allocates nothing here
    if (pending_ >= 0) rows_.push_back(pending_);
    rows_.insert(rows_.end(), tokens, tokens + n);
    return rows_;
}

void Session::eval_locked(const int32_t* tokens, int64_t n, float* logits, int64_t n_out) {
    if (n_out < 0) n_out = n;
    if (n_out > n) throw Error("eval: n_out " + std::to_string(n_out) + " exceeds the " + std::to_string(n) + " tokens fed");
    const std::vector<int32_t>& feed = with_pending(tokens, n);
    const auto m = static_cast<int64_t>(feed.size());
    if (m == 0) return;
    const int64_t n_vocab = model_->hparams().n_vocab;
    float* out = logits;
    if (n_out == 0) {  // only the pending token: its logits are still worth keeping
        n_out = 1;
        scratch_.resize(static_cast<size_t>(n_vocab));
        out = scratch_.data();
    }
    const int64_t at = st_->n_past();
    model_->eval(*st_, feed.data(), m, out, n_out, head_rows_, feed_ ? feed_->before(at, m) : Captures{});
    tokens_.insert(tokens_.end(), feed.begin(), feed.end());
    pending_ = -1;
    const float* last = out + (n_out - 1) * n_vocab;
    last_logits_.assign(last, last + n_vocab);
    committed(at, m);
}

void Session::eval_shortlist(const int32_t* tokens, int64_t n, float margin, int32_t keep, Shortlisted* out) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::vector<int32_t>& feed = with_pending(tokens, n);
    const auto m = static_cast<int64_t>(feed.size());
    if (m == 0) return;
    const int64_t at = st_->n_past();
    model_->eval_shortlist(*st_, feed.data(), m, margin, keep, out, feed_ ? feed_->before(at, m) : Captures{});
    tokens_.insert(tokens_.end(), feed.begin(), feed.end());
    pending_ = -1;
    if (out->list.ok) {
        last_logits_.clear();  // not computed; last_logits() re-runs the last position if asked
    } else {
        last_logits_.assign(out->full.begin(), out->full.end());
    }
    committed(at, m);
}

void Session::committed(int64_t at, int64_t n) {
    if (!feed_) return;
    try {
        feed_->committed(*st_, tokens_, at, n);
    } catch (...) {  // the rows are committed; the drafter's feed recovers them later
        feed_->lost();
        throw;
    }
}

std::vector<int32_t> Session::eval_argmax(const int32_t* tokens, int64_t n, int64_t n_out) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto m = static_cast<int64_t>(n + (pending_ >= 0 ? 1 : 0));
    std::vector<int32_t> ids(static_cast<size_t>(n_out < 0 ? m : std::min(n_out, m)));
    argmax_locked(tokens, n, ids.data(), static_cast<int64_t>(ids.size()), n_out);
    return ids;
}

int32_t Session::next_argmax(const int32_t* tokens, int64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    int32_t id = -1;
    argmax_locked(tokens, n, &id, 1, 1);
    return id;
}

void Session::argmax_locked(const int32_t* tokens, int64_t n, int32_t* ids, int64_t out, int64_t n_out) {
    const std::vector<int32_t>& feed = with_pending(tokens, n);
    const auto m = static_cast<int64_t>(feed.size());
    if (m == 0) return;
    if (out < 1 || n_out == 0) throw Error("eval_argmax: n_out must be >= 1 or < 0 (all), got " + std::to_string(n_out));
    const int64_t at = st_->n_past();
    model_->eval_argmax(*st_, feed.data(), m, ids, out, head_rows_, feed_ ? feed_->before(at, m) : Captures{});
    tokens_.insert(tokens_.end(), feed.begin(), feed.end());
    pending_ = -1;
    last_logits_.clear();  // not computed; last_logits() re-runs the last position if asked
    committed(at, m);
}

void Session::mtp_step(int64_t pos0, const int32_t* tokens, const float* hidden, int64_t n, float* logits,
                       float* hidden_out) {
    std::lock_guard<std::mutex> lock(mu_);
    MtpRows r;
    r.pos0 = pos0;
    r.n = n;
    r.tokens = tokens;
    r.hidden = hidden;
    r.out.logits = logits;
    r.out.hidden = hidden_out;
    model_->mtp(*st_, r);
}

void Session::eval_hidden(const int32_t* tokens, int64_t n, const int* layers, int n_layers, float* hidden) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::vector<int32_t>& feed = with_pending(tokens, n);
    const auto m = static_cast<int64_t>(feed.size());
    if (m == 0) return;
    const std::vector<Out> out(static_cast<size_t>(m), Out::none);
    std::vector<uint8_t> captured(static_cast<size_t>(m), 1);
    if (pending_ >= 0) captured[0] = 0;
    const SeqRows seq{st_.get(), m, Attend::causal};
    Request req = Request::of(seq, feed.data());
    req.out = out.data();
    req.capture_layers = layers;
    req.n_capture = n_layers;
    req.capture_rows = captured.data();
    req.hidden = hidden;
    model_->forward(req);
    tokens_.insert(tokens_.end(), feed.begin(), feed.end());
    pending_ = -1;
    last_logits_.clear();
    if (feed_) feed_->lost();
}

void Session::eval_embeddings(const float* embd, int64_t n, float* logits) {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_ >= 0) throw Error("eval_embeddings: the session holds a pending token; evaluate it first");
    if (n == 0) return;
    const SeqRows seq{st_.get(), n, Attend::causal};
    Request req = Request::of(seq, nullptr);
    req.embeddings = embd;
    req.logits = logits;
    req.head_rows = head_rows_;
    model_->forward(req);
    tokens_.insert(tokens_.end(), static_cast<size_t>(n), -1);
    if (feed_) feed_->lost();
    const int64_t n_vocab = model_->hparams().n_vocab;
    last_logits_.assign(logits + (n - 1) * n_vocab, logits + n * n_vocab);
}

void Session::eval_block(const int32_t* tokens, int64_t n, float* logits) {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_ >= 0) throw Error("eval_block: the session holds a pending token; evaluate it first");
    if (n == 0) return;
    const SeqRows seq{st_.get(), n, Attend::block};
    Request req = Request::of(seq, tokens);
    req.logits = logits;
    req.head_rows = head_rows_;
    model_->forward(req);
}

void Session::feed_locked(const int32_t* tokens, int64_t n) {
    if (n == 0) return;
    const std::vector<Out> out(static_cast<size_t>(n), Out::none);
    const SeqRows seq{st_.get(), n, Attend::causal};
    Request req = Request::of(seq, tokens);
    req.out = out.data();
    model_->forward(req);
    tokens_.insert(tokens_.end(), tokens, tokens + n);
}

void Session::rewind_locked(int64_t n) {
    if (n == st_->n_past()) return;
    const int64_t cp = st_->checkpoint_pos();
    try {
        if (cp >= 0 && n >= cp) {
            // From the checkpoint: recurrent slots restore their copy and are fed again the
            // accepted tokens after it (KV slots just forget rows).
            const int64_t replay = model_->rollback(*st_, n);
            const std::vector<int32_t> again(tokens_.begin() + (n - replay), tokens_.begin() + n);
            tokens_.resize(static_cast<size_t>(n - replay));
            feed_locked(again.data(), replay);
        } else {
            st_->truncate(n);
            tokens_.resize(static_cast<size_t>(n));
        }
    } catch (const std::out_of_range& e) {
        throw Error(e.what());
    }
    last_logits_.clear();
    if (feed_) feed_->rewound(n);
}

void Session::truncate(int64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t held = st_->n_past() + (pending_ >= 0 ? 1 : 0);
    if (n < 0 || n > held) {
        throw Error("truncate(" + std::to_string(n) + "): n_past must be in [0, " + std::to_string(held) + "]");
    }
    if (n == held) return;
    pending_ = -1;
    if (n < st_->n_past()) rewind_locked(n);
}

bool Session::can_truncate(int64_t n) const {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t held = st_->n_past() + (pending_ >= 0 ? 1 : 0);
    if (n < 0 || n > held) return false;
    return n >= st_->n_past() || st_->reachable(n);
}

void Session::checkpoint() {
    std::lock_guard<std::mutex> lock(mu_);
    st_->checkpoint();
}

void Session::set_pending(int32_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_ >= 0) throw Error("set_pending: the session already holds a pending token");
    if (id < 0 || id >= model_->hparams().n_vocab)
        throw Error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                    std::to_string(model_->hparams().n_vocab) + ")");
    if (st_->n_past() + 1 > model_->n_ctx())
        throw state::ContextOverflow("set_pending: the context of " + std::to_string(model_->n_ctx()) + " positions is full");
    pending_ = id;
}

std::vector<int32_t> Session::tokens() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<int32_t> all = tokens_;
    if (pending_ >= 0) all.push_back(pending_);
    return all;
}

std::vector<float> Session::last_logits() {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_ >= 0) {
        eval_locked(nullptr, 0, nullptr, 0);
    } else if (last_logits_.empty()) {
        if (tokens_.empty()) throw Error("the session holds no tokens: there is nothing to continue from");
        // Re-run the last position to recover its logits (after a greedy pass or a truncate).
        const int32_t last = tokens_.back();
        rewind_locked(st_->n_past() - 1);
        eval_locked(&last, 1, nullptr, 0);
    }
    return last_logits_;
}

std::vector<int32_t> Session::rows_for(const int32_t* tokens, int64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    return with_pending(tokens, n);
}

void Session::appended(const int32_t* rows, int64_t n, const float* last_logits) {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ = -1;  // the first of the rows, if the session held one
    tokens_.insert(tokens_.end(), rows, rows + n);
    if (feed_) feed_->lost();  // a batched pass keeps no hidden states
    if (last_logits) {
        last_logits_.assign(last_logits, last_logits + model_->hparams().n_vocab);
    } else {
        last_logits_.clear();
    }
}

std::shared_ptr<const Session::Snapshot> Session::snapshot() const {
    std::lock_guard<std::mutex> lock(mu_);
    auto snap = std::make_shared<Snapshot>();
    snap->model = model_;
    snap->state = st_->snapshot();
    snap->tokens = tokens_;
    snap->pending = pending_;
    snap->last_logits = last_logits_;
    if (feed_) snap->feed = feed_->clone();
    return snap;
}

void Session::restore(const Snapshot& snap) {
    std::lock_guard<std::mutex> lock(mu_);
    if (snap.model != model_) throw Error("restore: the snapshot was taken from a session of another model");
    // The snapshot's feed, if it kept one for the same drafter (copied first: it may throw);
    // else the feed lost track.
    std::unique_ptr<Feed> copy = feed_ && snap.feed && snap.feed->drafter() == feed_->drafter() ? snap.feed->clone() : nullptr;
    try {
        st_->restore(snap.state);
    } catch (const std::invalid_argument& e) {
        throw Error(std::string("restore: ") + e.what());
    }
    tokens_ = snap.tokens;
    pending_ = snap.pending;
    last_logits_ = snap.last_logits;
    if (copy) {
        set_feed(std::move(copy));
    } else if (feed_) {
        feed_->lost();
    }
}

namespace {

constexpr char kMagic[8] = {'D', 'S', '4', 'S', 'T', 'A', 'T', 'E'};

void save_to(const Session::Snapshot& snap, state::Writer& w) {
    w.bytes(kMagic, sizeof kMagic);
    w.put<uint32_t>(Session::kStateFormat);
    w.put<int32_t>(snap.pending);
    w.put<uint64_t>(snap.tokens.size());
    w.bytes(snap.tokens.data(), snap.tokens.size() * sizeof(int32_t));
    snap.state.save(w);
}

}  // namespace

size_t Session::saved_size(const Snapshot& snap) {
    state::Writer w;
    save_to(snap, w);
    return w.size();
}

void Session::save(const Snapshot& snap, uint8_t* out, size_t n) {
    state::Writer w(out, n);
    save_to(snap, w);
    if (w.size() != n) throw std::logic_error("Session::save: " + std::to_string(n) + " bytes given, " + std::to_string(w.size()) + " written");
}

std::shared_ptr<Session::Snapshot> Session::load(const uint8_t* data, size_t n) const {
    std::lock_guard<std::mutex> lock(mu_);
    state::Reader r(data, n);
    auto snap = std::make_shared<Snapshot>();
    snap->model = model_;
    try {
        char magic[sizeof kMagic];
        r.bytes(magic, sizeof magic, "the magic");
        if (std::memcmp(magic, kMagic, sizeof magic) != 0) throw std::invalid_argument("not a ds4 session state (bad magic)");
        const auto format = r.get<uint32_t>("the format version");
        if (format != kStateFormat) {
            throw std::invalid_argument("state format " + std::to_string(format) + ", this engine reads " +
                                        std::to_string(kStateFormat));
        }
        snap->pending = r.get<int32_t>("the pending token");
        const auto n_tokens = r.get<uint64_t>("the token count");
        if (n_tokens > r.left() / sizeof(int32_t)) throw std::invalid_argument("state data is truncated: its token ids");
        snap->tokens.resize(n_tokens);
        r.bytes(snap->tokens.data(), n_tokens * sizeof(int32_t), "the token ids");
        snap->state = st_->load(r);
        if (static_cast<uint64_t>(snap->state.n_past) != n_tokens) {
            throw std::invalid_argument("state data is corrupt: " + std::to_string(n_tokens) + " token ids for " +
                                        std::to_string(snap->state.n_past) + " positions");
        }
        const int32_t n_vocab = this->n_vocab();
        for (int32_t t : snap->tokens) {
            if (t < -1 || t >= n_vocab) throw std::invalid_argument("state data is corrupt: token id " + std::to_string(t));
        }
        if (snap->pending < -1 || snap->pending >= n_vocab) {
            throw std::invalid_argument("state data is corrupt: pending token id " + std::to_string(snap->pending));
        }
        if (r.left() != 0) throw std::invalid_argument(std::to_string(r.left()) + " bytes follow the state data");
    } catch (const std::invalid_argument& e) {
        throw Error(std::string("load state: ") + e.what());
    }
    return snap;
}

void Session::set_feed(std::unique_ptr<Feed> feed) {
    feed_ = std::move(feed);
    mtp_ = dynamic_cast<MtpFeed*>(feed_.get());
    block_ = dynamic_cast<BlockFeed*>(feed_.get());
}

void Session::track_mtp() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!model_->has_mtp()) throw Error(model_->path() + ": the model has no MTP block to draft with");
    if (mtp_) return;
    set_feed(std::make_unique<MtpFeed>(*model_));  // in place of a block drafter's, if any
    if (st_->n_past() > 0) feed_->lost();  // the positions held were evaluated without keeping hidden states
}

void Session::track_block(std::shared_ptr<BlockDrafter> drafter) {
    std::lock_guard<std::mutex> lock(mu_);
    if (&drafter->target() != model_.get()) {
        throw Error("track_block: the drafter " + drafter->path() + " was loaded for another model than " + model_->path());
    }
    if (block_ && block_->drafter() == drafter.get()) return;
    set_feed(std::make_unique<BlockFeed>(std::move(drafter)));  // in place of another drafter's, if any
    if (st_->n_past() > 0) feed_->lost();
}

int64_t Session::block_lag() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (!block_) throw Error("block_lag: the session does not track a block drafter (track_block)");
    return block_->lag(st_->n_past()) + (pending_ >= 0 ? 1 : 0);
}

bool Session::block_stale() const {
    std::lock_guard<std::mutex> lock(mu_);
    return block_ && block_->stale();
}

bool Session::block_draft(int32_t tok, int64_t n, bool logits, int64_t head_rows, const BlockPick& pick) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!block_) throw Error("block_draft: the session does not track a block drafter (track_block)");
    if (pending_ >= 0) return false;  // its hidden states, which the context needs, are not known yet
    return block_->draft(tokens_, tok, n, logits, head_rows, pick);
}

bool Session::tracks_mtp() const {
    std::lock_guard<std::mutex> lock(mu_);
    return mtp_ != nullptr;
}

int64_t Session::mtp_lag() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (!mtp_) throw Error("mtp_lag: the session does not track MTP (track_mtp)");
    return mtp_->lag(st_->n_past()) + (pending_ >= 0 ? 1 : 0);
}

bool Session::mtp_stale() const {
    std::lock_guard<std::mutex> lock(mu_);
    return mtp_ && mtp_->stale();
}

bool Session::mtp_draft(int32_t tok, const MtpOut& out) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!mtp_) throw Error("mtp_draft: the session does not track MTP (track_mtp)");
    if (pending_ >= 0) return false;  // its hidden state, which tok's row needs, is not known yet
    return mtp_->draft(*st_, tokens_, tok, out);
}

void Session::mtp_chain(int64_t pos, int32_t tok, const float* hidden, const MtpOut& out) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!mtp_) throw Error("mtp_chain: the session does not track MTP (track_mtp)");
    mtp_->chain(*st_, pos, tok, hidden, out);
}

}  // namespace ds4::model
