// The whole engine on the CPU it is built for, without Python: loads a GGUF, evaluates a prompt,
// prints the logits of its last position, then greedily decodes a few tokens and prints their ids.
// tests/model/test_arm_engine.py builds it for arm64 (every file of csrc/ but the bindings and the
// x86 kernels) and runs it under qemu-aarch64 against the x86 build's Python API.
// Usage: engine_check MODEL.gguf N_DECODE TOKEN... (stdout: "logit" lines, then one "ids" line).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/model.h"
#include "model/session.h"

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: engine_check MODEL.gguf N_DECODE TOKEN...\n");
        return 2;
    }
    try {
        ds4::model::Options opts;
        opts.cpu.threads = 2;
        opts.n_ctx = 256;
        auto model = ds4::model::Model::load(ds4::gguf::File::open(argv[1]), opts);
        ds4::model::Session s(model);
        std::vector<int32_t> prompt;
        for (int i = 3; i < argc; ++i) prompt.push_back(static_cast<int32_t>(std::atoi(argv[i])));
        std::vector<float> logits(static_cast<size_t>(s.n_vocab()));
        s.eval(prompt.data(), static_cast<int64_t>(prompt.size()), logits.data(), 1);
        for (float v : logits) std::printf("logit %.9g\n", v);
        std::printf("ids");
        for (int i = 0, n = std::atoi(argv[2]); i < n; ++i) {
            const auto id = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
            std::printf(" %d", id);
            s.eval(&id, 1, logits.data(), 1);
        }
        std::printf("\n");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "engine_check: %s\n", e.what());
        return 1;
    }
    return 0;
}
