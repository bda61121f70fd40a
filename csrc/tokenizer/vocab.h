// Shared base of the GGUF tokenizers: the vocabulary, BOS/EOS flags, and the added-token
// splitter (control and user-defined tokens matched whole in the text before the model sees
// it, as HF's AddedVocabulary does: leftmost-longest over the raw text).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace ds4::tok {

// Many short strings in one buffer: a 262k-token vocabulary as two allocations, not 262k.
class StringTable {
public:
    void reserve(size_t n, size_t bytes) {
        ends_.reserve(n);
        blob_.reserve(bytes);
    }
    void push_back(std::string_view s) {
        blob_.append(s);
        ends_.push_back(blob_.size());
    }
    size_t size() const { return ends_.size(); }
    size_t bytes() const { return blob_.size(); }
    std::string_view operator[](size_t i) const {
        const size_t begin = i ? ends_[i - 1] : 0;
        return {blob_.data() + begin, ends_[i] - begin};
    }

private:
    std::string blob_;
    std::vector<size_t> ends_;  // entry i is blob_[ends_[i-1], ends_[i])
};

// Spelling -> id over its own StringTable, by open addressing in one flat array: a node-based
// std::unordered_map costs an allocation per token to build and a cache miss per hop to probe.
class StringIndex {
public:
    StringIndex() = default;
    // Indexes entry i of `keys` as id i; a later duplicate replaces an earlier one (as a
    // Python dict built in file order).
    explicit StringIndex(StringTable keys);
    const StringTable& keys() const { return keys_; }
    int32_t find(std::string_view s) const;  // -1 if absent

private:
    struct Slot {
        uint32_t hash = 0;
        int32_t id = -1;  // -1: empty
    };
    StringTable keys_;
    std::vector<Slot> slots_;  // a power of two, at most half full
};

// llama.cpp's token types (tokenizer.ggml.token_type).
enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

class VocabTokenizer : public Tokenizer {
public:
    std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const override;
    std::string token_bytes(int32_t id) const override;
    std::string decode(const std::vector<int32_t>& ids) const override;
    int32_t vocab_size() const override { return static_cast<int32_t>(bytes_.size()); }
    int32_t bos_id() const override { return bos_; }
    int32_t eos_id() const override { return eos_; }
    bool strips_leading_space() const override { return strip_leading_space_; }

protected:
    // Reads the common metadata: token list (into `tokens`), types, BOS/EOS ids and flags.
    void load_common(const gguf::File& f, bool add_bos_default);
    // Registers token `id` as an added token matched by `text`; `special` ones are only
    // matched when parse_special is set (HF: split_special_tokens=False).
    void add_added_token(std::string_view text, int32_t id, bool special);
    // Tokenizes text between added tokens. `at_start`: the piece begins the input.
    virtual void encode_text(std::string_view text, bool at_start, std::vector<int32_t>& out) const = 0;

    StringTable tokens_;  // as the GGUF spells them
    std::vector<int32_t> types_;
    StringTable bytes_;   // what each id decodes to
    int32_t bos_ = -1, eos_ = -1, unk_ = -1, pad_ = -1;
    bool add_bos_ = false, add_eos_ = false;
    bool strip_leading_space_ = false;

private:
    struct TrieNode {
        int32_t id = -1;  // token ending here
        bool special = false;
    };
    std::vector<TrieNode> trie_{TrieNode{}};
    std::unordered_map<uint64_t, uint32_t> edges_;  // (node << 8 | byte) -> child node
    bool first_byte_[256] = {};
};

// Builders (spm.cpp, bpe.cpp).
std::unique_ptr<Tokenizer> make_spm(const gguf::File& f);
std::unique_ptr<Tokenizer> make_bpe(const gguf::File& f);

// Helpers for reading metadata arrays.
const gguf::Array& meta_array(const gguf::File& f, const std::string& key, size_t expect_size);

}  // namespace ds4::tok
