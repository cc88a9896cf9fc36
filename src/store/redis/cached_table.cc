#include "store/redis/cached_table.h"

#include <algorithm>

#include "core/fixed_window.h"
#include "core/token_bucket.h"

namespace sluice::redis {
namespace {

constexpr int64_t kNanosPerMicro = 1'000;

// Local units per script unit of a bucket: the local arithmetic counts a
// token in units of ns (Limit::token_units()), the scripts in units of us
// (ScriptLimit::p2). Both reduce refill_tokens / period by their gcd, so the
// ratio is 1000 * gcd_us / gcd_ns, a whole number.
int64_t local_units_per_script_unit(const Limit& limit, const ScriptLimit& script) {
  return limit.token_units() / static_cast<int64_t>(script.p2);
}

}  // namespace

Status CachedTable::limit_fits(const Limit& limit) {
  const auto refuse = [&](std::string why) {
    return Error{ErrorCode::kInvalidArgument, "store.redis.mode cached cannot decide " +
                                                  limit.describe() + " locally: " + why +
                                                  " (use mode exact for this limit's deployment)"};
  };
  if (limit.block().count() != 0)
    return refuse("a block must be seen by every instance the moment it starts");
  switch (limit.algorithm()) {
    case Algorithm::kTokenBucket: {
      Result<ScriptLimit> s = script_limit(limit);
      if (!s.ok()) return s.error();
      if (limit.token_units() % static_cast<int64_t>(s.value().p2) != 0)
        return refuse("its token does not convert exactly between ns and us units");
      return {};
    }
    case Algorithm::kFixedWindow:
      return {};
    case Algorithm::kGcra:
      return refuse("gcra makes token_bucket's decisions; use token_bucket");
    case Algorithm::kSlidingWindow:
    case Algorithm::kSlidingLog:
      return refuse("only token_bucket and fixed_window merge hits from several instances");
    case Algorithm::kConcurrency:
      return refuse("a slot given back by another instance would not be seen");
  }
  return refuse("unknown algorithm");
}

CachedTable::Entry* CachedTable::find_or_add(const Limit& limit, std::string redis_key) {
  auto it = entries_.find(redis_key);
  if (it != entries_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return &it->second;
  }
  Result<ScriptLimit> script = script_limit(limit);
  if (!script.ok()) return nullptr;
  if (entries_.size() >= max_keys_) evict_one();
  auto [added, _] = entries_.try_emplace(std::move(redis_key), limit, script.value());
  lru_.push_front(added->first);
  added->second.lru = lru_.begin();
  list_dirty(added->second);  // to fetch
  return &added->second;
}

void CachedTable::list_dirty(Entry& e) {
  if (e.listed) return;
  e.listed = true;
  dirty_.emplace_back(*e.lru);
  // While syncs fail, keys evicted and added again would pile up here: drop
  // the names of keys gone and the repeats, keeping it near the table's size.
  if (dirty_.size() > 2 * max_keys_ + 16) {
    std::vector<Entry*> kept;
    std::erase_if(dirty_, [&](const std::string& key) {
      auto it = entries_.find(key);
      if (it == entries_.end() || !it->second.listed) return true;
      it->second.listed = false;  // a repeat of this key is dropped
      kept.push_back(&it->second);
      return false;
    });
    for (Entry* k : kept) k->listed = true;
  }
}

// The least recently used key with nothing to send: its state is Redis's,
// so dropping it loses nothing (its next request asks Redis again). Looks at
// a few keys from the old end only: when those all have hits to send, the
// table holds one more until a sync has sent them.
void CachedTable::evict_one() {
  constexpr int kLooks = 16;
  int looks = 0;
  for (auto it = lru_.end(); it != lru_.begin() && looks < kLooks; ++looks) {
    --it;
    auto e = entries_.find(std::string(*it));
    const bool in_this_call = std::any_of(undo_.begin(), undo_.end(),
                                          [&](const auto& u) { return u.first == &e->second; });
    if (e->second.unsent == 0 && e->second.in_flight == 0 && !in_this_call) {
      lru_.erase(it);
      entries_.erase(e);
      return;
    }
  }
}

Result<CachedTable::Outcome> CachedTable::decide(std::span<const AcquireRequest> requests,
                                                 std::string_view key_prefix, Nanos now,
                                                 std::span<Decision> out, bool* fetch_soon) {
  if (out.size() != requests.size())
    return Error{ErrorCode::kInvalidArgument, "acquire: out must have one decision per request"};
  for (const AcquireRequest& r : requests) {
    if (r.limit == nullptr) return Error{ErrorCode::kInvalidArgument, "acquire: null limit"};
    if (Status s = core::check_cost(*r.limit, r.cost); !s.ok()) return s.error();
    if (Status s = core::check_max_wait(*r.limit, r.max_wait); !s.ok()) return s.error();
    if (Status s = limit_fits(*r.limit); !s.ok()) return s.error();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  latest_now_ = std::max(latest_now_, now);
  bool all_fetched = true;
  undo_.clear();
  for (const AcquireRequest& r : requests) {
    Entry* e = find_or_add(*r.limit, state_key(key_prefix, *r.limit, r.key));
    if (e == nullptr || !e->fetched) all_fetched = false;
    undo_.push_back({e, e != nullptr ? e->local : core::PackedState{}});
  }
  if (!all_fetched) {
    // Redis charges every limit of the request: the fetched ones' local
    // states learn it at the next sync.
    bool again = false;
    for (auto& [e, _] : undo_) {
      if (e == nullptr) continue;
      if (e->fetched) {
        list_dirty(*e);
      } else {
        // Asked again while its fetch is still to be sent (not in flight).
        again = again || (e->asked && e->listed);
        e->asked = true;
      }
    }
    if (again && ++asked_again_ == kAsksBeforeFetch && fetch_soon != nullptr) *fetch_soon = true;
    return Outcome::kAskRedis;
  }
  // Each limit steps its key's state in turn (a key named twice sees the
  // first step); a denial puts every state back: all-or-nothing.
  bool all_allowed = true;
  for (size_t i = 0; i < requests.size(); ++i) {
    Entry& e = *undo_[i].first;
    const core::PackedStep step =
        core::step(e.limit, e.local, now, requests[i].cost, requests[i].max_wait);
    out[i] = step.decision;
    out[i].decided_at = now;
    e.local = step.next;
    all_allowed = all_allowed && step.decision.allowed;
  }
  for (size_t i = requests.size(); i-- > 0;) {
    Entry& e = *undo_[i].first;
    list_dirty(e);
    if (!all_allowed) {
      e.local = undo_[i].second;
      continue;
    }
    e.last_now = std::max(e.last_now, now);
    if (e.limit.algorithm() == Algorithm::kFixedWindow) {
      // Hits of a window that has ended are dropped: no decision reads it again.
      const int64_t window = e.local.a;
      if (window != e.unsent_window) e.unsent = 0;
      e.unsent_window = window;
    }
    e.unsent += requests[i].cost;
  }
  return Outcome::kDecided;
}

std::vector<SyncItem> CachedTable::take_batch(Nanos* now,
                                              const std::function<bool(std::string_view)>& hold) {
  std::lock_guard<std::mutex> lock(mutex_);
  *now = latest_now_;
  std::vector<SyncItem> batch;
  std::vector<std::string> held;
  batch.reserve(dirty_.size());
  for (std::string& key : dirty_) {
    auto it = entries_.find(key);
    if (it == entries_.end() || !it->second.listed) continue;  // gone, or listed twice
    if (hold && hold(key)) {
      held.push_back(std::move(key));
      continue;
    }
    Entry& e = it->second;
    e.listed = false;
    uint64_t hits = e.unsent;
    int64_t window = e.unsent_window;
    if (e.limit.algorithm() == Algorithm::kFixedWindow) {
      // The counter of the window now: hits of an ended one are dropped, as
      // no decision reads that window again; none (a first fetch) reads it.
      const int64_t current = window_index(latest_now_.count() / 1'000, e.script.p2);
      if (hits == 0 || window < current) {
        hits = 0;
        window = current;
      }
    }
    batch.push_back(SyncItem{std::move(key), e.script, hits, window});
    e.in_flight += hits;
    e.unsent = 0;
  }
  dirty_ = std::move(held);
  asked_again_ = 0;
  return batch;
}

core::PackedState CachedTable::from_script(const Entry& e, const SyncState& s, Nanos now) {
  if (!s.found) return core::fresh_state(e.limit, now);
  if (e.limit.algorithm() == Algorithm::kFixedWindow) return {s.a, s.b};
  // token_bucket: a level far in debt that would not fit counts as empty
  // for as long as it takes to refill.
  int64_t level;
  if (__builtin_mul_overflow(s.a, local_units_per_script_unit(e.limit, e.script), &level))
    level = s.a < 0 ? INT64_MIN / 4 : static_cast<int64_t>(e.limit.size()) * e.limit.token_units();
  return core::detail::pack(core::TokenBucketState{level, s.b * kNanosPerMicro});
}

core::PackedState CachedTable::charge(const Entry& e, core::PackedState state, uint64_t hits,
                                      int64_t window, Nanos now) {
  if (hits == 0) return state;
  if (e.limit.algorithm() == Algorithm::kFixedWindow) {
    if (window == state.a) return {state.a, state.b + static_cast<int64_t>(hits)};
    if (window > state.a) return {window, static_cast<int64_t>(hits)};
    return state;
  }
  core::TokenBucketState s =
      core::token_bucket_refill(e.limit, core::detail::unpack<core::TokenBucketState>(state), now);
  s.level_units -= static_cast<int64_t>(hits) * e.limit.token_units();
  return core::detail::pack(s);
}

void CachedTable::settle(std::span<const SyncItem> batch, std::span<const SyncState> states) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = 0; i < batch.size() && i < states.size(); ++i) {
    auto it = entries_.find(batch[i].redis_key);
    if (it == entries_.end()) continue;  // reset meanwhile
    Entry& e = it->second;
    e.in_flight -= std::min(e.in_flight, batch[i].hits);
    // Redis's state holds every hit it was sent; the ones decided since the
    // batch left are charged on top, as the next sync will charge them.
    const Nanos at = std::max(e.last_now, latest_now_);
    e.local = charge(e, from_script(e, states[i], at), e.unsent, e.unsent_window, e.last_now);
    e.fetched = true;
  }
}

void CachedTable::forget(const std::string& redis_key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(redis_key);
  if (it == entries_.end()) return;
  lru_.erase(it->second.lru);
  entries_.erase(it);
}

size_t CachedTable::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

}  // namespace sluice::redis
