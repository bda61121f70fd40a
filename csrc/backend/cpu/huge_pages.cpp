#include "backend/cpu/huge_pages.h"

#include <new>

#include "backend/cpu/aligned.h"

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace ds4::backend::cpu {

void HugeDelete::operator()(uint8_t* p) const noexcept {
#if defined(__linux__)
    if (mapped) {
        munmap(p, mapped);
        return;
    }
#endif
    ::operator delete(p, std::align_val_t{kAlign});
}

HugeBytes huge_bytes(size_t n, bool huge) {
#if defined(__linux__)
    if (huge && n >= kHugePage) {
        const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        const size_t len = (n + page - 1) / page * page;
        // Mapped a huge page longer, then trimmed to start on a 2 MiB boundary.
        void* m = mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) throw std::bad_alloc();
        const auto base = reinterpret_cast<uintptr_t>(m);
        const uintptr_t start = (base + kHugePage - 1) / kHugePage * kHugePage;
        if (start > base) munmap(m, start - base);
        if (const uintptr_t end = base + len + kHugePage; end > start + len) {
            munmap(reinterpret_cast<void*>(start + len), end - start - len);
        }
        // Advice only: without transparent huge pages the mapping just keeps 4 KiB pages.
        madvise(reinterpret_cast<void*>(start), len, MADV_HUGEPAGE);
        return HugeBytes(reinterpret_cast<uint8_t*>(start), HugeDelete{len});
    }
#endif
    return HugeBytes(static_cast<uint8_t*>(::operator new(n == 0 ? 1 : n, std::align_val_t{kAlign})), HugeDelete{});
}

}  // namespace ds4::backend::cpu
