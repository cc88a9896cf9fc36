// SentinelWatch: finds the master that a group of Redis Sentinels names
// (RedisStoreOptions::sentinel), and follows it, on the store's internal
// thread.
//
// ask() puts SENTINEL GET-MASTER-ADDR-BY-NAME to the sentinels in turn,
// through the internal client (each question with its own timeout), the one
// that answered last first, until one names the master; a round asked for
// while one is under way follows it. Each sentinel's +switch-master channel
// is subscribed on a connection of its own (subscribed again after a
// reconnect, with a round of questions for what was missed meanwhile), and a
// message about this master publishes its new address at once. A new
// address goes to Shared::master, then to `changed`.
//
// A round in which some sentinel answered but none named the master (nil:
// they know no master of that name) ends kUnknownMaster; one in which no
// sentinel answered, kNoAnswer. Both are logged (rate-limited).
//
// Thread-safety: none; the internal thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "store/redis/client.h"
#include "store/redis/connection.h"
#include "store/redis/shared.h"

namespace sluice::redis {

class SentinelWatch final : public Connection::Listener {
 public:
  enum class Outcome { kMaster, kUnknownMaster, kNoAnswer };

  // `queries`: the internal client, which outlives this watch.
  SentinelWatch(boost::asio::io_context& io, Shared& shared, Client& queries,
                std::chrono::milliseconds timeout, std::function<void()> changed,
                std::function<void(Outcome)> round_done);
  ~SentinelWatch() override;
  SentinelWatch(const SentinelWatch&) = delete;
  SentinelWatch& operator=(const SentinelWatch&) = delete;

  // Subscribes to every sentinel's +switch-master, and asks.
  void start();
  void ask();

 private:
  void ask_from(size_t i);
  void ask_first(const std::string& sentinel);
  void end_round(Outcome outcome);
  void publish(const std::string& node, const std::string& source);

  void on_reply(Connection& connection, redisReply* reply, void* privdata) override;
  void on_state(Connection& connection, bool up) override;
  bool on_push(Connection& connection, const redisReply* reply) override;

  boost::asio::io_context& io_;
  Shared& shared_;
  Client& queries_;
  const std::chrono::milliseconds timeout_;
  std::function<void()> changed_;
  std::function<void(Outcome)> round_done_;
  std::vector<std::string> order_;  // the sentinels' names, the last that answered first
  std::vector<std::unique_ptr<Connection>> subscriptions_;
  bool asking_ = false;
  bool again_ = false;
  bool answered_ = false;  // in this round, a sentinel answered
  // Checked by the questions' callbacks, which may run after the watch is gone.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace sluice::redis
