// A forward request: the rows one pass evaluates, of one sequence or of many, and what it
// returns for them.
//
//   rows      a token id or an input embedding per row, in runs of consecutive rows per
//             sequence (SeqRows): run i's rows sit at positions state->n_past() + 0, 1, ...
//   attention per run: causal over the sequence's state, the new rows committed (decode, prefill,
//             verify); or a block of transient rows that see the committed positions and each
//             other, whatever their order, and commit nothing (a DFlash / DSpark draft pass)
//   outputs   per row: logits, the argmax of its logits (greedy, without the rows), a shortlist
//             (a sampler's: the ids within a margin of the largest, backend.h), or nothing
//   captures  hidden states of chosen layers for chosen rows, indexed as transformers'
//             output_hidden_states: 0 the embeddings, i after layer i, n_layer after the final
//             norm (what an MTP head or a DFlash drafter conditions on)
//
// A row's results never depend on the other rows of the pass (backend.h's batch invariance):
// a session stepped together with others gets the tokens it gets alone.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "state/state.h"

namespace ds4::model {

// A row's shortlist as a pass returns it.
struct Shortlisted {
    backend::Shortlist list;
    std::vector<float> full;  // every logit, where list.ok is false
};

enum class Attend : uint8_t {
    causal,  // row i sees positions [0, its own]; the rows are committed
    block,   // every row sees [0, n_past + n) of its run; nothing is committed
};

// Consecutive rows of one sequence.
struct SeqRows {
    state::State* state = nullptr;
    int64_t n = 0;
    Attend attend = Attend::causal;
};

enum class Out : uint8_t { none, logits, argmax, shortlist };

struct Request {
    const int32_t* tokens = nullptr;      // [rows] ids, or
    const float* embeddings = nullptr;    // [rows, n_embd] input embeddings (tokens null)
    const SeqRows* seqs = nullptr;        // [n_seqs], each state at most once
    int n_seqs = 0;

    // Per row what it returns (null: logits of every row).
    const Out* out = nullptr;             // [rows]
    float* logits = nullptr;              // [rows returning logits, n_vocab], in row order
    int32_t* argmax = nullptr;            // [rows returning argmax], in row order
    int64_t head_rows = 0;                // > 0: score only the first head_rows ids, the rest -inf
    // Rows returning a shortlist, in row order: each row's margin (>= 0) and its Shortlist,
    // whose x the model sets (the head's input row); where the backend could not shortlist
    // (ok false), its logits in full[n_vocab] instead.
    const float* margins = nullptr;
    const int32_t* keeps = nullptr;       // null, or how many of its largest values each row needs (0: all within its margin; Backend::matmul_shortlist)
    Shortlisted* shortlists = nullptr;

    const int* capture_layers = nullptr;  // [n_capture] in [0, n_layer]
    int n_capture = 0;
    const uint8_t* capture_rows = nullptr;  // [rows] nonzero: captured; null: every row
    float* hidden = nullptr;              // [n_capture, captured rows, n_embd]

    // The rows of one sequence, token ids (null: embeddings, set by the caller); outputs unset.
    static Request of(const SeqRows& seq, const int32_t* tokens) {
        Request r;
        r.tokens = tokens;
        r.seqs = &seq;
        r.n_seqs = 1;
        return r;
    }

    int64_t rows() const {
        int64_t n = 0;
        for (int i = 0; i < n_seqs; ++i) n += seqs[i].n;
        return n;
    }
};

// Hidden states a single-sequence pass keeps of every row it evaluates (Model::eval): the
// capture indices layers[n], written to hidden[n, rows, n_embd]; empty: none.
struct Captures {
    const int* layers = nullptr;
    int n = 0;
    float* hidden = nullptr;
    bool empty() const { return n == 0 || !hidden; }
};

// What rows of the built-in MTP block return (each buffer has a row per returning row).
struct MtpOut {
    float* logits = nullptr;    // [., n_vocab] or null
    int32_t* argmax = nullptr;  // [.] the largest logit's id, or null
    float* hidden = nullptr;    // [., n_embd] after the head norm (a chained step's input), or null
    int64_t head_rows = 0;      // > 0: score only the first head_rows ids, the rest -inf
};

// Rows of the built-in MTP block (Model::mtp) at positions pos0 .. pos0 + n - 1 of a state's
// MTP slot, and what its last n_out rows return.
struct MtpRows {
    int64_t pos0 = 0;
    int64_t n = 0;
    const int32_t* tokens = nullptr;      // [n] the token at each position
    const float* hidden = nullptr;        // [n, n_embd] the target's hidden state at the position before
    int64_t n_out = -1;                   // < 0: every row; 0: none (only the slot's rows written)
    MtpOut out;
};

// A request as a model runs it, checked and laid out by Model::forward.
struct Pass {
    const Request& req;
    int64_t n;               // rows
    const int32_t* pos;      // [n] each row's position
    const int32_t* last;     // [n] the last position each row's attention sees
    const int64_t* first;    // [n_seqs + 1] the first row of each run (first[n_seqs] = n)
    const int64_t* n_past;   // [n_seqs] each run's state's positions before the pass
    const int64_t* out_logits;  // rows returning logits, ascending
    int64_t n_logits;
    const int64_t* out_argmax;  // rows returning argmax, ascending
    int64_t n_argmax;
    const int64_t* out_shortlist;  // rows returning a shortlist, ascending
    int64_t n_shortlist;
    const int64_t* captured;    // captured rows, ascending
    int64_t n_captured;
};

}  // namespace ds4::model
