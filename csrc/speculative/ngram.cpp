// The n-gram proposers (proposer.h): drafts copied from the session's own history, at no
// model cost, which is what pays on edits, summaries and repetitive text.
#include <algorithm>
#include <stdexcept>

#include "speculative/proposer.h"

namespace ds4::speculative {

namespace {

class NgramSimple final : public Proposer {
public:
    NgramSimple(int match_min, int match_max) : min_(match_min), max_(match_max) {}
    const char* name() const override { return "ngram-simple"; }

    void propose(const std::vector<int32_t>& ctx, int n_max, Draft* draft) override {
        const auto size = static_cast<int64_t>(ctx.size());
        for (int n = max_; n >= min_; --n) {
            if (size <= n) continue;
            const int32_t* key = ctx.data() + size - n;
            // The most recent earlier match that has a token after it.
            for (int64_t j = size - n - 1; j >= 0; --j) {
                if (ctx[static_cast<size_t>(j)] != key[0] || !std::equal(key, key + n, ctx.begin() + j)) continue;
                const int64_t from = j + n, to = std::min<int64_t>(size, from + n_max);
                draft->tokens.insert(draft->tokens.end(), ctx.begin() + from, ctx.begin() + to);
                return;
            }
        }
    }

private:
    int min_, max_;
};

class NgramMod final : public Proposer {
public:
    explicit NgramMod(int n_match) : n_(n_match), pool_(kPoolSize, -1) {}
    const char* name() const override { return "ngram-mod"; }

    void observe(const std::vector<int32_t>& ctx) override {
        // Every position p with n tokens before it: the n-gram ending at p - 1 is followed by ctx[p].
        for (size_t p = std::max<size_t>(indexed_, static_cast<size_t>(n_)); p < ctx.size(); ++p)
            pool_[slot(ctx.data() + p - n_)] = ctx[p];
        indexed_ = std::max(indexed_, ctx.size());
    }

    void propose(const std::vector<int32_t>& ctx, int n_max, Draft* draft) override {
        if (ctx.size() < static_cast<size_t>(n_)) return;
        std::vector<int32_t> tail(ctx.end() - n_, ctx.end());
        for (int i = 0; i < n_max; ++i) {
            const int32_t next = pool_[slot(tail.data() + tail.size() - n_)];
            if (next < 0) break;
            draft->tokens.push_back(next);
            tail.push_back(next);
        }
    }

private:
    static constexpr size_t kPoolSize = size_t{1} << 20;
    size_t slot(const int32_t* t) const {
        uint64_t h = 0x9E3779B97F4A7C15ull;
        for (int i = 0; i < n_; ++i) h = (h ^ static_cast<uint32_t>(t[i])) * 0x100000001B3ull + 0x2545F4914F6CDD1Dull;
        return static_cast<size_t>(h >> 44) & (kPoolSize - 1);
    }

    int n_;
    std::vector<int32_t> pool_;
    size_t indexed_ = 0;
};

}  // namespace

std::unique_ptr<Proposer> make_ngram_simple(int match_min, int match_max) {
    if (match_min < 1 || match_max < match_min) throw std::invalid_argument("ngram-simple: need 1 <= match_min <= match_max");
    return std::make_unique<NgramSimple>(match_min, match_max);
}

std::unique_ptr<Proposer> make_ngram_mod(int n_match) {
    if (n_match < 1) throw std::invalid_argument("ngram-mod: n_match must be >= 1");
    return std::make_unique<NgramMod>(n_match);
}

std::unique_ptr<Proposer> make_proposer(const std::string& type) {
    if (type == "ngram-simple") return make_ngram_simple();
    if (type == "ngram-mod") return make_ngram_mod();
    throw std::invalid_argument("unknown speculative proposer type '" + type + "' (available: ngram-simple, ngram-mod, draft, mtp)");
}

}  // namespace ds4::speculative
