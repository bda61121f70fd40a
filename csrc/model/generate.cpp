// The decode loop; see generate.h.
#include "model/generate.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "speculative/dflash.h"
#include "speculative/draft.h"
#include "speculative/mtp.h"
#include "speculative/verify.h"
#include "state/state.h"

namespace ds4::model {

namespace {

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Tokens that end a turn in the chat formats of the supported families. Files rarely mark
// them (Gemma's has no eot key), so they are found by their text, as control tokens.
const char* const kEogTexts[] = {"<end_of_turn>", "<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<|end|>", "<|eom_id|>"};

std::vector<int32_t> eog_tokens(const tok::Tokenizer& tok) {
    std::vector<int32_t> ids;
    if (tok.eos_id() >= 0) ids.push_back(tok.eos_id());
    for (const char* text : kEogTexts) {
        const std::vector<int32_t> enc = tok.encode(text, false, true);
        if (enc.size() == 1 && tok.token_bytes(enc[0]) == text) ids.push_back(enc[0]);
    }
    return ids;
}

}  // namespace

Generator::Generator(Session& session, const tok::Tokenizer& tok, std::vector<int32_t> prompt, GenerateParams params)
    : session_(session),
      tok_(tok),
      prompt_(std::move(prompt)),
      params_(std::move(params)),
      sampler_(params_.sampling, session.n_vocab()),
      decoder_(tok) {
    if (params_.max_tokens < 0) throw std::invalid_argument("max_tokens must be >= 0, got " + std::to_string(params_.max_tokens));
    for (const std::string& s : params_.stop)
        if (s.empty()) throw std::invalid_argument("stop strings must not be empty");
    if (prompt_.empty() && session_.n_past() == 0)
        throw std::invalid_argument("empty prompt and an empty session: there is nothing to continue from");
    if (params_.stop_at_eog) eog_ = eog_tokens(tok_);
    if (params_.top_logprobs != -1) scorer_ = std::make_unique<sample::LogprobScorer>(params_.top_logprobs);  // checks the range
    if (!params_.spec.types.empty()) {
        if (params_.spec.n_max < 1) throw std::invalid_argument("spec n_max must be >= 1, got " + std::to_string(params_.spec.n_max));
        if (params_.spec.n_min < 0 || params_.spec.n_min > params_.spec.n_max) {
            throw std::invalid_argument("spec n_min must be in [0, n_max], got " + std::to_string(params_.spec.n_min));
        }
        const auto named = [&](const char* t) {
            return std::find(params_.spec.types.begin(), params_.spec.types.end(), t) != params_.spec.types.end();
        };
        if (named("mtp") && (named("dflash") || named("dspark"))) {
            throw std::invalid_argument("a block drafter replaces the built-in MTP block for a run: the two are not stacked");
        }
        for (const std::string& t : params_.spec.types) {
            if (t == "mtp") {
                proposers_.push_back(speculative::make_mtp_proposer(session_, tok_.vocab_size(), params_.spec.mtp_draft,
                                                                    params_.spec.mtp_depth, params_.spec.confidence,
                                                                    params_.spec.draft_vocab));
            } else if (t == "dflash" || t == "dspark") {
                const std::shared_ptr<BlockDrafter>& d = params_.spec.block_drafter;
                if (!d) throw std::invalid_argument("the '" + t + "' proposer needs a block drafter");
                if (t != d->kind()) {
                    throw std::invalid_argument(d->path() + " is a " + (t == "dspark" ? "DFlash drafter (no Markov head)" : "DSpark drafter") +
                                                ": name its proposer '" + d->kind() + "'");
                }
                proposers_.push_back(speculative::make_dflash_proposer(session_, params_.spec.block_drafter, tok_.vocab_size(),
                                                                       params_.spec.confidence, params_.spec.draft_vocab));
            } else if (t != "draft") {
                proposers_.push_back(speculative::make_proposer(t));
            } else if (!params_.spec.draft || !params_.spec.draft_tok) {
                throw std::invalid_argument("the 'draft' proposer needs a draft model");
            } else {
                proposers_.push_back(speculative::make_draft_proposer(params_.spec.draft, session_.model(),
                                                               *params_.spec.draft_tok, tok_, params_.spec.confidence,
                                                               params_.spec.draft_vocab));
            }
        }
    }
    start_sampling();
}

void Generator::start_sampling() {
    sampler_ = sample::Sampler(params_.sampling, session_.n_vocab());
    fused_greedy_ = params_.sampling.plain_greedy() && !scorer_;  // logprobs read the rows
    screened_ = sampler_.screens() && !scorer_ && proposers_.empty();  // speculation verifies with rows
    // Exact sampling: proposers that can sample draw their drafts and report q; otherwise greedy.
    const bool drawn = params_.spec.exact && !fused_greedy_ && params_.sampling.temperature > 0.0f;
    for (auto& p : proposers_) p->sample_drafts(drawn ? params_.sampling : sample::SamplingParams{}, session_.n_vocab());
    if (started_) seed_penalties();  // else start() does, once the prompt is in
}

void Generator::seed_penalties() {
    // The penalties look back over the context, prompt included, as llama.cpp's do (a batched
    // generation's prompt is still to be fed).
    std::vector<int32_t> context = session_.tokens();
    if (batched_ && stats_.n_generated == 0) context.insert(context.end(), prompt_.begin(), prompt_.end());
    const size_t window = static_cast<size_t>(std::max(0, params_.sampling.repeat_last_n));
    for (size_t i = context.size() - std::min(context.size(), window); i < context.size(); ++i)
        sampler_.accept(context[i]);
}

void Generator::set_sampling(const sample::SamplingParams& sampling) {
    if (batched_) throw std::logic_error("set_sampling: a batched generation runs without speculation; restart it instead");
    sampling.validate(session_.n_vocab());  // before anything changes
    params_.sampling = sampling;
    if (started_ && !done_ && !tokens_.empty()) {
        // The session holds the last token taken, then the accepted draft tokens not taken yet.
        const int64_t last = session_.n_past() - 1 - static_cast<int64_t>(queue_.size());
        queue_.clear();
        next_ = -1;
        session_.truncate(last);
        hold(tokens_.back());
        reeval_ = true;
    }
    start_sampling();
}

void Generator::start() {
    const double t0 = now();
    stats_.n_prompt = static_cast<int64_t>(prompt_.size());
    if (prompt_.empty()) {
        logits_ = session_.last_logits();
        listed_ = false;
    } else if (screened_) {
        session_.eval_shortlist(prompt_.data(), static_cast<int64_t>(prompt_.size()), sampler_.head_margin(),
                                sampler_.head_keep(), &sl_);
        listed_ = true;
    } else {
        logits_.resize(static_cast<size_t>(session_.n_vocab()));
        session_.eval(prompt_.data(), static_cast<int64_t>(prompt_.size()), logits_.data(), 1);
    }
    stats_.prefill_seconds = now() - t0;
    reserve_output();
    // Only now, with the prefill done (it may throw and be retried), is the generator started.
    started_ = true;
    if (!proposers_.empty()) {
        // What the head's first pass of several rows would do once (the screen's row norms) is
        // done here, so that the scheduler does not time it: a first verify pass ~2.5 plain
        // steps long on Gemma 3 270M kept a block drafter out of every later generation.
        session_.model().lend([](const Model::Lent& l) { l.be.prepare_head(l.output); });
        // The verify-cost prior: no pass is run for it; the first plain steps measure the rest.
        const double t1 = now();
        std::vector<double> cost = session_.model().extra_row_seconds(params_.spec.n_max + 1, &stats_.cost_prior_macs);
        stats_.cost_prior_seconds = now() - t1;
        scheduler_ = std::make_unique<speculative::Scheduler>(params_.spec.n_max, std::move(cost), static_cast<int>(proposers_.size()));
        scheduler_->resume(session_.model().pass_times(fused_greedy_));
        context_ = session_.tokens();
        for (auto& p : proposers_) p->observe(context_);
    }
    seed_penalties();
}

void Generator::reserve_output() {
    // Decode steps then append without reallocating (the context bounds a huge max_tokens).
    const int64_t room = session_.n_ctx() - session_.n_past() + 1;
    const auto n = static_cast<size_t>(std::min<int64_t>(params_.max_tokens, room));
    tokens_.reserve(n);
    if (scorer_) logprobs_.reserve(n);
}

void Generator::hold(int32_t tok) {
    // The session keeps the last sampled token pending, unless the context has no room left
    // for it: then, as when the context fills mid-way, the token is returned but not held.
    if (session_.n_past() < session_.n_ctx()) session_.set_pending(tok);
}

int32_t Generator::speculate(int32_t tok) {
    int winner = -1;
    // The first proposer of the chain with a draft the scheduler takes wins the step. Free
    // proposers draft all they can and the scheduler keeps a prefix; one that costs is asked
    // for the number of tokens the scheduler picks from its cost and running acceptance.
    // tok takes one position; the draft may use what is left of the context.
    const int64_t room = std::max<int64_t>(0, session_.n_ctx() - session_.n_past() - 1);
    const int cap = static_cast<int>(std::min<int64_t>(params_.spec.n_max, room));
    int k = 0;
    const double t0 = now();
    const speculative::TargetCost target{scheduler_->cost(1), scheduler_->extra_per_row()};
    scheduler_->set_horizon(params_.max_tokens - static_cast<int64_t>(tokens_.size()));
    // Exact acceptance computes each verified row's probabilities: about a draw's work.
    if (params_.spec.exact && !fused_greedy_) scheduler_->set_row_overhead(last_sample_seconds_);
    for (size_t i = 0; i < proposers_.size() && k == 0 && cap > 0; ++i) {
        speculative::Proposer& prop = *proposers_[i];
        const int p = static_cast<int>(i);
        draft_.clear();
        // A proposer's own bounds: at most max_draft(), and a draft that runs at least min_draft().
        const int pcap = std::min(cap, prop.max_draft());
        const int floor = std::min(params_.spec.n_min, pcap);
        if (prop.costs()) {
            int want = std::max(floor, scheduler_->pick(p, pcap, prop.cost_per_token(target),
                                                        prop.catch_up_seconds(context_, target),
                                                        prop.cost_per_draft(target)));
            if (want > 0) want = std::max(want, std::min(prop.min_draft(), pcap));
            const double tp = now();
            if (want > 0) prop.propose(context_, want, &draft_);
            stats_.catch_up_seconds += draft_.catch_up_seconds;
            k = std::min(want, static_cast<int>(draft_.tokens.size()));
            if (k > floor && !draft_.confidence.empty()) k = std::max(floor, scheduler_->cut(p, k, draft_.confidence));
            if (want > 0 && k == 0) scheduler_->wasted(p, now() - tp);
        } else {
            prop.propose(context_, pcap, &draft_);
            const int avail = std::min(pcap, static_cast<int>(draft_.tokens.size()));
            k = avail == 0 ? 0 : std::max(std::min(floor, avail), scheduler_->pick(p, avail));
            if (k > 0) k = std::max(k, std::min(prop.min_draft(), avail));
        }
        if (k > 0) winner = p;
    }
    stats_.draft_seconds += now() - t0;
    const double t1 = now();
    if (k == 0) {
        int32_t next = -1;  // sampling: drawn by the caller from logits_
        if (fused_greedy_) {
            next = session_.next_argmax(&tok, 1);
        } else {
            session_.eval(&tok, 1, logits_.data(), 1);
        }
        stats_.plain_seconds += now() - t1;
        scheduler_->timed_pass(1, now() - t1 + last_sample_seconds_);
        return next;
    }
    // tok goes to position p, draft token i to p + 1 + i; row i of the pass is the target's
    // prediction after feed[i], the one draft token i is checked against.
    const int64_t p = session_.n_past();
    const int32_t n_vocab = session_.n_vocab();
    std::vector<int32_t>& draft = draft_.tokens;
    draft.resize(static_cast<size_t>(k));
    draft.insert(draft.begin(), tok);
    std::vector<int32_t> ids;
    session_.checkpoint();  // the rejected rows are rolled back from here, the context never replayed
    if (fused_greedy_) {
        ids = session_.eval_argmax(draft.data(), k + 1);
        ids.erase(ids.begin(), ids.end() - (k + 1));  // a token the session held pending comes first
    } else {
        rows_.resize(static_cast<size_t>(k + 1) * n_vocab);
        session_.eval(draft.data(), k + 1, rows_.data(), k + 1);
    }
    draft.erase(draft.begin());
    stats_.verify_seconds += now() - t1;
    scheduler_->timed_pass(k + 1, now() - t1);
    const auto row = [&](int i) { return rows_.data() + static_cast<size_t>(i) * n_vocab; };
    int j = 0;
    int32_t next = -1;
    bool sampled = false;
    if (fused_greedy_) {
        while (j < k && draft[static_cast<size_t>(j)] == ids[static_cast<size_t>(j)]) ++j;
        next = ids[static_cast<size_t>(j)];
    } else if (!params_.spec.exact) {
        const auto argmax = [&](const float* r) { return static_cast<int32_t>(std::max_element(r, r + n_vocab) - r); };
        while (j < k && draft[static_cast<size_t>(j)] == argmax(row(j))) ++j;
    } else {
        const double t2 = now();
        sampled = true;
        probs_.resize(static_cast<size_t>(n_vocab));
        // q: the distribution each draft token was drawn from, or one-hot (nullptr)
        const auto q = [&](int i) {
            return draft_.q.empty() ? nullptr : draft_.q.data() + static_cast<size_t>(i) * n_vocab;
        };
        for (; j < k; ++j) {
            const int32_t d = draft[static_cast<size_t>(j)];
            sampler_.probs(row(j), n_vocab, probs_.data());
            if (speculative::accept_exact(probs_.data(), q(j), d, sampler_.uniform())) {
                sampler_.accept(d);
                continue;
            }
            // the residual in place of the distribution it comes from
            if (speculative::residual(probs_.data(), q(j), d, n_vocab, probs_.data())) {
                next = sampler_.sample_from(probs_.data(), n_vocab);
            }
            break;
        }
        stats_.sample_seconds += now() - t2;
    }
    // The row after the accepted prefix: the caller draws from it unless drawn above, and
    // scores the token from it when logprobs are on.
    if (!fused_greedy_ && (next < 0 || scorer_)) logits_.assign(row(j), row(j) + n_vocab);
    if (j < k) session_.truncate(p + 1 + j);
    // The pass as the scheduler should judge it: drafting, verifying, the acceptance's per-row
    // probabilities and the draw that follows (as a plain step's, timed_pass(1) above).
    proposers_[static_cast<size_t>(winner)]->verified(k, j);
    scheduler_->verified(winner, k, j, now() - t0 + (next < 0 && !fused_greedy_ ? last_sample_seconds_ : 0.0),
                         draft_.catch_up_seconds);
    ++stats_.n_spec_passes;
    stats_.n_drafted += k;
    stats_.n_accepted += j;
    if (stats_.drafted_per_position.size() < static_cast<size_t>(k)) {
        stats_.drafted_per_position.resize(static_cast<size_t>(k));
        stats_.accepted_per_position.resize(static_cast<size_t>(k));
    }
    stats_.accepted_per_pass.push_back(j);
    for (int i = 0; i < k; ++i) ++stats_.drafted_per_position[static_cast<size_t>(i)];
    for (int i = 0; i < j; ++i) ++stats_.accepted_per_position[static_cast<size_t>(i)];
    for (int i = 0; i < j; ++i) {
        const int32_t d = draft[static_cast<size_t>(i)];
        queue_.push_back({d, p + 1 + i, sampled, scorer_ ? scorer_->score(row(i), n_vocab, d) : sample::TokenLogprob{}});
    }
    return next;
}

void Generator::finish(const char* reason) {
    done_ = true;
    stats_.stop_reason = reason;
    // What this generation measured of the passes is where the next one on this model starts.
    if (scheduler_) session_.model().set_pass_times(fused_greedy_, scheduler_->pass_times());
}

bool Generator::release(std::string* piece, bool final) {
    size_t cut = std::string::npos;
    for (const std::string& s : params_.stop) {
        const size_t at = held_.find(s);
        if (at < cut) {  // the earliest match ends the text; it names the stop string (ties: the first listed)
            cut = at;
            stats_.stop_string = s;
        }
    }
    size_t show = held_.size();
    if (cut != std::string::npos) {
        show = cut;
    } else if (!final) {
        // Hold back the longest tail that is a proper prefix of a stop string.
        for (const std::string& s : params_.stop)
            for (size_t k = std::min(s.size() - 1, held_.size()); k > 0; --k)
                if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
                    show = std::min(show, held_.size() - k);
                    break;
                }
    }
    text_.append(held_, 0, show);
    if (piece) piece->append(held_, 0, show);
    held_.erase(0, cut != std::string::npos ? held_.size() : show);
    return cut != std::string::npos;
}

