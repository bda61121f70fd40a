// Quant bindings: dequantise a GGUF tensor or raw blocks, dot products against a float row,
// the Q8_0 quantiser and the SIMD dispatch switches. Every size is checked against the
// type's block geometry before a kernel runs, so no call can read or write out of bounds.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/aligned.h"
#include "bindings/register.h"
#include "gguf/gguf.h"
#include "quant/blocks.h"
#include "quant/head_screen.h"
#include "quant/int16_gemm.h"
#include "quant/kernels.h"
#include "quant/packed.h"
#include "quant/types.h"

namespace py = pybind11;

namespace ds4::bindings {

namespace {

using quant::Isa;
using quant::Kernels;
using quant::Type;
using quant::TypeInfo;

constexpr uint32_t kMaxTypeId = 64;

struct TypeRef {
    Type type;
    const TypeInfo* info;
};

std::vector<std::string> supported_type_names() {
    std::vector<std::string> names;
    for (uint32_t id = 0; id < kMaxTypeId; ++id) {
        const TypeInfo* info = quant::type_info(id);
        if (info && quant::is_supported(static_cast<Type>(id))) names.emplace_back(info->name);
    }
    return names;
}

std::string joined(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
}

TypeRef supported_type(const std::string& name) {
    for (uint32_t id = 0; id < kMaxTypeId; ++id) {
        const TypeInfo* info = quant::type_info(id);
        if (info && name == info->name) {
            if (!quant::is_supported(static_cast<Type>(id))) {
                throw py::value_error("type " + name + " has no ds4 kernels (supported: " +
                                      joined(supported_type_names()) + ")");
            }
            return {static_cast<Type>(id), info};
        }
    }
    throw py::value_error("unknown type name '" + name + "' (supported: " + joined(supported_type_names()) + ")");
}

// The kernels of `t` for the requested ISA (with fallback), or for the active one.
const Kernels& kernels_of(Type t, const std::optional<std::string>& isa) {
    return isa ? quant::kernels(t, quant::parse_isa(*isa)) : quant::kernels(t);
}

// A contiguous byte view of `data` (bytes, bytearray, a uint8 / any contiguous buffer).
struct Bytes {
    py::buffer_info info;
    const uint8_t* ptr;
    size_t size;
};

Bytes bytes_of(const py::buffer& data) {
    py::buffer_info info = data.request();
    // Strides must be C-contiguous; a 0-d or 1-d view of bytes always is.
    py::ssize_t expect = info.itemsize;
    for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
        if (info.shape[d] > 1 && info.strides[d] != expect) throw py::value_error("data must be C-contiguous");
        expect *= info.shape[d];
    }
    const auto size = static_cast<size_t>(info.size * info.itemsize);
    const auto* ptr = static_cast<const uint8_t*>(info.ptr);
    return {std::move(info), ptr, size};
}

// A 1-d C-contiguous float32 array (no silent casts: a float64 row is a caller bug here).
py::array_t<float> float_row(const py::array& x, const char* what) {
    if (!py::isinstance<py::array_t<float>>(x) || x.dtype().kind() != 'f' || x.itemsize() != 4) {
        throw py::type_error(std::string(what) + " must be a float32 numpy array, got dtype " +
                             py::str(x.dtype()).cast<std::string>());
    }
    if (x.ndim() != 1) throw py::value_error(std::string(what) + " must be 1-dimensional");
    if (!(x.flags() & py::array::c_style)) throw py::value_error(std::string(what) + " must be C-contiguous");
    return py::reinterpret_borrow<py::array_t<float>>(x);
}

void check_row_length(const TypeRef& t, int64_t n) {
    if (n < 0) throw py::value_error("n must be >= 0");
    if (n % t.info->block_size != 0) {
        throw py::value_error("n = " + std::to_string(n) + " is not a multiple of " + t.info->name +
                              "'s block size " + std::to_string(t.info->block_size));
    }
}

py::array_t<float> dequantize_tensor(const std::string& path, const std::string& name) {
    std::shared_ptr<gguf::File> f;
    {
        py::gil_scoped_release release;
        f = gguf::File::open(path);
    }
    const gguf::TensorInfo* t = f->find_tensor(name);
    if (!t) throw py::key_error("tensor '" + name + "' not found in " + f->path());
    const TypeInfo* info = quant::type_info(t->type);
    const Type type = static_cast<Type>(t->type);
    const Kernels& k = quant::kernels(type);
    if (!info || !k.dequant) {
        throw py::value_error("tensor '" + name + "' in " + f->path() + " has type " +
                              (info ? info->name : std::to_string(t->type)) + ", which ds4 cannot dequantise");
    }
    const int64_t n = t->n_elements();
    // The reader validated ne[0] % block_size == 0 and nbytes against the map; recheck the
    // invariant the kernel relies on rather than trust it silently.
    if (n % info->block_size != 0 || quant::row_bytes(*info, n) != t->nbytes) {
        throw py::value_error("tensor '" + name + "': size does not match its type");
    }
    std::vector<py::ssize_t> shape(t->ne.rbegin(), t->ne.rend());  // numpy order
    py::array_t<float> out(shape);
    float* dst = out.mutable_data();
    {
        py::gil_scoped_release release;
        k.dequant(t->data, dst, n);
    }
    return out;
}

py::array_t<float> dequantize_raw(const std::string& type_name, const py::buffer& data, int64_t n,
                                  const std::optional<std::string>& isa) {
    const TypeRef t = supported_type(type_name);
    check_row_length(t, n);
    const Bytes b = bytes_of(data);
    const size_t need = quant::row_bytes(*t.info, n);
    if (b.size != need) {
        throw py::value_error("data has " + std::to_string(b.size) + " bytes; " + std::to_string(n) + " " +
                              t.info->name + " values take " + std::to_string(need));
    }
    const Kernels& k = kernels_of(t.type, isa);
    py::array_t<float> out(n);
    float* dst = out.mutable_data();
    {
        py::gil_scoped_release release;
        k.dequant(b.ptr, dst, n);
    }
    return out;
}

// Checks that `data` holds n_rows rows of len(x) values each and returns len(x).
int64_t check_rows(const TypeRef& t, const Bytes& b, int64_t n_rows, int64_t n) {
    check_row_length(t, n);
    if (n_rows < 0) throw py::value_error("n_rows must be >= 0");
    const size_t row = quant::row_bytes(*t.info, n);
    if (row != 0 && static_cast<size_t>(n_rows) > b.size / row) {
        throw py::value_error("data has " + std::to_string(b.size) + " bytes, less than " + std::to_string(n_rows) +
                              " rows of " + std::to_string(n) + " " + t.info->name + " values");
    }
    if (b.size != row * static_cast<size_t>(n_rows)) {
        throw py::value_error("data has " + std::to_string(b.size) + " bytes; " + std::to_string(n_rows) +
                              " rows of " + std::to_string(n) + " " + t.info->name + " values take " +
                              std::to_string(row * static_cast<size_t>(n_rows)));
    }
    return n;
}

float dot(const std::string& type_name, const py::buffer& data, const py::array& x_obj,
          const std::optional<std::string>& isa) {
    const TypeRef t = supported_type(type_name);
    const py::array_t<float> x = float_row(x_obj, "x");
    const Bytes b = bytes_of(data);
    const int64_t n = check_rows(t, b, 1, static_cast<int64_t>(x.size()));
    const Kernels& k = kernels_of(t.type, isa);
    return k.dot(b.ptr, x.data(), n);
}

py::array_t<float> dot_rows(const std::string& type_name, const py::buffer& data, int64_t n_rows,
                            const py::array& x_obj, const std::optional<std::string>& isa) {
    const TypeRef t = supported_type(type_name);
    const py::array_t<float> x = float_row(x_obj, "x");
    const Bytes b = bytes_of(data);
    const int64_t n = check_rows(t, b, n_rows, static_cast<int64_t>(x.size()));
    const Kernels& k = kernels_of(t.type, isa);
    const size_t row = quant::row_bytes(*t.info, n);
    py::array_t<float> out(n_rows);
    float* y = out.mutable_data();
    const float* xp = x.data();
    {
        py::gil_scoped_release release;
        for (int64_t r = 0; r < n_rows; ++r) y[r] = k.dot(b.ptr + static_cast<size_t>(r) * row, xp, n);
    }
    return out;
}

// The rows of x, a C-contiguous 2-D float32 array (TypeError otherwise).
int64_t matrix_rows(const py::array& x) {
    if (!py::isinstance<py::array_t<float>>(x) || x.itemsize() != 4 || x.dtype().kind() != 'f' || x.ndim() != 2 ||
        !(x.flags() & py::array::c_style)) {
        throw py::type_error("x must be a C-contiguous 2-D float32 array");
    }
    return static_cast<int64_t>(x.shape(0));
}

// X (nx, n) against n_rows weight rows through one of the kernel paths a matmul can take:
// "dot" (one call per pair), "rows" (dot_rows in chunks of up to kDotRowsMax activation rows,
// the last chunk shorter) or "gemm" (decode_groups of every weight row, then one gemm_groups).
// All three must agree bit for bit; tests compare them. Returns Y (nx, n_rows).
py::array_t<float> matmul_path(const std::string& type_name, const py::buffer& data, int64_t n_rows,
                               const py::array& x_obj, const std::string& path, const std::optional<std::string>& isa) {
    const TypeRef t = supported_type(type_name);
    const int64_t nx = matrix_rows(x_obj);
    const Bytes b = bytes_of(data);
    const int64_t n = check_rows(t, b, n_rows, static_cast<int64_t>(x_obj.shape(1)));
    const Kernels& k = kernels_of(t.type, isa);
    const quant::I16Kernels& ik = quant::i16_kernels(t.type, isa ? quant::parse_isa(*isa) : quant::active_isa());
    const bool i16 = path == "i16" || path == "i16rows" || path == "i16packed" || path == "i16packed_gemm";
    if (path != "dot" && path != "rows" && path != "gemm" && !i16) {
        throw py::value_error("path must be 'dot', 'rows', 'gemm', 'i16', 'i16rows', 'i16packed' or 'i16packed_gemm', got '" +
                              path + "'");
    }
    if ((path == "i16packed" && !ik.rows_packed) || (path == "i16packed_gemm" && !ik.decode_packed)) {
        throw py::value_error(type_name + " has no packed int16 rows kernel on this ISA");
    }
    if (path == "i16" && !ik.gemm) throw py::value_error(type_name + " has no int16 path on this ISA");
    if (path == "i16rows" && !ik.rows) throw py::value_error(type_name + " has no fused int16 rows kernel on this ISA");
    if (path == "rows" && !k.dot_rows) throw py::value_error(type_name + " has no dot_rows kernel on this ISA");
    if (path == "gemm" && !k.decode_groups) throw py::value_error(type_name + " has no gemm_groups kernel on this ISA");
    const size_t row = quant::row_bytes(*t.info, n);
    py::array_t<float> out({nx, n_rows});
    float* y = out.mutable_data();
    const auto* xp = static_cast<const float*>(x_obj.data());
    {
        py::gil_scoped_release release;
        if (path == "dot") {
            for (int64_t r = 0; r < nx; ++r)
                for (int64_t o = 0; o < n_rows; ++o) y[r * n_rows + o] = k.dot(b.ptr + static_cast<size_t>(o) * row, xp + r * n, n);
        } else if (path == "rows") {
            for (int64_t o = 0; o < n_rows; ++o)
                for (int64_t r = 0; r < nx; r += quant::kDotRowsMax) {
                    const int m = static_cast<int>(std::min<int64_t>(quant::kDotRowsMax, nx - r));
                    k.dot_rows(b.ptr + static_cast<size_t>(o) * row, xp + r * n, n, m, n, y + r * n_rows + o, n_rows);
                }
        } else if (i16) {
            const int64_t lda = quant::act_stride(n);
            backend::cpu::AlignedVector<int16_t> a(static_cast<size_t>(nx * lda));  // the backend's alignment
            const int64_t groups = ik.groups(n), halves = n / quant::kHalf;
            std::vector<float> da(static_cast<size_t>(nx * groups)), xs(static_cast<size_t>(nx * halves));
            for (int64_t r = 0; r < nx; ++r) {
                ik.quantize_row(xp + r * n, n, a.data() + r * lda, da.data() + r * groups, xs.data() + r * halves);
            }
            if (path == "i16" || path == "i16packed_gemm") {
                backend::cpu::AlignedVector<int16_t> q(static_cast<size_t>(n_rows * n));
                std::vector<float> sw(static_cast<size_t>(n_rows * groups)), mw(static_cast<size_t>(n_rows * halves));
                ik.decode_rows(b.ptr, row, path == "i16packed_gemm", static_cast<int>(n_rows), n, q.data(), sw.data(),
                               mw.data());
                ik.gemm_rows(q.data(), sw.data(), mw.data(), static_cast<int>(n_rows), a.data(), da.data(), xs.data(),
                             static_cast<int>(nx), n, y, n_rows);
            } else {  // the fused rows kernels, as the backend runs them: two rows at a time where a kernel does
                const bool packed = path == "i16packed";
                const quant::RowsI16Fn one = ik.rows_of(packed);
                const quant::RowsPacked2Fn pair = ik.pairs_of(packed, nx);
                for (int64_t r = 0; r < nx;) {
                    const int m = ik.pass_rows(nx - r);
                    for (int64_t o = 0; o < n_rows;) {
                        const bool two = pair && o + 1 < n_rows;
                        const uint8_t* wo = b.ptr + static_cast<size_t>(o) * row;
                        float* yo = y + r * n_rows + o;
                        if (two) {
                            pair(wo, row, n, a.data() + r * lda, da.data() + r * groups, xs.data() + r * halves, m, yo, n_rows);
                        } else {
                            one(wo, n, a.data() + r * lda, da.data() + r * groups, xs.data() + r * halves, m, yo, n_rows);
                        }
                        o += two ? 2 : 1;
                    }
                    r += m;
                }
            }
        } else if (n_rows > 0) {
            std::vector<float> u(static_cast<size_t>(n_rows * n)), sc(static_cast<size_t>(n_rows * (n / k.group_len)));
            for (int64_t o = 0; o < n_rows; ++o)
                k.decode_groups(b.ptr + static_cast<size_t>(o) * row, n, u.data() + o * n, sc.data() + o * (n / k.group_len));
            k.gemm_groups(u.data(), sc.data(), static_cast<int>(n_rows), xp, n, static_cast<int>(nx), n, k.group_len, y, n_rows);
        }
    }
    return out;
}

// n_rows rows of n values (row_bytes each) in GGUF layout -> packed (quant/packed.h), or back.
py::bytes repack(const std::string& type_name, const py::buffer& data, int64_t n_rows, int64_t n, bool pack) {
    const TypeRef t = supported_type(type_name);
    if (!quant::has_packed_layout(t.type)) throw py::value_error(type_name + " has no packed layout");
    const Bytes b = bytes_of(data);
    check_rows(t, b, n_rows, n);
    std::string out(b.size, '\0');
    auto* o = reinterpret_cast<uint8_t*>(out.data());
    (pack ? quant::pack_rows : quant::unpack_rows)(t.type, b.ptr, n, n_rows, o);
    return py::bytes(out);
}

py::bytes quantize_q8_0(const py::array& x_obj) {
    if (!py::isinstance<py::array_t<float>>(x_obj) || x_obj.itemsize() != 4 || x_obj.dtype().kind() != 'f') {
        throw py::type_error("x must be a float32 numpy array, got dtype " + py::str(x_obj.dtype()).cast<std::string>());
    }
    if (!(x_obj.flags() & py::array::c_style)) throw py::value_error("x must be C-contiguous");
    const auto n = static_cast<int64_t>(x_obj.size());
    if (n % quant::QK8_0 != 0) {
        throw py::value_error("x has " + std::to_string(n) + " values, not a multiple of Q8_0's block size 32");
    }
    std::string out(static_cast<size_t>(n / quant::QK8_0) * sizeof(quant::block_q8_0), '\0');
    const auto* xp = static_cast<const float*>(x_obj.data());
    {
        py::gil_scoped_release release;
        quant::quantize_row_q8_0(xp, out.data(), n);
    }
    return py::bytes(out);
}

// The greedy head's screen (quant/head_screen.h) over packed Q8_0 rows (pack_weights): the
// kernel's scores (or the reference's), the row norms and each activation row's ||x - s||.
py::tuple head_screen(const py::buffer& data, int64_t n_rows, const py::array& x_obj, bool reference) {
    const TypeRef t = supported_type("Q8_0");
    const int64_t nx = matrix_rows(x_obj);
    const Bytes b = bytes_of(data);
    const int64_t n = check_rows(t, b, n_rows, static_cast<int64_t>(x_obj.shape(1)));
    if (!quant::BlockLanes(n).tail4() && quant::BlockLanes(n).tail != 0) {
        throw py::value_error("the screen serves rows whose last chunk has 0 or 4 blocks, not " + std::to_string(n) + " values");
    }
    const quant::screen::ScoresFn kernel = reference ? &quant::screen::scores_ref : quant::screen::scores();
    if (!kernel) throw py::value_error("this CPU has no screen kernel (AVX-512 VNNI + VBMI)");
    const auto* xp = static_cast<const float*>(x_obj.data());
    for (int64_t i = 0; i < nx * n; ++i) {
        if (!std::isfinite(xp[i])) throw py::value_error("x must be finite");
    }
    const size_t row = quant::row_bytes(*t.info, n);
    const int64_t nb = n / 32;
    std::vector<int8_t> q(static_cast<size_t>(nx * n));
    std::vector<float> d(static_cast<size_t>(nx * nb));
    std::vector<int32_t> neg(static_cast<size_t>(nx * nb));
    py::array_t<float> scores({nx, n_rows}), norms(n_rows);
    py::array_t<double> err(nx);
    {
        py::gil_scoped_release release;
        for (int64_t r = 0; r < nx; ++r) {
            err.mutable_data()[r] = quant::screen::quantize(xp + r * n, n, {q.data() + r * n, d.data() + r * nb, neg.data() + r * nb});
        }
        for (int64_t r0 = 0; r0 < nx; r0 += quant::screen::kRowsMax) {
            const int m = static_cast<int>(std::min<int64_t>(quant::screen::kRowsMax, nx - r0));
            kernel(b.ptr, row, n_rows, n, q.data() + r0 * n, d.data() + r0 * nb, neg.data() + r0 * nb, m,
                   scores.mutable_data() + r0 * n_rows, n_rows);
        }
        (reference ? quant::screen::row_norms_ref : quant::screen::row_norms)(b.ptr, row, n_rows, n, norms.mutable_data());
    }
    return py::make_tuple(scores, norms, err);
}

// The screen's filter of one unit of scores (quant/head_screen.h: FilterFn): (the new lo, the
// indices kept, their upper bounds).
py::tuple head_screen_filter(const py::array& y_obj, const py::array& norm_obj, float b, float lo, float margin,
                             float floor, bool reference) {
    const py::array_t<float> y = float_row(y_obj, "y"), norm = float_row(norm_obj, "norm");
    if (y.size() != norm.size()) throw py::value_error("y and norm must have the same length");
    const int64_t m = y.size();
    py::array_t<int32_t> idx(m);
    py::array_t<float> up(m);
    const quant::screen::FilterFn fn = reference ? &quant::screen::filter_ref : quant::screen::filter();
    const int64_t k = fn(y.data(), norm.data(), m, b, margin, floor, &lo, idx.mutable_data(), up.mutable_data());
    return py::make_tuple(lo, idx[py::slice(0, k, 1)], up[py::slice(0, k, 1)]);
}

}  // namespace

