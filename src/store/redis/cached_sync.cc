#include "store/redis/cached_sync.h"

#include <algorithm>
#include <random>

#include "store/redis/client.h"
#include "store/redis/connection.h"
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

CachedSync::CachedSync(CachedTable& table, Shared& shared)
    : table_(table), shared_(shared), sequence_key_(make_sequence_key(shared.options.key_prefix)) {}

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
  send(client, false);
}

void CachedSync::send(Client& client, bool use_eval) {
  std::string frame;
  append_array_header(frame, 3 + 1 + batch_.size() + 3 + 6 * batch_.size());
  append_bulk(frame, use_eval ? "EVAL" : "EVALSHA");
  append_bulk(frame, use_eval ? kCachedSyncScript : kCachedSyncScriptSha1);
  append_bulk(frame, static_cast<int64_t>(1 + batch_.size()));
  append_bulk(frame, sequence_key_);
  for (const SyncItem& item : batch_) append_bulk(frame, item.redis_key);
  append_bulk(frame, batch_now_.count() / 1'000);
  append_bulk(frame, static_cast<int64_t>(sequence_));
  append_bulk(frame, static_cast<int64_t>(shared_.options.ttl_extra.count()));
  for (const SyncItem& item : batch_) {
    append_bulk(frame, item.limit.algorithm);
    append_bulk(frame, static_cast<int64_t>(item.limit.p1));
    append_bulk(frame, static_cast<int64_t>(item.limit.p2));
    append_bulk(frame, static_cast<int64_t>(item.limit.p3));
    append_bulk(frame, static_cast<int64_t>(item.hits));
    append_bulk(frame, item.window);
  }
  // A sync carries many keys: at least 250 ms, whatever the decisions' timeout.
  const auto timeout =
      std::max<std::chrono::milliseconds>(shared_.options.timeout, std::chrono::milliseconds(250));
  client.command(std::move(frame), std::string(), -1, timeout,
                 [this, &client, use_eval](Status s, const redisReply* reply) {
                   if (!s.ok() && !use_eval && s.error().message.starts_with("NOSCRIPT")) {
                     Counters::add(shared_.counters.script_loads);
                     send(client, true);
                     return;
                   }
                   std::vector<SyncState> states;
                   if (s.ok() && !read_states(reply, batch_.size(), &states))
                     s = Error{ErrorCode::kStoreUnavailable, "unexpected reply to the sync script"};
                   if (s.ok()) table_.settle(batch_, states);
                   finish(client, std::move(s));
                 });
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
