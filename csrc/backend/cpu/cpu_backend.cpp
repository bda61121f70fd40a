// The CPU backend: every op of backend.h on the host, threaded with ThreadPool.
//
// Matmul: every output element y[r][o] is the dot of weight row o and activation row r in the
// one order of operations the active ISA defines for that format (quant/x86/simd.h), whichever of
// three kernel paths computes it, so a row's result never depends on how many rows share the
// call (batch invariance: decode, verify blocks and prefill agree bit for bit):
//   - a few rows (decode, verify): dot_rows streams each weight row once per chunk of up to
//     kDotRowsMax activation rows, decoding it once for the chunk, straight from the mmap;
//   - many rows (prefill): a tile of weight rows is decoded once into floats (decode_groups) and
//     a register-tiled GEMM (gemm_groups) runs every activation row against it;
//   - with int16 activations on (CpuOptions::int16_activations), matmuls of the formats with
//     an int16 path (the legacy formats, packed, and the K-quants) take it instead
//     (quant/int16_gemm.h): activations
//     quantised per group of 32 or 256 values, a fused kernel for a few rows, integer tiles for
//     many; results differ from the float dot's by ~1e-4 relative, and are the same for every
//     batch size on the int16 path; weights repacked at load (pack(), quant/packed.h: the legacy
//     formats in the block-lane order) take the packed fused kernel and are decoded a row at a time
//     for the GEMM, with the same integers, so the floats are again the same;
//   - a format with only the scalar reference dot (slow, accumulates in double) dequantises a
//     tile of weight rows and takes dot_f32 per element; that choice depends only on the format
//     and ISA, never on n.
// Threads split the output rows (weight rows) into units (ThreadPool::for_each_unit: a contiguous
// share each, then the others' leftovers), never the reduction; within a unit, weight rows are
// taken in blocks that stay in L2 while the activation rows stream past them, so a prefill reads
// each weight byte from memory once. Threads also split rows of
// elementwise ops and the (query row, KV group, key chunk) units of attention, whose SIMD inner
// kernels (attn.h) keep one order per (row, head) and whose chunks merge in one fixed order;
// no reduction is ever split in a way that depends on the batch or the threads.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/aligned.h"
#include "backend/cpu/attn.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/delta.h"
#include "backend/cpu/huge_pages.h"
#include "backend/cpu/screened_head.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/vmath.h"
#include "quant/int16_gemm.h"
#include "quant/kernels.h"
#include "quant/weight_streams.h"

namespace ds4::backend {

namespace {

// Output rows of a matmul dequantised per tile (reference-dot formats): the float tile stays in
// cache while every activation row streams past it.
constexpr int64_t kMatmulTile = 16;
// Weight bytes per block of the dot_rows path: small enough to stay in L2 while the
// activation rows stream past (each activation row is then reused from L1 across the block).
constexpr size_t kDotBlockBytes = 128 * 1024;
// From this many activation rows on, decoding weight tiles for the GEMM beats dot_rows (decoding
// a row writes its n_in floats, worth a few dots; measured on Gemma: 8- and 16-row verify blocks
// ran 1.3x faster through dot_rows).
constexpr int64_t kGemmMinRows = 32;
// GEMM blocking: weight rows decoded per tile (a multiple of every register tile's rows) and
// activation rows per pass over a tile (their floats stay in L2 next to the decoded tile).
constexpr int64_t kGemmTileRows = 24;
// The int16 GEMM's tile: its int16 rows are half the float tile's bytes, and at 48 rows the
// activation rows are read from L2 half as often as at 24 (AVX-512, Zen 5, one thread: 6-12 %
// faster on Gemma's 640-column matrices, 1-3 % on its K-quant ones).
constexpr int64_t kInt16TileRows = 48;
constexpr int64_t kGemmRowBlock = 32;
// Activation rows per pass of the int16 path (a multiple of its register tile's 6 rows).
constexpr int64_t kInt16RowBlock = 36;
// Passes of at most this many activation rows decode I16Kernels::few_rows_tile weight rows at a
// time where the kernels set it (Qwen2.5-Coder 1.5B, Intel Xeon: 48 rows 0.95x the time, 96
// rows 1.0x, 256 rows 1.14x).
constexpr int64_t kInt16FewRows = 48;
// Weight rows per block of the fused argmax head (a multiple of kGemmTileRows, kInt16TileRows and
// kMatmulTile).
constexpr int64_t kArgmaxBlock = 240;
// Rows per group of an RMS norm (their mean squares' add chains interleaved).
constexpr int kNormRows = 8;
// Weight bytes x activation rows per work unit of the dot_rows path (see unit_rows).
constexpr size_t kUnitBytes = 64 * 1024;
// The pairs kernels read a unit's rows as weight streams (quant/weight_streams.h); units of
// kStreamUnitBytes give each stream runs of several pages (Qwen2.5-Coder 1.5B decode then: 64 KiB
// per unit 1.31x, 256 KiB 1.37-1.39x). Passes of up to kStreamRowsMax activation rows, where the
// weight stream bounds the kernels (the same VM in another state, in one process: 1 row 1.15x,
// 2 rows 1.11x, 4 rows 1.07x, 6 rows 1.01x, 8 rows 0.98x).
constexpr size_t kStreamUnitBytes = 256 * 1024;
constexpr int64_t kStreamRowsMax = 6;
// Keys per attention chunk (aligned to absolute positions; see attention()).
constexpr int64_t kAttnChunk = 128;
// Most query heads per attention kernel call of the few-rows path (a run of rows times a KV
// group's heads): their queries, scores and V sums stay in L1 / L2 next to the chunk's keys.
constexpr int kAttnRunHeads = 32;
// Elementwise ops below this many elements run on the calling thread only.
constexpr int64_t kParallelMin = 1 << 14;

// sum_i a[i] * b[i] with kLanes independent float accumulators summed pairwise at the end:
// vectorisable, and one fixed order of operations for a given n.
constexpr int kLanes = 16;
float dot_f32(const float* a, const float* b, int64_t n) {
    float acc[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        for (int j = 0; j < kLanes; ++j) acc[j] += a[i + j] * b[i + j];
    }
    for (int j = 0; i < n; ++i, ++j) acc[j] += a[i] * b[i];
    for (int width = kLanes / 2; width > 0; width /= 2) {
        for (int j = 0; j < width; ++j) acc[j] += acc[j + width];
    }
    return acc[0];
}

// Host memory, 64-byte aligned; on huge pages from 2 MiB on (a KV cache) if asked.
class HostBuffer final : public Buffer {
public:
    HostBuffer(size_t bytes, bool huge) {
        mem_ = cpu::huge_bytes(bytes, huge);
        data_ = mem_.get();
        bytes_ = bytes;
    }

private:
    cpu::HugeBytes mem_;
};

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(const CpuOptions& o)
        : pool_ptr_(cpu::ThreadPool::shared(o.threads)), pool_(*pool_ptr_), int16_(o.int16_activations),
          repack_(o.repack), defer_pack_(o.defer_pack), screen_head_(o.screen_head), huge_pages_(o.huge_pages) {}
    int threads() const override { return pool_.size(); }
    void for_each(int64_t n, const std::function<void(int64_t)>& fn) override {
        std::exception_ptr error;  // the pool's jobs must not throw: the first error is rethrown here
        std::mutex mu;
        pool_.for_each_unit(n, [&](int, int64_t i) {
            try {
                fn(i);
            } catch (...) {
                std::lock_guard<std::mutex> lock(mu);
                if (!error) error = std::current_exception();
            }
        });
        if (error) std::rethrow_exception(error);
    }

