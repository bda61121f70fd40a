// Standalone tokenizer bindings: ds4._core.Tokenizer(path) loads only the vocabulary of a GGUF,
// and Tokenizer.stream_decoder() gives a StreamDecoder that returns complete UTF-8 text per id.
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

struct PyTokenizer {
    std::shared_ptr<gguf::File> file;
    std::unique_ptr<tok::Tokenizer> tok;
};

// Keeps its tokenizer alive for as long as the decoder lives.
struct PyStreamDecoder {
    std::shared_ptr<PyTokenizer> owner;
    tok::StreamDecoder dec;
    explicit PyStreamDecoder(std::shared_ptr<PyTokenizer> o) : owner(std::move(o)), dec(*owner->tok) {}
};

}  // namespace

void register_tokenizer(py::module_& m) {
    py::class_<PyTokenizer, std::shared_ptr<PyTokenizer>>(m, "Tokenizer")
        .def(py::init([](const std::string& path) {
                 py::gil_scoped_release release;
                 auto t = std::make_shared<PyTokenizer>();
                 t->file = gguf::File::open(path);
                 t->tok = tok::Tokenizer::from_gguf(*t->file);
                 return t;
             }),
             py::arg("path"))
        .def(
            "encode",
            [](const PyTokenizer& self, const std::string& text, bool add_special, bool parse_special) {
                py::gil_scoped_release release;
                return self.tok->encode(text, add_special, parse_special);
            },
            py::arg("text"), py::arg("add_special") = true, py::arg("parse_special") = true)
        .def(
            "decode",
            [](const PyTokenizer& self, const std::vector<int32_t>& ids) {
                std::string bytes;
                {
                    py::gil_scoped_release release;
                    bytes = self.tok->decode(ids);
                }
                return utf8_str(bytes);
            },
            py::arg("ids"))
        .def("decode_bytes",
             [](const PyTokenizer& self, const std::vector<int32_t>& ids) { return py::bytes(self.tok->decode(ids)); },
             py::arg("ids"))
        .def("token_bytes", [](const PyTokenizer& self, int32_t id) { return py::bytes(self.tok->token_bytes(id)); },
             py::arg("id"))
        .def_property_readonly("vocab_size", [](const PyTokenizer& self) { return self.tok->vocab_size(); })
        .def_property_readonly("bos_id", [](const PyTokenizer& self) { return self.tok->bos_id(); })
        .def_property_readonly("eos_id", [](const PyTokenizer& self) { return self.tok->eos_id(); })
        .def("stream_decoder",
             [](const std::shared_ptr<PyTokenizer>& self) { return std::make_unique<PyStreamDecoder>(self); });

    py::class_<PyStreamDecoder>(m, "StreamDecoder")
        .def(
            "push", [](PyStreamDecoder& self, int32_t id) { return utf8_str(self.dec.push(id)); }, py::arg("id"),
            "Feed one id; returns the newly completed text (never part of a character).")
        .def(
            "flush", [](PyStreamDecoder& self) { return utf8_str(self.dec.flush()); },
            "Whatever is held back, as U+FFFD.");
}

}  // namespace ds4::bindings
