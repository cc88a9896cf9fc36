#include "store/redis/sentinel.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "store/redis/script_reply.h"

namespace sluice::redis {
namespace {

constexpr std::string_view kSwitchMaster = "+switch-master";

std::string names(const std::vector<std::string>& list) {
  std::string out;
  for (const std::string& n : list) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

SentinelWatch::SentinelWatch(boost::asio::io_context& io, Shared& shared, Client& queries,
                             std::chrono::milliseconds timeout, std::function<void()> changed,
                             std::function<void(Outcome)> round_done)
    : io_(io),
      shared_(shared),
      queries_(queries),
      timeout_(timeout),
      changed_(std::move(changed)),
      round_done_(std::move(round_done)) {
  for (const Endpoint& s : shared_.sentinels) order_.push_back(s.name());
}

SentinelWatch::~SentinelWatch() {
  alive_.reset();
  subscriptions_.clear();
}

void SentinelWatch::start() {
  for (const Endpoint& s : shared_.sentinels) {
    subscriptions_.push_back(std::make_unique<Connection>(io_, s, shared_, *this));
    subscriptions_.back()->ensure_connecting();
  }
  ask();
}

void SentinelWatch::ask() {
  if (asking_) {
    again_ = true;
    return;
  }
  asking_ = true;
  answered_ = false;
  ask_from(0);
}

void SentinelWatch::ask_from(size_t i) {
  if (i == order_.size()) {
    end_round(answered_ ? Outcome::kUnknownMaster : Outcome::kNoAnswer);
    return;
  }
  const std::string sentinel = order_[i];
  queries_.command(
      command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", shared_.options.sentinel.master}), sentinel,
      -1, timeout_,
      [this, alive = std::weak_ptr<bool>(alive_), i, sentinel](Status s, const redisReply* reply) {
        if (alive.expired()) return;
        std::string node;
        if (s.ok() && read_master_address(reply, &node)) {
          answered_ = true;
          if (!node.empty()) {
            ask_first(sentinel);
            publish(node, "the sentinel at " + sentinel);
            end_round(Outcome::kMaster);
            return;
          }
        }
        ask_from(i + 1);
      });
}

// The sentinel that answered, or announced a switch, knows the newest
// configuration: asked first from then on (a sentinel that has not heard of
// a failover yet names the old master for a while).
void SentinelWatch::ask_first(const std::string& sentinel) {
  const auto at = std::find(order_.begin(), order_.end(), sentinel);
  if (at != order_.end()) std::rotate(order_.begin(), at, at + 1);
}

void SentinelWatch::end_round(Outcome outcome) {
  asking_ = false;
  const std::string& master = shared_.options.sentinel.master;
  if (outcome == Outcome::kUnknownMaster) {
    shared_.log.log(ErrorKind::kConnection,
                    "the sentinels (" + names(order_) + ") know no master named '" + master +
                        "' (SENTINEL GET-MASTER-ADDR-BY-NAME answered nil)");
  } else if (outcome == Outcome::kNoAnswer) {
    shared_.log.log(ErrorKind::kConnection,
                    "no sentinel answered (" + names(order_) + ") for the master '" + master + "'");
  }
  if (round_done_) round_done_(outcome);
  if (again_) {
    again_ = false;
    ask();
  }
}

void SentinelWatch::publish(const std::string& node, const std::string& source) {
  const std::string before = shared_.master.get();
  if (!shared_.master.set(node)) return;
  const std::string& master = shared_.options.sentinel.master;
  if (before.empty()) {
    spdlog::info("redis store: master '{}' at {} (from {})", master, node, source);
  } else {
    Counters::add(shared_.counters.master_switches);
    spdlog::warn("redis store: master '{}' moved from {} to {} (from {})", master, before, node,
                 source);
  }
  if (changed_) changed_();
}

void SentinelWatch::on_state(Connection& connection, bool up) {
  if (!up) return;
  const std::string subscribe = command({"SUBSCRIBE", std::string(kSwitchMaster)});
  connection.send(subscribe, nullptr);
  // A switch announced while this connection was down was missed.
  ask();
}

void SentinelWatch::on_reply(Connection& connection, redisReply* reply, void* /*privdata*/) {
  // The SUBSCRIBE's confirmation; an error (a user without the channel's
  // permission) leaves the store on questions alone.
  if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
    shared_.log.log(ErrorKind::kConnection, "sentinel at " + connection.name() +
                                                " refused SUBSCRIBE " + std::string(kSwitchMaster) +
                                                ": " + std::string(reply->str, reply->len));
  }
}

bool SentinelWatch::on_push(Connection& connection, const redisReply* reply) {
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3) return false;
  for (size_t i = 0; i < 3; ++i) {
    if (reply->element[i]->type != REDIS_REPLY_STRING) return false;
  }
  const auto text = [&](size_t i) {
    return std::string_view(reply->element[i]->str, reply->element[i]->len);
  };
  if (text(0) != "message" || text(1) != kSwitchMaster) return false;
  std::string node;
  if (read_switch_master(text(2), shared_.options.sentinel.master, &node)) {
    ask_first(connection.name());
    publish(node, "+switch-master from the sentinel at " + connection.name());
  }
  return true;
}

}  // namespace sluice::redis
