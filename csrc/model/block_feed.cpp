// See block_feed.h.
#include "model/block_feed.h"

#include <algorithm>
#include <cstring>

namespace ds4::model {

BlockFeed::BlockFeed(std::shared_ptr<BlockDrafter> drafter)
    : d_(std::move(drafter)), st_(d_->new_state()), width_(d_->n_features()) {}

BlockFeed::BlockFeed(const BlockFeed& other)
    : d_(other.d_), st_(d_->new_state()), width_(other.width_), stale_(other.stale_), rows_(other.rows_) {
    st_->restore(other.st_->snapshot());
}

int64_t BlockFeed::lag(int64_t p) const {
    return stale_ ? p : std::max<int64_t>(0, p - st_->n_past());
}

Captures BlockFeed::before(int64_t at, int64_t n) {
    if (stale_) return {};
    if (st_->n_past() + static_cast<int64_t>(rows_.size()) / width_ != at) {  // rows committed behind the feed's back
        lost();
        return {};
    }
    pass_.resize(static_cast<size_t>(n * width_));
    return Captures{d_->layers().data(), static_cast<int>(d_->layers().size()), pass_.data()};
}

void BlockFeed::committed(state::State&, const std::vector<int32_t>&, int64_t, int64_t n) {
    if (stale_) return;
    if (n <= kEager) {
        append(0, n, n);
        return;
    }
    // A prompt: fed now, a chunk at a time, its features never held whole twice.
    feed();
    for (int64_t r = 0; r < n; r += kChunk) {
        append(r, std::min(kChunk, n - r), n);
        feed();
    }
    std::vector<float>().swap(pass_);
    std::vector<float>().swap(rows_);
}

void BlockFeed::append(int64_t r0, int64_t m, int64_t n) {
    // The pass wrote [layer][row][n_embd]; a context row is the layers side by side.
    const size_t d = static_cast<size_t>(d_->target().hparams().n_embd), k = d_->layers().size();
    const size_t at = rows_.size();
    rows_.resize(at + static_cast<size_t>(m) * k * d);
    for (int64_t r = 0; r < m; ++r) {
        for (size_t l = 0; l < k; ++l) {
            std::memcpy(rows_.data() + at + (static_cast<size_t>(r) * k + l) * d,
                        pass_.data() + (l * static_cast<size_t>(n) + static_cast<size_t>(r0 + r)) * d, d * sizeof(float));
        }
    }
}

void BlockFeed::lost() {
    stale_ = true;
    rows_.clear();
}

void BlockFeed::rewound(int64_t n) {
    if (stale_) return;
    if (n < st_->n_past()) {
        st_->truncate(n);
        rows_.clear();
        return;
    }
    rows_.resize(std::min(rows_.size(), static_cast<size_t>((n - st_->n_past()) * width_)));
}

void BlockFeed::feed() {
    const int64_t n = static_cast<int64_t>(rows_.size()) / width_;
    if (n == 0) return;
    d_->context(*st_, rows_.data(), n);
    rows_.clear();
}

bool BlockFeed::resync(const std::vector<int32_t>& tokens) {
    if (std::any_of(tokens.begin(), tokens.end(), [](int32_t t) { return t < 0; })) return false;
    st_->truncate(0);
    rows_.clear();
    stale_ = false;
    Model& target = d_->target();
    const std::unique_ptr<state::State> scratch = target.new_state();
    const auto p = static_cast<int64_t>(tokens.size());
    for (int64_t at = 0; at < p; at += kChunk) {
        const int64_t n = std::min(kChunk, p - at);
        target.eval_captures(*scratch, tokens.data() + at, n, before(at, n));
        committed(*scratch, tokens, at, n);
        feed();
    }
    return true;
}

bool BlockFeed::draft(const std::vector<int32_t>& tokens, int32_t anchor, int64_t n, bool logits, int64_t head_rows,
                      const BlockPick& pick) {
    const auto p = static_cast<int64_t>(tokens.size());
    if (p + d_->block_size() > st_->n_ctx()) return false;
    if (!stale_ && st_->n_past() + static_cast<int64_t>(rows_.size()) / width_ != p) lost();
    if (stale_ && !resync(tokens)) return false;
    feed();
    d_->draft(*st_, anchor, n, logits, head_rows, pick);
    return true;
}

}  // namespace ds4::model
