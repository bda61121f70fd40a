#include "model/identity.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <vector>

namespace ds4::model {

namespace {

struct Fnv {
    uint64_t h = 0xcbf29ce484222325ull;
    void add(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
    }
    void add(uint64_t v) {
        uint8_t b[8];
        for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
        add(b, 8);
    }
    void add(std::string_view s) {
        add(static_cast<uint64_t>(s.size()));
        add(s.data(), s.size());
    }
    std::string hex() const {
        char buf[17];
        std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
        return buf;
    }
};

std::string vocab_fingerprint(const gguf::File& file) {
    Fnv f;
    const gguf::Value* v = file.find("tokenizer.ggml.tokens");
    if (!v) return f.hex();
    const gguf::Array& toks = v->as_array();
    f.add(static_cast<uint64_t>(toks.size()));
    for (size_t i = 0; i < toks.size(); ++i) f.add(toks.string_at(i));
    return f.hex();
}

std::string weights_fingerprint(const gguf::File& file) {
    // The geometry of the trunk, whatever the quantisation: a drafter trained on a model serves
    // any quantisation of it, and refuses a model of another shape.
    std::vector<const gguf::TensorInfo*> ts;
    for (const gguf::TensorInfo& t : file.tensors()) {
        if (t.name.rfind("blk.", 0) == 0 || t.name == "token_embd.weight") ts.push_back(&t);
    }
    std::sort(ts.begin(), ts.end(), [](const gguf::TensorInfo* a, const gguf::TensorInfo* b) { return a->name < b->name; });
    Fnv f;
    const gguf::Value* arch = file.find("general.architecture");
    f.add(arch ? arch->as_string() : std::string());
    for (const gguf::TensorInfo* t : ts) {
        f.add(t->name);
        f.add(static_cast<uint64_t>(t->ne.size()));
        for (int64_t n : t->ne) f.add(static_cast<uint64_t>(n));
    }
    return f.hex();
}

}  // namespace

Identity identity_of(const gguf::File& file) { return {vocab_fingerprint(file), weights_fingerprint(file)}; }

}  // namespace ds4::model
