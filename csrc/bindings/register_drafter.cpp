// Block drafters (DFlash / DSpark, model/block_drafter.h): loading one for a target model, and
// the fingerprints a drafter file records of its target (what the converter writes).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "bindings/handles.h"
#include "bindings/register.h"
#include "model/block_drafter.h"
#include "model/identity.h"

namespace py = pybind11;

namespace ds4::bindings {

namespace {

py::dict identity_dict(const gguf::File& f, const model::Identity& id) {
    const std::string arch = f.get("general.architecture").as_string();
    const gguf::Value* name = f.find("general.name");
    const gguf::TensorInfo* emb = f.find_tensor("token_embd.weight");
    py::dict d;
    d["architecture"] = arch;
    d["name"] = name ? name->as_string() : std::string();
    d["vocab_fingerprint"] = id.vocab;
    d["weights_fingerprint"] = id.weights;
    d["n_layer"] = f.get(arch + ".block_count").as_int();
    d["n_embd"] = f.get(arch + ".embedding_length").as_int();
    d["n_vocab"] = emb && emb->ne.size() == 2 ? emb->ne[1] : 0;
    return d;
}

}  // namespace

void register_drafter(py::module_& m) {
    py::class_<model::BlockDrafter, std::shared_ptr<model::BlockDrafter>>(m, "BlockDrafter")
        .def(py::init([](const std::string& path, const Model& target) {
                 py::gil_scoped_release release;
                 return model::BlockDrafter::load(gguf::File::open(path), target.net);
             }),
             py::arg("path"), py::arg("target"))
        .def_property_readonly("path", &model::BlockDrafter::path)
        .def_property_readonly("kind", &model::BlockDrafter::kind)
        .def_property_readonly("block_size", &model::BlockDrafter::block_size)
        .def_property_readonly("mask_token", &model::BlockDrafter::mask_token)
        .def_property_readonly("layers", &model::BlockDrafter::layers);
    m.def(
        "target_identity",
        [](const std::string& path) {
            const std::shared_ptr<gguf::File> f = gguf::File::open(path);
            return identity_dict(*f, model::identity_of(*f));
        },
        py::arg("path"), "What a drafter file records of its target model (architecture, name, fingerprints) and its sizes.");
    m.def(
        "target_identity",
        [](const Model& target) {
            const model::Identity* id = nullptr;
            {
                py::gil_scoped_release release;
                id = &target.net->identity();
            }
            return identity_dict(target.net->file(), *id);
        },
        py::arg("target"), "The same of a loaded model, whose fingerprints are computed once.");
}

}  // namespace ds4::bindings
