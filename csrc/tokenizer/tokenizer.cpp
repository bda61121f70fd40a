// Tokenizer::from_gguf, the shared vocabulary / added-token code, and StreamDecoder.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <functional>

#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace ds4::tok {

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& file) {
    const gguf::Value* model = file.find("tokenizer.ggml.model");
    if (!model) throw Error(file.path() + ": no tokenizer.ggml.model in the GGUF metadata");
    const std::string& name = model->as_string();
    if (name == "llama") return make_spm(file);
    if (name == "gpt2") return make_bpe(file);
    throw Error(file.path() + ": tokenizer.ggml.model '" + name + "' is not supported (supported: llama, gpt2)");
}

const gguf::Array& meta_array(const gguf::File& f, const std::string& key, size_t expect_size) {
    const gguf::Value* v = f.find(key);
    if (!v) throw Error(f.path() + ": missing " + key);
    if (v->type != gguf::ValueType::ARRAY) throw Error(f.path() + ": " + key + " is not an array");
    const auto& arr = v->as_array();
    if (expect_size && arr.size() != expect_size)
        throw Error(f.path() + ": " + key + " has " + std::to_string(arr.size()) + " entries, tokenizer.ggml.tokens has " +
                    std::to_string(expect_size));
    return arr;
}

void VocabTokenizer::load_common(const gguf::File& f, bool add_bos_default) {
    const auto& toks = meta_array(f, "tokenizer.ggml.tokens", 0);
    if (toks.empty()) throw Error(f.path() + ": tokenizer.ggml.tokens is empty");
    if (toks.size() > (1u << 21)) throw Error(f.path() + ": tokenizer.ggml.tokens has more than 2^21 entries");
    size_t bytes = 0;
    for (size_t i = 0; i < toks.size(); ++i) bytes += toks.string_at(i).size();
    tokens_.reserve(toks.size(), bytes);
    for (size_t i = 0; i < toks.size(); ++i) tokens_.push_back(toks.string_at(i));
    types_.assign(tokens_.size(), kNormal);
    if (f.find("tokenizer.ggml.token_type")) {
        const auto& tt = meta_array(f, "tokenizer.ggml.token_type", tokens_.size());
        for (size_t i = 0; i < tt.size(); ++i) types_[i] = static_cast<int32_t>(tt.int_at(i));
    }
    auto id_key = [&](const char* key) -> int32_t {
        const gguf::Value* v = f.find(key);
        if (!v) return -1;
        int64_t id = v->as_int();
        if (id < 0 || id >= static_cast<int64_t>(tokens_.size()))
            throw Error(f.path() + ": " + key + " = " + std::to_string(id) + " is outside the vocabulary of " +
                        std::to_string(tokens_.size()));
        return static_cast<int32_t>(id);
    };
    bos_ = id_key("tokenizer.ggml.bos_token_id");
    eos_ = id_key("tokenizer.ggml.eos_token_id");
    unk_ = id_key("tokenizer.ggml.unknown_token_id");
    pad_ = id_key("tokenizer.ggml.padding_token_id");
    const gguf::Value* ab = f.find("tokenizer.ggml.add_bos_token");
    const gguf::Value* ae = f.find("tokenizer.ggml.add_eos_token");
    // HF (and llama.cpp) default: BOS for SentencePiece vocabularies, nothing for byte-level.
    add_bos_ = (ab ? ab->as_bool() : add_bos_default) && bos_ >= 0;
    add_eos_ = (ae ? ae->as_bool() : false) && eos_ >= 0;
}

StringIndex::StringIndex(StringTable keys) : keys_(std::move(keys)) {
    size_t cap = 16;
    while (cap < 2 * keys_.size()) cap *= 2;
    slots_.resize(cap);
    const size_t mask = cap - 1;
    for (size_t i = 0; i < keys_.size(); ++i) {
        const std::string_view k = keys_[i];
        const auto h = static_cast<uint32_t>(std::hash<std::string_view>{}(k));
        size_t at = h & mask;
        while (slots_[at].id >= 0 && !(slots_[at].hash == h && keys_[static_cast<size_t>(slots_[at].id)] == k))
            at = (at + 1) & mask;
        slots_[at] = Slot{h, static_cast<int32_t>(i)};
    }
}

int32_t StringIndex::find(std::string_view s) const {
    if (slots_.empty()) return -1;
    const auto h = static_cast<uint32_t>(std::hash<std::string_view>{}(s));
    const size_t mask = slots_.size() - 1;
    for (size_t at = h & mask; slots_[at].id >= 0; at = (at + 1) & mask)
        if (slots_[at].hash == h && keys_[static_cast<size_t>(slots_[at].id)] == s) return slots_[at].id;
    return -1;
}

