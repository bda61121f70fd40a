// Generation: the decode loop over a Session — prefill, sample, feed back — with stop
// conditions, streaming text that never splits a UTF-8 character or shows part of a stop
// string, and the timing statistics users judge it by.
//
// The loop lives here, in C++, so a step costs one forward pass and one pass of the sampler
// over the logits row, with no row copied out to Python.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/session.h"
#include "sample/sampler.h"
#include "tokenizer/tokenizer.h"

namespace ds4::model {

struct GenerateParams {
    int64_t max_tokens = 256;          // >= 0
    sample::SamplingParams sampling;
    std::vector<std::string> stop;     // generation ends where one of these appears in the text
    bool stop_at_eog = true;           // end at an end-of-generation token (EOS, end of turn)
};

struct GenerateStats {
    int64_t n_prompt = 0;              // tokens prefilled by this call
    int64_t n_generated = 0;           // tokens sampled
    int64_t n_forward = 0;             // decode forward passes (one per token after the first)
    double prefill_seconds = 0;
    double decode_seconds = 0;         // forward passes after the prefill
    double sample_seconds = 0;
    std::string stop_reason;           // "max_tokens" | "eog" | "stop" | "context" while running: ""
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

    bool done() const { return done_; }
    const std::vector<int32_t>& tokens() const { return tokens_; }
    const std::string& text() const { return text_; }
    const GenerateStats& stats() const { return stats_; }

private:
    void start();
    void hold(int32_t tok);
    void finish(const char* reason);
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
    // Plain greedy decoding takes each next token from the fused argmax of the output
    // projection (Session::eval_argmax) instead of a logits row: next_ holds it, or -1.
    bool fused_greedy_ = false;
    int32_t next_ = -1;
    std::vector<int32_t> tokens_;
    std::string text_;                 // shown so far
    std::string held_;                 // decoded, not yet shown (may start a stop string)
    GenerateStats stats_;
    bool started_ = false;
    bool done_ = false;
};

}  // namespace ds4::model