bool Generator::next(std::string* piece) {
    if (done_) return false;
    if (batched_) throw std::logic_error("a batched generation is stepped by its engine, not by next()");
    const double entered = now();
    const double prefill_before = stats_.prefill_seconds;
    const bool more = step(piece);
    stats_.end_to_end_seconds += now() - entered - (stats_.prefill_seconds - prefill_before);
    return more;
}

int32_t Generator::draw() {
    const int32_t n_vocab = session_.n_vocab();
    if (!screened_) return sampler_.sample(logits_.data(), n_vocab);
    if (!listed_) return sampler_.sample_screened(logits_.data(), n_vocab);
    if (!sl_.list.ok) return sampler_.sample_screened(sl_.full.data(), n_vocab);
    const backend::Shortlist& l = sl_.list;
    sample::ScreenedRow row{l.ids.data(), l.logits.data(), static_cast<int64_t>(l.ids.size()), l.thr,
                            [this](const int32_t* ids, int64_t n, float* out) {
                                session_.model().head_values(sl_.list, ids, n, out);
                            }};
    return sampler_.sample_screened(row);
}

bool Generator::take_token(std::string* piece, int32_t* out, int64_t* verified) {
    if (static_cast<int64_t>(tokens_.size()) >= params_.max_tokens) {
        finish("max_tokens");
        return false;
    }
    const double t0 = now();
    // An accepted draft token (already evaluated at `verified`), the target's next greedy
    // token, or a sample.
    *verified = -1;
    int32_t tok;
    bool recorded = false;
    if (!queue_.empty()) {
        tok = queue_.front().tok;
        *verified = queue_.front().pos;
        recorded = queue_.front().sampled;
        if (scorer_) logprobs_.push_back(std::move(queue_.front().logprob));
        queue_.pop_front();
    } else {
        if (next_ >= 0) {
            tok = next_;
        } else {
            tok = draw();
            last_sample_seconds_ = now() - t0;
        }
        // Not fused (scorer_ turns that off), so logits_ is the row tok was drawn from.
        if (scorer_) logprobs_.push_back(scorer_->score(logits_.data(), session_.n_vocab(), tok));
    }
    if (!recorded) sampler_.accept(tok);
    stats_.sample_seconds += now() - t0;
    ++stats_.n_generated;
    tokens_.push_back(tok);
    if (scheduler_) context_.push_back(tok);
    *out = tok;
    // Ending on an accepted draft token: the session keeps what precedes it, and it pending,
    // as when decoding plainly.
    const auto end_here = [&](const char* reason) {
        if (*verified >= 0) session_.truncate(*verified);
        queue_.clear();
        hold(tok);
        finish(reason);
    };
    const bool eog = std::find(eog_.begin(), eog_.end(), tok) != eog_.end();
    // Ids past the tokenizer's vocabulary (padding rows of the embedding) have no text.
    if (!eog && tok < tok_.vocab_size()) held_ += decoder_.push(tok);
    if (release(piece, eog)) {
        end_here("stop");
    } else if (eog) {
        end_here("eog");
    } else if (static_cast<int64_t>(tokens_.size()) >= params_.max_tokens) {
        end_here("max_tokens");
    }
    return !done_;
}

