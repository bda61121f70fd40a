// Byte streams for a state snapshot saved outside the process (a prompt cache on disk): a Writer
// that either counts bytes (no buffer: the size a caller allocates) or fills a buffer of exactly
// that size, and a Reader that refuses to read past its end. Little-endian, as every CPU this
// engine runs on stores it; no padding, no alignment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ds4::state {

class Writer {
public:
    Writer() = default;                                      // counts only
    Writer(uint8_t* out, size_t cap) : out_(out), cap_(cap) {}

    size_t size() const { return n_; }
    void bytes(const void* p, size_t n) {
        if (out_) {
            if (n > cap_ - n_) throw std::logic_error("state Writer: more bytes than the size counted");
            std::memcpy(out_ + n_, p, n);
        }
        n_ += n;
    }
    template <class T>
    void put(T v) { bytes(&v, sizeof v); }

private:
    uint8_t* out_ = nullptr;
    size_t cap_ = 0, n_ = 0;
};

class Reader {
public:
    Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}

    size_t offset() const { return at_; }
    size_t left() const { return n_ - at_; }
    void bytes(void* out, size_t n, const char* what) {
        if (n > left()) {
            throw std::invalid_argument(std::string("state data is truncated: ") + what + " needs " + std::to_string(n) +
                                        " bytes at offset " + std::to_string(at_) + ", " + std::to_string(left()) + " left");
        }
        std::memcpy(out, p_ + at_, n);
        at_ += n;
    }
    template <class T>
    T get(const char* what) {
        T v;
        bytes(&v, sizeof v, what);
        return v;
    }

private:
    const uint8_t* p_;
    size_t n_, at_ = 0;
};

}  // namespace ds4::state
