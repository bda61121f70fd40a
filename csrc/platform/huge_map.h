// Mappings on a 2 MiB boundary with MADV_HUGEPAGE (Linux): what lets the kernel back them with
// 2 MiB pages (one TLB entry instead of 512), for the weights a decode step streams. Used for the
// model file's mapping (gguf/gguf.cpp) and the CPU backend's copies (backend/cpu/huge_pages.h).
#pragma once

#include <cstddef>
#include <string>

namespace ds4::platform {

inline constexpr size_t kHugePage = size_t{2} << 20;

// mmap(len, prot, flags, fd, offset 0) placed on a kHugePage boundary and advised MADV_HUGEPAGE
// (advice only: without transparent huge pages the mapping keeps 4 KiB pages); nothing is mapped
// past len rounded up to a page. MAP_FAILED with errno set on failure, and on systems without
// MADV_HUGEPAGE (the callers then map as they would have).
void* map_huge_aligned(size_t len, int prot, int flags, int fd);

// The page cache's hold on the file at `path`, as fractions of its pages: resident, those cached
// before this call; huge, those a map_huge_aligned mapping of it (the loader's) gets on 2 MiB
// pages once read (smaps' FilePmdMapped). Reads the whole file, as a load would. Linux; elsewhere
// zeros. Throws std::system_error.
struct CacheState {
    double resident = 0, huge = 0;
};
CacheState file_cache_state(const std::string& path);

}  // namespace ds4::platform
