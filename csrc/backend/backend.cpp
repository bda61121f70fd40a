// Op names for error messages, and the helpers of backend.h over the memory ops.
#include "backend/backend.h"

namespace ds4::backend {

const char* op_name(Op op) {
    switch (op) {
        case Op::matmul: return "matmul";
        case Op::argmax: return "argmax";
        case Op::get_rows: return "get_rows";
        case Op::rms_norm: return "rms_norm";
        case Op::rope: return "rope";
        case Op::attention: return "attention";
        case Op::store_kv: return "store_kv";
        case Op::add: return "add";
        case Op::mul: return "mul";
        case Op::glu: return "glu";
        case Op::softcap: return "softcap";
        case Op::copy: return "copy";
        case Op::scatter_add: return "scatter_add";
        case Op::ssm_conv: return "ssm_conv";
        case Op::gated_delta: return "gated_delta";
    }
    return "?";
}

Vec Backend::upload(const float* host, int64_t n) {
    if (n == 0) return {};
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    std::shared_ptr<Buffer> buf = alloc(bytes);
    write(buf->data(), host, bytes);
    return {std::move(buf), n};
}

Rows Backend::output_rows(float* host, int64_t n, int64_t dim) {
    return host_visible() ? Rows{host, n, dim} : arena_.rows(n, dim);
}

void Backend::finish_output(Rows rows, float* host) {
    if (rows.data != host) download(host, rows);
}

}  // namespace ds4::backend