void Generator::flush(std::string* piece) {
    // The end: whatever the decoder and the stop-string check still hold is final text.
    if (stats_.stop_reason != "stop") {
        held_ += decoder_.flush();
        release(piece, true);
    }
}

bool Generator::step(std::string* piece) {
    if (!started_) start();
    if (reeval_ && !done_) {
        reeval_ = false;
        const double t0 = now();
        if (fused_greedy_) {
            next_ = session_.next_argmax(nullptr, 0);
        } else {
            logits_ = session_.last_logits();
            listed_ = false;
        }
        stats_.decode_seconds += now() - t0;
        ++stats_.n_forward;
    }
    while (!done_) {
        const size_t before = text_.size();
        int32_t tok;
        int64_t verified;
        if (!take_token(piece, &tok, &verified)) break;
        if (verified >= 0) {  // evaluated by the verify pass; next_ already holds what follows the last one
            if (queue_.empty()) {
                for (auto& p : proposers_) p->observe(context_);
            }
            if (text_.size() > before) return true;
            continue;
        }
        const double t1 = now();
        try {
            if (scheduler_) {
                if (logits_.empty()) logits_.resize(static_cast<size_t>(session_.n_vocab()));
                next_ = speculate(tok);
                if (queue_.empty()) {
                    for (auto& p : proposers_) p->observe(context_);
                }
            } else if (fused_greedy_) {
                next_ = session_.next_argmax(&tok, 1);
            } else if (screened_) {
                session_.eval_shortlist(&tok, 1, sampler_.head_margin(), sampler_.head_keep(), &sl_);
                listed_ = true;
            } else {
                session_.eval(&tok, 1, logits_.data(), 1);
                listed_ = false;
            }
        } catch (const state::ContextOverflow&) {
            finish("context");
            break;
        }
        stats_.decode_seconds += now() - t1;
        ++stats_.n_forward;
        if (scheduler_) {
            stats_.plain_tokens_per_second = scheduler_->plain_tokens_per_second();
            stats_.spec_balance_seconds = scheduler_->balance() - scheduler_->invested();
            stats_.spec_slowdown.resize(proposers_.size());
            for (size_t i = 0; i < proposers_.size(); ++i) stats_.spec_slowdown[i] = scheduler_->slowdown(static_cast<int>(i));
        }
        if (text_.size() > before) return true;
    }
    flush(piece);
    return false;
}

