// Model bindings. For now a Model is the mapped GGUF plus its tokenizer; the forward pass,
// sessions and sampling attach here as they land.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "bindings/register.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace py = pybind11;

namespace ds4::bindings {

namespace {

struct Model {
    std::shared_ptr<gguf::File> file;
    std::unique_ptr<tok::Tokenizer> tokenizer;
    std::string arch;
    int64_t n_ctx = 0;
    int threads = 0;
};

std::unique_ptr<Model> load_model(const std::string& path, int threads, int64_t n_ctx) {
    auto m = std::make_unique<Model>();
    m->file = gguf::File::open(path);
    m->arch = m->file->get("general.architecture").as_string();
    m->tokenizer = tok::Tokenizer::from_gguf(*m->file);
    if (n_ctx > 0) {
        m->n_ctx = n_ctx;
    } else if (const gguf::Value* v = m->file->find(m->arch + ".context_length")) {
        m->n_ctx = v->as_int();
    }
    m->threads = threads;
    return m;
}

}  // namespace

void register_model(py::module_& m) {
    py::class_<Model>(m, "Model")
        .def(py::init([](const std::string& path, int threads, int64_t n_ctx) {
                 py::gil_scoped_release release;
                 return load_model(path, threads, n_ctx);
             }),
             py::arg("path"), py::arg("threads") = 0, py::arg("n_ctx") = 0)
        .def_readonly("arch", &Model::arch)
        .def_readonly("n_ctx", &Model::n_ctx)
        .def_property_readonly("vocab_size", [](const Model& self) { return self.tokenizer->vocab_size(); })
        .def(
            "tokenize",
            [](const Model& self, const std::string& text, bool add_special, bool parse_special) {
                std::vector<int32_t> ids;
                {
                    py::gil_scoped_release release;
                    ids = self.tokenizer->encode(text, add_special, parse_special);
                }
                return ids;
            },
            py::arg("text"), py::arg("add_special") = true, py::arg("parse_special") = true)
        .def(
            "detokenize",
            [](const Model& self, const std::vector<int32_t>& ids) {
                std::string bytes;
                {
                    py::gil_scoped_release release;
                    bytes = self.tokenizer->decode(ids);
                }
                // Invalid or truncated UTF-8 (ids cut mid-character) becomes U+FFFD, not an error.
                PyObject* s = PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace");
                if (!s) throw py::error_already_set();
                return py::reinterpret_steal<py::str>(s);
            },
            py::arg("ids"))
        .def_property_readonly("bos_id", [](const Model& self) { return self.tokenizer->bos_id(); })
        .def_property_readonly("eos_id", [](const Model& self) { return self.tokenizer->eos_id(); })
        .def(
            "token_bytes",
            [](const Model& self, int32_t id) { return py::bytes(self.tokenizer->token_bytes(id)); },
            py::arg("id"));
}

}  // namespace ds4::bindings
