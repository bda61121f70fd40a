// GGUF v2/v3 reader: maps the file read-only, parses header, metadata and tensor directory,
// and validates every count, length, offset and extent against the file size before use.
//
// Layout (all little-endian):
//   "GGUF" u32 version  u64 n_tensors  u64 n_kv
//   n_kv     × { string key, u32 value_type, value }
//   n_tensors× { string name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset }
//   padding to general.alignment, then the data section (tensor offsets are relative to it)
// where string = u64 length + bytes, and an array value = u32 elem_type, u64 count, elements.
#include "gguf/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "platform/huge_map.h"
#include "quant/types.h"

namespace ds4::gguf {

namespace {

constexpr int kMaxDims = 4;         // ggml tensors have at most 4 dimensions
constexpr int kMaxArrayDepth = 16;  // nested arrays deeper than this are not a real model
// Arrays of scalars and strings stay in the map, but a consumer may still expand every element
// (inspect() builds a Python list; nested arrays are parsed Values), so a corrupt count that is
// merely bounded by the file size could ask for many times the file in memory. Real
// vocabularies are under 1M entries; 2^25 array elements per file is far above any model.
constexpr uint64_t kMaxArrayElements = uint64_t{1} << 25;
// Counts are only bounds until the entries are read: reserve no more than this up front.
constexpr uint64_t kMaxReserve = 4096;

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return buf;
}

// Minimum encoded size of a value of type t, used to bound element counts before allocating.
uint64_t min_encoded_size(ValueType t) {
    switch (t) {
        case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
        case ValueType::UINT16: case ValueType::INT16: return 2;
        case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
        case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
        case ValueType::STRING: return 8;
        case ValueType::ARRAY: return 12;
    }
    return 1;
}

bool valid_utf8(const std::string& s) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    size_t n = s.size(), i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t len;
        uint32_t cp;
        if (c < 0x80) { i++; continue; }
        if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
        else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
        else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
        else return false;
        if (i + len > n) return false;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        // Reject overlong forms, surrogates and code points past U+10FFFF.
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
            return false;
        i += len;
    }
    return true;
}

// Bounds-checked reader over one mapped file. Every read names the field it is reading so
// that a failure says what was being parsed and where.
class Cursor {
public:
    Cursor(const std::string& path, const uint8_t* base, uint64_t size)
        : path_(path), base_(base), size_(size) {}

    uint64_t array_elements = 0;  // read so far in this file, against kMaxArrayElements

    uint64_t pos() const { return pos_; }
    uint64_t remaining() const { return size_ - pos_; }

    [[noreturn]] void fail(uint64_t at, const std::string& field, const std::string& what) const {
        throw Error(format("%s: %s at byte %" PRIu64 ": %s", path_.c_str(), field.c_str(), at, what.c_str()));
    }

    // `suffix` is appended to `field` only when failing, so per-element reads build no strings.
    void need(uint64_t n, const std::string& field, const char* suffix = "") const {
        if (n > remaining())
            fail(pos_, field + suffix,
                 format("truncated: needs %" PRIu64 " bytes, only %" PRIu64 " left in the %" PRIu64 "-byte file", n,
                        remaining(), size_));
    }

