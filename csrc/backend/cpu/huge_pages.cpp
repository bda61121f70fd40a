#include "backend/cpu/huge_pages.h"

#include <new>

#include "backend/cpu/aligned.h"
#include "platform/huge_map.h"

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
        void* m = platform::map_huge_aligned(n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
        if (m == MAP_FAILED) throw std::bad_alloc();
        const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        return HugeBytes(static_cast<uint8_t*>(m), HugeDelete{(n + page - 1) / page * page});
    }
#endif
    return HugeBytes(static_cast<uint8_t*>(::operator new(n == 0 ? 1 : n, std::align_val_t{kAlign})), HugeDelete{});
}

}  // namespace ds4::backend::cpu
