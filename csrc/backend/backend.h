// The op interface every compute backend implements (CPU now; CUDA/HIP/Metal later).
//
// The model code (csrc/model/) is written against these ops only. Ops read and write memory the
// backend allocated (buffer.h): activations are row-major float32 Rows taken from the backend's
// arena (arena.h), parameter vectors are Vecs, KV storage is Buffers a session's slots hold.
// Model code never dereferences them; bytes cross between the host and the backend through
// write / read / copy. What crosses as host arrays is per-row metadata only: token ids,
// positions, the rows to gather, and the argmax indices a greedy head returns. Weights stay in
// their GGUF block format and are read in place from the mapping (or from the backend's packed
// copy: the place where a GPU backend uploads them). A backend reports what it can run with
// supports_op(); the model checks every op and the format of every weight when it loads, so an
// unsupported one fails at load time with a clear message.
//
// Batch invariance is part of the contract (DESIGN.md): a row's result must be bit-identical
// whether it is processed alone or with other rows, of its own sequence or of others, so an
// implementation may split work over output rows/columns or over query rows, never over a
// reduction, and must use the same arithmetic for every number of rows. Op by op:
//   matmul, argmax  y[r] depends on x[r] and the weight only: one order of operations per
//                   (format, ISA) for every n;
//                   argmax picks from exactly the values matmul would write; matmuls (one
//                   input, several weights) gives each weight's matmul
//   get_rows, rms_norm, rope, store_kv, add, mul, glu, softcap, copy
//                   per row (per element), whatever the rows around it
//   scatter_add     per destination row: one source row, in call order
//   ssm_conv, gated_delta
//                   recurrences over one sequence's rows in order: row t's result depends on the
//                   state and rows before it only, computed the same whether the rows come one
//                   per call or many (a per-token order, never a chunked one)
//   attention       row r reads q[r], its own pos / last and the cache rows it sees; the keys
//                   are visited in chunks aligned to absolute positions and merged in one order,
//                   so the result does not depend on the other rows nor on the threads; with
//                   several sequences in one op (attention_seqs), nor on the other sequences
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/arena.h"
#include "backend/buffer.h"
#include "quant/types.h"

namespace ds4::backend {

// A weight in the mmap: n_mat matrices (a 3-D stack of experts; 1 for a plain matrix) of n_out
// rows of n_in elements (ggml ne = [n_in, n_out, n_mat]). Ops take one matrix (matrix(e)).
struct Weight {
    const void* data = nullptr;
    quant::Type type = quant::Type::F32;
    int64_t n_in = 0;        // row length (reduction dimension)
    int64_t n_out = 0;       // rows of one matrix (output features / vocabulary entries)
    int64_t n_mat = 1;
    size_t row_bytes = 0;    // bytes of one row in its block format
    // The same rows repacked by Backend::pack for the int16 path (quant/packed.h), or nullptr;
    // owned by the backend. The float paths read `data`. A packed row has its GGUF row's size.
    const void* packed = nullptr;

