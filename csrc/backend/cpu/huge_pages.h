// Memory for what the kernels stream every token (weights, the KV cache), on request
// (CpuOptions::huge_pages): from 2 MiB on, an anonymous mapping on a 2 MiB boundary that Linux is
// asked to back with transparent huge pages.
//
// Why: a decode step reads every weight once, and the one-row kernels read 8.4-9.5 GB/s per core
// from DRAM on scattered 4 KiB pages where the same bytes on 2 MiB pages read 11.1-11.7 (Q4_K /
// Q6_K, Intel Xeon): a TLB miss every 64 lines, and the hardware prefetchers stop at each page's
// end. The file's mapping (gguf.cpp, map_file) gets 2 MiB pages only where the page cache holds
// 2 MiB folios, which a file just written does not; so the CPU backend can copy large weights
// here (CpuBackend::pack) whatever the cache holds.
// Why not always: fresh memory costs its first touch, and in VMs that hand freed memory back to
// the host (free page reporting) every new process pays it again: seconds per GB measured.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "platform/huge_map.h"

namespace ds4::backend::cpu {

inline constexpr size_t kHugePage = platform::kHugePage;

// Frees what huge_bytes() gave: unmaps `mapped` bytes, or (0) deletes a 64-byte aligned block.
struct HugeDelete {
    size_t mapped = 0;
    void operator()(uint8_t* p) const noexcept;
};
using HugeBytes = std::unique_ptr<uint8_t[], HugeDelete>;

// n bytes, uninitialised (pages are touched only when written), on 64-byte lines; with `huge`,
// from kHugePage on (Linux), a mapping of their own (platform::map_huge_aligned): its last
// partial 2 MiB takes 4 KiB pages, so nothing past n is made resident. Throws std::bad_alloc.
HugeBytes huge_bytes(size_t n, bool huge);

}  // namespace ds4::backend::cpu