    const char* name() const override { return "cpu"; }
    std::string settings() const override { return int16_ ? "cpu int16" : "cpu f32"; }

    bool supports_op(Op op, quant::Type type) const override {
        switch (op) {
            // Either matmul path may run (the ISA can change after load with set_isa), so
            // require what both need: the reference dequant and dot, which every supported
            // format has.
            case Op::matmul:
            case Op::argmax: return quant::is_supported(type);
            case Op::get_rows: return quant::kernels(type).dequant != nullptr;
            default: return true;
        }
    }

    bool pack(Weight& w, const ReleaseFn& release) override { return pack_as(w, release, defer_pack_); }
    bool pack_now(Weight& w) override {
        return pack_as(w, [](const void*, size_t) {}, false);
    }

    // The legacy formats' rows repacked for the int16 path; with huge_pages, other matrices of at least a
    // huge page copied as they are, and both onto huge pages (huge_pages.h).
    bool pack_as(Weight& w, const ReleaseFn& release, bool defer) {
        if (!repack_ || w.packed) return false;
        const size_t bytes = w.row_bytes * static_cast<size_t>(w.total_rows());
        const bool repack = int16_ && quant::has_packed_layout(w.type);
        // Stacks (a MoE's experts) stay in the file: a step reads only its routed experts, and a
        // model larger than memory must still run from its mapping.
        if (!repack && (!huge_pages_ || w.n_mat != 1 || bytes < cpu::kHugePage)) return false;
        cpu::HugeBytes buf = cpu::huge_bytes(bytes, huge_pages_);
        Pending job{static_cast<const uint8_t*>(w.data), buf.get(), w, repack, release};
        if (repack) {
            w.packed = buf.get();
        } else {
            w.data = buf.get();
        }
        packed_.push_back(std::move(buf));
        if (defer) {
            pending_.push_back(std::move(job));
        } else {
            pack_rows(job);
        }
        return true;
    }

    bool packing_pending() const override { return !pending_.empty(); }

    void prepare_head(const Weight& w) override {
        if (screen_head_ && cpu::ScreenedHead::shortlists(w)) screen_.prepare(pool_, w);
    }

    void drop_packed(const Weight& w) override {
        screen_.forget(w.packed);
        const auto it = std::find_if(packed_.begin(), packed_.end(),
                                     [&](const auto& b) { return b.get() == w.packed || b.get() == w.data; });
        if (it != packed_.end()) packed_.erase(it);
    }

    void finish_packing() override {
        for (const Pending& job : pending_) pack_rows(job);
        pending_.clear();
    }

