// The BPE merge loop shared by both models, as HF tokenizers' Word::merge_all runs it: a
// min-heap of candidate pairs keyed by (rank, left position); a popped candidate is applied
// only if both symbols are still there unchanged. O(n log n) in the word length.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

namespace ds4::tok {

struct BpeSymbol {
    int32_t id;
    uint32_t start, end;  // bytes in the word
    uint32_t nchars;      // code points (SPM rank ties use it)
    bool mergeable;       // byte-fallback and unknown symbols never merge
};

struct PairRank {
    uint64_t a = 0, b = 0;  // lexicographic; smaller merges first
    int32_t new_id = -1;
};

// rank(left, right, &r) -> bool: whether the two symbols merge, and how.
template <class RankFn>
void bpe_merge(std::vector<BpeSymbol>& syms, RankFn rank, std::vector<int32_t>& out) {
    const int n = static_cast<int>(syms.size());
    std::vector<int> prev(n), next(n);
    for (int i = 0; i < n; ++i) {
        prev[i] = i - 1;
        next[i] = i + 1 < n ? i + 1 : -1;
    }
    struct Cand {
        PairRank r;
        int left, right;
        int32_t lid, rid;
        bool operator>(const Cand& o) const {
            if (r.a != o.r.a) return r.a > o.r.a;
            if (r.b != o.r.b) return r.b > o.r.b;
            return left > o.left;
        }
    };
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
    auto consider = [&](int l, int r) {
        if (l < 0 || r < 0 || !syms[l].mergeable || !syms[r].mergeable) return;
        PairRank pr;
        if (rank(syms[l], syms[r], &pr)) heap.push(Cand{pr, l, r, syms[l].id, syms[r].id});
    };
    for (int i = 0; i + 1 < n; ++i) consider(i, i + 1);
    std::vector<bool> dead(n, false);
    while (!heap.empty()) {
        Cand c = heap.top();
        heap.pop();
        if (dead[c.left] || dead[c.right] || next[c.left] != c.right || syms[c.left].id != c.lid ||
            syms[c.right].id != c.rid)
            continue;
        BpeSymbol& L = syms[c.left];
        L.id = c.r.new_id;
        L.end = syms[c.right].end;
        L.nchars += syms[c.right].nchars;
        dead[c.right] = true;
        next[c.left] = next[c.right];
        if (next[c.left] >= 0) prev[next[c.left]] = c.left;
        consider(prev[c.left], c.left);
        consider(c.left, next[c.left]);
    }
    for (int i = 0; i < n; i = next[i] < 0 ? n : next[i]) out.push_back(syms[i].id);
}

}  // namespace ds4::tok