void Generator::start_batched() {
    if (started_) throw std::logic_error("start_batched: the generator has started already");
    if (!proposers_.empty()) {
        throw std::invalid_argument("batched decoding runs without speculation (as session-batched serving does)");
    }
    stats_.n_prompt = static_cast<int64_t>(prompt_.size());
    batched_ = true;
    started_ = true;
    feed_ = session_.rows_for(prompt_.data(), static_cast<int64_t>(prompt_.size()));
    reserve_output();
    seed_penalties();
    if (feed_.empty()) {  // continuing a session that holds its last position's logits (or can recompute them)
        logits_ = session_.last_logits();
        listed_ = false;
        emit(nullptr);
    }
}

void Generator::fed(int64_t n, const float* logits, int32_t argmax, Shortlisted* list, double seconds) {
    const bool prompt = stats_.n_generated == 0;
    (prompt ? stats_.prefill_seconds : stats_.decode_seconds) += seconds;
    if (!prompt) {
        stats_.end_to_end_seconds += seconds;
        ++stats_.n_forward;
    }
    feed_.erase(feed_.begin(), feed_.begin() + n);
    if (!feed_.empty()) return;  // more of the prompt to come
    if (fused_greedy_) {
        next_ = argmax;
    } else if (list) {
        std::swap(sl_, *list);
        listed_ = true;
    } else {
        logits_.assign(logits, logits + session_.n_vocab());
        listed_ = false;
    }
    const double t0 = now();
    emit(nullptr);
    stats_.end_to_end_seconds += now() - t0;
}

void Generator::emit(std::string* piece) {
    int32_t tok;
    int64_t verified;
    if (take_token(piece, &tok, &verified)) {
        feed_.assign(1, tok);
    } else {
        feed_.clear();
        flush(piece);
    }
}

void Generator::run() {
    while (next(nullptr)) {
    }
}

}  // namespace ds4::model
