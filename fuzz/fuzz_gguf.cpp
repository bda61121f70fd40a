// libFuzzer target for the GGUF reader.
//
// File::open takes a path (the reader mmaps), so each input is written to one memfd that is
// reused across runs and opened through /proc/self/fd/N: no disk I/O and no temp files left
// behind when the fuzzer is killed. After a successful open every metadata value is walked
// and every byte of every tensor's data is read, so ASan sees any pointer or extent the
// reader validated wrongly. gguf::Error is the expected outcome for most inputs; anything
// else (crash, sanitizer report, other exception) is a finding.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gguf/gguf.h"

namespace {

int g_fd = -1;
std::string g_path;

// Mixed into a volatile sink so the compiler cannot drop the reads.
uint64_t walk(const ds4::gguf::Value& v) {
    using ds4::gguf::ValueType;
    uint64_t h = static_cast<uint64_t>(v.type);
    switch (v.type) {
        case ValueType::STRING:
            for (char ch : v.str) h = h * 31 + static_cast<unsigned char>(ch);
            break;
        case ValueType::ARRAY:
            for (size_t k = 0; k < v.arr.size(); k++) {
                if (v.arr.elem_type() == ValueType::STRING)
                    for (char ch : v.arr.string_at(k)) h = h * 31 + static_cast<unsigned char>(ch);
                else if (v.arr.elem_type() == ValueType::ARRAY)
                    h = h * 31 + walk(v.arr.array_at(k));
                else
                    h = h * 31 + walk(v.arr[k]);
            }
            break;
        case ValueType::BOOL:
            h += v.as_bool();
            break;
        case ValueType::FLOAT32: case ValueType::FLOAT64:
            h += static_cast<uint64_t>(v.as_float() != 0);
            break;
        default:
            h += v.num.u;
            break;
    }
    return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (g_fd < 0) {
        g_fd = memfd_create("fuzz_gguf", MFD_CLOEXEC);
        if (g_fd < 0) {
            std::perror("memfd_create");
            std::abort();
        }
        g_path = "/proc/self/fd/" + std::to_string(g_fd);
    }
    if (ftruncate(g_fd, 0) != 0 || pwrite(g_fd, data, size, 0) != static_cast<ssize_t>(size)) {
        std::perror("memfd write");
        std::abort();
    }
    volatile uint64_t sink = 0;
    try {
        auto f = ds4::gguf::File::open(g_path);
        uint64_t h = f->version() + f->alignment() + f->data_offset();
        for (const auto& [key, value] : f->metadata()) h = h * 131 + key.size() + walk(value);
        for (const auto& t : f->tensors()) {
            h += static_cast<uint64_t>(t.n_elements());
            if (f->find_tensor(t.name) != &t) std::abort();  // the index must agree with the list
            for (uint64_t i = 0; i < t.nbytes; i++) h += t.data[i];
        }
        sink = h;
    } catch (const ds4::gguf::Error&) {
        // A clean rejection: what malformed input should produce.
    }
    (void)sink;
    return 0;
}
