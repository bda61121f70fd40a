// Names of the ops of backend.h, for error messages.
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
    }
    return "?";
}

}  // namespace ds4::backend
