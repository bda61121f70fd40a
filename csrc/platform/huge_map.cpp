#include "platform/huge_map.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <system_error>
#include <vector>

#if defined(__linux__)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace ds4::platform {

void* map_huge_aligned(size_t len, int prot, int flags, int fd) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t rounded = (len + page - 1) / page * page;
    // A reservation a huge page longer, the mapping placed on its first 2 MiB boundary, the rest
    // of the reservation released.
    void* r = mmap(nullptr, rounded + kHugePage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED) return r;
    const auto lo = reinterpret_cast<uintptr_t>(r), hi = lo + rounded + kHugePage;
    const uintptr_t at = (lo + kHugePage - 1) / kHugePage * kHugePage;
    void* p = mmap(reinterpret_cast<void*>(at), len, prot, flags | MAP_FIXED, fd, 0);
    if (p == MAP_FAILED) {
        const int e = errno;
        munmap(r, rounded + kHugePage);
        errno = e;
        return p;
    }
    if (at > lo) munmap(r, at - lo);
    if (hi > at + rounded) munmap(reinterpret_cast<void*>(at + rounded), hi - at - rounded);
    madvise(p, len, MADV_HUGEPAGE);
    return p;
#else
    (void)len, (void)prot, (void)flags, (void)fd;
    errno = ENOTSUP;
    return reinterpret_cast<void*>(-1);
#endif
}

CacheState file_cache_state(const std::string& path) {
    CacheState out;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const auto fail = [&](const char* what) { throw std::system_error(errno, std::generic_category(), path + ": " + what); };
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail("cannot open");
    struct stat st {};
    const bool stated = fstat(fd, &st) == 0;
    const auto size = static_cast<size_t>(st.st_size);
    void* p = stated && size > 0 ? map_huge_aligned(size, PROT_READ, MAP_PRIVATE, fd) : nullptr;
    const int e = errno;
    close(fd);
    errno = e;
    if (!stated) fail("cannot stat");
    if (size == 0) return out;
    if (p == MAP_FAILED) fail("cannot map");
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t pages = (size + page - 1) / page;
    std::vector<unsigned char> vec(pages);
    if (mincore(p, size, vec.data()) != 0) {
        const int m = errno;
        munmap(p, size);
        errno = m;
        fail("mincore");
    }
    size_t resident = 0;
    for (unsigned char v : vec) resident += v & 1;
    const auto* bytes = static_cast<const volatile unsigned char*>(p);
    for (size_t off = 0; off < size; off += page) (void)bytes[off];
    // FilePmdMapped of the mapping that starts at p.
    char start[32];
    std::snprintf(start, sizeof start, "%lx-", static_cast<unsigned long>(reinterpret_cast<uintptr_t>(p)));
    size_t pmd_kib = 0;
    if (FILE* f = std::fopen("/proc/self/smaps", "r")) {
        char line[512];
        bool inside = false;
        while (std::fgets(line, sizeof line, f)) {
            if (!(line[0] >= 'A' && line[0] <= 'Z')) {  // a mapping's header: its address range
                inside = std::strncmp(line, start, std::strlen(start)) == 0;
            } else if (inside && std::sscanf(line, "FilePmdMapped: %zu kB", &pmd_kib) == 1) {
                break;
            }
        }
        std::fclose(f);
    }
    munmap(p, size);
    out.resident = static_cast<double>(resident) / static_cast<double>(pages);
    out.huge = static_cast<double>(pmd_kib) * 1024.0 / static_cast<double>(pages * page);
#else
    (void)path;
#endif
    return out;
}

}  // namespace ds4::platform
