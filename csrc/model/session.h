// A Session: one sequence being evaluated against a shared Model (DESIGN.md's Session).
//
// It owns its state (state::State: a slot per layer) and keeps the Model (and so the mmap'd
// weights) alive. eval() appends tokens and returns the logits of every one; checkpoint() before
// a pass that may be partly rejected and truncate() after it rewind without re-evaluating the
// context; snapshot()/restore() copy every slot (cost: see state::Snapshot). Calls on one
// session are serialised by its own mutex, so a session used from two threads stays consistent.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "model/model.h"
#include "model/block_feed.h"
#include "model/mtp_feed.h"
#include "state/state.h"

namespace ds4::model {

class Session {
public:
    explicit Session(std::shared_ptr<Model> model);

    struct Snapshot {
        std::shared_ptr<const Model> model;  // restore() checks it is this session's model
        state::Snapshot state;
        std::vector<int32_t> tokens;         // ids of the positions held in the state
        int32_t pending = -1;
        std::vector<float> last_logits;      // of the last position held, when known
        std::shared_ptr<const Feed> feed;    // the MTP or block drafter's feed, when the session kept one
        int64_t n_past() const { return state.n_past + (pending >= 0 ? 1 : 0); }
    };

    const Model& model() const { return *model_; }
    Model& model() { return *model_; }
    // Positions the session holds: the cached ones plus a pending token, if any.
    int64_t n_past() const;
    int64_t n_ctx() const { return model_->n_ctx(); }
    int32_t n_vocab() const { return static_cast<int32_t>(model_->hparams().n_vocab); }

    // Appends tokens[0, n) (after the pending token, if any); writes the logits of the last
    // n_out of them (n_out < 0: all n) to logits[n_out, n_vocab]. Throws Error for an id
    // outside the vocabulary and state::ContextOverflow past n_ctx, leaving the session unchanged.
    void eval(const int32_t* tokens, int64_t n, float* logits, int64_t n_out = -1);
    // Appends tokens[0, n) like eval and shortlists the last one's logits for a sampler
    // (Model::eval_shortlist): *out holds its shortlist, or its logits in full.
    void eval_shortlist(const int32_t* tokens, int64_t n, float margin, int32_t keep, Shortlisted* out);
    // Greedy verification: appends tokens[0, n) like eval and returns, for every position this
    // call evaluates (the pending token first, if the session held one), the id of its largest
    // logit, computed without materialising the logits (Model::eval_argmax); n_out >= 1: for
    // the last n_out of them only (the others' output projection is skipped).
    std::vector<int32_t> eval_argmax(const int32_t* tokens, int64_t n, int64_t n_out = -1);
    // eval_argmax(tokens, n, 1)'s one id, without a vector: a greedy decode step.
    int32_t next_argmax(const int32_t* tokens, int64_t n);
    // The hidden states of layers[0, n_layers) for tokens[0, n) appended like eval():
    // hidden[n_layers, n, n_embd], indexed as transformers' output_hidden_states (0: the
    // embeddings, i: after layer i, n_layer: after the final norm). Throws Error for a layer
    // outside [0, n_layer]; the pending token, if any, is fed first and not returned.
    void eval_hidden(const int32_t* tokens, int64_t n, const int* layers, int n_layers, float* hidden);
    // Built-in MTP drafting (model().has_mtp(); model/mtp_feed.h). From track_mtp() on (Error
    // without an MTP block), the session's passes keep what the block needs to draft.
    void track_mtp();
    bool tracks_mtp() const;
    // Rows the block must take before drafting after the positions held (the whole context
    // when the feed lost track of it and must re-evaluate).
    int64_t mtp_lag() const;
    // Whether the feed lost track (mtp_lag() then counts the context, evaluated again first).
    bool mtp_stale() const;
    // The first step of a draft after tok, the token to be evaluated next at n_past(): feeds the
    // block what it lacks and tok's row, writing `out`. False (nothing done) while a token is
    // pending (its hidden state is not known yet) or where positions were given as embeddings.
    bool mtp_draft(int32_t tok, const MtpOut& out);
    // A chained step: tok's row at pos, with the previous step's output hidden state.
    void mtp_chain(int64_t pos, int32_t tok, const float* hidden, const MtpOut& out);
    // The model's MTP block over rows at positions pos0.. of this session's MTP slot (every
    // row's outputs; Model::mtp); the positions the session holds are untouched.
    void mtp_step(int64_t pos0, const int32_t* tokens, const float* hidden, int64_t n, float* logits, float* hidden_out);
    // Block drafting (model/block_feed.h): from track_block() on, the session's passes keep what
    // the drafter needs, and its context rows live with the session. A session feeds one drafter
    // at a time: tracking another (or the MTP block) drops the first one's feed.
    void track_block(std::shared_ptr<BlockDrafter> drafter);
    // Rows the drafter must take before drafting (as mtp_lag()), and whether it lost track.
    int64_t block_lag() const;
    bool block_stale() const;
    // A block pass after tok, the token to be evaluated next at n_past(), drafting up to n
    // tokens through pick (BlockDrafter::draft). False (nothing done) while a token is pending,
    // where the context cannot be recovered or the block would not fit.
    bool block_draft(int32_t tok, int64_t n, bool logits, int64_t head_rows, const BlockPick& pick);
    // Appends n rows given as input embeddings embd[n, n_embd] (what layer 0 of the stack
    // reads: after any embedding scale) instead of token ids, writing logits[n, n_vocab]; the
    // positions hold no token id (-1 in tokens()). Throws Error if a token is pending.
    void eval_embeddings(const float* embd, int64_t n, float* logits);
    // A block pass (request.h's Attend::block): rows tokens[0, n) at positions n_past() + i,
    // each seeing the positions held and every row of the block; writes logits[n, n_vocab] and
    // commits nothing (what a DFlash / DSpark drafter's pass is). Throws Error if the session
    // holds a pending token (it must be evaluated first).
    void eval_block(const int32_t* tokens, int64_t n, float* logits);
    // Keeps the first n positions; throws Error unless 0 <= n <= n_past(). From the last
    // checkpoint on it never re-evaluates the context (recurrent slots replay only the tokens
    // after the checkpoint).
    void truncate(int64_t n);
    // Whether truncate(n) can go there without re-evaluating (always, for attention-only
    // models; for recurrent layers 0, n_past(), or from the last checkpoint on).
    bool can_truncate(int64_t n) const;
    // Marks the positions evaluated so far (a pending token not included) as where truncate()
    // returns to without re-evaluating: taken before a pass that may be partly rejected.
    void checkpoint();
    // A drafting session: its evals score only the first n vocabulary ids (Model::eval's
    // head_rows; 0: all). Its logits then read -inf past them, last_logits() included.
    void set_head_rows(int64_t n) { head_rows_ = n; }

