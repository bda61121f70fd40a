// Generation: the decode loop over a Session — prefill, sample, feed back — with stop
// conditions, streaming text that never splits a UTF-8 character or shows part of a stop
// string, and the timing statistics users judge it by.
//
// The loop lives here, in C++, so a step costs one forward pass and one pass of the sampler
// over the logits row, with no row copied out to Python.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "model/session.h"
#include "sample/logprobs.h"
#include "sample/sampler.h"
#include "speculative/proposer.h"
#include "speculative/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace ds4::model {

// Speculative decoding (speculative/): proposers chained in order (the first with a draft wins the
// step), each draft verified by one batched target pass.
//   - Greedy sampling (temperature 0): a drafted token is accepted iff it is the target's argmax,
//     so the output is exactly plain greedy decoding's (the kernels are batch-invariant).
//   - Otherwise, opportunistic (the default): a drafted token equal to the target's argmax (of
//     its raw logits) is accepted as is, and sampling resumes at the first one that is not. Not
//     distribution-preserving: more deterministic than plain sampling, by design.
//   - Otherwise, exact: rejection sampling (speculative/verify.h) against the sampler's distribution, so
//     every token is distributed exactly as plain sampling's.
struct SpecParams {
    std::vector<std::string> types;    // empty: plain decoding
    int n_max = 16;                    // >= 1: most drafted tokens verified in one pass
    int n_min = 0;                     // verify at least this many of a draft, whatever the scheduler says
    bool exact = false;                // temperature > 0: exact instead of opportunistic
    float confidence = 0.0f;           // a model proposer ends its draft below this probability (0: off)
    int64_t draft_vocab = -1;          // the draft model scores the first draft_vocab ids (0: all; < 0: speculative/draft.h's default)
    int mtp_draft = 2;                 // the built-in MTP proposer drafts at most this many tokens (speculative/mtp.h)
    int mtp_depth = 0;                 // ... or, > 0, exactly this many (0: the adaptive depth)
    // The "draft" proposer's model and its tokenizer (which must be the target's).
    std::shared_ptr<Model> draft;
    const tok::Tokenizer* draft_tok = nullptr;
    // The "dflash" proposer's block drafter (loaded for the target).
    std::shared_ptr<BlockDrafter> block_drafter;
};

struct GenerateParams {
    int64_t max_tokens = 256;          // >= 0
    sample::SamplingParams sampling;
    std::vector<std::string> stop;     // generation ends where one of these appears in the text
    bool stop_at_eog = true;           // end at an end-of-generation token (EOS, end of turn)
    // Log-probabilities (sample/logprobs.h): -1 off; otherwise every generated token's, with
    // this many of the most likely alternatives (0..sample::kMaxTopLogprobs). They need each
    // token's logits row, so greedy decoding computes rows instead of a fused argmax (the
    // tokens stay the same: the argmax of those rows).
    int top_logprobs = -1;
    SpecParams spec;
};

