// Tokenizers built from GGUF metadata (tokenizer.ggml.*): SentencePiece-style ("llama")
// and byte-level BPE ("gpt2") with the pre-tokenizer of tokenizer.ggml.pre.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"

namespace ds4::tok {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class Tokenizer {
public:
    // Throws Error (naming the key) if the metadata is missing or inconsistent.
    static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& file);
    virtual ~Tokenizer() = default;

    // add_special: prepend BOS / append EOS as the add_bos_token / add_eos_token flags say.
    // parse_special: control and user-defined tokens written in the text become their ids.
    virtual std::vector<int32_t> encode(std::string_view text, bool add_special,
                                        bool parse_special) const = 0;
    // The bytes a token stands for (byte-fallback tokens give their single byte); special
    // tokens give their text. Throws std::out_of_range for an id outside the vocabulary.
    virtual std::string token_bytes(int32_t id) const = 0;
    // Concatenated token_bytes, with the leading-space rule of the model applied; may end in
    // an incomplete UTF-8 sequence only if the ids do.
    virtual std::string decode(const std::vector<int32_t>& ids) const = 0;

    virtual int32_t vocab_size() const = 0;
    virtual int32_t bos_id() const = 0;  // -1 if none
    virtual int32_t eos_id() const = 0;  // -1 if none
    // True when decode drops one leading space of the output (SentencePiece's prefix space).
    virtual bool strips_leading_space() const { return false; }
};

// Streaming detokeniser: feed ids one at a time; returns only complete UTF-8 text, holding a
// partial multi-byte sequence back until its last byte arrives.
class StreamDecoder {
public:
    explicit StreamDecoder(const Tokenizer& tok) : tok_(tok) {}
    std::string push(int32_t id);
    std::string flush();  // whatever is held back, invalid bytes replaced by U+FFFD

private:
    const Tokenizer& tok_;
    std::string pending_;  // decoded bytes not yet returned: an incomplete UTF-8 tail
    bool at_start_ = true;  // nothing decoded yet (the leading-space rule still applies)
};

}  // namespace ds4::tok
