// What a forward pass costs before any pass has run: the speculation scheduler's prior.
//
// A verify pass of r rows costs one decode step (measured by the generation's first plain steps)
// plus what the r - 1 extra rows add. A decode step streams the weights once; each extra row
// adds the multiply-adds of every matrix (the weights are already in flight). So the prior of
// the extra rows is the model's multiply-adds per row, from its tensor directory, at the rate
// the backend's matmul kernels reach on this machine for each weight format and row count,
// measured once per process on a small synthetic matrix that stays in cache (a few ms; a
// fresh `ds4 -p` pays it, not a calibration of the whole curve). The generation refines the
// curve from the passes it runs anyway (speculative/scheduler.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "gguf/gguf.h"
#include "quant/types.h"

namespace ds4::model {

// Per row of a forward pass: the multiply-adds and weight bytes of the matmuls, by format.
struct PassWork {
    struct Part {
        quant::Type type = quant::Type::F32;
        int64_t n_in = 0;    // the row length of the first matrix of this format (what the probe uses)
        double macs = 0;     // multiply-adds per activation row
        double bytes = 0;    // weight bytes a pass reads
    };
    std::vector<Part> layers;  // the blocks' matrices, one part per format
    Part head;                 // the output projection (all n_vocab rows)
    int64_t n_vocab = 0;

    // The output projection's share when only its first head_rows rows are scored (0: all).
    double head_share(int64_t head_rows) const;
    double macs(int64_t head_rows = 0) const;
    double bytes(int64_t head_rows = 0) const;

    // From the tensor directory: every 2-D blk.* weight, of each 3-D stack of experts the
    // expert_used_count matrices a row runs, and output.weight (or the tied token_embd.weight)
    // as the head.
    static PassWork of(const gguf::File& file, int64_t n_vocab);
};

// What generations measured of a model's passes, carried to the next generation on it (the
// speculation scheduler's fit, speculative/scheduler.h): a plain step's seconds and, per row count, the
// measured / prior ratio of what the extra rows cost.
struct PassTimes {
    // A running measured / prior ratio: the faster of the first two passes sets it (the first
    // pass of a size runs cold: buffers grow, pages fault), later ones move it by `weight`.
    struct Fit {
        double ratio = 1.0;
        int seen = 0;  // passes measured (0: ratio unset)
        void add(double r, double weight) {
            ratio = seen == 0 ? r : seen == 1 ? std::min(ratio, r) : ratio + weight * (r - ratio);
            ++seen;
        }
    };
    double step = 0;        // 0: never measured
    std::vector<Fit> rows;  // [r - 1]: of passes of r rows
    Fit all;                // of passes of every row count
};

// Seconds that r rows add to a pass of one row, r = 1 .. max_rows (element r - 1; element 0 is
// 0), from `work` and the rates of `be`'s kernels (measured on first use of each format and
// kept for the process). *probe_macs, if given, gets the multiply-adds the measurement ran (0
// when every rate was already known).
std::vector<double> extra_row_seconds(backend::Backend& be, const PassWork& work, int max_rows,
                                      double* probe_macs = nullptr);

}  // namespace ds4::model