// Timings: every second of a generate call after the prefill is in end_to_end_seconds, and the
// phases below split it (what they leave is the loop's own bookkeeping: text, stop strings).
struct GenerateStats {
    int64_t n_prompt = 0;              // tokens prefilled by this call
    int64_t n_generated = 0;           // tokens sampled
    int64_t n_forward = 0;             // decode forward passes (one per token after the first)
    double prefill_seconds = 0;
    double decode_seconds = 0;         // forward passes after the prefill, drafting included
    double sample_seconds = 0;
    double end_to_end_seconds = 0;     // everything after the prefill: what the user waited for
    // Speculation (zero / empty without it)
    int64_t n_drafted = 0;             // drafted tokens verified
    int64_t n_accepted = 0;            // of which accepted
    int64_t n_spec_passes = 0;         // forward passes that verified a draft
    std::vector<int64_t> accepted_per_position;  // [i]: passes that accepted draft position i
    std::vector<int64_t> drafted_per_position;   // [i]: passes that verified draft position i
    std::vector<int32_t> accepted_per_pass;      // per pass that verified a draft, in order: its accepted tokens
    double draft_seconds = 0;          // in the proposers, catch-up included
    double catch_up_seconds = 0;       // of which feeding a draft model what it missed
    double verify_seconds = 0;         // target passes that verified a draft
    double plain_seconds = 0;          // target passes of one token
    double cost_prior_seconds = 0;     // measuring the kernel rates of the cost prior (once per process)
    double cost_prior_macs = 0;        // ... the multiply-adds it ran
    double plain_tokens_per_second = 0;  // the scheduler's model of plain decoding
    double spec_balance_seconds = 0;   // the scheduler's ledger: seconds gained over plain decoding
    std::vector<double> spec_slowdown;   // per proposer: measured / predicted seconds of its passes
    std::string stop_reason;           // "max_tokens" | "eog" | "stop" | "context" | "cancelled"; while running: ""
    std::string stop_string;           // the stop string that ended the text (stop_reason "stop"), else ""
};

class Generator {
public:
    // prompt is appended to what the session holds (it may be empty when the session already
    // holds context). Throws std::invalid_argument for bad parameters.
    Generator(Session& session, const tok::Tokenizer& tok, std::vector<int32_t> prompt, GenerateParams params);

    // Runs until new text is ready or generation ends. Appends the text to *piece and returns
    // true while generation continues; false once it has ended (*piece may still get the tail).
    bool next(std::string* piece);
    void run();  // to the end

    // Batched decoding (model/engine.h): an engine runs the forward passes of many generators,
    // each plain (no speculation: std::invalid_argument). start_batched() replaces the prefill;
    // then, until done(), the engine evaluates the first n of rows() (the prompt, the pending
    // token first, then each sampled token) in its pass and calls fed() with the last row's
    // logits (argmax for plain greedy decoding) once n covers them all: the generator samples
    // the next token, streams its text and puts it in rows().
    void start_batched();
    bool batched() const { return batched_; }
    const std::vector<int32_t>& rows() const { return feed_; }
    bool wants_argmax() const { return fused_greedy_; }
    // A shortlisted row (request.h) instead of logits, with margin shortlist_margin().
    bool wants_shortlist() const { return screened_; }
    float shortlist_margin() const { return sampler_.head_margin(); }
    int32_t shortlist_keep() const { return sampler_.head_keep(); }
    Session& session() { return session_; }
    // list: the row's shortlist (taken: swapped with the generator's own) where it asked for one.
    void fed(int64_t n, const float* logits, int32_t argmax, Shortlisted* list, double seconds);
    // The context cannot take rows(): generation ends as when a plain pass overflows.
    void overflow() { feed_.clear(); finish("context"); flush(nullptr); }
    // Ends the generation where it is (stop reason "cancelled": its client went away); an engine
    // drops it at its next step. Nothing once it has ended.
    void cancel() {
        if (!done_) {
            feed_.clear();
            finish("cancelled");
            flush(nullptr);
        }
    }

    // The sampling-mode boundary (the server calls it when output enters tool-call syntax): from
    // the next token on, sample with `sampling`. Draft tokens a verify pass accepted under the old
    // settings and not yet taken are dropped: the session rewinds to the last token taken (from
    // the checkpoint taken before that pass: recurrent slots restore their copy and replay the
    // accepted rows, the context is never evaluated again) and evaluates it again, so the next
    // token is drawn from its logits under the new settings, as a fresh session that evaluated
    // the same tokens and sampled with them would. Throws std::invalid_argument for bad settings
    // (nothing changed) and std::logic_error on a batched generator.
    void set_sampling(const sample::SamplingParams& sampling);

