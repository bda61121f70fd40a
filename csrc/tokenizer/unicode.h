// Unicode helpers for the tokenizers: lenient UTF-8 decoding, general categories (generated
// table in unicode_tables.cpp), White_Space, and GPT-2's byte <-> printable-character map.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ds4::tok::uni {

enum class Cat : uint8_t {
    Cn, Lu, Ll, Lt, Lm, Lo, Mn, Mc, Me, Nd, Nl, No, Pc, Pd, Ps, Pe,
    Pi, Pf, Po, Sm, Sc, Sk, So, Zs, Zl, Zp, Cc, Cf, Cs, Co,
};

struct Range {
    uint32_t lo, hi;
    Cat cat;
};

extern const Range kCategoryRanges[];
extern const size_t kCategoryRangeCount;
extern const Range kWhiteSpaceRanges[];
extern const size_t kWhiteSpaceRangeCount;

Cat category(uint32_t cp);
inline bool is_letter(Cat c) { return c >= Cat::Lu && c <= Cat::Lo; }
inline bool is_number(Cat c) { return c >= Cat::Nd && c <= Cat::No; }
bool is_white_space(uint32_t cp);  // \s as Oniguruma (HF tokenizers) reads it

// Decodes one code point at s[i]; `len` gets its byte length. Invalid or truncated UTF-8
// decodes as one byte with code point kInvalid, so any input can be walked without throwing.
constexpr uint32_t kInvalid = 0xFFFFFFFF;
uint32_t decode_utf8(std::string_view s, size_t i, size_t* len);
void append_utf8(std::string& out, uint32_t cp);
// Length of the UTF-8 sequence that the lead byte c starts (1..4), 0 for a continuation or
// invalid lead byte.
int utf8_seq_len(unsigned char c);

// GPT-2 byte-level alphabet: every byte maps to one printable code point.
uint32_t byte_to_cp(uint8_t b);
int cp_to_byte(uint32_t cp);  // -1 if cp is not in the alphabet

}  // namespace ds4::tok::uni
