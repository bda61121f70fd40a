// See pass_cost.h.
#include "model/pass_cost.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "quant/kernels.h"

namespace ds4::model {

namespace {

// Activation-row counts the probe times (and the largest asked for); the others are
// interpolated. Each is timed twice (the faster counts), after one untimed call that brings the
// matrix into cache and wakes the threads.
constexpr int kProbeRows[] = {1, 2, 4, 8, 16, 32};
// Multiply-adds of one activation row against the probe matrix: enough that a call's thread
// hand-off is small beside its compute, small enough (~0.5 MB of weights) to stay in cache.
constexpr double kProbeMacs = 1 << 19;

// A layer's matrix, or a stack of experts' matrices (3-D).
bool is_layer_matrix(const gguf::TensorInfo& t) {
    return (t.ne.size() == 2 || t.ne.size() == 3) && t.name.rfind("blk.", 0) == 0 && t.name.size() > 7 &&
           t.name.compare(t.name.size() - 7, 7, ".weight") == 0;
}

// `used` matrices of t (all of a 2-D one) take part in a row's pass.
void add(PassWork::Part& p, const gguf::TensorInfo& t, double used = 1.0) {
    if (p.n_in == 0) p.n_in = t.ne[0];
    const double n_mat = t.ne.size() == 3 ? static_cast<double>(t.ne[2]) : 1.0;
    p.macs += static_cast<double>(t.ne[0]) * static_cast<double>(t.ne[1]) * std::min(used, n_mat);
    p.bytes += static_cast<double>(t.nbytes) * std::min(used, n_mat) / n_mat;
}

// Seconds of a matmul of r activation rows against the probe matrix of `type` (probe_out rows
// of n_in), for the probed row counts r.
struct Rates {
    std::vector<int> rows;
    std::vector<double> seconds;
    int64_t probe_out = 0, n_in = 0;