    bool done() const { return done_; }
    const std::vector<int32_t>& tokens() const { return tokens_; }
    // One per token of tokens() when logprobs_on() (params.top_logprobs >= 0), else empty.
    bool logprobs_on() const { return scorer_ != nullptr; }
    const std::vector<sample::TokenLogprob>& logprobs() const { return logprobs_; }
    const std::string& text() const { return text_; }
    const GenerateStats& stats() const { return stats_; }

private:
    void start();
    bool step(std::string* piece);  // next() without its timing
    // Takes the next token (an accepted draft's, the greedy one, or a sample), records it and
    // streams its text; returns false once generation has ended (on it, or before it).
    bool take_token(std::string* piece, int32_t* tok, int64_t* verified);
    void flush(std::string* piece);  // the final text, once done
    void emit(std::string* piece);   // batched: the next token into rows(), or the end
    void hold(int32_t tok);
    void reserve_output();            // room for max_tokens ids in tokens_
    // A new sampler for params_.sampling, its penalties seeded with the context, and the
    // proposers' draws set to match (exact sampling: from their own distributions).
    void start_sampling();
    void seed_penalties();  // the sampler accepts the context's last repeat_last_n tokens
    // Evaluates tok (pending in the session) together with a draft, if a proposer has one and the
    // scheduler finds it pays, queueing the accepted draft tokens; returns the target's next token.
    int32_t speculate(int32_t tok);
    void finish(const char* reason);
    // The next token drawn from the row in hand (logits_, or sl_ where listed_).
    int32_t draw();
    // Moves what can safely be shown from held_ to text_ (and *piece): everything except a
    // tail that could still become a stop string. Returns true if a stop string was found.
    bool release(std::string* piece, bool final);

    Session& session_;
    const tok::Tokenizer& tok_;
    std::vector<int32_t> prompt_;
    GenerateParams params_;
    sample::Sampler sampler_;
    tok::StreamDecoder decoder_;
    std::vector<int32_t> eog_;
    std::vector<float> logits_;
    // Plain greedy decoding without logprobs takes each next token from the fused argmax of
    // the output projection (Session::eval_argmax) instead of a logits row: next_ holds it, or -1.
    bool fused_greedy_ = false;
    int32_t next_ = -1;
    // Sampling without top-k, top-p, min-p or logprobs draws from shortlisted rows (the head
    // computes only the logits near the largest; Sampler::sample_screened): sl_ holds the row
    // when listed_, else logits_ does.
    bool screened_ = false;
    bool listed_ = false;
    Shortlisted sl_;
    bool reeval_ = false;  // set_sampling(): the last token taken, pending again, is evaluated before the next draw
    double last_sample_seconds_ = 0;  // the last draw from logits_: a plain step pays it besides its pass
    // Speculation: the proposers, the scheduler, the context they see (every token of the
    // session, the last emitted one included) and the accepted draft tokens still to emit, with
    // the session position each was evaluated at.
    std::vector<std::unique_ptr<speculative::Proposer>> proposers_;
    std::unique_ptr<speculative::Scheduler> scheduler_;
    std::vector<int32_t> context_;
    struct Verified {
        int32_t tok;
        int64_t pos;
        bool sampled;  // already recorded by the sampler (exact mode accepts as it goes)
        sample::TokenLogprob logprob;  // from its verify row, when logprobs are on
    };
    std::deque<Verified> queue_;
    speculative::Draft draft_;
    std::vector<float> rows_, probs_;  // sampled speculation: the verify pass's logits, a distribution
    std::vector<int32_t> tokens_;
    std::unique_ptr<sample::LogprobScorer> scorer_;  // logprobs on: scores each token taken
    std::vector<sample::TokenLogprob> logprobs_;
    std::string text_;                 // shown so far
    std::string held_;                 // decoded, not yet shown (may start a stop string)
    GenerateStats stats_;
    bool started_ = false;
    bool done_ = false;
    bool batched_ = false;
    std::vector<int32_t> feed_;        // batched: the rows the engine is to evaluate next
};

}  // namespace ds4::model
