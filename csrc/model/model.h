// A loaded model: hyper-parameters, weights (views into the GGUF mmap) and the backend that
// runs its forward pass. One Model is shared by any number of sequences, each a state::State
// (a slot per layer) that new_state() makes.
//
// Model::load dispatches on general.architecture to one short file per architecture (llama.cpp,
// qwen2.cpp, qwen3.cpp, qwen3moe.cpp, qwen3next.cpp for the hybrids, gemma3.cpp) that says how
// it differs from the shared decoder (decoder.h), which binds the tensors per layer and runs
// forward requests (request.h) from the blocks in blocks.h, moe.h and deltanet.h.
#pragma once

#include <cstdint>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "gguf/gguf.h"
#include "model/hparams.h"
#include "model/identity.h"
#include "model/pass_cost.h"
#include "model/request.h"
#include "state/state.h"

namespace ds4::model {

// A model that cannot be built (unknown architecture, missing tensor, shape mismatch, bad
// metadata) or a call with bad arguments (token id outside the vocabulary).
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct Options {
    std::string backend = "cpu";                  // the only one so far
    backend::CpuOptions cpu;                      // threads, int16 activations, repacking
    int64_t n_ctx = 0;                            // <= 0: the model's trained context length
    backend::KvType kv_type = backend::KvType::f16;
};

class Model {
public:
    // Throws Error for an unknown architecture or a file that does not fit it.
    static std::shared_ptr<Model> load(std::shared_ptr<const gguf::File> file, const Options& opts);
    virtual ~Model() = default;
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    const HParams& hparams() const { return hp_; }
    const std::string& path() const { return file_->path(); }
    const gguf::File& file() const { return *file_; }
    // What a drafter file records of its target (identity.h), computed on first use.
    const Identity& identity() const;
    int64_t n_ctx() const { return n_ctx_; }
    backend::KvType kv_type() const { return opts_.kv_type; }

    // An empty state for one sequence: a KV slot per attention layer (sized for n_ctx), a
    // recurrent slot per gated DeltaNet layer.
    std::unique_ptr<state::State> new_state() const;
    // st.rollback(n) (state.h) on this model's backend, where recurrent slots replay their
    // logged rows: serialised with the passes. Returns the tokens to feed again.
    int64_t rollback(state::State& st, int64_t n);

    // Whether the file holds a built-in MTP block (hparams().n_mtp, its tensors present).
    virtual bool has_mtp() const { return false; }
    // One pass of the MTP block (MtpRows) on st's MTP slot: row i joins tokens[i] (the token at
    // position pos0 + i) with hidden[i] (the target's hidden state after its final norm at the
    // position before; zeros before the first), runs the block's layer (attending to the slot's
    // positions up to its own) and, for the last n_out rows, the shared output head: logits
    // predict the token after tokens[i]; out.hidden is the block's output after its head norm
    // (what a chained step takes as hidden). Writes the slot's rows, nothing else of st. Throws
    // Error without an MTP block or for bad ids or positions.
    void mtp(state::State& st, const MtpRows& rows);

    // Runs one forward pass over the request's rows (request.h). Checks everything first (ids,
    // states, outputs, context: Error / state::ContextOverflow) and changes nothing on error;
    // then writes the outputs and commits each causal run's rows to its state. Passes are
    // serialised: they share the backend's threads.
    void forward(const Request& req);
    // fn(i) for i < n on the backend's threads: work between passes (Backend::for_each).
    void for_each(int64_t n, const std::function<void(int64_t)>& fn) { backend_->for_each(n, fn); }

    // One sequence: appends tokens[0, n) to `st` and writes the logits of the last n_out of them
    // (logits[n_out, n_vocab]; n_out < 0 means all n).
    // head_rows > 0 scores only the first head_rows vocabulary ids, the rest reading as -inf (a
    // drafter's shortlist: the output projection is most of a small model's bytes).
    // cap: hidden states of every row to keep (what the built-in MTP block or a block drafter
    // conditions on).
    void eval(state::State& st, const int32_t* tokens, int64_t n, float* logits, int64_t n_out = -1,
              int64_t head_rows = 0, const Captures& cap = {});
    // The same, writing for each of the last n_out rows the id of its largest logit (lowest id
    // on ties) instead of the logits: what greedy decoding and greedy verification need, without
    // the n_out x n_vocab rows. Bit-consistent with eval: argmax of the very same logits.
    void eval_argmax(state::State& st, const int32_t* tokens, int64_t n, int32_t* ids, int64_t n_out = -1,
                     int64_t head_rows = 0, const Captures& cap = {});

    // The same for a sampler: the last row's shortlist (request.h's Out::shortlist) within
    // `margin` of its largest logit (or its `keep` largest, keep > 0), or its logits in full where the backend cannot shortlist.
    void eval_shortlist(state::State& st, const int32_t* tokens, int64_t n, float margin, int32_t keep,
                        Shortlisted* out, const Captures& cap = {});
    // y[i] = the logit of ids[i] in a row a pass shortlisted (s.ok), exactly as the full row
    // has it; on the calling thread, outside the pass lock (the weights are read-only).
    void head_values(const backend::Shortlist& s, const int32_t* ids, int64_t n, float* y);

