// Hand-written scanners equivalent to the pre-tokenizer regexes in pretokenize.h, as
// Oniguruma (HF tokenizers) runs them: at each position the first alternative that matches
// wins, quantifiers are greedy and backtrack only where the regex would.
#include "tokenizer/pretokenize.h"

#include "tokenizer/unicode.h"

namespace ds4::tok {

namespace {

enum Cls : uint8_t { kLetter, kNumber, kSpace, kOther };

struct Chars {
    std::vector<uint32_t> cp;
    std::vector<uint32_t> off;  // byte offset of each code point; off[n] = text size
    std::vector<uint8_t> cls;

    explicit Chars(std::string_view text) {
        cp.reserve(text.size());
        off.reserve(text.size() + 1);
        cls.reserve(text.size());
        for (size_t i = 0; i < text.size();) {
            size_t len = 0;
            uint32_t c = uni::decode_utf8(text, i, &len);
            cp.push_back(c);
            off.push_back(static_cast<uint32_t>(i));
            Cls k = kOther;  // invalid bytes never occur in HF's str input; treat them as symbols
            if (c != uni::kInvalid) {
                uni::Cat cat = uni::category(c);
                if (uni::is_letter(cat)) k = kLetter;
                else if (uni::is_number(cat)) k = kNumber;
                else if (uni::is_white_space(c)) k = kSpace;
            }
            cls.push_back(k);
            i += len;
        }
        off.push_back(static_cast<uint32_t>(text.size()));
    }
    size_t size() const { return cp.size(); }
    size_t run(size_t i, Cls k) const {  // end of the run of class k starting at i
        while (i < cls.size() && cls[i] == k) ++i;
        return i;
    }
};

bool is_nl(uint32_t c) { return c == '\r' || c == '\n'; }

// Case-insensitive compare with an ASCII lowercase letter, using the simple case folds
// Oniguruma applies (U+017F LONG S folds to 's').
bool fold_eq(uint32_t c, char lower, bool icase) {
    if (c == static_cast<uint32_t>(lower)) return true;
    if (!icase) return false;
    if (c == static_cast<uint32_t>(lower - 'a' + 'A')) return true;
    return lower == 's' && c == 0x17F;
}

// 's|'t|'re|'ve|'m|'ll|'d at i: the number of code points matched, or 0.
size_t contraction(const Chars& ch, size_t i, bool icase) {
    if (ch.cp[i] != '\'' || i + 1 >= ch.size()) return 0;
    uint32_t a = ch.cp[i + 1];
    for (char c : {'s', 't', 'm', 'd'})
        if (fold_eq(a, c, icase)) return 2;
    if (i + 2 >= ch.size()) return 0;
    uint32_t b = ch.cp[i + 2];
    static const char kTwo[3][2] = {{'r', 'e'}, {'v', 'e'}, {'l', 'l'}};
    for (const auto& p : kTwo)
        if (fold_eq(a, p[0], icase) && fold_eq(b, p[1], icase)) return 3;
    return 0;
}

// \s+(?!\S)|\s+ at a whitespace run [i, j): all of it at the end of the text, else all but
// its last character (which goes with what follows), else the single character.
size_t space_run(const Chars& ch, size_t i) {
    size_t j = ch.run(i, kSpace);
    if (j == ch.size() || j - 1 == i) return j;
    return j - 1;
}

size_t match_gpt2(const Chars& ch, size_t i) {
    if (size_t n = contraction(ch, i, false)) return i + n;
    size_t n = ch.size();
    if (ch.cp[i] == ' ' && i + 1 < n && ch.cls[i + 1] != kSpace) return ch.run(i + 1, Cls(ch.cls[i + 1]));
    if (ch.cls[i] != kSpace) return ch.run(i, Cls(ch.cls[i]));
    return space_run(ch, i);
}

size_t match_llama3(const Chars& ch, size_t i, size_t max_digits) {
    if (size_t n = contraction(ch, i, true)) return i + n;
    size_t n = ch.size();
    uint32_t c = ch.cp[i];
    Cls k = Cls(ch.cls[i]);
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (k != kLetter && k != kNumber && !is_nl(c) && i + 1 < n && ch.cls[i + 1] == kLetter)
        return ch.run(i + 1, kLetter);
    if (k == kLetter) return ch.run(i, kLetter);
    // \p{N}{1,max}
    if (k == kNumber) {
        size_t j = i;
        while (j < n && j - i < max_digits && ch.cls[j] == kNumber) ++j;
        return j;
    }
    // " ?[^\s\p{L}\p{N}]+[\r\n]*"
    size_t j = 0;
    if (c == ' ' && i + 1 < n && ch.cls[i + 1] == kOther) j = ch.run(i + 1, kOther);
    else if (k == kOther) j = ch.run(i, kOther);
    if (j) {
        while (j < n && is_nl(ch.cp[j])) ++j;
        return j;
    }
    // \s*[\r\n]+ : through the last line break of the whitespace run
    size_t end = ch.run(i, kSpace);
    for (size_t m = end; m > i; --m)
        if (is_nl(ch.cp[m - 1])) return m;
    return space_run(ch, i);
}

}  // namespace

void pre_split(PreSplit kind, std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& out) {
    Chars ch(text);
    if (kind == PreSplit::Smollm) {
        // Digits(individual_digits) first: each number character is a piece of its own, and the
        // GPT-2 regex runs on each stretch between them as if it were the whole text.
        for (size_t i = 0; i < ch.size();) {
            if (ch.cls[i] == kNumber) {
                out.emplace_back(ch.off[i], ch.off[i + 1] - ch.off[i]);
                ++i;
                continue;
            }
            size_t j = i;
            while (j < ch.size() && ch.cls[j] != kNumber) ++j;
            const size_t first = out.size();
            pre_split(PreSplit::Gpt2, text.substr(ch.off[i], ch.off[j] - ch.off[i]), out);
            for (size_t k = first; k < out.size(); ++k) out[k].first += ch.off[i];
            i = j;
        }
        return;
    }
    for (size_t i = 0; i < ch.size();) {
        size_t j = kind == PreSplit::Gpt2 ? match_gpt2(ch, i) : match_llama3(ch, i, kind == PreSplit::Llama3 ? 3 : 1);
        out.emplace_back(ch.off[i], ch.off[j] - ch.off[i]);
        i = j;
    }
}

}  // namespace ds4::tok