    // Seconds that r rows add to one, per multiply-add of one activation row: interpolated
    // between the probed row counts, extrapolated at the last one's cost per row.
    double extra_per_mac(int r) const {
        const auto at = [&](size_t i) { return seconds[i] - seconds[0]; };
        size_t hi = 0;
        while (hi + 1 < rows.size() && rows[hi] < r) ++hi;
        double s;
        if (rows[hi] == r) {
            s = at(hi);
        } else if (rows[hi] < r) {
            s = at(hi) * double(r - 1) / std::max(1, rows[hi] - 1);
        } else {
            const size_t lo = hi - 1;
            s = at(lo) + (at(hi) - at(lo)) * double(r - rows[lo]) / (rows[hi] - rows[lo]);
        }
        return std::max(0.0, s) / (static_cast<double>(probe_out) * static_cast<double>(n_in));
    }
};

Rates measure(backend::Backend& be, quant::Type type, int64_t n_in, int max_rows, double* macs) {
    Rates out;
    out.n_in = n_in;
    out.probe_out = std::max<int64_t>(64, static_cast<int64_t>(kProbeMacs / static_cast<double>(n_in)) / 64 * 64);
    const quant::TypeInfo* info = quant::type_info(static_cast<uint32_t>(type));
    backend::Weight w;
    std::vector<uint8_t> zeros(quant::row_bytes(*info, n_in) * static_cast<size_t>(out.probe_out));
    w.data = zeros.data();
    w.type = type;
    w.n_in = n_in;
    w.n_out = out.probe_out;
    w.row_bytes = quant::row_bytes(*info, n_in);
    // The probe takes the path a model's weights take: packed, if the backend packs this format.
    be.pack_now(w);
    // Sizes within a quarter of the largest add little: the largest stands for them.
    for (int r : kProbeRows)
        if (r < max_rows && 4 * r <= 3 * max_rows) out.rows.push_back(r);
    out.rows.push_back(max_rows);
    std::vector<float> xs(static_cast<size_t>(max_rows * n_in));
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>((i * 7919 % 1000) - 500) * 1e-3f;
    const std::unique_ptr<backend::Buffer> xb = be.alloc(xs.size() * sizeof(float));
    const std::unique_ptr<backend::Buffer> yb = be.alloc(static_cast<size_t>(max_rows * out.probe_out) * sizeof(float));
    const backend::Rows x{static_cast<float*>(xb->data()), max_rows, n_in};
    const backend::Rows y{static_cast<float*>(yb->data()), max_rows, out.probe_out};
    be.upload(x, xs.data());
    const double macs_per_row = static_cast<double>(out.probe_out) * static_cast<double>(n_in);
    // The untimed call runs the most rows: it also grows the backend's scratch to its largest.
    be.matmul(w, x, y);
    *macs += max_rows * macs_per_row;
    for (int r : out.rows) {
        double best = std::numeric_limits<double>::infinity();
        for (int rep = 0; rep < 2; ++rep) {
            const auto t0 = std::chrono::steady_clock::now();
            be.matmul(w, x.rows(0, r), y.rows(0, r));
            best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
            *macs += r * macs_per_row;
        }
        // r rows cost at least one and at most r times one row: a stall caught by both timings
        // of a size must not bend the curve
        out.seconds.push_back(out.seconds.empty() ? best : std::clamp(best, out.seconds[0], r * out.seconds[0]));
    }
    be.drop_packed(w);
    return out;
}

}  // namespace

double PassWork::head_share(int64_t head_rows) const {
    return head_rows > 0 && head_rows < n_vocab ? static_cast<double>(head_rows) / static_cast<double>(n_vocab) : 1.0;
}

double PassWork::macs(int64_t head_rows) const {
    double m = head.macs * head_share(head_rows);
    for (const Part& p : layers) m += p.macs;
    return m;
}

double PassWork::bytes(int64_t head_rows) const {
    double b = head.bytes * head_share(head_rows);
    for (const Part& p : layers) b += p.bytes;
    return b;
}

PassWork PassWork::of(const gguf::File& file, int64_t n_vocab) {
    PassWork w;
    w.n_vocab = n_vocab;
    // A row runs expert_used_count matrices of each stack of routed experts.
    const gguf::Value* used_key = file.find(file.get("general.architecture").as_string() + ".expert_used_count");
    const double used = used_key ? static_cast<double>(used_key->as_int()) : 1.0;
    for (const gguf::TensorInfo& t : file.tensors()) {
        if (!is_layer_matrix(t)) continue;
        const auto type = static_cast<quant::Type>(t.type);
        auto it = std::find_if(w.layers.begin(), w.layers.end(), [&](const Part& p) { return p.type == type; });
        if (it == w.layers.end()) {
            w.layers.push_back({type});
            it = w.layers.end() - 1;
        }
        add(*it, t, t.ne.size() == 3 ? used : 1.0);
    }
    const gguf::TensorInfo* head = file.find_tensor("output.weight");
    if (!head) head = file.find_tensor("token_embd.weight");
    if (head && head->ne.size() == 2) {
        w.head.type = static_cast<quant::Type>(head->type);
        add(w.head, *head);
    }
    return w;
}

std::vector<double> extra_row_seconds(backend::Backend& be, const PassWork& work, int max_rows, double* probe_macs) {
    // Rates are a property of the machine, the kernels and the backend's settings: measured once
    // per process for each of those and each format.
    using Key = std::tuple<int, int, int, std::string, int, int64_t>;  // isa, threads, type, settings, max_rows, n_in
    static std::mutex mu;
    static std::map<Key, Rates> known;
    double macs = 0;
    std::vector<double> extra(static_cast<size_t>(max_rows), 0.0);
    std::vector<PassWork::Part> parts = work.layers;
    if (work.head.macs > 0) parts.push_back(work.head);
    std::lock_guard<std::mutex> lock(mu);
    for (const PassWork::Part& p : parts) {
        const Key key{static_cast<int>(quant::active_isa()), be.threads(), static_cast<int>(p.type),
                      be.settings(), max_rows, p.n_in};
        auto it = known.find(key);
        if (it == known.end()) it = known.emplace(key, measure(be, p.type, p.n_in, max_rows, &macs)).first;
        for (int r = 2; r <= max_rows; ++r) extra[static_cast<size_t>(r - 1)] += p.macs * it->second.extra_per_mac(r);
    }
    // Never cheaper for more rows.
    for (size_t i = 1; i < extra.size(); ++i) extra[i] = std::max(extra[i], extra[i - 1]);
    if (probe_macs) *probe_macs = macs;
    return extra;
}

}  // namespace ds4::model