void register_quant(py::module_& m) {
    m.def("dequantize", &dequantize_tensor, py::arg("path"), py::arg("tensor_name"),
          "The named tensor as float32 in numpy order (reversed ggml ne). KeyError if absent.");
    m.def("dequantize_raw", &dequantize_raw, py::arg("type_name"), py::arg("data"), py::arg("n"),
          py::arg("isa") = py::none(), "n values of raw blocks of type_name as float32.");
    m.def("dot", &dot, py::arg("type_name"), py::arg("data"), py::arg("x"), py::arg("isa") = py::none(),
          "sum_i w[i] * x[i] for one row of weights in block format and a float32 row x.");
    m.def("dot_rows", &dot_rows, py::arg("type_name"), py::arg("data"), py::arg("n_rows"), py::arg("x"),
          py::arg("isa") = py::none(), "Dot of x with each of n_rows consecutive weight rows.");
    m.def("matmul_path", &matmul_path, py::arg("type_name"), py::arg("data"), py::arg("n_rows"), py::arg("x"),
          py::arg("path"), py::arg("isa") = py::none(),
          "Y (nx, n_rows) = X (nx, n) against n_rows weight rows via one kernel path: dot, rows or gemm "
          "(float, bit-identical), or i16 / i16rows (int16-quantised activations: the GEMM, or the fused "
          "few-rows kernel of the formats that have one) / i16packed (data from pack_weights) / "
          "i16packed_gemm (the same decoded for the GEMM).");
    m.def("pack_weights", [](const std::string& t, const py::buffer& d, int64_t n_rows, int64_t n) {
        return repack(t, d, n_rows, n, true);
    }, py::arg("type_name"), py::arg("data"), py::arg("n_rows"), py::arg("n"),
          "n_rows rows of n values rewritten in the packed layout the int16 path uses (same size).");
    m.def("unpack_weights", [](const std::string& t, const py::buffer& d, int64_t n_rows, int64_t n) {
        return repack(t, d, n_rows, n, false);
    }, py::arg("type_name"), py::arg("data"), py::arg("n_rows"), py::arg("n"),
          "The inverse of pack_weights.");
    m.def("head_screen_filter", &head_screen_filter, py::arg("y"), py::arg("norm"), py::arg("b"), py::arg("lo"),
          py::arg("margin") = 0.0f, py::arg("floor") = -std::numeric_limits<float>::infinity(),
          py::arg("reference") = false,
          "The greedy head screen's filter of one unit of scores (the kernel where the screen has one).");
    m.def("head_screen", &head_screen, py::arg("data"), py::arg("n_rows"), py::arg("x"), py::arg("reference") = false,
          "The greedy head's int8 screen of packed Q8_0 rows (pack_weights) and x (nx, n): (scores (nx, n_rows), "
          "row norms (n_rows), ||x - screen quantisation|| per row); the scalar reference's scores if reference.");
    m.def("quantize_q8_0", &quantize_q8_0, py::arg("x"),
          "Q8_0 blocks of x (float32, size a multiple of 32), byte-identical to ggml's reference.");
    m.def("simd_available", [] {
        std::vector<std::string> names;
        for (Isa i : quant::available_isas()) names.emplace_back(quant::isa_name(i));
        return names;
    }, "ISAs this build and CPU can run, lowest first ('scalar' always).");
    m.def("simd_active", [] { return std::string(quant::isa_name(quant::active_isa())); },
          "The ISA the kernels use now.");
    m.def("set_simd", [](const std::string& name) { quant::set_isa(quant::parse_isa(name)); }, py::arg("name"),
          "Use the kernels of one ISA from now on (process-wide); ValueError if unavailable.");
    m.def("type_names", &supported_type_names, "Tensor types ds4 can dequantise and dot.");
}

}  // namespace ds4::bindings
