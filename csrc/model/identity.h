// What a drafter file records of its target model (docs/drafters.md: dflash.target.*), so that a
// drafter refuses a model it was not trained for: fingerprints of the vocabulary and of the
// trunk's geometry, 16 hex digits each (FNV-1a, 64 bits: a fingerprint, not a defence against a
// crafted collision).
#pragma once

#include <string>

#include "gguf/gguf.h"

namespace ds4::model {

struct Identity {
    std::string vocab;    // the vocabulary's size and every token's bytes
    std::string weights;  // the architecture and the names and shapes of the trunk's tensors
};

// Reads every token string of the file once (~6 ms for a 262k vocabulary): a loaded model
// computes it once (Model::identity).
Identity identity_of(const gguf::File& file);

}  // namespace ds4::model
