#include "store/redis/cached_sync.h"

#include <algorithm>
#include <charconv>
#include <random>
#include <unordered_map>

#include "store/redis/client.h"
#include "store/redis/connection.h"
#include "store/redis/script_limit.h"
#include "store/redis/scripts.h"
#include "store/redis/shared.h"

namespace sluice::redis {
namespace {

// Each store's sequence numbers are its own: a random instance id names them.
std::string make_sequence_key(std::string_view prefix) {
  std::random_device random;
  const uint64_t id = (uint64_t{random()} << 32) ^ random();
  char hex[17];
  for (int i = 15; i >= 0; --i) hex[15 - i] = "0123456789abcdef"[(id >> (4 * i)) & 0xf];
  hex[16] = '\0';
  return std::string(prefix) + "sync:" + hex;
}

// The script's reply: three integers per key.
bool read_states(const redisReply* reply, size_t keys, std::vector<SyncState>* out) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 * keys)
    return false;
  out->resize(keys);
  for (size_t i = 0; i < 3 * keys; ++i) {
    if (reply->element[i]->type != REDIS_REPLY_INTEGER) return false;
  }
  for (size_t k = 0; k < keys; ++k) {
    (*out)[k].found = reply->element[3 * k]->integer != 0;
    (*out)[k].a = reply->element[3 * k + 1]->integer;
    (*out)[k].b = reply->element[3 * k + 2]->integer;
  }
  return true;
}

}  // namespace

// The key the script reads and writes for an item: its state key, or a fixed
// window's counter for the item's window (fixed_window.lua).
std::string CachedSync::state_key_of(const SyncItem& item) const {
  if (item.limit.algorithm != algorithm_name(Algorithm::kFixedWindow)) return item.redis_key;
  return window_key(item.redis_key, shared_.options.key_prefix, item.window);
}

CachedSync::CachedSync(CachedTable& table, Shared& shared)
    : table_(table), shared_(shared), sequence_key_(make_sequence_key(shared.options.key_prefix)) {
  if (shared_.options.cluster) slot_tags_ = slot_tags();
}

void CachedSync::run(Client& client, Done done) {
  if (in_flight_) {
    queued_.push_back(std::move(done));
    return;
  }
  start(client, {std::move(done)});
}

void CachedSync::start(Client& client, std::vector<Done> waiters) {
  // What failed goes again first, as it was; its slots (on one Redis, every
  // key) are held back from the new batch until it has gone through.
  flight_ = std::move(pending_);
  pending_.clear();
  const bool cluster = shared_.options.cluster;
  std::vector<bool> held(cluster ? 16384 : 1, false);
  for (const Batch& b : flight_) {
    for (const SyncItem& item : b.items) held[cluster ? key_slot(item.redis_key) : 0] = true;
  }
  Batch fresh;
  std::function<bool(std::string_view)> hold;
  if (!flight_.empty())
    hold = [&](std::string_view key) {
      return static_cast<bool>(held[cluster ? key_slot(key) : 0]);
    };
  fresh.items = table_.take_batch(&fresh.now, hold);
  if (!fresh.items.empty()) {
    fresh.sequence = ++sequence_;
    flight_.push_back(std::move(fresh));
  }
  if (flight_.empty()) {
    for (Done& d : waiters) d(Status());
    return;
  }
  in_flight_ = true;
  current_ = std::move(waiters);
  auto round = std::make_shared<Round>();
  round->failed.resize(flight_.size());
  std::vector<Part> parts;
  for (size_t b = 0; b < flight_.size(); ++b) {
    std::string error;
    if (!plan(b, &parts, &error)) {
      if (shared_.request_refresh) shared_.request_refresh();
      if (round->status.ok()) round->status = Error{ErrorCode::kStoreUnavailable, error};
      for (size_t i = 0; i < flight_[b].items.size(); ++i) round->failed[b].push_back(i);
    }
  }
  if (parts.empty()) {
    finish(client, *round);
    return;
  }
  // Every part is counted before the first is sent: one may fail at once.
  round->pending = parts.size();
  for (Part& part : parts)
    send(client, round, std::make_shared<const Part>(std::move(part)), false);
}