    std::unique_ptr<Buffer> alloc(size_t bytes) override { return std::make_unique<HostBuffer>(bytes, huge_pages_); }
    void write(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
    void read(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
    void copy(void* dst, const void* src, size_t bytes) override {
        if (bytes) std::memcpy(dst, src, bytes);
    }
    bool host_visible() const override { return true; }

    void gather(Rows src, const int64_t* idx, Rows dst) override {
        for (int64_t i = 0; i < dst.n; ++i) {
            const float* r = src.data + idx[i] * src.dim;
            std::copy(r, r + src.dim, dst.data + i * dst.dim);
        }
    }

    void fill(Rows ys, float v) override {
        float* y = ys.data;
        elementwise(ys.size(), [&](int64_t i) { y[i] = v; });
    }

    void scatter_add(Rows src, const int64_t* idx, const float* w, Rows dst) override {
        rows(src.n, src.dim, [&](int64_t i) {
            const float* s = src.data + i * src.dim;
            float* d = dst.data + idx[i] * dst.dim;
            for (int64_t c = 0; c < src.dim; ++c) d[c] += w[i] * s[c];
        });
    }

    void ssm_conv(Rows x, const Vec& wv, int k, Rows state, Rows y) override {
        const int64_t C = x.dim, n = x.n, h = k - 1;
        const float* w = wv.data();
        // Channels are independent: each thread takes a range of them through every row.
        const auto conv = [&](int64_t c0, int64_t c1) {
            for (int64_t c = c0; c < c1; ++c) {
                const float* wc = w + c * k;
                // in(t') for t' in [t - k + 1, t]: the state's rows, then x's
                const auto in = [&](int64_t t) { return t < 0 ? state.data[(h + t) * C + c] : x.data[t * C + c]; };
                for (int64_t t = 0; t < n; ++t) {
                    float acc = 0.0f;
                    for (int j = 0; j < k; ++j) acc += wc[j] * in(t - h + j);
                    y.data[t * C + c] = acc / (1.0f + std::exp(-acc));
                }
                // The state becomes the last k - 1 inputs (oldest first).
                for (int64_t r = 0; r < h; ++r) {
                    const int64_t t = n - h + r;
                    state.data[r * C + c] = in(t);
                }
            }
        };
        if (n * C * k < kParallelMin) {
            conv(0, C);
        } else {
            pool_.parallel_for(C, conv);
        }
    }

    void gated_delta(Rows qkv, Rows a, Rows b, const Vec& a_coef, const Vec& dt_bias, const DeltaParams& p,
                     Rows state, Rows out) override {
        const int64_t dk = p.d_k, dv = p.d_v, kd = p.key_dim(), n = qkv.n;
        const float* A = a_coef.data();
        const float* dt = dt_bias.data();
        const double q_scale = 1.0 / std::sqrt(static_cast<double>(dk));
        const cpu::DeltaKernels& kern = cpu::delta_kernels(dv);
        // Value heads are independent: a unit per head, through every row. Per head, the rows'
        // normalised q^ and k^, decays and betas first, then the kernel (delta.h).
        reserve_scratch(static_cast<size_t>(n * (2 * dk + 2) + 3 * dv));
        const auto head = [&](int th, int64_t h) {
            float* qk = thread_scratch(th);  // [n, 2 d_k]
            float* decay = qk + n * 2 * dk;
            float* beta = decay + n;
            const int64_t kh = p.key_head(static_cast<int>(h));
            for (int64_t t = 0; t < n; ++t) {
                const float* row = qkv.data + t * qkv.dim;
                const float* q = row + kh * dk;
                const float* k = row + kd + kh * dk;
                double qq = 0.0, kk = 0.0;
                for (int64_t i = 0; i < dk; ++i) {
                    qq += static_cast<double>(q[i]) * q[i];
                    kk += static_cast<double>(k[i]) * k[i];
                }
                const auto qn = static_cast<float>(q_scale / std::sqrt(qq + 1e-6));
                const auto kn = static_cast<float>(1.0 / std::sqrt(kk + 1e-6));
                float* qkt = qk + t * 2 * dk;
                for (int64_t i = 0; i < dk; ++i) {
                    qkt[i] = q[i] * qn;
                    qkt[dk + i] = k[i] * kn;
                }
                const float x = a.data[t * a.dim + h] + dt[h];
                const float softplus = x > 20.0f ? x : std::log1p(std::exp(x));
                decay[t] = std::exp(A[h] * softplus);
                beta[t] = 1.0f / (1.0f + std::exp(-b.data[t * b.dim + h]));
            }
            cpu::DeltaRows r{state.data + h * dk * dv, dk, dv, n, qk, qkv.data + 2 * kd + h * dv, qkv.dim,
                             decay, beta, out.data + h * dv, out.dim, beta + n};
            kern.rows(r);
        };
        if (n * p.n_v * dk * dv < kParallelMin) {
            for (int64_t h = 0; h < p.n_v; ++h) head(0, h);
        } else {
            pool_.for_each_unit(p.n_v, head);
        }
    }

    void matmul(const Weight& w, Rows xr, Rows yr) override {
        const Path path = path_of(w, xr.n);
        prepare(path, w, xr.data, xr.n);
        run_matmul(path, w, xr, yr);
    }

    // The int16 path's activations of x quantised once for every weight whose quantiser gives
    // the same rows (Prepared): the others' quantisation would repeat it value for value.
    void matmuls(const Weight* const* ws, int count, Rows xr, const Rows* ys) override {
        Prepared done{};
        for (int i = 0; i < count; ++i) {
            const Weight& w = *ws[i];
            const Path path = path_of(w, xr.n);
            const Prepared now = prepared(path, w);
            if (!(now == done)) prepare(path, w, xr.data, xr.n);  // (another path: nothing to prepare)
            done = now;
            run_matmul(path, w, xr, ys[i]);
        }
    }

    void matmul_argmax(const Weight& w, Rows xr, float cap, int32_t* idx) override {
        // The soft-cap can merge distinct logits into ties.
        if (cap == 0.0f && cpu::ScreenedHead::serves(w, xr.n) && screens(w, xr)) {
            prepare(path_of(w, xr.n), w, xr.data, xr.n);
            screen_.argmax(pool_, w, xr.data, xr.n, act_a_.data(), act_da_.data(), act_xs_.data(), idx);
            for (int64_t r = 0; r < xr.n; ++r) {  // rows whose candidates overflowed
                if (idx[r] < 0) full_argmax(w, xr.data + r * w.n_in, 1, cap, idx + r);
            }
            return;
        }
        full_argmax(w, xr.data, xr.n, cap, idx);
    }

    bool screens(const Weight& w, Rows xr) const {
        // The screen needs finite activations for its bound (a NaN or inf row takes the full
        // head, which reports it).
        return screen_head_ && path_of(w, xr.n) == Path::int16_rows && w.packed &&
               std::all_of(xr.data, xr.data + xr.n * w.n_in, [](float v) { return std::isfinite(v); });
    }

    void matmul_shortlist(const Weight& w, Rows xr, const float* margin, const int32_t* keep,
                          const ShortlistOf& out) override {
        if (!cpu::ScreenedHead::serves(w, xr.n) || !screens(w, xr)) {
            Backend::matmul_shortlist(w, xr, margin, keep, out);
            return;
        }
        prepare(path_of(w, xr.n), w, xr.data, xr.n);
        screen_.shortlist(pool_, w, xr.data, xr.n, act_a_.data(), act_da_.data(), act_xs_.data(), margin, keep, out);
    }

    void matmul_ids(const Weight& w, const float* x, const int32_t* ids, int64_t n, float* y) const override {
        if (!cpu::ScreenedHead::shortlists(w)) throw std::logic_error("matmul_ids: the head is not shortlisted here");
        // The activation row quantised as prepare() does it, so each value is matmul's.
        const quant::I16Kernels& ik = quant::i16_kernels(w.type);
        thread_local cpu::AlignedVector<int16_t> a;  // per calling thread, sized once
        thread_local std::vector<float> da, xs;
        a.resize(static_cast<size_t>(quant::act_stride(w.n_in)));
        da.resize(static_cast<size_t>(ik.groups(w.n_in)));
        xs.resize(static_cast<size_t>(w.n_in / quant::kHalf));
        ik.quantize_row(x, w.n_in, a.data(), da.data(), xs.data());
        const quant::RowsI16Fn exact = ik.rows_of(true);
        const auto* rows = static_cast<const uint8_t*>(w.packed);
        for (int64_t i = 0; i < n; ++i) {
            if (ids[i] < 0 || ids[i] >= w.n_out) throw std::out_of_range("matmul_ids: id out of range");
            exact(rows + static_cast<size_t>(ids[i]) * w.row_bytes, w.n_in, a.data(), da.data(), xs.data(), 1, y + i, 1);
        }
    }

    // Every logit of the head, folded into each row's running maximum.
    void full_argmax(const Weight& w, const float* x, int64_t n, float cap, int32_t* idx) {
        const Path path = path_of(w, n);
        const cpu::VecMath& vm = cpu::vec_math();
        // Logits are made kArgmaxBlock weight rows at a time into per-thread scratch (a multiple
        // of every path's tile), capped, and folded into a running (max, index) per row.
        const int64_t block = kArgmaxBlock;
        const size_t logits = static_cast<size_t>(n * block);
        prepare(path, w, x, n);
        reserve_scratch(path_scratch(path, w) + logits);
        const int threads = pool_.size();
        best_.assign(static_cast<size_t>(n * threads), {-INFINITY, -1});
        std::atomic<bool> bad{false};
        pool_.for_each_unit((w.n_out + block - 1) / block, [&](int t, int64_t bi) {
            float* ys = thread_scratch(t);
            float* scratch = ys + logits;
            Best* best = best_.data() + t * n;
            const int64_t o0 = bi * block, o1 = std::min(w.n_out, o0 + block);
            compute(path, w, x, n, o0, o1, ys, block, scratch);
            for (int64_t r = 0; r < n; ++r) {
                float* yr = ys + r * block;
                if (cap > 0.0f) {
                    for (int64_t o = 0; o < o1 - o0; ++o) yr[o] = softcapped(yr[o], cap);
                }
                float mx;
                bool finite;
                const int64_t i = vm.argmax(yr, o1 - o0, &mx, &finite);
                if (!finite) bad.store(true, std::memory_order_relaxed);
                Best& b = best[r];
                // Ties go to the lower id, whatever order the thread took its blocks in.
                if (mx > b.value || (mx == b.value && b.index >= 0 && o0 + i < b.index)) {
                    b = {mx, static_cast<int32_t>(o0 + i)};
                }
            }
        });
        if (bad.load()) throw std::domain_error("matmul_argmax: a logit is NaN or +inf");
        for (int64_t r = 0; r < n; ++r) {
            Best b{-INFINITY, -1};
            for (int t = 0; t < threads; ++t) {  // ties go to the lower id
                const Best& c = best_[static_cast<size_t>(t * n + r)];
                if (c.value > b.value || (c.value == b.value && c.index >= 0 && c.index < b.index)) b = c;
            }
            if (b.index < 0) throw std::domain_error("matmul_argmax: every logit is -inf");
            idx[r] = b.index;
        }
    }

    void get_rows(const Weight& w, const int32_t* ids, Rows yr) override {
        float* y = yr.data;
        const int64_t n = yr.n;
        const quant::DequantFn dequant = quant::kernels(w.type).dequant;
        const auto* base = static_cast<const uint8_t*>(w.data);
        pool_.parallel_for(n, [&](int64_t i0, int64_t i1) {
            for (int64_t i = i0; i < i1; ++i) {
                dequant(base + static_cast<size_t>(ids[i]) * w.row_bytes, y + i * w.n_in, w.n_in);
            }
        });
    }

    void rms_norm(Rows xs, const Vec& wv, float eps, Rows ys) override {
        const int64_t groups = (xs.n + kNormRows - 1) / kNormRows;
        rows(groups, xs.dim * kNormRows, [&](int64_t gi) {
            const int64_t r0 = gi * kNormRows;
            if (r0 + kNormRows <= xs.n) return norm_rows<kNormRows>(xs, r0, wv.data(), eps, ys);
            for (int64_t r = r0; r < xs.n; ++r) norm_rows<1>(xs, r, wv.data(), eps, ys);
        });
    }

    void rope(Rows xs, int n_head, const int32_t* pos, const RopeParams& p) override {
        float* x = xs.data;
        const int64_t n = xs.n;
        const int64_t head_dim = xs.dim / n_head;
        const int half = p.n_dims / 2;
        const float* table = rope_table(pos, n, p);
        rows(n, xs.dim, [&](int64_t r) {
            const float* cs = table + r * 2 * half;
            for (int i = 0; i < half; ++i) {
                const float c = cs[2 * i], s = cs[2 * i + 1];
                for (int h = 0; h < n_head; ++h) {
                    float* xh = x + (r * n_head + h) * head_dim;
                    const int a = p.mode == RopeMode::neox ? i : 2 * i;
                    const int b = p.mode == RopeMode::neox ? i + half : 2 * i + 1;
                    const float x0 = xh[a];
                    const float x1 = xh[b];
                    xh[a] = x0 * c - x1 * s;
                    xh[b] = x1 * c + x0 * s;
                }
            }
        });
    }

    // Attention per (query row, KV group): the row's keys in chunks of kAttnChunk aligned to
    // absolute positions; per chunk the raw scores, their unnormalised softmax (max m_c, sum
    // l_c) and the weighted V sum o_c; chunks merged in ascending order (m = max(m, m_c),
    // o = o e^(m_old - m) + o_c e^(m_c - m), likewise l), then o / l. A row's chunks depend only
    // on its own key range, and the merge order is fixed, so results never depend on n, on the
    // threads, on the other sequences of the op, or on whether chunks ran on one thread (many
    // rows: a unit per (row, group)) or on several (few rows, as in decode: a unit per chunk, so
    // that each thread streams a different part of the KV cache, which bounds decode attention at
    // long contexts). The rows of all sequences share the units: a batched step's sessions, a
    // row each, are not attended one after another on one thread.
    void attention_seqs(Rows qr, const int32_t* pos, const int32_t* last, const int64_t* first, const KvView* kvs,
                        int n_seqs, const AttnParams& p, Rows outr) override {
        const int64_t n = qr.n, hd = p.head_dim, q_dim = static_cast<int64_t>(p.n_head) * hd;
        const int group = p.n_head / p.n_head_kv;
        const int64_t pairs = n * p.n_head_kv;
        std::vector<Attn>& seqs = attn_seqs_;
        seqs.clear();
        attn_seq_.resize(static_cast<size_t>(n));
        for (int s = 0; s < n_seqs; ++s) {
            const int64_t f = first[s];
            seqs.push_back({qr.data + f * q_dim, pos + f, last + f, kvs[s], p, outr.data + f * q_dim});
            for (int64_t r = f; r < first[s + 1]; ++r) attn_seq_[static_cast<size_t>(r)] = s;
        }
        // Flat row R (of q) is row R - first[s] of its sequence s.
        const auto of = [&](int64_t R) -> std::pair<const Attn&, int64_t> {
            const int s = attn_seq_[static_cast<size_t>(R)];
            return {seqs[static_cast<size_t>(s)], R - first[s]};
        };
        if (pairs >= 4 * pool_.size()) {
            // Scores, then the chunk's V sum and its (m, l) per head, then the running (m, l).
            reserve_scratch(static_cast<size_t>(group * (kAttnChunk + hd + 4)));
            pool_.for_each_unit(pairs, [&](int t, int64_t u) {
                float* sc = thread_scratch(t);
                float* part = sc + group * kAttnChunk;
                float* stats = part + group * hd;
                const auto [at, r] = of(u / p.n_head_kv);
                const int g = static_cast<int>(u % p.n_head_kv);
                float* o = at.out_of(r, g);
                for (int64_t c = at.first_chunk(r); c <= at.last_chunk(r); ++c) {
                    at.chunk(r, g, c, sc, part, stats);
                    at.merge(c == at.first_chunk(r), o, stats + 2 * group, part, stats);
                }
                at.finish(o, stats + 2 * group);
            });
            return;
        }
        // Few rows: partial results per (row, group, chunk) land in attn_parts_, then each (row,
        // group) merges its chunks in order. The units are (sequence, group, chunk, run of rows):
        // consecutive rows of a sequence that see the same keys of a chunk (all chunks of a block
        // but the causal last one) share one kernel call, their heads side by side, so each key
        // and value row is loaded once for all of them (a head's scores and V sum do not depend
        // on the heads beside it, attn.h).
        std::vector<int64_t>& start = attn_start_;  // first slot of each (row, group)
        start.assign(static_cast<size_t>(pairs + 1), 0);
        for (int64_t u = 0; u < pairs; ++u) {
            const auto [at, r] = of(u / p.n_head_kv);
            start[static_cast<size_t>(u + 1)] = start[static_cast<size_t>(u)] + at.last_chunk(r) - at.first_chunk(r) + 1;
        }
        const size_t slot = static_cast<size_t>(group * (hd + 2));
        attn_parts_.resize(static_cast<size_t>(start.back()) * slot);
        const auto slot_of = [&](int64_t R, int g, int64_t c) {
            const auto [at, r] = of(R);
            const size_t pair = static_cast<size_t>(R * p.n_head_kv + g);
            return attn_parts_.data() + static_cast<size_t>(start[pair] + c - at.first_chunk(r)) * slot;
        };
        const int run_max = std::max(1, kAttnRunHeads / group);
        std::vector<AttnRun>& runs = attn_runs_;
        runs.clear();
        for (int s = 0; s < n_seqs; ++s) {
            const Attn& at = seqs[static_cast<size_t>(s)];
            const int64_t m = first[s + 1] - first[s];
            if (m == 0) continue;
            const auto sees = [&](int64_t r, int64_t c) { return at.first_chunk(r) <= c && c <= at.last_chunk(r); };
            int64_t c_min = at.first_chunk(0), c_max = at.last_chunk(0);
            for (int64_t r = 1; r < m; ++r) {
                c_min = std::min(c_min, at.first_chunk(r));
                c_max = std::max(c_max, at.last_chunk(r));
            }
            for (int g = 0; g < p.n_head_kv; ++g) {
                for (int64_t c = c_min; c <= c_max; ++c) {
                    for (int64_t r = 0; r < m;) {
                        if (!sees(r, c)) {
                            ++r;
                            continue;
                        }
                        int64_t r1 = r + 1;
                        while (r1 < m && r1 - r < run_max && sees(r1, c) && at.keys(r1, c) == at.keys(r, c)) ++r1;
                        runs.push_back({first[s] + r, static_cast<int>(r1 - r), g, c});
                        r = r1;
                    }
                }
            }
        }
        reserve_scratch(Attn::chunk_run_floats(run_max * group, hd));
        pool_.for_each_unit(static_cast<int64_t>(runs.size()), [&](int t, int64_t u) {
            const AttnRun& run = runs[static_cast<size_t>(u)];
            const auto [at, r0] = of(run.r0);
            if (run.rows == 1) {
                float* part = slot_of(run.r0, run.g, run.c);
                at.chunk(r0, run.g, run.c, thread_scratch(t), part, part + group * hd);
                return;
            }
            at.chunk_run(r0, run.rows, run.g, run.c, thread_scratch(t),
                         [&](int i) { return slot_of(run.r0 + i, run.g, run.c); });
        });
        attn_running_.resize(static_cast<size_t>(2 * group));
        float* running = attn_running_.data();
        for (int64_t pair = 0; pair < pairs; ++pair) {
            const auto [at, r] = of(pair / p.n_head_kv);
            float* o = at.out_of(r, static_cast<int>(pair % p.n_head_kv));
            for (int64_t u = start[static_cast<size_t>(pair)]; u < start[static_cast<size_t>(pair + 1)]; ++u) {
                const float* part = attn_parts_.data() + static_cast<size_t>(u) * slot;
                at.merge(u == start[static_cast<size_t>(pair)], o, running, part, part + group * hd);
            }
            at.finish(o, running);
        }
    }

    void add(Rows ys, Rows xs) override {
        float* y = ys.data;
        const float* x = xs.data;
        elementwise(ys.size(), [&](int64_t i) { y[i] += x[i]; });
    }

    void add_rows(Rows ys, const Vec& bv) override {
        const float* b = bv.data();
        rows(ys.n, ys.dim, [&](int64_t r) {
            float* yr = ys.data + r * ys.dim;
            for (int64_t i = 0; i < ys.dim; ++i) yr[i] += b[i];
        });
    }

    void scale(Rows ys, float s) override {
        float* y = ys.data;
        elementwise(ys.size(), [&](int64_t i) { y[i] *= s; });
    }

    void mul_rows(Rows ys, const Vec& wv) override {
        const float* w = wv.data();
        rows(ys.n, ys.dim, [&](int64_t r) {
            float* yr = ys.data + r * ys.dim;
            for (int64_t i = 0; i < ys.dim; ++i) yr[i] *= w[i];
        });
    }

    void glu(Rows gs, Rows us, Act act, Rows ys) override {
        const float* gate = gs.data;
        const float* up = us.data;
        float* y = ys.data;
        const int64_t n = gs.size();
        const cpu::VecMath& vm = cpu::vec_math();
        if (n < kParallelMin) {
            vm.glu(gate, up, n, act, y);
            return;
        }
        pool_.parallel_for(n, [&](int64_t i0, int64_t i1) { vm.glu(gate + i0, up + i0, i1 - i0, act, y + i0); });
    }

    void softcap(Rows xs, float cap) override {
        float* x = xs.data;
        elementwise(xs.size(), [&](int64_t i) { x[i] = softcapped(x[i], cap); });
    }

    void store_kv(const KvView& kv, int64_t pos, Rows k, Rows v) override {
        const size_t elem = kv.type == KvType::f32 ? sizeof(float) : sizeof(uint16_t);
        const size_t off = static_cast<size_t>(pos * kv.dim) * elem;
        store_rows(static_cast<uint8_t*>(kv.k) + off, kv.type, k);
        store_rows(static_cast<uint8_t*>(kv.v) + off, kv.type, v);
    }

private:
    void store_rows(void* dst, KvType type, Rows src) {
        if (type == KvType::f32) {
            std::memcpy(dst, src.data, static_cast<size_t>(src.size()) * sizeof(float));
            return;
        }
        auto* d = static_cast<uint16_t*>(dst);
        const float* x = src.data;
        const cpu::VecMath& vm = cpu::vec_math();
        spans(src.size(), [&](int64_t i0, int64_t i1) { vm.to_f16(x + i0, i1 - i0, d + i0); });
    }

    // Rows r0 .. r0 + M - 1 of an RMS norm. Each row's mean square is one chain of double adds in
    // element order (one rounding instead of dim, whatever the row length or the batch); the
    // M chains advance together, so that they overlap instead of each waiting on its own latency.
    template <int M>
    static void norm_rows(Rows xs, int64_t r0, const float* w, float eps, Rows ys) {
        const int64_t dim = xs.dim;
        const float* x = xs.data + r0 * dim;
        double ss[M] = {};
        for (int64_t i = 0; i < dim; ++i) {
            for (int k = 0; k < M; ++k) ss[k] += static_cast<double>(x[k * dim + i]) * x[k * dim + i];
        }
        for (int k = 0; k < M; ++k) {
            const float* xr = x + k * dim;
            float* yr = ys.data + (r0 + k) * dim;
            const auto inv = static_cast<float>(1.0 / std::sqrt(ss[k] / static_cast<double>(dim) + eps));
            for (int64_t i = 0; i < dim; ++i) yr[i] = w ? (xr[i] * inv) * w[i] : xr[i] * inv;
        }
    }

    enum class Path { rows, gemm, int16_rows, int16_gemm, reference };

    // One attention call's geometry and the three steps every (row, KV group) goes through.
    struct Attn {
        const float* q;
        const int32_t* pos;
        const int32_t* last;
        const KvView& kv;
        const AttnParams& p;
        float* out;

        int group() const { return p.n_head / p.n_head_kv; }
        int64_t first_key(int64_t r) const { return p.window > 0 ? std::max<int64_t>(0, pos[r] - p.window + 1) : 0; }
        int64_t first_chunk(int64_t r) const { return first_key(r) / kAttnChunk; }
        int64_t last_chunk(int64_t r) const { return last[r] / kAttnChunk; }
        float* out_of(int64_t r, int g) const { return out + (r * p.n_head + g * group()) * p.head_dim; }

        // The keys of chunk c that row r sees.
        std::pair<int64_t, int64_t> keys(int64_t r, int64_t c) const {
            return {std::max(first_key(r), c * kAttnChunk), std::min<int64_t>(last[r], (c + 1) * kAttnChunk - 1)};
        }
        // Chunk c of row r, KV group g: part[h * hd ..] = sum of e^(v_j - m_h) v_j over the chunk's
        // keys, stats[2h] = m_h, stats[2h + 1] = l_h (sum of the exps); sc: group * kAttnChunk floats.
        void chunk(int64_t r, int g, int64_t c, float* sc, float* part, float* stats) const {
            const auto [j0, j1] = keys(r, c);
            heads(q + (r * p.n_head + g * group()) * p.head_dim, group(), g, j0, j1, sc, part, stats);
        }
        // The same for nr consecutive rows from r0 that see the same keys of chunk c, in one kernel
        // call: their query heads gathered side by side (scratch: the floats of chunk_run_floats),
        // each row's part and stats then copied to slot(i) ([group * hd] then [2 * group]).
        template <class Slot>
        void chunk_run(int64_t r0, int nr, int g, int64_t c, float* scratch, Slot&& slot) const {
            const int64_t hd = p.head_dim, row = group() * hd;
            const int nh = nr * group();
            float* qb = scratch;
            float* sc = qb + nh * hd;
            float* part = sc + nh * kAttnChunk;
            float* stats = part + nh * hd;
            for (int i = 0; i < nr; ++i) {
                const float* qr = q + ((r0 + i) * p.n_head + g * group()) * hd;
                std::copy(qr, qr + row, qb + i * row);
            }
            const auto [j0, j1] = keys(r0, c);
            heads(qb, nh, g, j0, j1, sc, part, stats);
            for (int i = 0; i < nr; ++i) {
                float* dst = slot(i);
                std::copy(part + i * row, part + (i + 1) * row, dst);
                std::copy(stats + 2 * i * group(), stats + 2 * (i + 1) * group(), dst + row);
            }
        }
        static size_t chunk_run_floats(int nh, int64_t hd) { return static_cast<size_t>(nh * (2 * hd + kAttnChunk + 2)); }
        // Scores, softmax and V sum of nh query heads qh (KV group g) over keys j0..j1.
        void heads(const float* qh, int nh, int g, int64_t j0, int64_t j1, float* sc, float* part, float* stats) const {
            const cpu::AttnKernels& kern = cpu::attn_kernels();
            const cpu::VecMath& vm = cpu::vec_math();
            const int64_t hd = p.head_dim, kv_stride = static_cast<int64_t>(p.n_head_kv) * hd;
            const size_t kv_elem = kv.type == KvType::f32 ? sizeof(float) : sizeof(uint16_t);
            const size_t kv_off = static_cast<size_t>(g) * static_cast<size_t>(hd) * kv_elem;
            const int64_t len = j1 - j0 + 1;
            kern.scores(qh, nh, static_cast<const uint8_t*>(kv.k) + kv_off, kv.type, kv_stride, j0, j1, hd, sc, len);
            for (int h = 0; h < nh; ++h) vm.softmax_part(sc + h * len, len, p.scale, p.softcap, &stats[2 * h], &stats[2 * h + 1]);
            kern.mix(sc, nh, static_cast<const uint8_t*>(kv.v) + kv_off, kv.type, kv_stride, j0, j1, hd, part, len);
        }
        // Folds a chunk (part, stats) into the running o (group * hd) and running[2h] = m,
        // running[2h + 1] = l; the first chunk is copied.
        void merge(bool first, float* o, float* running, const float* part, const float* stats) const {
            const int64_t hd = p.head_dim;
            for (int h = 0; h < group(); ++h) {
                float* oh = o + h * hd;
                const float* ph = part + h * hd;
                const float mc = stats[2 * h], lc = stats[2 * h + 1];
                if (first) {
                    std::copy(ph, ph + hd, oh);
                    running[2 * h] = mc;
                    running[2 * h + 1] = lc;
                    continue;
                }
                const float m = std::max(running[2 * h], mc);
                const float a = std::exp(running[2 * h] - m), b = std::exp(mc - m);
                running[2 * h] = m;
                running[2 * h + 1] = running[2 * h + 1] * a + lc * b;
                for (int64_t d = 0; d < hd; ++d) oh[d] = oh[d] * a + ph[d] * b;
            }
        }
        void finish(float* o, const float* running) const {
            const int64_t hd = p.head_dim;
            for (int h = 0; h < group(); ++h) {
                const float l = running[2 * h + 1];
                for (int64_t d = 0; d < hd; ++d) o[h * hd + d] /= l;
            }
        }
    };
    struct Best {
        float value;
        int32_t index;
    };
    // Rows r0 .. r0 + rows - 1 (of the op's q, all in one sequence), KV group g, key chunk c.
    struct AttnRun {
        int64_t r0;
        int rows;
        int g;
        int64_t c;
    };

    Path path_of(const Weight& w, int64_t n) const {
        const quant::I16Kernels& ik = quant::i16_kernels(w.type);
        if (int16_ && ik.gemm) {
            const bool fused = ik.rows_of(w.packed) != nullptr;
            return n < (ik.gemm_from ? ik.gemm_from : kInt16GemmRows) && fused ? Path::int16_rows : Path::int16_gemm;
        }
        const quant::Kernels& k = quant::kernels(w.type);
        // A SIMD dot exists iff the active ISA's dot is not the scalar reference's.
        if (k.dot == quant::kernels_for(w.type, quant::Isa::scalar).dot) return Path::reference;
        return n >= kGemmMinRows && k.decode_groups ? Path::gemm : Path::rows;
    }
    // What prepare() computes from x for w: its int16 quantiser and the row length (quantize null:
    // nothing, another path).
    struct Prepared {
        quant::QuantizeI16Fn quantize = nullptr;
        quant::QuantizeLanesFn lanes = nullptr;
        int group_spans = 0, range = 0, min_len = 0;
        bool block_lanes = false;
        int64_t n_in = 0;
        bool operator==(const Prepared& o) const {
            return quantize == o.quantize && lanes == o.lanes && group_spans == o.group_spans && range == o.range &&
                   min_len == o.min_len && block_lanes == o.block_lanes && n_in == o.n_in;
        }
    };
    static Prepared prepared(Path path, const Weight& w) {
        if (path != Path::int16_rows && path != Path::int16_gemm) return {};
        const quant::I16Kernels& ik = quant::i16_kernels(w.type);
        return {ik.quantize, ik.quantize_lanes, ik.group_spans, ik.range, ik.min_len, ik.block_lanes, w.n_in};
    }
    // The int16 path quantises the activation rows once per call, threads splitting the rows.
    void prepare(Path path, const Weight& w, const float* x, int64_t n) {
        if (path != Path::int16_rows && path != Path::int16_gemm) return;
        const quant::I16Kernels& ik = quant::i16_kernels(w.type);
        const int64_t groups = ik.groups(w.n_in), halves = w.n_in / quant::kHalf, lda = quant::act_stride(w.n_in);
        act_a_.resize(static_cast<size_t>(n * lda));
        act_da_.resize(static_cast<size_t>(n * groups));
        act_xs_.resize(static_cast<size_t>(n * halves));
        pool_.parallel_for(n, [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) {
                ik.quantize_row(x + r * w.n_in, w.n_in, act_a_.data() + r * lda, act_da_.data() + r * groups,
                                act_xs_.data() + r * halves);
            }
        });
    }
    // matmul() after prepare().
    void run_matmul(Path path, const Weight& w, Rows xr, Rows yr) {
        const float* x = xr.data;
        float* y = yr.data;
        const int64_t n = xr.n;
        const int64_t unit = unit_rows(path, w, n);
        reserve_scratch(path_scratch(path, w));
        pool_.for_each_unit((w.n_out + unit - 1) / unit, [&](int t, int64_t u) {
            const int64_t o0 = u * unit, o1 = std::min(w.n_out, o0 + unit);
            compute(path, w, x, n, o0, o1, y + o0, w.n_out, thread_scratch(t));
        });
    }

    // Weight rows per work unit: whole tiles of the tiled paths; for the few-rows kernels, about
    // kUnitBytes of weights per activation row (kStreamUnitBytes where they read weight streams),
    // so that a unit is a few microseconds of work and each thread still gets several (a late or
    // slow thread then takes fewer units).
    int64_t unit_rows(Path path, const Weight& w, int64_t n) const {
        if (path == Path::int16_gemm) return kInt16TileRows;
        if (path == Path::gemm) return kGemmTileRows;
        if (path == Path::reference) return kMatmulTile;
        // a kernel of two weight rows at a time gets whole pairs, or whole sets of weight streams
        const bool pairs = path == Path::int16_rows && quant::i16_kernels(w.type).pairs_of(w.packed, n);
        const bool streams = pairs && n <= kStreamRowsMax;
        const size_t bytes = streams ? kStreamUnitBytes : kUnitBytes / static_cast<size_t>(n);
        const int64_t by_bytes = std::max<int64_t>(1, static_cast<int64_t>(bytes / w.row_bytes));
        const int64_t by_threads = (w.n_out + 4 * pool_.size() - 1) / (4 * pool_.size());
        const int64_t rows = std::max<int64_t>(1, std::min(by_bytes, by_threads));
        const int64_t whole = streams ? quant::kWeightStreams : pairs ? 2 : 1;
        return (rows + whole - 1) / whole * whole;
    }
    // Floats of per-thread scratch a path needs.
    static size_t path_scratch(Path path, const Weight& w) {
        if (path == Path::int16_gemm) {  // int16 weights (half a float each), sw per group, mw per half span
            return static_cast<size_t>(kInt16TileRows * (w.n_in / 2 + w.n_in / quant::kSpan + w.n_in / quant::kHalf));
        }
        if (path == Path::gemm) {
            return static_cast<size_t>(kGemmTileRows * (w.n_in + w.n_in / quant::kernels(w.type).group_len));
        }
        if (path == Path::reference) return static_cast<size_t>(kMatmulTile * w.n_in);
        return 0;
    }
    // Per-thread scratch of `floats` each, sized on the calling thread so that no worker allocates.
    void reserve_scratch(size_t floats) {
        scratch_stride_ = cpu::round_to_lines<float>(floats);
        if (scratch_.size() < scratch_stride_ * static_cast<size_t>(pool_.size())) {
            scratch_.resize(scratch_stride_ * static_cast<size_t>(pool_.size()));
        }
    }
    float* thread_scratch(int t) { return scratch_.data() + scratch_stride_ * static_cast<size_t>(t); }

    static float softcapped(float v, float cap) { return std::tanh(v / cap) * cap; }

    // y[r * ldy + (o - o0)] = dot(weight row o, x row r) for o in [o0, o1), r < n, by `path`;
    // the float paths give the same floats (the dot kernel's order), and so do the two int16
    // paths (int16_gemm.h), so the choice within each is free.
    void compute(Path path, const Weight& w, const float* x, int64_t n, int64_t o0, int64_t o1, float* y,
                 int64_t ldy, float* scratch) const {
        const quant::Kernels& k = quant::kernels(w.type);
        const auto* base = static_cast<const uint8_t*>(w.data);
        if (path == Path::rows) {
            // Weight rows in blocks that stay in L2 while the activation rows stream past.
            const int64_t block = std::max<int64_t>(1, static_cast<int64_t>(kDotBlockBytes / w.row_bytes));
            for (int64_t b0 = o0; b0 < o1; b0 += block) {
                const int64_t b1 = std::min(o1, b0 + block);
                for (int64_t r = 0; r < n; r += quant::kDotRowsMax) {
                    const int m = static_cast<int>(std::min<int64_t>(quant::kDotRowsMax, n - r));
                    for (int64_t o = b0; o < b1; ++o) {
                        const uint8_t* wo = base + static_cast<size_t>(o) * w.row_bytes;
                        float* yo = y + r * ldy + (o - o0);
                        if (k.dot_rows) {
                            k.dot_rows(wo, x + r * w.n_in, w.n_in, m, w.n_in, yo, ldy);
                        } else {
                            for (int i = 0; i < m; ++i) yo[i * ldy] = k.dot(wo, x + (r + i) * w.n_in, w.n_in);
                        }
                    }
                }
            }
            return;
        }
        if (path == Path::int16_rows) {
            // Few rows of a format with a fused kernel: each weight row decoded in registers once
            // per chunk of up to rows_max activation rows, straight from the mmap or the packed
            // copy, every chunk in turn while the row is in L1 (the argmax head's blocks of 240
            // rows would otherwise be read from L2 once per chunk).
            const quant::I16Kernels& ik = quant::i16_kernels(w.type);
            const int64_t groups = ik.groups(w.n_in), halves = w.n_in / quant::kHalf, lda = quant::act_stride(w.n_in);
            // Two weight rows at a time where the ISA has a kernel for it (AVX-512).
            const auto* rows = static_cast<const uint8_t*>(w.packed ? w.packed : w.data);
            const quant::RowsI16Fn one = ik.rows_of(w.packed);
            const quant::RowsPacked2Fn pair = ik.pairs_of(w.packed, n);
            if (pair && n <= kStreamRowsMax) {
                // each pair's two results written apart through `both`
                float both[2 * quant::kPairRowsMax];
                const int64_t done = quant::stream_pairs(o1 - o0, [&](int64_t o, int64_t run) {
                    for (int64_t r = 0; r < n;) {
                        const int m = ik.pass_rows(n - r);
                        pair(rows + static_cast<size_t>(o0 + o) * w.row_bytes, static_cast<size_t>(run) * w.row_bytes,
                             w.n_in, act_a_.data() + r * lda, act_da_.data() + r * groups, act_xs_.data() + r * halves,
                             m, both, 2);
                        for (int j = 0; j < m; ++j) {
                            y[(r + j) * ldy + o] = both[2 * j];
                            y[(r + j) * ldy + o + run] = both[2 * j + 1];
                        }
                        r += m;
                    }
                });
                y += done;  // what is left (fewer than kWeightStreams rows) below
                o0 += done;
            }
            for (int64_t o = o0; o < o1;) {
                const uint8_t* wo = rows + static_cast<size_t>(o) * w.row_bytes;
                const bool two = pair && o + 1 < o1;
                for (int64_t r = 0; r < n;) {
                    const int m = ik.pass_rows(n - r);
                    const int16_t* a = act_a_.data() + r * lda;
                    const float *da = act_da_.data() + r * groups, *xs = act_xs_.data() + r * halves;
                    float* yo = y + r * ldy + (o - o0);
                    if (two) {
                        pair(wo, w.row_bytes, w.n_in, a, da, xs, m, yo, ldy);
                    } else {
                        one(wo, w.n_in, a, da, xs, m, yo, ldy);
                    }
                    r += m;
                }
                o += two ? 2 : 1;
            }
            return;
        }
        if (path == Path::int16_gemm) {
            // As the GEMM below, over integer tiles and the activations quantised by prepare().
            const quant::I16Kernels& ik = quant::i16_kernels(w.type);
            const int64_t groups = ik.groups(w.n_in), halves = w.n_in / quant::kHalf, lda = quant::act_stride(w.n_in);
            auto* q = reinterpret_cast<int16_t*>(scratch);
            float* sw = scratch + kInt16TileRows * w.n_in / 2;
            float* mw = sw + kInt16TileRows * groups;
            const auto* rows = static_cast<const uint8_t*>(w.packed ? w.packed : w.data);
            const int64_t tile = n <= kInt16FewRows && ik.few_rows_tile ? ik.few_rows_tile : kInt16TileRows;
            for (int64_t t0 = o0; t0 < o1; t0 += tile) {
                const int nw = static_cast<int>(std::min(tile, o1 - t0));
                ik.decode_rows(rows + static_cast<size_t>(t0) * w.row_bytes, w.row_bytes, w.packed != nullptr, nw,
                               w.n_in, q, sw, mw);
                for (int64_t r = 0; r < n; r += kInt16RowBlock) {
                    const int m = static_cast<int>(std::min(kInt16RowBlock, n - r));
                    ik.gemm_rows(q, sw, mw, nw, act_a_.data() + r * lda, act_da_.data() + r * groups,
                                 act_xs_.data() + r * halves, m, w.n_in, y + r * ldy + (t0 - o0), ldy);
                }
            }
            return;
        }
        if (path == Path::gemm) {
            // Tiles of weight rows decoded once, then every activation row, kGemmRowBlock at a time.
            const int64_t groups = w.n_in / k.group_len;
            float* u = scratch;
            float* sc = u + kGemmTileRows * w.n_in;
            for (int64_t t0 = o0; t0 < o1; t0 += kGemmTileRows) {
                const int nw = static_cast<int>(std::min(kGemmTileRows, o1 - t0));
                for (int i = 0; i < nw; ++i) {
                    k.decode_groups(base + static_cast<size_t>(t0 + i) * w.row_bytes, w.n_in, u + i * w.n_in,
                                    sc + i * groups);
                }
                for (int64_t r = 0; r < n; r += kGemmRowBlock) {
                    const int m = static_cast<int>(std::min(kGemmRowBlock, n - r));
                    k.gemm_groups(u, sc, nw, x + r * w.n_in, w.n_in, m, w.n_in, k.group_len, y + r * ldy + (t0 - o0), ldy);
                }
            }
            return;
        }
        // Formats with only the reference dot: dequantise a tile of weight rows (exactly) once
        // and take dot_f32 per element, shared by every activation row.
        for (int64_t t0 = o0; t0 < o1; t0 += kMatmulTile) {
            const int64_t t1 = std::min(o1, t0 + kMatmulTile);
            const float* wt = reinterpret_cast<const float*>(base + static_cast<size_t>(t0) * w.row_bytes);
            if (w.type != quant::Type::F32) {
                for (int64_t o = t0; o < t1; ++o) {
                    k.dequant(base + static_cast<size_t>(o) * w.row_bytes, scratch + (o - t0) * w.n_in, w.n_in);
                }
                wt = scratch;
            }
            for (int64_t r = 0; r < n; ++r) {
                for (int64_t o = t0; o < t1; ++o) y[r * ldy + (o - o0)] = dot_f32(wt + (o - t0) * w.n_in, x + r * w.n_in, w.n_in);
            }
        }
    }

    // cos and sin of every rotated pair at positions pos[0..n): [n][n_dims / 2][2]. A forward
    // pass ropes q and k of every layer at the same positions with one or two parameter sets
    // (Gemma's sliding and global layers), so the last two tables are kept and reused.
    const float* rope_table(const int32_t* pos, int64_t n, const RopeParams& p) {
        const auto same = [&](const RopeTable& t) {  // the mode only orders the pairs
            return t.p.n_dims == p.n_dims && t.p.freq_base == p.freq_base && t.p.freq_scale == p.freq_scale &&
                   t.p.freq_factors == p.freq_factors && t.pos.size() == static_cast<size_t>(n) &&
                   std::equal(pos, pos + n, t.pos.begin());
        };
        for (const RopeTable& t : rope_tables_) {
            if (same(t)) return t.cs.data();
        }
        RopeTable& t = rope_tables_[rope_next_];
        rope_next_ = 1 - rope_next_;
        t.p = p;
        t.pos.assign(pos, pos + n);
        const int half = p.n_dims / 2;
        // Inverse frequencies as float32, as the reference implementations round them.
        std::vector<float>& inv_freq = rope_inv_freq_;  // reused: a decode step allocates nothing here
        inv_freq.resize(static_cast<size_t>(half));
        for (int i = 0; i < half; ++i) {
            double f = 1.0 / std::pow(static_cast<double>(p.freq_base), 2.0 * i / p.n_dims);
            if (p.freq_factors) f /= p.freq_factors[i];
            inv_freq[static_cast<size_t>(i)] = static_cast<float>(f);
        }
        t.cs.resize(static_cast<size_t>(n * 2 * half));
        rows(n, 2 * half, [&](int64_t r) {
            const float pr = static_cast<float>(pos[r]) * p.freq_scale;
            float* cs = t.cs.data() + r * 2 * half;
            for (int i = 0; i < half; ++i) {
                const double angle = pr * inv_freq[static_cast<size_t>(i)];
                cs[2 * i] = static_cast<float>(std::cos(angle));
                cs[2 * i + 1] = static_cast<float>(std::sin(angle));
            }
        });
        return t.cs.data();
    }

    // fn(r) for each of n rows of dim elements, threaded when the block is large.
    template <class F>
    void rows(int64_t n, int64_t dim, F&& fn) {
        if (n * dim < kParallelMin) {
            for (int64_t r = 0; r < n; ++r) fn(r);
            return;
        }
        pool_.parallel_for(n, [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) fn(r);
        });
    }

