// What the binding files share: the Python-side Model (its file, tokenizer and network) and
// the check that turns Python token ids into the core's.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace ds4::bindings {

struct Model {
    std::shared_ptr<gguf::File> file;
    std::unique_ptr<tok::Tokenizer> tokenizer;
    std::shared_ptr<model::Model> net;
    std::string arch;
};

// Token ids as int32 after a range check (a cast alone would wrap ids >= 2^31); throws
// model::Error naming the first id outside [0, n_vocab).
std::vector<int32_t> token_ids(const pybind11::array_t<int64_t, pybind11::array::c_style | pybind11::array::forcecast>& a,
                               int64_t n_vocab);

void register_generate(pybind11::module_& m);  // GenerateOptions, Generator, Engine

}  // namespace ds4::bindings