    template <typename T>
    T read(const std::string& field, const char* suffix = "") {
        need(sizeof(T), field, suffix);
        T v;
        std::memcpy(&v, base_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }

    // Steps over one length-prefixed string; returns where its bytes start.
    const uint8_t* skip_string(const std::string& field) {
        uint64_t at = pos_;
        uint64_t len = read<uint64_t>(field, " length");
        if (len > remaining())
            fail(at, field, format("string length %" PRIu64 " runs past the end of the file (%" PRIu64 " bytes left)",
                                   len, remaining()));
        const uint8_t* p = base_ + pos_;
        pos_ += len;
        return p;
    }

    std::string read_string(const std::string& field) {
        uint64_t start = pos_;
        const uint8_t* p = skip_string(field);
        return std::string(reinterpret_cast<const char*>(p), pos_ - start - sizeof(uint64_t));
    }

    const uint8_t* here() const { return base_ + pos_; }
    void skip(uint64_t n) { pos_ += n; }  // n already checked with need()

private:
    const std::string& path_;
    const uint8_t* base_;
    uint64_t size_;
    uint64_t pos_ = 0;
};

// A scalar of type t from its encoding at p (bounds already checked).
Value scalar_at(ValueType t, const uint8_t* p) {
    Value v;
    v.type = t;
    auto get = [p](auto x) {
        std::memcpy(&x, p, sizeof x);
        return x;
    };
    switch (t) {
        case ValueType::UINT8: v.num.u = get(uint8_t{}); break;
        case ValueType::INT8: v.num.i = get(int8_t{}); break;
        case ValueType::UINT16: v.num.u = get(uint16_t{}); break;
        case ValueType::INT16: v.num.i = get(int16_t{}); break;
        case ValueType::UINT32: v.num.u = get(uint32_t{}); break;
        case ValueType::INT32: v.num.i = get(int32_t{}); break;
        case ValueType::UINT64: v.num.u = get(uint64_t{}); break;
        case ValueType::INT64: v.num.i = get(int64_t{}); break;
        case ValueType::FLOAT32: v.num.f = get(float{}); break;
        case ValueType::FLOAT64: v.num.f = get(double{}); break;
        case ValueType::BOOL: v.num.b = *p != 0; break;
        case ValueType::STRING: case ValueType::ARRAY: break;  // not scalars
    }
    return v;
}

Value read_value(Cursor& c, ValueType type, const std::string& field, int depth) {
    Value v;
    v.type = type;
    switch (type) {
        case ValueType::STRING: v.str = c.read_string(field); break;
        case ValueType::BOOL: {
            uint64_t at = c.pos();
            uint8_t b = c.read<uint8_t>(field);
            if (b > 1) c.fail(at, field, format("bool value %u is neither 0 nor 1", b));
            v.num.b = b != 0;
            break;
        }
        case ValueType::ARRAY: {
            if (depth >= kMaxArrayDepth) c.fail(c.pos(), field, "arrays nested too deeply");
            uint64_t at = c.pos();
            uint32_t et = c.read<uint32_t>(field + " element type");
            if (et > static_cast<uint32_t>(ValueType::FLOAT64))
                c.fail(at, field, format("unknown array element type %u", et));
            const auto elem = static_cast<ValueType>(et);
            at = c.pos();
            uint64_t count = c.read<uint64_t>(field + " element count");
            uint64_t min_size = min_encoded_size(elem);
            if (count > c.remaining() / min_size)
                c.fail(at, field, format("array of %" PRIu64 " %s elements cannot fit in the %" PRIu64 " bytes left",
                                         count, value_type_name(elem), c.remaining()));
            if (count > kMaxArrayElements - c.array_elements)
                c.fail(at, field, format("array of %" PRIu64 " %s elements exceeds the limit of %" PRIu64
                                         " array elements per file",
                                         count, value_type_name(elem), kMaxArrayElements));
            c.array_elements += count;
            const uint8_t* data = c.here();
            if (elem == ValueType::STRING) {
                // Validate every length first, so the offsets are allocated only for a sound array.
                for (uint64_t k = 0; k < count; k++) c.skip_string(field);
                std::vector<uint64_t> offsets(count + 1);
                uint64_t off = 0;
                for (uint64_t k = 0; k < count; k++) {
                    offsets[k] = off;
                    uint64_t len;
                    std::memcpy(&len, data + off, sizeof len);
                    off += sizeof len + len;
                }
                offsets[count] = off;
                v.arr = Array(data, std::move(offsets));
            } else if (elem == ValueType::ARRAY) {
                std::vector<Value> nested;
                nested.reserve(std::min(count, kMaxReserve));
                for (uint64_t k = 0; k < count; k++) nested.push_back(read_value(c, elem, field, depth + 1));
                v.arr = Array(std::move(nested));
            } else {
                // count * size fits: count <= remaining / size was checked above.
                if (elem == ValueType::BOOL) {
                    for (uint64_t k = 0; k < count; k++)
                        if (data[k] > 1)
                            c.fail(c.pos() + k, field, format("bool value %u is neither 0 nor 1", data[k]));
                }
                c.skip(count * min_size);
                v.arr = Array(elem, count, data);
            }
            break;
        }
        default: {
            const uint64_t size = min_encoded_size(type);  // a scalar's exact size
            c.need(size, field);
            v = scalar_at(type, c.here());
            c.skip(size);
            break;
        }
    }
    return v;
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// "<prefix>-00001-of-00003.gguf" -> ("<prefix>", 3); count 0 if the name is not the first part
// of a split. Parsed by hand: sscanf's %d would accept signs and spaces.
std::pair<std::string, int> split_name(const std::string& path) {
    const size_t kTail = 20;  // -NNNNN-of-NNNNN.gguf
    if (path.size() <= kTail) return {"", 0};
    const char* t = path.c_str() + path.size() - kTail;
    auto number = [](const char* p) {
        int n = 0;
        for (int i = 0; i < 5; i++) {
            if (p[i] < '0' || p[i] > '9') return -1;
            n = n * 10 + (p[i] - '0');
        }
        return n;
    };
    int no = number(t + 1), count = number(t + 10);
    if (t[0] != '-' || std::memcmp(t + 6, "-of-", 4) != 0 || std::memcmp(t + 15, ".gguf", 5) != 0 || no != 1 ||
        count < 1)
        return {"", 0};
    return {path.substr(0, path.size() - kTail), count};
}

// A split bookkeeping value as a signed integer; any integer type is accepted (gguf-py writes
// uint16 / int32), anything else is an error that names the file.
int64_t split_key(const std::string& path, const Value& v, const char* key) {
    if (v.is_integer()) {
        try {
            return v.as_int();
        } catch (const Error&) {
            // a uint64 above INT64_MAX: report it below like any other bad value
        }
    }
    throw Error(path + ": metadata '" + key + "' must be an integer, found " +
                (v.is_integer() ? std::string("an out-of-range value") : std::string(value_type_name(v.type))));
}

}  // namespace

const char* value_type_name(ValueType t) {
    switch (t) {
        case ValueType::UINT8: return "uint8";
        case ValueType::INT8: return "int8";
        case ValueType::UINT16: return "uint16";
        case ValueType::INT16: return "int16";
        case ValueType::UINT32: return "uint32";
        case ValueType::INT32: return "int32";
        case ValueType::FLOAT32: return "float32";
        case ValueType::BOOL: return "bool";
        case ValueType::STRING: return "string";
        case ValueType::ARRAY: return "array";
        case ValueType::UINT64: return "uint64";
        case ValueType::INT64: return "int64";
        case ValueType::FLOAT64: return "float64";
    }
    return "?";
}

bool Value::is_integer() const {
    switch (type) {
        case ValueType::UINT8: case ValueType::INT8: case ValueType::UINT16: case ValueType::INT16:
        case ValueType::UINT32: case ValueType::INT32: case ValueType::UINT64: case ValueType::INT64:
            return true;
        default:
            return false;
    }
}

static bool is_unsigned(ValueType t) {
    return t == ValueType::UINT8 || t == ValueType::UINT16 || t == ValueType::UINT32 || t == ValueType::UINT64;
}

int64_t Value::as_int() const {
    if (!is_integer()) throw Error(std::string("expected an integer, found ") + value_type_name(type));
    if (is_unsigned(type) && num.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw Error("integer value too large");
    return is_unsigned(type) ? static_cast<int64_t>(num.u) : num.i;
}

uint64_t Value::as_uint() const {
    if (!is_integer()) throw Error(std::string("expected an integer, found ") + value_type_name(type));
    if (!is_unsigned(type) && num.i < 0) throw Error("expected a non-negative integer");
    return is_unsigned(type) ? num.u : static_cast<uint64_t>(num.i);
}

double Value::as_float() const {
    if (is_float()) return num.f;
    if (is_integer()) return is_unsigned(type) ? static_cast<double>(num.u) : static_cast<double>(num.i);
    throw Error(std::string("expected a number, found ") + value_type_name(type));
}

bool Value::as_bool() const {
    if (type != ValueType::BOOL) throw Error(std::string("expected a bool, found ") + value_type_name(type));
    return num.b;
}

const std::string& Value::as_string() const {
    if (type != ValueType::STRING) throw Error(std::string("expected a string, found ") + value_type_name(type));
    return str;
}

const Array& Value::as_array() const {
    if (type != ValueType::ARRAY) throw Error(std::string("expected an array, found ") + value_type_name(type));
    return arr;
}

Array::Array(ValueType elem_type, size_t count, const uint8_t* data)
    : elem_type_(elem_type), size_(count), data_(data) {}

Array::Array(const uint8_t* data, std::vector<uint64_t> offsets)
    : elem_type_(ValueType::STRING), size_(offsets.size() - 1), data_(data), offsets_(std::move(offsets)) {}

Array::Array(std::vector<Value> nested)
    : elem_type_(ValueType::ARRAY), size_(nested.size()), nested_(std::move(nested)) {}

Value Array::operator[](size_t i) const {
    switch (elem_type_) {
        case ValueType::STRING: {
            Value v;
            v.type = ValueType::STRING;
            v.str = std::string(string_at(i));
            return v;
        }
        case ValueType::ARRAY: return nested_[i];
        default: return scalar_at(elem_type_, data_ + i * min_encoded_size(elem_type_));
    }
}

int64_t Array::int_at(size_t i) const {
    if (elem_type_ == ValueType::INT32) {  // the common case (token types), read in place
        int32_t x;
        std::memcpy(&x, data_ + i * sizeof x, sizeof x);
        return x;
    }
    return (*this)[i].as_int();
}

double Array::float_at(size_t i) const {
    if (elem_type_ == ValueType::FLOAT32) {  // the common case (scores), read in place
        float f;
        std::memcpy(&f, data_ + i * sizeof f, sizeof f);
        return f;
    }
    return (*this)[i].as_float();
}

std::string_view Array::string_at(size_t i) const {
    if (elem_type_ != ValueType::STRING)
        throw Error(std::string("expected a string, found ") + value_type_name(elem_type_));
    const uint64_t at = offsets_[i] + sizeof(uint64_t);  // past the length prefix
    return {reinterpret_cast<const char*>(data_ + at), static_cast<size_t>(offsets_[i + 1] - at)};
}

const Value& Array::array_at(size_t i) const {
    if (elem_type_ != ValueType::ARRAY)
        throw Error(std::string("expected an array, found ") + value_type_name(elem_type_));
    return nested_[i];
}

int64_t TensorInfo::n_elements() const {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;  // validated not to overflow when the directory was read
    return n;
}

struct File::Map {
    std::string path;
    const uint8_t* base = nullptr;
    uint64_t size = 0;

    ~Map() {
        if (base) munmap(const_cast<uint8_t*>(base), size);
    }
};

File::~File() = default;

const Value* File::find(const std::string& key) const {
    auto it = kv_index_.find(key);
    return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const Value& File::get(const std::string& key) const {
    const Value* v = find(key);
    if (!v) throw Error(path_ + ": required metadata key '" + key + "' is missing");
    return *v;
}

const TensorInfo* File::find_tensor(const std::string& name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

void File::release(const void* p, size_t n) const {
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const auto b = reinterpret_cast<uintptr_t>(p);
    for (const auto& m : maps_) {
        const auto mb = reinterpret_cast<uintptr_t>(m->base);
        if (b < mb || b + n > mb + m->size) continue;
        const uintptr_t lo = (b + page - 1) / page * page, hi = (b + n) / page * page;
        // Advice only: on failure the pages just stay resident.
        if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
        return;
    }
}

namespace {

// The whole file, read-only, on a 2 MiB boundary with MADV_HUGEPAGE where Linux has it
// (platform/huge_map.h): the page cache's 2 MiB folios then map whole, and a read of pages not
// yet cached fills 2 MiB folios. A decode step streams every weight once: on a Xeon VM the
// one-row Q4_K kernel read 9.0 GB/s from 4 KiB pages against 14 from 2 MiB ones. Elsewhere, for
// a file under 2 MiB, or if that mapping fails, a plain one (whose error is the one reported).
void* map_file(int fd, uint64_t size) {
    if (size >= platform::kHugePage) {
        if (void* p = platform::map_huge_aligned(size, PROT_READ, MAP_PRIVATE, fd); p != MAP_FAILED) return p;
    }
    return mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
}

}  // namespace

std::shared_ptr<File> File::open(const std::string& path) {
    std::shared_ptr<File> f(new File());
    f->path_ = path;
    f->parse(0, path);

    // A split model: the first part names the count; the others follow the same pattern.
    int count = 1;
    if (const Value* v = f->find("split.count")) {
        int64_t c = split_key(path, *v, "split.count");
        if (c < 1 || c > 99999) throw Error(path + ": metadata 'split.count' is " + std::to_string(c) + ", expected 1..99999");
        count = static_cast<int>(c);
        if (const Value* no = f->find("split.no")) {
            int64_t n = split_key(path, *no, "split.no");
            if (n < 0 || n >= c)
                throw Error(path + ": metadata 'split.no' is " + std::to_string(n) + ", expected 0.." +
                            std::to_string(c - 1));
            if (n != 0)
                throw Error(path + ": this is part " + std::to_string(n + 1) +
                            " of a split model; open the first part (-00001-of-...)");
        }
    }
    if (count > 1) {
        auto [prefix, name_count] = split_name(path);
        if (name_count != count)
            throw Error(path + ": split.count is " + std::to_string(count) +
                        " but the file name does not follow <name>-00001-of-" + format("%05d", count) + ".gguf");
        for (int i = 1; i < count; i++) f->parse(i, prefix + format("-%05d-of-%05d.gguf", i + 1, count), count);
        if (const Value* tc = f->find("split.tensors.count")) {
            if (split_key(path, *tc, "split.tensors.count") != static_cast<int64_t>(f->tensors_.size()))
                throw Error(path + ": split.tensors.count does not match the " + std::to_string(f->tensors_.size()) +
                            " tensors found in the parts");
        }
    }
    return f;
}

void File::parse(int split, const std::string& path, int n_splits_expected) {
    auto map = std::make_unique<Map>();
    map->path = path;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) != 0) {
        int e = errno;
        ::close(fd);
        throw Error(path + ": cannot stat: " + std::strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error(path + ": not a regular file");
    }
    map->size = static_cast<uint64_t>(st.st_size);
    if (map->size == 0) {
        ::close(fd);
        throw Error(path + ": magic at byte 0: file is empty");
    }
    void* p = map_file(fd, map->size);
    int e = errno;
    ::close(fd);
    if (p == MAP_FAILED) throw Error(path + ": cannot map: " + std::strerror(e));
    map->base = static_cast<const uint8_t*>(p);
    const Map& m = *map;
    maps_.push_back(std::move(map));

    Cursor c(path, m.base, m.size);

    uint64_t at = c.pos();
    uint32_t magic = c.read<uint32_t>("magic");
    if (std::memcmp(&magic, "GGUF", 4) != 0) {
        const auto* b = reinterpret_cast<const unsigned char*>(&magic);
        c.fail(at, "magic", format("not a GGUF file (starts with %02x %02x %02x %02x, expected 'GGUF')", b[0], b[1], b[2], b[3]));
    }
    at = c.pos();
    uint32_t version = c.read<uint32_t>("version");
    if (version != 2 && version != 3) {
        if ((version & 0xFFFF) == 0 && (version >> 16) != 0)
            c.fail(at, "version", format("big-endian GGUF (version field 0x%08x) is not supported", version));
        c.fail(at, "version", format("unsupported GGUF version %u (ds4 reads versions 2 and 3)", version));
    }
    if (split == 0) version_ = version;

    at = c.pos();
    uint64_t n_tensors = c.read<uint64_t>("tensor count");
    // The smallest directory entry is 24 bytes (empty name, 0 dims, type, offset).
    if (n_tensors > c.remaining() / 24)
        c.fail(at, "tensor count", format("%" PRIu64 " tensors cannot fit in a %" PRIu64 "-byte file", n_tensors, m.size));
    at = c.pos();
    uint64_t n_kv = c.read<uint64_t>("metadata count");
    // The smallest key/value pair is 13 bytes (empty key, type, one-byte value).
    if (n_kv > c.remaining() / 13)
        c.fail(at, "metadata count", format("%" PRIu64 " key/value pairs cannot fit in a %" PRIu64 "-byte file", n_kv, m.size));

    std::vector<std::pair<std::string, Value>> kv;
    std::unordered_map<std::string, size_t> kv_index;
    kv.reserve(std::min(n_kv, kMaxReserve));
    for (uint64_t i = 0; i < n_kv; i++) {
        uint64_t key_at = c.pos();
        std::string field = format("metadata key #%" PRIu64, i);
        std::string key = c.read_string(field);
        if (!valid_utf8(key)) c.fail(key_at, field, "key is not valid UTF-8");
        if (key.empty()) c.fail(key_at, field, "key is empty");
        field = "metadata '" + key + "'";
        if (kv_index.count(key)) c.fail(key_at, field, "duplicate key");
        at = c.pos();
        uint32_t vt = c.read<uint32_t>(field + " type");
        if (vt > static_cast<uint32_t>(ValueType::FLOAT64)) c.fail(at, field, format("unknown value type %u", vt));
        Value v = read_value(c, static_cast<ValueType>(vt), field, 0);
        kv_index.emplace(key, kv.size());
        kv.emplace_back(std::move(key), std::move(v));
    }

    uint64_t alignment = 32;  // GGUF's default when general.alignment is absent
    if (auto it = kv_index.find("general.alignment"); it != kv_index.end()) {
        const Value& a = kv[it->second].second;
        if (a.type != ValueType::UINT32)
            throw Error(path + ": metadata 'general.alignment' must be uint32, found " + value_type_name(a.type));
        alignment = a.num.u;
        // The spec asks for a multiple of 8; less would let weights sit at misaligned addresses.
        if (alignment < 8 || (alignment & (alignment - 1)) != 0)
            throw Error(path + ": metadata 'general.alignment' is " + std::to_string(alignment) +
                        ", not a power of two of at least 8");
    }

    struct Pending {
        TensorInfo info;
        uint64_t entry_at;
    };
    std::vector<Pending> pending;
    std::unordered_set<std::string> names;  // of this split; earlier splits are in tensor_index_
    pending.reserve(std::min(n_tensors, kMaxReserve));
    for (uint64_t i = 0; i < n_tensors; i++) {
        uint64_t entry_at = c.pos();
        std::string field = format("tensor #%" PRIu64 " name", i);
        TensorInfo t;
        t.name = c.read_string(field);
        if (!valid_utf8(t.name)) c.fail(entry_at, field, "name is not valid UTF-8");
        if (t.name.empty()) c.fail(entry_at, field, "name is empty");
        field = "tensor '" + t.name + "'";
        if (tensor_index_.count(t.name) || !names.insert(t.name).second)
            c.fail(entry_at, field, "duplicate tensor name");
        at = c.pos();
        uint32_t n_dims = c.read<uint32_t>(field + " dimension count");
        if (n_dims > kMaxDims) c.fail(at, field, format("%u dimensions (at most %d supported)", n_dims, kMaxDims));
        uint64_t n_elements = 1;
        for (uint32_t d = 0; d < n_dims; d++) {
            at = c.pos();
            uint64_t ne = c.read<uint64_t>(field + format(" dimension %u", d));
            if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
                (ne != 0 && n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / ne))
                c.fail(at, field, format("dimension %u of %" PRIu64 " overflows the element count", d, ne));
            n_elements *= ne;
            t.ne.push_back(static_cast<int64_t>(ne));
        }
        if (t.ne.empty()) t.ne.push_back(1);  // a 0-d tensor is a scalar
        at = c.pos();
        t.type = c.read<uint32_t>(field + " type");
        const quant::TypeInfo* ti = quant::type_info(t.type);
        if (!ti) c.fail(at, field, format("unknown tensor type id %u", t.type));
        if (t.ne[0] % ti->block_size != 0)
            c.fail(at, field, format("row length %" PRId64 " is not a multiple of %s's block size %" PRId64, t.ne[0],
                                     ti->name, ti->block_size));
        uint64_t blocks = n_elements / static_cast<uint64_t>(ti->block_size);
        if (blocks > std::numeric_limits<uint64_t>::max() / ti->type_size)
            c.fail(at, field, "byte size overflows");
        t.nbytes = blocks * ti->type_size;
        at = c.pos();
        t.offset = c.read<uint64_t>(field + " offset");
        if (t.offset % alignment != 0)
            c.fail(at, field, format("data offset %" PRIu64 " is not a multiple of the alignment %" PRIu64, t.offset, alignment));
        t.split = split;
        pending.push_back({std::move(t), entry_at});
    }

    uint64_t data_offset = align_up(c.pos(), alignment);
    uint64_t data_size = data_offset <= m.size ? m.size - data_offset : 0;
    if (n_tensors > 0 && data_offset > m.size)
        c.fail(c.pos(), "data section", format("starts at byte %" PRIu64 ", past the end of the %" PRIu64 "-byte file",
                                               data_offset, m.size));
    for (Pending& q : pending) {
        TensorInfo& t = q.info;
        if (t.offset > data_size || t.nbytes > data_size - t.offset)
            c.fail(q.entry_at, "tensor '" + t.name + "' data",
                   format("bytes %" PRIu64 "..%" PRIu64 " of the data section run past its end (%" PRIu64 " bytes)",
                          t.offset, t.offset + t.nbytes, data_size));
        t.data = m.base + data_offset + t.offset;
    }
    // Tensors must not overlap: a writer bug there would silently alias two weights. Each
    // non-empty tensor is compared with the furthest-reaching one before it in offset order
    // (not just its neighbour, which may be empty or short and hide the overlap).
    std::vector<const Pending*> by_offset;
    for (const Pending& q : pending)
        if (q.info.nbytes > 0) by_offset.push_back(&q);
    std::sort(by_offset.begin(), by_offset.end(),
              [](const Pending* a, const Pending* b) { return a->info.offset < b->info.offset; });
    const TensorInfo* reach = nullptr;  // extents were checked above, so offset + nbytes cannot wrap
    for (const Pending* q : by_offset) {
        const TensorInfo& cur = q->info;
        if (reach && cur.offset < reach->offset + reach->nbytes)
            c.fail(q->entry_at, "tensor '" + cur.name + "' data", "overlaps the data of tensor '" + reach->name + "'");
        if (!reach || cur.offset + cur.nbytes > reach->offset + reach->nbytes) reach = &cur;
    }

    if (split == 0) {
        kv_ = std::move(kv);
        kv_index_ = std::move(kv_index);
        alignment_ = alignment;
        data_offset_ = data_offset;
    } else {
        // Each part must say where it belongs, and agree with the first part on the count.
        auto it = kv_index.find("split.no");
        if (it == kv_index.end() || split_key(path, kv[it->second].second, "split.no") != split)
            throw Error(path + ": metadata 'split.no' is missing or is not " + std::to_string(split));
        it = kv_index.find("split.count");
        if (it == kv_index.end() || split_key(path, kv[it->second].second, "split.count") != n_splits_expected)
            throw Error(path + ": metadata 'split.count' is missing or is not " + std::to_string(n_splits_expected) +
                        " (as in the first part)");
    }
    for (Pending& q : pending) {
        tensor_index_.emplace(q.info.name, tensors_.size());
        tensors_.push_back(std::move(q.info));
    }
}

}  // namespace ds4::gguf
