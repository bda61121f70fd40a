// Read-only view of a GGUF model file (v2 and v3), memory-mapped.
//
// Everything in the header, metadata and tensor directory is validated against the file
// size before use; a malformed file raises gguf::Error naming the file, the field and the
// byte offset, and no read ever leaves the map. Split models (name-00001-of-0000N.gguf)
// open as one File whose tensors point into each split's own map.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ds4::gguf {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

enum class ValueType : uint32_t {
    UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
    BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

const char* value_type_name(ValueType t);

struct Value;

// The elements of an array value. Scalar and string elements stay in the mapped file (a typed
// pointer; one offset per string), so a 262k-entry vocabulary costs one allocation instead of
// a parsed Value per entry; only nested arrays are held as Values. Like TensorInfo::data, it
// points into the map: valid while the File lives.
class Array {
public:
    Array() = default;
    // Built by the reader, which has validated the bytes: `count` packed scalars at `data`;
    // strings whose length prefixes start at data + offsets[i] (offsets[count]: the end); or
    // nested arrays.
    Array(ValueType elem_type, size_t count, const uint8_t* data);
    Array(const uint8_t* data, std::vector<uint64_t> offsets);
    explicit Array(std::vector<Value> nested);

    ValueType elem_type() const { return elem_type_; }
    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    // Element i (< size()) as a Value; a string element is copied, a nested array too. The
    // typed accessors below read in place and check the element type like Value's accessors.
    Value operator[](size_t i) const;
    int64_t int_at(size_t i) const;
    double float_at(size_t i) const;
    std::string_view string_at(size_t i) const;
    const Value& array_at(size_t i) const;

private:
    ValueType elem_type_ = ValueType::UINT8;
    size_t size_ = 0;
    const uint8_t* data_ = nullptr;
    std::vector<uint64_t> offsets_;  // STRING elements
    std::vector<Value> nested_;      // ARRAY elements
};

// One metadata value. Scalars keep their exact type; arrays keep their element type and
// may nest (an array of arrays).
struct Value {
    ValueType type = ValueType::UINT8;
    union {
        uint64_t u;
        int64_t i;
        double f;
        bool b;
    } num{};
    std::string str;                 // STRING
    Array arr;                       // ARRAY

    bool is_integer() const;
    bool is_float() const { return type == ValueType::FLOAT32 || type == ValueType::FLOAT64; }
    // Checked accessors: throw Error if the value does not have that shape or range.
    int64_t as_int() const;
    uint64_t as_uint() const;
    double as_float() const;         // integers convert too
    bool as_bool() const;
    const std::string& as_string() const;
    const Array& as_array() const;
};

struct TensorInfo {
    std::string name;
    uint32_t type = 0;               // ggml type id (quant::Type)
    std::vector<int64_t> ne;         // ggml order: ne[0] is the contiguous row length
    uint64_t offset = 0;             // from the start of its split's data section
    uint64_t nbytes = 0;
    int split = 0;                   // which split file holds it
    const uint8_t* data = nullptr;   // into that split's map; valid while the File lives

    int64_t n_elements() const;
};

class File {
public:
    // Opens and validates `path`; if it is the first part of a split model, every part.
    static std::shared_ptr<File> open(const std::string& path);
    ~File();
    File(const File&) = delete;
    File& operator=(const File&) = delete;

    const std::string& path() const { return path_; }
    uint32_t version() const { return version_; }
    uint64_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }  // of the first split
    int n_splits() const { return static_cast<int>(maps_.size()); }

    // Metadata in file order (of the first split; split bookkeeping keys included).
    const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
    const Value* find(const std::string& key) const;  // nullptr if absent
    const Value& get(const std::string& key) const;   // throws Error if absent

    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* find_tensor(const std::string& name) const;  // nullptr if absent

    // Drops the whole pages inside [p, p + n) of a map from this process's memory (they are
    // read back from the file if touched again): for tensors whose bytes were copied elsewhere.
    void release(const void* p, size_t n) const;

private:
    struct Map;
    File() = default;
    // n_splits_expected: the first part's split.count, which every later part must repeat.
    void parse(int split, const std::string& path, int n_splits_expected = 1);

    std::string path_;
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    uint64_t data_offset_ = 0;
    std::vector<std::unique_ptr<Map>> maps_;
    std::vector<std::pair<std::string, Value>> kv_;
    std::unordered_map<std::string, size_t> kv_index_;
    std::vector<TensorInfo> tensors_;
    std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace ds4::gguf