    int64_t total_rows() const { return n_out * n_mat; }
    // Matrix e of the stack: a view of its rows (packed ones too).
    Weight matrix(int64_t e) const {
        Weight w = *this;
        const size_t off = static_cast<size_t>(e * n_out) * row_bytes;
        w.data = static_cast<const uint8_t*>(data) + off;
        if (packed) w.packed = static_cast<const uint8_t*>(packed) + off;
        w.n_mat = 1;
        return w;
    }
};

// A sampling head's row without its full logits (Backend::matmul_shortlist): the ids whose value
// can come within a margin of the row's largest, with exactly the values matmul would write.
struct Shortlist {
    std::vector<int32_t> ids;    // ascending
    std::vector<float> logits;   // of ids
    float thr = 0.0f;            // every id left out has a value below it
    bool ok = false;             // false: not shortlisted (the caller needs the row whole)
    std::vector<float> x;        // the activation row (for matmul_ids), set by the model
};

enum class Op {
    matmul,      // y = x · Wᵀ for a weight in any supported block format
    argmax,      // the fused greedy head: each row's argmax of x · Wᵀ (matmul_argmax)
    get_rows,    // embedding lookup: dequantised rows of a weight
    rms_norm,
    rope,
    attention,   // over a KV cache, causal or a block, optional sliding window and soft-cap
    store_kv,    // f32 rows into the KV cache's type
    add,         // elementwise, and a row vector broadcast over rows (biases)
    mul,         // a row vector broadcast over rows, and a scalar
    glu,         // act(gate) * up
    softcap,
    copy,        // bytes in and out of backend buffers, rows gathered within them, fill
    scatter_add, // weighted rows added into chosen rows (routed experts' outputs)
    ssm_conv,    // causal depthwise convolution with a carried state (linear-attention layers)
    gated_delta, // the gated delta rule's recurrence (gated DeltaNet layers)
};

const char* op_name(Op op);

enum class RopeMode { normal, neox };  // normal: pairs (2i, 2i+1); neox: pairs (i, i + d/2)

struct RopeParams {
    RopeMode mode = RopeMode::neox;
    int n_dims = 0;                // rotated dimensions (the first n_dims of each head)
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;       // linear scaling: position multiplied by this
    const float* freq_factors = nullptr;  // [n_dims/2] divisors of each frequency (a Vec's data), or nullptr
};

enum class KvType { f32, f16 };

// One layer's cache in backend memory: row p holds position p, n_head_kv heads of head_dim.
struct KvView {
    void* k = nullptr;             // [capacity, dim] in `type`
    void* v = nullptr;             // [capacity, dim] in `type`
    KvType type = KvType::f32;
    int64_t dim = 0;               // n_head_kv * head_dim
    int64_t n_kv = 0;              // positions attention reads: 0..n_kv-1
};

struct AttnParams {
    int n_head = 0;
    int n_head_kv = 0;             // grouped-query: query head h reads KV head h / (n_head / n_head_kv)
    int head_dim = 0;
    float scale = 1.0f;            // on q·k before soft-cap and softmax
    float softcap = 0.0f;          // 0: none; else s = cap * tanh(s / cap)
    int64_t window = 0;            // 0: full causal; else query p sees keys j with p - j < window
};

enum class Act { silu, gelu_tanh, sigmoid };

// A gated DeltaNet layer's shape: n_k key heads of d_k, n_v value heads of d_v (n_v a multiple
// of n_k): value head h reads key head h / (n_v / n_k), or h % n_k when `tiled` (the order
// llama.cpp's converter gives Qwen3.5's value heads).
struct DeltaParams {
    int n_k = 0, n_v = 0, d_k = 0, d_v = 0;
    bool tiled = false;
    int key_head(int h) const { return tiled ? h % n_k : h / (n_v / n_k); }
    int64_t key_dim() const { return static_cast<int64_t>(n_k) * d_k; }
    int64_t value_dim() const { return static_cast<int64_t>(n_v) * d_v; }
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual const char* name() const = 0;
    virtual int threads() const { return 1; }
    // fn(i) for every i < n, spread over the backend's threads where it has them (work that is
    // not a kernel: the per-row sampling after a batched pass); fn must be safe to run
    // concurrently for distinct i.
    virtual void for_each(int64_t n, const std::function<void(int64_t)>& fn) {
        for (int64_t i = 0; i < n; ++i) fn(i);
    }
    // Whether `op` runs here (for weights of `type`: matmul, argmax and get_rows look at it).
    // A model checks every op and weight format it needs when it loads.
    virtual bool supports_op(Op op, quant::Type type = quant::Type::F32) const = 0;

    // Gives w a prepared copy of its rows when that makes this backend's matmuls on it faster
    // (the CPU backend: a repacked layout for the int16 path in w.packed, or the rows as they are
    // on huge pages, w.data then pointing at the copy); returns whether it did, in which case the
    // matmul paths in use no longer read the file's rows. Results are unchanged. `release(p,
    // bytes)` is told of each range of w.data once copied, so that a mapped file's pages can go
    // while the copy grows (peak memory: the copy, not the copy and the file). A backend may
    // defer the copying (CpuOptions::defer_pack): pack() then only reserves it and sets
    // w.packed, and finish_packing(), which the model calls before its first forward pass,
    // writes the rows (`release` must stay callable until then): a model that may never run (a
    // draft model the scheduler keeps out) costs its mapping only.
    using ReleaseFn = std::function<void(const void*, size_t)>;
    virtual bool pack(Weight& w, const ReleaseFn& release) { return false; }
    // pack() done at once whatever the deferral, nothing released (a probe's own matrix).
    virtual bool pack_now(Weight& w) { return false; }
    virtual bool packing_pending() const { return false; }
    virtual void finish_packing() {}
    // Does now what the output head `w`'s first pass of several rows would do once (verify passes
    // follow), after packing.
    virtual void prepare_head(const Weight& w) {}
    // Frees the copy pack() made of w's rows (a matrix that is going away).
    virtual void drop_packed(const Weight& w) {}