    // A token appended without being evaluated yet. Generation leaves its last sampled token
    // here, so that continuing (the next eval or generate) feeds it with the new tokens in one
    // forward pass instead of paying a pass for a token whose logits nobody may want.
    void set_pending(int32_t id);
    // The ids of every position held, pending token included.
    std::vector<int32_t> tokens() const;
    // Logits of the last position held [n_vocab] (a copy, so other threads may go on using
    // the session): evaluates the pending token, or recomputes the last position after a
    // truncate/restore dropped them. Throws Error if n_past() == 0.
    std::vector<float> last_logits();
    // Batched passes (model/engine.h) run this session's rows with other sessions' in one
    // Model::forward on its state: rows_for() gives what feeding tokens means (the pending token
    // first), appended() records the first n of them once a pass has evaluated them, with the
    // last one's logits when the pass returned them. The engine holds the session meanwhile.
    std::vector<int32_t> rows_for(const int32_t* tokens, int64_t n);
    state::State& state() { return *st_; }
    void appended(const int32_t* rows, int64_t n, const float* last_logits);

    std::shared_ptr<const Snapshot> snapshot() const;
    // Throws Error if the snapshot comes from a session of another model.
    void restore(const Snapshot& snap);

    // A snapshot as bytes, to keep outside the process (a prompt cache on disk): the tokens,
    // the pending token and every slot, in the engine's layout kStateFormat (bumped whenever
    // it changes). Not the drafter's feed nor the last logits: a session restored from them
    // recomputes what it needs. saved_size() first, then save() into exactly that many bytes.
    static constexpr uint32_t kStateFormat = 1;
    static size_t saved_size(const Snapshot& snap);
    static void save(const Snapshot& snap, uint8_t* out, size_t n);
    // save()'s bytes read back as a snapshot of this session's model (restore() it). Throws
    // Error for bytes of another format or shape, or cut short.
    std::shared_ptr<Snapshot> load(const uint8_t* data, size_t n) const;

private:
    void eval_locked(const int32_t* tokens, int64_t n, float* logits, int64_t n_out);
    // The pending token (if any) followed by tokens[0, n): what a forward pass feeds (in rows_,
    // valid until the next call).
    const std::vector<int32_t>& with_pending(const int32_t* tokens, int64_t n);
    void argmax_locked(const int32_t* tokens, int64_t n, int32_t* ids, int64_t out, int64_t n_out);
    // Appends tokens without asking for any output.
    void feed_locked(const int32_t* tokens, int64_t n);
    // Back to n <= the positions in the state (from the checkpoint by rollback, else truncate).
    void rewind_locked(int64_t n);

    std::shared_ptr<Model> model_;
    std::unique_ptr<state::State> st_;
    std::vector<int32_t> tokens_;      // ids of the positions held [st_->n_past()]
    int32_t pending_ = -1;             // appended, not evaluated; -1: none
    std::vector<float> last_logits_;   // of position st_->n_past() - 1; empty when unknown
    std::vector<float> scratch_;       // logits rows nobody asked for
    std::vector<int32_t> rows_;        // with_pending()'s rows
    int64_t head_rows_ = 0;
    // Kept for a drafter (the MTP block or a block drafter), once tracked, and its typed views.
    void set_feed(std::unique_ptr<Feed> feed);
    // Tells the feed that rows [at, at + n) were committed (it loses track if feeding throws).
    void committed(int64_t at, int64_t n);
    std::unique_ptr<Feed> feed_;
    MtpFeed* mtp_ = nullptr;
    BlockFeed* block_ = nullptr;
    mutable std::mutex mu_;
};

}  // namespace ds4::model
