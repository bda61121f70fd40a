// SentencePiece-style BPE ("llama" in tokenizer.ggml.model), as transformers builds it from a
// GGUF: spaces become U+2581, and pairs merge in the order HF's generate_merges derives from
// the vocabulary. That order sorts every split (left, right) of every token by the merged
// token's score (Gemma: its position in the file instead), then longer left piece, longer right
// piece, then file order. Rather than materialise those merges (millions for a 262k vocabulary)
// a pair's rank is computed when it is looked at: its concatenation is a token or it is no merge.
// Characters without a token fall back to <0xNN> byte tokens.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <unordered_map>

#include "tokenizer/bpe_merge.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace ds4::tok {

namespace {

const char kSpaceMark[] = "\xE2\x96\x81";  // U+2581

// Python's str.isspace(): White_Space plus the four information separators.
bool py_isspace(uint32_t cp) { return uni::is_white_space(cp) || (cp >= 0x1C && cp <= 0x1F); }

class SpmTokenizer final : public VocabTokenizer {
public:
    explicit SpmTokenizer(const gguf::File& f) {
        const gguf::Value* arch = f.find("general.architecture");
        std::string a = arch ? arch->as_string() : "";
        gemma_ = a == "gemma" || a == "gemma2" || a == "gemma3";
        load_common(f, /*add_bos_default=*/true);
        const size_t n = tokens_.size();

        // Gemma files store tokens of several spaces as real spaces; HF respells every
        // all-whitespace token that has a space as that many U+2581.
        text_.resize(n);
        for (size_t i = 0; i < n; ++i) {
            text_[i] = tokens_[i];
            if (!gemma_ || tokens_[i].find(' ') == std::string::npos) continue;
            bool all_space = true;
            size_t chars = 0;
            for (size_t k = 0; k < tokens_[i].size(); ++chars) {
                size_t len = 0;
                uint32_t cp = uni::decode_utf8(tokens_[i], k, &len);
                all_space = all_space && cp != uni::kInvalid && py_isspace(cp);
                k += len;
            }
            if (all_space) {
                text_[i].clear();
                for (size_t k = 0; k < chars; ++k) text_[i] += kSpaceMark;
            }
        }
        // Lookup by spelling; a later duplicate wins (a Python dict built in file order).
        id_of_.reserve(n * 2);
        std::unordered_map<std::string_view, int32_t> first;
        first.reserve(n * 2);
        for (size_t i = 0; i < n; ++i) {
            id_of_[text_[i]] = static_cast<int32_t>(i);
            first.emplace(text_[i], static_cast<int32_t>(i));
        }

        std::vector<float> scores(n, 0.0f);
        if (!gemma_) {
            const auto& sc = meta_array(f, "tokenizer.ggml.scores", n);
            for (size_t i = 0; i < n; ++i) scores[i] = static_cast<float>(sc[i].as_float());
        }
        order_.assign(n, 0);
        std::vector<int32_t> canon;  // ids that their spelling maps to
        for (size_t i = 0; i < n; ++i) {
            if (id_of_[text_[i]] != static_cast<int32_t>(i)) continue;
            canon.push_back(static_cast<int32_t>(i));
            order_[i] = static_cast<uint32_t>(first[text_[i]]);
        }
        // Dense rank of the merged token's score, best first (ties share a rank).
        auto score = [&](int32_t t) { return gemma_ ? -static_cast<double>(t) : static_cast<double>(scores[t]); };
        std::stable_sort(canon.begin(), canon.end(), [&](int32_t x, int32_t y) { return score(x) > score(y); });
        score_rank_.assign(n, 0);
        uint32_t rank = 0;
        for (size_t k = 0; k < canon.size(); ++k) {
            if (k > 0 && score(canon[k]) != score(canon[k - 1])) ++rank;
            score_rank_[canon[k]] = rank;
        }

        bytes_.resize(n);
        for (size_t i = 0; i < n; ++i) {
            const std::string& t = text_[i];
            unsigned hex = 0;
            char tail = 0;
            if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && std::sscanf(t.c_str() + 3, "%2x%c", &hex, &tail) == 2 &&
                tail == '>' && std::isxdigit(static_cast<unsigned char>(t[3])) && std::isxdigit(static_cast<unsigned char>(t[4]))) {
                bytes_[i] = std::string(1, static_cast<char>(hex));
                continue;
            }
            std::string& b = bytes_[i];
            for (size_t k = 0; k < t.size();) {
                if (t.compare(k, 3, kSpaceMark) == 0) {
                    b += ' ';
                    k += 3;
                } else {
                    b += t[k++];
                }
            }
        }
        for (int b = 0; b < 256; ++b) {
            char name[8];
            std::snprintf(name, sizeof name, "<0x%02X>", b);
            auto it = id_of_.find(name);
            byte_tok_[b] = it == id_of_.end() ? -1 : it->second;
        }
        // LlamaTokenizer prepends U+2581 (Metaspace, prepend_scheme "first") and its decoder
        // strips one leading space; GemmaTokenizer does neither.
        strip_leading_space_ = !gemma_;