void VocabTokenizer::add_added_token(std::string_view text, int32_t id, bool special) {
    if (text.empty()) return;
    uint32_t node = 0;
    for (unsigned char c : text) {
        uint64_t key = (static_cast<uint64_t>(node) << 8) | c;
        auto it = edges_.find(key);
        if (it == edges_.end()) {
            trie_.push_back(TrieNode{});
            it = edges_.emplace(key, static_cast<uint32_t>(trie_.size() - 1)).first;
        }
        node = it->second;
    }
    trie_[node].id = id;
    trie_[node].special = trie_[node].special || special;
    first_byte_[static_cast<unsigned char>(text[0])] = true;
}

std::vector<int32_t> VocabTokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
    std::vector<int32_t> out;
    if (add_special && add_bos_) out.push_back(bos_);
    size_t seg = 0;  // start of the text not yet tokenized
    size_t i = 0;
    while (i < text.size()) {
        if (!first_byte_[static_cast<unsigned char>(text[i])]) {
            ++i;
            continue;
        }
        // Longest added token starting at i.
        uint32_t node = 0;
        size_t best_len = 0;
        const TrieNode* best = nullptr;
        for (size_t j = i; j < text.size(); ++j) {
            auto it = edges_.find((static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(text[j]));
            if (it == edges_.end()) break;
            node = it->second;
            if (trie_[node].id >= 0) {
                best = &trie_[node];
                best_len = j + 1 - i;
            }
        }
        if (!best) {
            ++i;
            continue;
        }
        if (best->special && !parse_special) {
            i += best_len;  // stays text; scanning resumes after it, as HF's matcher does
            continue;
        }
        if (i > seg) encode_text(text.substr(seg, i - seg), seg == 0, out);
        out.push_back(best->id);
        i += best_len;
        seg = i;
    }
    if (text.size() > seg) encode_text(text.substr(seg), seg == 0, out);
    if (add_special && add_eos_) out.push_back(eos_);
    return out;
}

std::string VocabTokenizer::token_bytes(int32_t id) const {
    if (id < 0 || id >= vocab_size())
        throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary of " +
                                std::to_string(vocab_size()));
    return std::string(bytes_[static_cast<size_t>(id)]);
}

std::string VocabTokenizer::decode(const std::vector<int32_t>& ids) const {
    std::string out;
    for (int32_t id : ids) {
        if (id < 0 || id >= vocab_size()) token_bytes(id);  // throws
        out += bytes_[static_cast<size_t>(id)];
    }
    if (strip_leading_space_ && !out.empty() && out[0] == ' ') out.erase(0, 1);
    return out;
}

namespace {

// Examines the UTF-8 sequence at p[0..avail): returns its length if it is complete and valid;
// otherwise sets *cut (the bytes so far are a valid but unfinished prefix) or returns the
// negated length of its maximal valid prefix (one U+FFFD replaces it, as Python's "replace").
int check_utf8(const unsigned char* p, size_t avail, bool* cut) {
    *cut = false;
    int n = uni::utf8_seq_len(p[0]);
    if (n == 0) return -1;
    unsigned char lo = 0x80, hi = 0xBF;
    if (p[0] == 0xE0) lo = 0xA0;
    else if (p[0] == 0xED) hi = 0x9F;
    else if (p[0] == 0xF0) lo = 0x90;
    else if (p[0] == 0xF4) hi = 0x8F;
    for (int k = 1; k < n; ++k) {
        if (static_cast<size_t>(k) >= avail) {
            *cut = true;
            return 0;
        }
        unsigned char c = p[k];
        if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return -k;
    }
    return n;
}

const char kReplacement[] = "\xEF\xBF\xBD";

}  // namespace

std::string StreamDecoder::push(int32_t id) {
    std::string b = tok_.token_bytes(id);
    if (at_start_ && !b.empty()) {
        if (tok_.strips_leading_space() && b[0] == ' ') b.erase(0, 1);
        at_start_ = false;
    }
    pending_ += b;
    std::string out;
    const auto* p = reinterpret_cast<const unsigned char*>(pending_.data());
    size_t i = 0;
    while (i < pending_.size()) {
        bool cut = false;
        int r = check_utf8(p + i, pending_.size() - i, &cut);
        if (cut) break;  // hold the unfinished character back
        if (r > 0) {
            out.append(pending_, i, static_cast<size_t>(r));
            i += static_cast<size_t>(r);
        } else {
            out += kReplacement;
            i += static_cast<size_t>(-r);
        }
    }
    pending_.erase(0, i);
    return out;
}

std::string StreamDecoder::flush() {
    // What is held back is always one unfinished prefix: one U+FFFD.
    std::string out = pending_.empty() ? std::string() : std::string(kReplacement);
    pending_.clear();
    return out;
}

}  // namespace ds4::tok