    template <class F>
    void elementwise(int64_t n, F&& fn) {
        spans(n, [&](int64_t i0, int64_t i1) {
            for (int64_t i = i0; i < i1; ++i) fn(i);
        });
    }
    // fn(i0, i1) over [0, n): one span, or the threads' shares when n is large enough to split.
    template <class F>
    void spans(int64_t n, F&& fn) {
        if (n < kParallelMin) {
            if (n > 0) fn(0, n);
            return;
        }
        pool_.parallel_for(n, fn);
    }

    std::shared_ptr<cpu::ThreadPool> pool_ptr_;  // the process's pool of this size (ThreadPool::shared)
    cpu::ThreadPool& pool_;
    cpu::AlignedVector<float> scratch_;  // per-thread GEMM tiles / score rows, grown on the calling thread
    size_t scratch_stride_ = 0;   // floats of scratch_ per thread in the current op
    std::vector<Best> best_;      // matmul_argmax: per (thread, row) running maximum
    std::vector<Attn> attn_seqs_;       // attention: each sequence's geometry
    std::vector<int> attn_seq_;         // ... the sequence of each row
    std::vector<float> attn_parts_;     // ... few rows: per-chunk partial results
    std::vector<int64_t> attn_start_;   // ... the first slot of each (row, KV group)
    std::vector<AttnRun> attn_runs_;    // ... and the units: runs of rows per (KV group, chunk)
    std::vector<float> attn_running_;   // ... and the running (max, sum) of a merge
    std::vector<cpu::HugeBytes> packed_;  // pack(): the repacked and the staged weights
    struct Pending {
        const uint8_t* src;  // the rows in the file
        uint8_t* dst;        // where they go
        Weight w;            // their geometry
        bool repack;         // repacked (quant/packed.h), else copied as they are
        ReleaseFn release;   // told of each range of src once written
    };
    std::vector<Pending> pending_;  // packs deferred to finish_packing()

