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

#include "tokenizer/bpe_merge.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace ds4::tok {

namespace {

const char kSpaceMark[] = "\xE2\x96\x81";  // U+2581

// Python's str.isspace(): White_Space plus the four information separators.
bool py_isspace(uint32_t cp) { return uni::is_white_space(cp) || (cp >= 0x1C && cp <= 0x1F); }

int hex_digit(char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }  // c is a hex digit

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
        StringTable text;
        text.reserve(n, tokens_.bytes() + 64);
        std::string respelled;
        for (size_t i = 0; i < n; ++i) {
            const std::string_view t = tokens_[i];
            if (!gemma_ || t.find(' ') == std::string_view::npos) {
                text.push_back(t);
                continue;
            }
            bool all_space = true;
            size_t chars = 0;
            for (size_t k = 0; k < t.size(); ++chars) {
                size_t len = 0;
                uint32_t cp = uni::decode_utf8(t, k, &len);
                all_space = all_space && cp != uni::kInvalid && py_isspace(cp);
                k += len;
            }
            respelled.clear();
            for (size_t k = 0; all_space && k < chars; ++k) respelled += kSpaceMark;
            text.push_back(all_space ? std::string_view(respelled) : t);
        }
        // Lookup by spelling; a later duplicate wins (a Python dict built in file order).
        id_of_ = StringIndex(std::move(text));
        std::vector<int32_t> last(n), first(n, -1);  // per id: its spelling's last and first ids
        for (size_t i = 0; i < n; ++i) {
            last[i] = id_of_.find(id_of_.keys()[i]);
            if (first[static_cast<size_t>(last[i])] < 0) first[static_cast<size_t>(last[i])] = static_cast<int32_t>(i);
        }

        std::vector<float> scores(n, 0.0f);
        if (!gemma_) {
            const auto& sc = meta_array(f, "tokenizer.ggml.scores", n);
            for (size_t i = 0; i < n; ++i) scores[i] = static_cast<float>(sc.float_at(i));
        }
        order_.assign(n, 0);
        std::vector<int32_t> canon;  // ids that their spelling maps to
        canon.reserve(n);
        for (size_t i = 0; i < n; ++i) {
            if (last[i] != static_cast<int32_t>(i)) continue;
            canon.push_back(static_cast<int32_t>(i));
            order_[i] = static_cast<uint32_t>(first[i]);
        }
        // Dense rank of the merged token's score, best first (ties share a rank).
        auto score = [&](int32_t t) { return gemma_ ? -static_cast<double>(t) : static_cast<double>(scores[t]); };
        auto better = [&](int32_t x, int32_t y) { return score(x) > score(y); };
        // Gemma's order is file order, which canon already has: skip the O(n log n) sort.
        if (!std::is_sorted(canon.begin(), canon.end(), better)) std::stable_sort(canon.begin(), canon.end(), better);
        score_rank_.assign(n, 0);
        uint32_t rank = 0;
        for (size_t k = 0; k < canon.size(); ++k) {
            if (k > 0 && score(canon[k]) != score(canon[k - 1])) ++rank;
            score_rank_[canon[k]] = rank;
        }

        bytes_.reserve(n, id_of_.keys().bytes());
        std::string b;
        for (size_t i = 0; i < n; ++i) {
            const std::string_view t = id_of_.keys()[i];
            b.clear();
            if (t.size() == 6 && t.substr(0, 3) == "<0x" && std::isxdigit(static_cast<unsigned char>(t[3])) &&
                std::isxdigit(static_cast<unsigned char>(t[4])) && t[5] == '>') {
                b += static_cast<char>(hex_digit(t[3]) << 4 | hex_digit(t[4]));
            } else {
                for (size_t k = 0; k < t.size();) {
                    const size_t mark = std::min(t.find(kSpaceMark, k), t.size());
                    b.append(t, k, mark - k);
                    if (mark == t.size()) break;
                    b += ' ';
                    k = mark + 3;
                }
            }
            bytes_.push_back(b);
        }
        for (int c = 0; c < 256; ++c) {
            char name[8];
            std::snprintf(name, sizeof name, "<0x%02X>", c);
            byte_tok_[c] = id_of_.find(name);
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
            if (id_of_.keys()[i] != tokens_[i] || !(listed || types_[i] == kControl || types_[i] == kUserDefined))
                continue;
            add_added_token(tokens_[i], id_of_.find(tokens_[i]), listed || types_[i] == kControl);
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
                const int32_t id = id_of_.find(std::string_view(norm).substr(i, len));
                if (id >= 0) {
                    syms.push_back(BpeSymbol{id, s, e, 1, true});
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
                const int32_t t = id_of_.find(std::string_view(norm).substr(l.start, r.end - l.start));
                if (t < 0) return false;
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
    StringIndex id_of_;  // keyed by HF's spelling of each token
    std::vector<uint32_t> score_rank_, order_;
    int32_t byte_tok_[256];
};

}  // namespace

std::unique_ptr<Tokenizer> make_spm(const gguf::File& f) { return std::make_unique<SpmTokenizer>(f); }

}  // namespace ds4::tok