    // Memory. alloc: `bytes` of backend memory, 64-byte aligned, contents undefined. write /
    // read / copy move bytes host -> backend, backend -> host, backend -> backend, in op order
    // (a read sees every op before it). Where host_visible(), backend memory is host memory and
    // host memory may be handed to ops as Rows (a pass's outputs written in place).
    virtual std::unique_ptr<Buffer> alloc(size_t bytes) = 0;
    virtual void write(void* dst, const void* src, size_t bytes) = 0;
    virtual void read(void* dst, const void* src, size_t bytes) = 0;
    virtual void copy(void* dst, const void* src, size_t bytes) = 0;
    virtual bool host_visible() const { return false; }
    // dst row i = src row rows[i], i < dst.n (src.dim == dst.dim)
    virtual void gather(Rows src, const int64_t* rows, Rows dst) = 0;
    // y = v everywhere
    virtual void fill(Rows y, float v) = 0;

    // y[x.n, w.n_out] = x[., w.n_in] · wᵀ (one matrix: w.n_mat == 1)
    virtual void matmul(const Weight& w, Rows x, Rows y) = 0;
    // ys[i] = matmul(*ws[i], x) for i < count, one input for all (a layer's q, k and v
    // projections; gate and up), which a backend may prepare once; no ys[i] may overlap x.
    virtual void matmuls(const Weight* const* ws, int count, Rows x, const Rows* ys) {
        for (int i = 0; i < count; ++i) matmul(*ws[i], x, ys[i]);
    }
    // Greedy head: for each row r of x, idx[r] (host memory) = the lowest index of the largest
    // value of row r of x · wᵀ, after cap * tanh(v / cap) when cap > 0 — exactly the argmax of
    // what matmul (then softcap) would write, without materialising the rows. Throws
    // std::domain_error if a value is NaN or +inf.
    virtual void matmul_argmax(const Weight& w, Rows x, float cap, int32_t* idx) = 0;
    // Sampling head: out(r) (host memory) for each row r of x, shortlisting the ids whose value
    // can reach the row's largest minus margin[r] >= 0 (Shortlist), where this backend can
    // without every value; out(r).ok = false elsewhere (the default: never). keep (null: none):
    // keep[r] > 0 says the row needs only its keep[r] largest values (top-k; the screened
    // sampler's kScreened), so thr may rise to a value that many ids reach.
    using ShortlistOf = std::function<Shortlist&(int64_t)>;
    virtual void matmul_shortlist(const Weight& w, Rows x, const float* margin, const int32_t* keep,
                                  const ShortlistOf& out) {
        for (int64_t r = 0; r < x.n; ++r) out(r).ok = false;
    }
    // y[i] = the value of ids[i] in x · wᵀ for one host row x[w.n_in], exactly as matmul writes
    // it, on the calling thread (so inside for_each too): more of a row matmul_shortlist served.
    // Throws std::logic_error where this backend does not shortlist w.
    virtual void matmul_ids(const Weight& w, const float* x, const int32_t* ids, int64_t n, float* y) const {
        throw std::logic_error("matmul_ids: this backend does not shortlist heads");
    }
    // y row i = row ids[i] of w, dequantised, i < y.n (y.dim == w.n_in); ids are checked by the
    // caller
    virtual void get_rows(const Weight& w, const int32_t* ids, Rows y) = 0;
    // y = x / rms(x) * w per row; w empty: no weights; y may equal x
    virtual void rms_norm(Rows x, const Vec& w, float eps, Rows y) = 0;
    // x rows of n_head heads of x.dim / n_head, rotated in place; pos[x.n] is each row's position
    virtual void rope(Rows x, int n_head, const int32_t* pos, const RopeParams& p) = 0;
    // out[q.n, n_head * head_dim] = softmax(q kᵀ) v for query rows q at positions pos; row i sees
    // cache rows [0, last[i]] (from pos[i] - window + 1 on with a window). last[i] = pos[i] is
    // causal attention; the block's last position for every row is a non-causal block. The rows
    // read must be written.
    void attention(Rows q, const int32_t* pos, const int32_t* last, const KvView& kv, const AttnParams& p, Rows out) {
        const int64_t first[2] = {0, q.n};
        attention_seqs(q, pos, last, first, &kv, 1, p, out);
    }
    // attention() of several sequences' rows in one op: rows first[s] .. first[s + 1] - 1 of q,
    // pos, last and out over cache kvs[s], s < n_seqs (first[0] = 0, first[n_seqs] = q.n). A row's
    // result is the one attention() gives it alone; the threads share the whole op, so that a
    // step of many sequences with a row each is not one sequence at a time.
    virtual void attention_seqs(Rows q, const int32_t* pos, const int32_t* last, const int64_t* first,
                                const KvView* kvs, int n_seqs, const AttnParams& p, Rows out) = 0;
    // Rows k and v (kv.dim wide) into positions [pos, pos + k.n) of the cache, in its type.
    virtual void store_kv(const KvView& kv, int64_t pos, Rows k, Rows v) = 0;
    // y += x (same shape)
    virtual void add(Rows y, Rows x) = 0;
    // y[r, c] += b[c]
    virtual void add_rows(Rows y, const Vec& b) = 0;
    // y[r, c] *= w[c]
    virtual void mul_rows(Rows y, const Vec& w) = 0;
    // y *= s
    virtual void scale(Rows y, float s) = 0;
    // y = act(gate) * up; y may be gate or up
    virtual void glu(Rows gate, Rows up, Act act, Rows y) = 0;
    // x = cap * tanh(x / cap)
    virtual void softcap(Rows x, float cap) = 0;
    // dst row rows[i] += w[i] * src row i for i < src.n; the rows are distinct, w is host memory
    virtual void scatter_add(Rows src, const int64_t* rows, const float* w, Rows dst) = 0;
    // Causal depthwise convolution of kernel k over the rows of one sequence, then silu:
    // y[t, c] = silu(sum_j w[c * k + j] * in(t - k + 1 + j, c)), where in(t', c) for t' < 0 is row
    // k - 1 + t' of state ([k - 1, channels], oldest first), which then holds the last k - 1
    // inputs. y does not alias x.
    virtual void ssm_conv(Rows x, const Vec& w, int k, Rows state, Rows y) = 0;
    // The gated delta rule over the rows of one sequence, in order. Row t of qkv holds q (n_k x
    // d_k), k (n_k x d_k) and v (n_v x d_v); a and b hold n_v values. Per value head h, with key
    // head p.key_head(h): beta = sigmoid(b), g = a_coef[h] * softplus(a + dt_bias[h]),
    // q^ = q / sqrt(|q|^2 + 1e-6) / sqrt(d_k), k^ = k / sqrt(|k|^2 + 1e-6);
    //   S_h = e^g S_h;  S_h += k^ (beta (v - S_h^T k^))^T;  out[t, h] = S_h^T q^,
    // with S_h rows h d_k .. h d_k + d_k - 1 of state ([n_v d_k, d_v]).
    virtual void gated_delta(Rows qkv, Rows a, Rows b, const Vec& a_coef, const Vec& dt_bias, const DeltaParams& p,
                             Rows state, Rows out) = 0;

    // Helpers over the memory ops.
    Vec upload(const float* host, int64_t n);
    void upload(Rows dst, const float* host) { write(dst.data, host, bytes_of(dst)); }
    void download(float* host, Rows src) { read(host, src.data, bytes_of(src)); }
    // dst = src (the same number of values; dst's rows may be wider slices of a wider tensor's)
    void copy(Rows dst, Rows src) { copy(dst.data, src.data, bytes_of(src)); }
    // Rows for a pass's output into host memory `host`: that memory itself where the backend can
    // address it, else arena rows that finish_output() then downloads.
    Rows output_rows(float* host, int64_t n, int64_t dim);
    void finish_output(Rows rows, float* host);

    // What besides the ISA and the threads decides how fast this backend's kernels run on a
    // format (the CPU backend: whether activations go int16): a key for measured rates.
    virtual std::string settings() const { return name(); }

    // The activations of the pass being run (reset by the model at the start of each pass).
    Arena& arena() { return arena_; }

protected:
    Backend() : arena_([this](size_t bytes) { return alloc(bytes); }) {}

private:
    static size_t bytes_of(Rows r) { return static_cast<size_t>(r.size()) * sizeof(float); }
    Arena arena_;
};

}  // namespace ds4::backend
