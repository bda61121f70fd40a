// Unicode helpers; see unicode.h.
#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace ds4::tok::uni {

namespace {

const Range* find_range(const Range* table, size_t n, uint32_t cp) {
    const Range* end = table + n;
    const Range* it = std::upper_bound(table, end, cp, [](uint32_t v, const Range& r) { return v < r.lo; });
    if (it == table) return nullptr;
    --it;
    return cp <= it->hi ? it : nullptr;
}

// ASCII is most text; a direct table avoids the binary search for it.
struct AsciiCats {
    std::array<Cat, 128> cat{};
    AsciiCats() {
        for (uint32_t c = 0; c < 128; ++c) {
            const Range* r = find_range(kCategoryRanges, kCategoryRangeCount, c);
            cat[c] = r ? r->cat : Cat::Cn;
        }
    }
};

// bytes_to_unicode() of GPT-2: printable Latin-1 bytes map to themselves, the other 68 bytes
// to U+0100 onwards in byte order.
struct ByteMap {
    std::array<uint32_t, 256> to_cp{};
    std::array<int16_t, 324> to_byte{};  // indexed by code point, all < 0x144
    ByteMap() {
        to_byte.fill(-1);
        uint32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
            to_cp[b] = printable ? static_cast<uint32_t>(b) : next++;
            to_byte[to_cp[b]] = static_cast<int16_t>(b);
        }
    }
};

const ByteMap& byte_map() {
    static const ByteMap m;
    return m;
}

}  // namespace

Cat category(uint32_t cp) {
    static const AsciiCats ascii;
    if (cp < 128) return ascii.cat[cp];
    const Range* r = find_range(kCategoryRanges, kCategoryRangeCount, cp);
    return r ? r->cat : Cat::Cn;
}

bool is_white_space(uint32_t cp) {
    if (cp < 128) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
    return find_range(kWhiteSpaceRanges, kWhiteSpaceRangeCount, cp) != nullptr;
}

int utf8_seq_len(unsigned char c) {
    if (c < 0x80) return 1;
    if (c < 0xC2) return 0;
    if (c < 0xE0) return 2;
    if (c < 0xF0) return 3;
    if (c < 0xF5) return 4;
    return 0;
}

uint32_t decode_utf8(std::string_view s, size_t i, size_t* len) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
    size_t avail = s.size() - i;
    int n = utf8_seq_len(p[0]);
    *len = 1;
    if (n == 1) return p[0];
    if (n == 0 || static_cast<size_t>(n) > avail) return kInvalid;
    uint32_t cp = p[0] & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
        if ((p[k] & 0xC0) != 0x80) return kInvalid;
        cp = (cp << 6) | (p[k] & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp < 0xE000))
        return kInvalid;
    *len = static_cast<size_t>(n);
    return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

uint32_t byte_to_cp(uint8_t b) { return byte_map().to_cp[b]; }

int cp_to_byte(uint32_t cp) {
    const ByteMap& m = byte_map();
    return cp < m.to_byte.size() ? m.to_byte[cp] : -1;
}

}  // namespace ds4::tok::uni