bool CachedSync::plan(size_t batch, std::vector<Part>* parts, std::string* error) const {
  const std::vector<SyncItem>& items = flight_[batch].items;
  if (!shared_.options.cluster) {
    Group all{sequence_key_, {}};
    all.items.resize(items.size());
    for (size_t i = 0; i < items.size(); ++i) all.items[i] = i;
    parts->push_back(Part{batch, -1, {std::move(all)}});
    return true;
  }
  const std::shared_ptr<const SlotMap> map = shared_.topology.snapshot();
  if (map == nullptr) {
    *error = "no cluster slot map yet";
    return false;
  }
  // The items by slot, each slot's in batch order; a master's slots in one
  // part, its lowest slot first (declared: it routes the call).
  std::vector<std::pair<uint16_t, size_t>> by_slot(items.size());
  for (size_t i = 0; i < items.size(); ++i) by_slot[i] = {key_slot(items[i].redis_key), i};
  std::stable_sort(by_slot.begin(), by_slot.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [slot, i] : by_slot) {
    if (map->slot_node[slot] < 0 || slot_tags_[slot] == UINT32_MAX) {
      *error = "cluster slot " + std::to_string(slot) + " is not in the slot map";
      return false;
    }
  }
  std::unordered_map<int, size_t> part_of_node;
  for (size_t k = 0; k < by_slot.size();) {
    const uint16_t slot = by_slot[k].first;
    Group group{sequence_key_ + ":{" + std::to_string(slot_tags_[slot]) + "}", {}};
    for (; k < by_slot.size() && by_slot[k].first == slot; ++k)
      group.items.push_back(by_slot[k].second);
    const auto [at, fresh] = part_of_node.try_emplace(map->slot_node[slot], parts->size());
    if (fresh) parts->push_back(Part{batch, slot, {}});
    (*parts)[at->second].groups.push_back(std::move(group));
  }
  return true;
}

