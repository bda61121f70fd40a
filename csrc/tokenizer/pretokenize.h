// Pre-tokenizer splits for byte-level BPE: the regexes HF tokenizers runs before BPE, written
// out by hand as small scanners (no regex engine). Each split covers the text exactly.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace ds4::tok {

enum class PreSplit {
    Gpt2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    Llama3,  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
             //   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
    Qwen2,   // as Llama3 with \p{N} (one digit per piece)
    Smollm,  // each \p{N} alone, then Gpt2 on the stretches between (SmolLM's tokenizer.json)
};

// Appends (byte offset, byte length) of each piece of `text` to `out`.
void pre_split(PreSplit kind, std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& out);

}  // namespace ds4::tok
