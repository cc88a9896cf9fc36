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

// Per cluster slot, the smallest number whose decimal text, as a hash tag,
// puts a key in that slot (every slot has one below 200,000).
std::vector<uint32_t> make_slot_tags() {
  constexpr uint32_t kNone = UINT32_MAX;
  std::vector<uint32_t> tags(16384, kNone);
  size_t left = tags.size();
  char text[16] = "{";
  for (uint32_t n = 0; left > 0 && n < 10'000'000; ++n) {
    char* end = std::to_chars(text + 1, text + sizeof(text) - 1, n).ptr;
    *end++ = '}';
    uint32_t& tag = tags[key_slot(std::string_view(text, static_cast<size_t>(end - text)))];
    if (tag == kNone) {
      tag = n;
      --left;
    }
  }
  return tags;
}

}  // namespace

CachedSync::CachedSync(CachedTable& table, Shared& shared)
    : table_(table), shared_(shared), sequence_key_(make_sequence_key(shared.options.key_prefix)) {
  if (shared_.options.cluster) slot_tags_ = make_slot_tags();
}

void CachedSync::run(Client& client, Done done) {
  if (in_flight_) {
    queued_.push_back(std::move(done));
    return;
  }
  start(client, {std::move(done)});
}

void CachedSync::start(Client& client, std::vector<Done> waiters) {
  if (!resend_) {
    batch_ = table_.take_batch(&batch_now_);
    if (batch_.empty()) {
      for (Done& d : waiters) d(Status());
      return;
    }
    ++sequence_;
  }
  in_flight_ = true;
  current_ = std::move(waiters);
  std::vector<Part> parts;
  std::string error;
  if (!plan(&parts, &error)) {
    if (shared_.request_refresh) shared_.request_refresh();
    finish(client, Error{ErrorCode::kStoreUnavailable, error});
    return;
  }
  // Every part is counted before the first is sent: one may fail at once.
  auto round = std::make_shared<Round>();
  round->pending = parts.size();
  round->states.resize(batch_.size());
  for (Part& part : parts)
    send(client, round, std::make_shared<const Part>(std::move(part)), false);
}

bool CachedSync::plan(std::vector<Part>* parts, std::string* error) {
  parts->clear();
  if (!shared_.options.cluster) {
    Group all{sequence_key_, {}};
    all.items.resize(batch_.size());
    for (size_t i = 0; i < batch_.size(); ++i) all.items[i] = i;
    parts->push_back(Part{-1, {std::move(all)}});
    return true;
  }
  const std::shared_ptr<const SlotMap> map = shared_.topology.snapshot();
  if (map == nullptr) {
    *error = "no cluster slot map yet";
    return false;
  }
  // The items by slot, each slot's in batch order; a master's slots in one
  // part, its lowest slot first (declared: it routes the call).
  std::vector<std::pair<uint16_t, size_t>> by_slot(batch_.size());
  for (size_t i = 0; i < batch_.size(); ++i) by_slot[i] = {key_slot(batch_[i].redis_key), i};
  std::stable_sort(by_slot.begin(), by_slot.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::unordered_map<int, size_t> part_of_node;
  for (size_t k = 0; k < by_slot.size();) {
    const uint16_t slot = by_slot[k].first;
    const int node = map->slot_node[slot];
    if (node < 0 || slot_tags_[slot] == UINT32_MAX) {
      *error = "cluster slot " + std::to_string(slot) + " is not in the slot map";
      return false;
    }
    Group group{sequence_key_ + ":{" + std::to_string(slot_tags_[slot]) + "}", {}};
    for (; k < by_slot.size() && by_slot[k].first == slot; ++k)
      group.items.push_back(by_slot[k].second);
    const auto [at, fresh] = part_of_node.try_emplace(node, parts->size());
    if (fresh) parts->push_back(Part{slot, {}});
    (*parts)[at->second].groups.push_back(std::move(group));
  }
  return true;
}

void CachedSync::send(Client& client, const std::shared_ptr<Round>& round,
                      const std::shared_ptr<const Part>& part, bool use_eval) {
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
  for (size_t i : first.items) append_bulk(frame, batch_[i].redis_key);
  append_bulk(frame, batch_now_.count() / 1'000);
  append_bulk(frame, static_cast<int64_t>(sequence_));
  append_bulk(frame, static_cast<int64_t>(shared_.options.ttl_extra.count()));
  append_bulk(frame, static_cast<int64_t>(part->groups.size() - 1));
  for (size_t g = 1; g < part->groups.size(); ++g) {
    const Group& group = part->groups[g];
    append_bulk(frame, static_cast<int64_t>(1 + group.items.size()));
    append_bulk(frame, group.sequence_key);
    for (size_t i : group.items) append_bulk(frame, batch_[i].redis_key);
  }
  for (const Group& group : part->groups) {
    for (size_t i : group.items) {
      const SyncItem& item = batch_[i];
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
          size_t k = 0;
          for (const Group& group : part->groups) {
            for (size_t i : group.items) round->states[i] = states[k++];
          }
        } else if (s.error().message.starts_with("NOTLOCAL") && shared_.request_refresh) {
          // A slot moved or is migrating: the resend follows a fresh map.
          shared_.request_refresh();
        }
        part_done(client, round, std::move(s));
      });
}

void CachedSync::part_done(Client& client, const std::shared_ptr<Round>& round, Status status) {
  if (!status.ok() && round->status.ok()) round->status = std::move(status);
  if (--round->pending > 0) return;
  if (round->status.ok()) table_.settle(batch_, round->states);
  finish(client, round->status);
}

void CachedSync::forget(const std::string& redis_key) {
  if (in_flight_) {
    forgotten_.push_back(redis_key);
    return;
  }
  if (!resend_) return;
  std::erase_if(batch_, [&](const SyncItem& item) { return item.redis_key == redis_key; });
  if (batch_.empty()) resend_ = false;
}

void CachedSync::finish(Client& client, Status status) {
  in_flight_ = false;
  resend_ = !status.ok();
  std::vector<std::string> forgotten = std::move(forgotten_);
  forgotten_.clear();
  for (const std::string& key : forgotten) forget(key);
  if (status.ok()) {
    syncs_.fetch_add(1, std::memory_order_relaxed);
  } else {
    failures_.fetch_add(1, std::memory_order_relaxed);
    shared_.log.log(
        ErrorKind::kConnection,
        "cached mode: sync of " + std::to_string(batch_.size()) +
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