void CachedSync::send(Client& client, const std::shared_ptr<Round>& round,
                      const std::shared_ptr<const Part>& part, bool use_eval) {
  const Batch& batch = flight_[part->batch];
  const Group& first = part->groups.front();
  size_t items = 0;
  size_t further_keys = 0;
  for (const Group& g : part->groups) items += g.items.size();
  for (size_t g = 1; g < part->groups.size(); ++g) further_keys += 2 + part->groups[g].items.size();
  std::string frame;
  append_array_header(frame, 3 + 1 + first.items.size() + 4 + further_keys + 6 * items);
  append_bulk(frame, use_eval ? "EVAL" : "EVALSHA");
  append_bulk(frame, use_eval ? kCachedSyncScript : kCachedSyncScriptSha1);
  append_bulk(frame, static_cast<int64_t>(1 + first.items.size()));
  append_bulk(frame, first.sequence_key);
  for (size_t i : first.items) append_bulk(frame, state_key_of(batch.items[i]));
  append_bulk(frame, batch.now.count() / 1'000);
  append_bulk(frame, static_cast<int64_t>(batch.sequence));
  append_bulk(frame, static_cast<int64_t>(shared_.options.ttl_extra.count()));
  append_bulk(frame, static_cast<int64_t>(part->groups.size() - 1));
  for (size_t g = 1; g < part->groups.size(); ++g) {
    const Group& group = part->groups[g];
    append_bulk(frame, static_cast<int64_t>(1 + group.items.size()));
    append_bulk(frame, group.sequence_key);
    for (size_t i : group.items) append_bulk(frame, state_key_of(batch.items[i]));
  }
  for (const Group& group : part->groups) {
    for (size_t i : group.items) {
      const SyncItem& item = batch.items[i];
      append_bulk(frame, item.limit.algorithm);
      append_bulk(frame, static_cast<int64_t>(item.limit.p1));
      append_bulk(frame, static_cast<int64_t>(item.limit.p2));
      append_bulk(frame, static_cast<int64_t>(item.limit.p3));
      append_bulk(frame, static_cast<int64_t>(item.hits));
      append_bulk(frame, item.window);
    }
  }
  // A sync carries many keys: at least 250 ms, whatever the decisions' timeout.
  const auto timeout =
      std::max<std::chrono::milliseconds>(shared_.options.timeout, std::chrono::milliseconds(250));
  client.command(
      std::move(frame), std::string(), part->slot, timeout,
      [this, &client, round, part, use_eval, items](Status s, const redisReply* reply) {
        if (!s.ok() && !use_eval && s.error().message.starts_with("NOSCRIPT")) {
          Counters::add(shared_.counters.script_loads);
          send(client, round, part, true);
          return;
        }
        std::vector<SyncState> states;
        if (s.ok() && !read_states(reply, items, &states))
          s = Error{ErrorCode::kStoreUnavailable, "unexpected reply to the sync script"};
        if (s.ok()) {
          const Batch& batch = flight_[part->batch];
          size_t k = 0;
          for (const Group& group : part->groups) {
            for (size_t i : group.items) table_.settle({&batch.items[i], 1}, {&states[k++], 1});
          }
        } else if (s.error().message.starts_with("NOTLOCAL") && shared_.request_refresh) {
          // A slot moved or is migrating: the resend follows a fresh map.
          shared_.request_refresh();
        }
        part_done(client, round, *part, std::move(s));
      });
}

void CachedSync::part_done(Client& client, const std::shared_ptr<Round>& round, const Part& part,
                           Status status) {
  if (!status.ok()) {
    if (round->status.ok()) round->status = std::move(status);
    for (const Group& group : part.groups) {
      round->failed[part.batch].insert(round->failed[part.batch].end(), group.items.begin(),
                                       group.items.end());
    }
  }
  if (--round->pending > 0) return;
  finish(client, *round);
}

void CachedSync::drop(std::vector<Batch>& batches, const std::string& redis_key) {
  for (Batch& b : batches) {
    std::erase_if(b.items, [&](const SyncItem& item) { return item.redis_key == redis_key; });
  }
  std::erase_if(batches, [](const Batch& b) { return b.items.empty(); });
}

void CachedSync::forget(const std::string& redis_key) {
  if (in_flight_) {
    forgotten_.push_back(redis_key);
    return;
  }
  drop(pending_, redis_key);
}

void CachedSync::finish(Client& client, const Round& round) {
  in_flight_ = false;
  size_t keys = 0;
  size_t failed = 0;
  for (size_t b = 0; b < flight_.size(); ++b) {
    keys += flight_[b].items.size();
    if (round.failed[b].empty()) continue;
    Batch again{flight_[b].sequence, flight_[b].now, {}};
    for (size_t i : round.failed[b]) again.items.push_back(std::move(flight_[b].items[i]));
    failed += again.items.size();
    pending_.push_back(std::move(again));
  }
  flight_.clear();
  std::vector<std::string> forgotten = std::move(forgotten_);
  forgotten_.clear();
  for (const std::string& key : forgotten) drop(pending_, key);
  const Status status = round.status;
  if (status.ok()) {
    syncs_.fetch_add(1, std::memory_order_relaxed);
  } else {
    failures_.fetch_add(1, std::memory_order_relaxed);
    shared_.log.log(
        ErrorKind::kConnection,
        "cached mode: sync of " + std::to_string(failed) + " of " + std::to_string(keys) +
            " keys failed (their hits are kept and sent again): " + status.error().message);
  }
  std::vector<Done> done = std::move(current_);
  current_.clear();
  for (Done& d : done) d(status);
  if (!queued_.empty()) {
    std::vector<Done> next = std::move(queued_);
    queued_.clear();
    start(client, std::move(next));
  }
}

}  // namespace sluice::redis
