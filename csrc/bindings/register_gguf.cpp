// GGUF bindings: inspect() turns a file's metadata and tensor directory into Python objects.
#include <pybind11/pybind11.h>

#include <string>
#include <system_error>

#include "bindings/register.h"
#include "gguf/gguf.h"
#include "platform/huge_map.h"
#include "quant/types.h"

namespace py = pybind11;

namespace ds4::bindings {

namespace {

py::object to_python(const gguf::Value& v) {
    using gguf::ValueType;
    switch (v.type) {
        case ValueType::UINT8: case ValueType::UINT16: case ValueType::UINT32: case ValueType::UINT64:
            return py::int_(v.num.u);
        case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64:
            return py::int_(v.num.i);
        case ValueType::FLOAT32: case ValueType::FLOAT64:
            return py::float_(v.num.f);
        case ValueType::BOOL:
            return py::bool_(v.num.b);
        case ValueType::STRING:
            // Metadata strings are UTF-8 by spec; a bad byte becomes U+FFFD rather than failing
            // the whole inspection (keys and names are validated strictly by the reader).
            return utf8_str(v.str);
        case ValueType::ARRAY: {
            const gguf::Array& a = v.arr;
            py::list out(a.size());
            // Strings and nested arrays are read in place: no per-element copy into a Value.
            for (size_t i = 0; i < a.size(); i++) {
                if (a.elem_type() == ValueType::STRING) out[i] = utf8_str(a.string_at(i));
                else if (a.elem_type() == ValueType::ARRAY) out[i] = to_python(a.array_at(i));
                else out[i] = to_python(a[i]);
            }
            return std::move(out);
        }
    }
    return py::none();
}

py::dict inspect(const std::string& path) {
    std::shared_ptr<gguf::File> f;
    {
        py::gil_scoped_release release;
        f = gguf::File::open(path);
    }
    py::dict metadata;
    for (const auto& [key, value] : f->metadata()) metadata[py::str(key)] = to_python(value);
    py::list tensors;
    for (const gguf::TensorInfo& t : f->tensors()) {
        py::dict d;
        d["name"] = t.name;
        d["type"] = quant::type_info(t.type)->name;
        py::tuple shape(t.ne.size());
        for (size_t i = 0; i < t.ne.size(); i++) shape[i] = t.ne[t.ne.size() - 1 - i];  // numpy order
        d["shape"] = shape;
        d["offset"] = t.offset;
        d["nbytes"] = t.nbytes;
        d["split"] = t.split;
        tensors.append(d);
    }
    py::dict out;
    out["path"] = f->path();
    out["version"] = f->version();
    out["alignment"] = f->alignment();
    out["data_offset"] = f->data_offset();
    out["n_splits"] = f->n_splits();
    out["metadata"] = metadata;
    out["tensors"] = tensors;
    return out;
}

}  // namespace

void register_gguf(py::module_& m) {
    m.def("inspect", &inspect, py::arg("path"),
          "Metadata and tensor directory of a GGUF file; raises GGUFError if it is malformed.");
    m.def(
        "file_cache_state",
        [](const std::string& path) {
            try {
                platform::CacheState s;
                {
                    py::gil_scoped_release release;
                    s = platform::file_cache_state(path);
                }
                return py::make_tuple(s.resident, s.huge);
            } catch (const std::system_error& e) {
                PyErr_SetString(PyExc_OSError, e.what());
                throw py::error_already_set();
            }
        },
        py::arg("path"),
        "(resident, huge): the fractions of a file's pages cached before the call and mapped on 2 MiB pages by "
        "the loader's mapping once read (ds4.page_cache.cache_state).");
}

}  // namespace ds4::bindings