    // Writes job.dst from job.src in slices of ~8 MiB, each released once written (peak memory:
    // the copy, not the copy and the file); threads split a slice's rows.
    void pack_rows(const Pending& job) {
        const Weight& w = job.w;
        const int64_t slice = std::max<int64_t>(1, static_cast<int64_t>((size_t{8} << 20) / w.row_bytes));
        const int64_t n_rows = w.total_rows();  // every matrix of a stack
        for (int64_t s0 = 0; s0 < n_rows; s0 += slice) {
            const int64_t s1 = std::min(n_rows, s0 + slice);
            pool_.parallel_for(s1 - s0, [&](int64_t r0, int64_t r1) {
                const size_t off = static_cast<size_t>(s0 + r0) * w.row_bytes;
                if (job.repack) {
                    quant::pack_rows(w.type, job.src + off, w.n_in, r1 - r0, job.dst + off);
                } else {
                    std::memcpy(job.dst + off, job.src + off, static_cast<size_t>(r1 - r0) * w.row_bytes);
                }
            });
            job.release(job.src + static_cast<size_t>(s0) * w.row_bytes, static_cast<size_t>(s1 - s0) * w.row_bytes);
        }
        job.release(job.src, w.row_bytes * static_cast<size_t>(n_rows));  // the pages slices' edges shared
    }
    cpu::AlignedVector<int16_t> act_a_;  // the int16 path's quantised activation rows (prepare)
    cpu::AlignedVector<float> act_da_, act_xs_;
    struct RopeTable {
        RopeParams p;
        std::vector<int32_t> pos;  // empty until first filled (n >= 1 never matches it)
        std::vector<float> cs;
    };
    RopeTable rope_tables_[2];  // rope_table(): the last two, the older replaced next
    std::vector<float> rope_inv_freq_;
    int rope_next_ = 0;
    cpu::ScreenedHead screen_;
    bool int16_, repack_, defer_pack_, screen_head_, huge_pages_;  // CpuOptions
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const CpuOptions& opts) {
    CpuOptions o = opts;
    if (o.threads <= 0) o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return std::make_unique<CpuBackend>(o);
}

}  // namespace ds4::backend