    // What a block drafter (model/block_drafter.h) borrows from its target: the backend it runs
    // on, the token embeddings (a row times embed_scale is what layer 0 reads) and the output
    // projection with its soft-cap (0: none).
    struct Lent {
        backend::Backend& be;
        const backend::Weight& embeddings;
        float embed_scale;
        const backend::Weight& output;
        float softcap;
    };
    // Runs fn under the pass lock with the arena reset, as a pass of this model: a drafter's
    // pass on this model's backend, serialised with its passes.
    void lend(const std::function<void(const Lent&)>& fn);

    // Appends tokens[0, n) to `st` returning nothing but the hidden states `cap` keeps of every
    // row: how a drafter's feed recovers the context it lost track of.
    void eval_captures(state::State& st, const int32_t* tokens, int64_t n, const Captures& cap);

    // Per row of a forward pass: multiply-adds and weight bytes by format (model/pass_cost.h).
    const PassWork& work() const { return work_; }
    // The prior of what r rows add to a one-row pass (model/pass_cost.h), r = 1 .. max_rows;
    // *probe_macs gets the multiply-adds measuring it ran (0 once known in this process).
    std::vector<double> extra_row_seconds(int max_rows, double* probe_macs = nullptr);

    // What earlier generations measured of this model's passes: per kind of pass (those that
    // return each row's argmax, those that return logits rows), as the last one left it.
    PassTimes pass_times(bool argmax) const;
    void set_pass_times(bool argmax, PassTimes t);

    // Forward passes run and rows they evaluated, since load: the work a caller can account for.
    uint64_t forward_passes() const { return passes_.load(); }
    uint64_t forward_rows() const { return rows_.load(); }
    // Whether repacking was deferred (Options::defer_pack) and no forward pass has run it yet.
    bool repack_pending() const { return backend_->packing_pending(); }

protected:
    Model(std::shared_ptr<const gguf::File> file, HParams hp, const Options& opts);
    // Runs a checked pass: writes the outputs and the slots; committing is the caller's.
    virtual void run(const Pass& p) = 0;
    // Layer `layer`'s slot of a new state: a KV slot unless the architecture says otherwise.
    virtual std::unique_ptr<state::Slot> make_slot(int layer) const;
    // Slots of a state: one per layer, and one for an MTP block's layer (index n_layer).
    virtual int n_slots() const { return hp_.n_layer; }
    // The MTP block's pass, after Model::mtp's checks (has_mtp() among them).
    virtual void run_mtp(state::State& st, const MtpRows& rows) = 0;
    // What lend() hands out.
    virtual Lent lent() = 0;

    backend::Backend& be() { return *backend_; }

    std::shared_ptr<const gguf::File> file_;
    HParams hp_;
    Options opts_;
    int64_t n_ctx_;
    std::unique_ptr<backend::Backend> backend_;

private:
    void eval_one(state::State& st, const int32_t* tokens, int64_t n, int64_t n_out, float* logits, int32_t* ids,
                  int64_t head_rows, const Captures& cap);
    // A request for eval_one / eval_shortlist: seq's rows with eval_out_'s outputs and cap's captures.
    Request one(const SeqRows& seq, const int32_t* tokens, const Captures& cap) const;
    // Checks a request before anything runs (Model::forward); returns its rows.
    int64_t check(const Request& req) const;
    // Throws Error naming the first id outside the vocabulary.
    void check_tokens(const int32_t* tokens, int64_t n) const;
    void forward_locked(const Request& req);  // forward() with mu_ held

    std::mutex mu_;
    // The pass layout, rebuilt under mu_ for every pass.
    std::vector<int32_t> pos_, last_;
    std::vector<int64_t> first_, n_past_, out_logits_, out_argmax_, out_shortlist_, captured_;
    std::vector<Out> eval_out_;  // eval()'s output kinds
    PassWork work_;
    mutable std::once_flag identity_once_;
    mutable Identity identity_;
    mutable std::mutex times_mu_;
    PassTimes times_[2];  // [argmax]
    std::atomic<uint64_t> passes_{0}, rows_{0};
};

// The architecture builders (one per file), called by Model::load.
std::unique_ptr<Model> make_llama(std::shared_ptr<const gguf::File> file, const Options& opts);
std::unique_ptr<Model> make_qwen2(std::shared_ptr<const gguf::File> file, const Options& opts);
std::unique_ptr<Model> make_qwen3(std::shared_ptr<const gguf::File> file, const Options& opts);
std::unique_ptr<Model> make_qwen3moe(std::shared_ptr<const gguf::File> file, const Options& opts);
std::unique_ptr<Model> make_qwen3next(std::shared_ptr<const gguf::File> file, const Options& opts);
std::unique_ptr<Model> make_qwen35(std::shared_ptr<const gguf::File> file, const Options& opts);
std::unique_ptr<Model> make_qwen35moe(std::shared_ptr<const gguf::File> file, const Options& opts);
std::unique_ptr<Model> make_gemma3(std::shared_ptr<const gguf::File> file, const Options& opts);

}  // namespace ds4::model
