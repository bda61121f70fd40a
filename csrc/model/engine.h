// One engine step for many sessions of one model: every running generation's next rows (its
// last sampled token, or a chunk of its prompt) gathered into one forward request (request.h),
// run once, and dispatched back: each generation samples and streams its next token.
//
// Decoding on a CPU reads every weight once per pass whatever the rows, so sessions that share
// a pass share that read: the aggregate rate grows with the sessions until the multiply-adds
// catch up with the bytes. A row's result does not depend on its neighbours (backend.h), so
// each session gets exactly the tokens it would get alone.
//
// Generations join (add) and leave (when done) between steps; speculation is not used here (as
// the seeds' session-batched serving: a lone request may speculate through Generator::next).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/generate.h"
#include "model/model.h"

namespace ds4::model {

class Engine {
public:
    // max_rows: rows per pass at most; decode rows come first, prompt chunks fill the rest.
    explicit Engine(std::shared_ptr<Model> model, int64_t max_rows = 512);

    // Starts g in batched mode (Generator::start_batched) and adds it. Throws
    // std::invalid_argument for a generator on another model's session, one already added or
    // started, or one that speculates; state::ContextOverflow for a prompt that cannot fit.
    void add(Generator& g);
    // Runs one forward pass for the generators that have rows (done ones leave first); returns
    // whether any generator is still running.
    bool step();
    size_t running() const { return gens_.size(); }
    uint64_t passes() const { return passes_; }

private:
    struct Part {
        Generator* g;
        int64_t n;       // rows taken from g->rows()
        int64_t out;     // index among the pass's logits (or argmax) rows; -1: none
    };

    std::shared_ptr<Model> model_;
    int64_t max_rows_;
    std::vector<Generator*> gens_;
    uint64_t passes_ = 0;
    size_t next_ = 0;                  // where the next pass starts taking decode rows
    // One pass's request, reused between steps.
    std::vector<Part> parts_;
    std::vector<SeqRows> seqs_;
    std::vector<int32_t> tokens_;
    std::vector<Out> out_;
    std::vector<float> logits_;
    std::vector<int32_t> argmax_;
    std::vector<float> margins_;      // of the rows returning shortlists
    std::vector<int32_t> keeps_;
    std::vector<Shortlisted> lists_;  // theirs (swapped with each generator's: nothing allocated per step)
};

}  // namespace ds4::model