        // Added tokens: control ones special, user-defined ones plain; respelled ones are not
        // in HF's vocabulary under their file spelling, so transformers skips them.
        for (size_t i = 0; i < n; ++i) {
            bool listed = static_cast<int32_t>(i) == bos_ || static_cast<int32_t>(i) == eos_ ||
                          static_cast<int32_t>(i) == unk_ || static_cast<int32_t>(i) == pad_ ||
                          (gemma_ && tokens_[i] == "<mask>");  // GemmaTokenizer's default mask token
            if (text_[i] != tokens_[i] || !(listed || types_[i] == kControl || types_[i] == kUserDefined)) continue;
            add_added_token(tokens_[i], id_of_[tokens_[i]], listed || types_[i] == kControl);
        }
    }

protected:
    void encode_text(std::string_view text, bool at_start, std::vector<int32_t>& out) const override {
        std::string norm;
        norm.reserve(text.size() + 8);
        if (!gemma_ && at_start && text[0] != ' ' && text.substr(0, 3) != kSpaceMark) norm += kSpaceMark;
        for (char c : text) {
            if (c == ' ') norm += kSpaceMark;
            else norm += c;
        }
        std::vector<BpeSymbol> syms;
        syms.reserve(norm.size());
        for (size_t i = 0; i < norm.size();) {
            size_t len = 0;
            uint32_t cp = uni::decode_utf8(norm, i, &len);
            const uint32_t s = static_cast<uint32_t>(i), e = static_cast<uint32_t>(i + len);
            if (cp != uni::kInvalid) {
                auto it = id_of_.find(std::string_view(norm).substr(i, len));
                if (it != id_of_.end()) {
                    syms.push_back(BpeSymbol{it->second, s, e, 1, true});
                    i += len;
                    continue;
                }
            }
            bool all_bytes = true;
            for (size_t k = i; k < i + len; ++k) all_bytes = all_bytes && byte_tok_[static_cast<unsigned char>(norm[k])] >= 0;
            if (all_bytes) {
                for (size_t k = i; k < i + len; ++k)
                    syms.push_back(BpeSymbol{byte_tok_[static_cast<unsigned char>(norm[k])], static_cast<uint32_t>(k),
                                             static_cast<uint32_t>(k + 1), 1, false});
            } else if (unk_ >= 0) {
                if (!syms.empty() && !syms.back().mergeable && syms.back().id == unk_ && syms.back().end == s)
                    syms.back().end = e;  // fuse_unk: a run of unknowns is one <unk>
                else
                    syms.push_back(BpeSymbol{unk_, s, e, 1, false});
            }
            i += len;
        }
        bpe_merge(
            syms,
            [this, &norm](const BpeSymbol& l, const BpeSymbol& r, PairRank* pr) {
                auto it = id_of_.find(std::string_view(norm).substr(l.start, r.end - l.start));
                if (it == id_of_.end()) return false;
                const int32_t t = it->second;
                const uint64_t nl = std::min<uint32_t>(l.nchars, 0xFFFF), nr = std::min<uint32_t>(r.nchars, 0xFFFF);
                pr->a = (static_cast<uint64_t>(score_rank_[t]) << 32) | ((0xFFFF - nl) << 16) | (0xFFFF - nr);
                pr->b = (static_cast<uint64_t>(order_[t]) << 42) | (static_cast<uint64_t>(l.id) << 21) |
                        static_cast<uint64_t>(r.id);
                pr->new_id = t;
                return true;
            },
            out);
    }

private:
    bool gemma_ = false;
    std::vector<std::string> text_;  // HF's spelling of each token
    std::unordered_map<std::string_view, int32_t> id_of_;
    std::vector<uint32_t> score_rank_, order_;
    int32_t byte_tok_[256];
};

}  // namespace

std::unique_ptr<Tokenizer> make_spm(const gguf::File& f) { return std::make_unique<SpmTokenizer>(f); }

}  // namespace ds4::tok
