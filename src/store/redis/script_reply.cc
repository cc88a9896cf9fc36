#include "store/redis/script_reply.h"

#include <charconv>
#include <cstdint>
#include <limits>

namespace sluice::redis {
namespace {

bool starts_with_word(std::string_view message, std::string_view word) {
  return message.size() >= word.size() && message.substr(0, word.size()) == word &&
         (message.size() == word.size() || message[word.size()] == ' ');
}

// "MOVED 3999 127.0.0.1:6381" -> slot and node.
bool parse_redirect(std::string_view message, int* slot, std::string_view* node) {
  const size_t a = message.find(' ');
  if (a == std::string_view::npos) return false;
  const size_t b = message.find(' ', a + 1);
  if (b == std::string_view::npos) return false;
  const std::string_view slot_text = message.substr(a + 1, b - a - 1);
  auto [end, ec] = std::from_chars(slot_text.data(), slot_text.data() + slot_text.size(), *slot);
  if (ec != std::errc() || end != slot_text.data() + slot_text.size() || *slot < 0 ||
      *slot >= 16384)
    return false;
  *node = message.substr(b + 1);
  return !node->empty();
}

// Errors that say the server cannot serve now, as opposed to a script error.
bool is_server_error(std::string_view m) {
  for (std::string_view word : {"LOADING", "BUSY", "CLUSTERDOWN", "MASTERDOWN", "NOAUTH",
                                "WRONGPASS", "NOPERM", "MISCONF", "TRYAGAIN"}) {
    if (starts_with_word(m, word)) return true;
  }
  return m.starts_with("ERR Protocol error");
}

// hiredis's own functions, which bound_reply_arrays() wraps.
const redisReplyObjectFunctions* hiredis_functions = nullptr;
redisReplyObjectFunctions bounded_functions;

void* create_bounded_array(const redisReadTask* task, int elements) {
  if (elements > kMaxReplyElements) return nullptr;  // the reader fails the reply
  return hiredis_functions->createArray(task, elements);
}

}  // namespace

void bound_reply_arrays(redisReader* reader) {
  // Every reader starts with the same hiredis functions: wrap them once.
  static const bool wrapped = [reader] {
    hiredis_functions = reader->fn;
    bounded_functions = *reader->fn;
    bounded_functions.createArray = create_bounded_array;
    return true;
  }();
  (void)wrapped;
  if (reader->fn == hiredis_functions) reader->fn = &bounded_functions;
}

ErrorReply read_error_reply(std::string_view message) {
  ErrorReply e;
  if (starts_with_word(message, "NOSCRIPT")) {
    e.kind = ErrorReply::Kind::kNoScript;
  } else if (const bool moved = starts_with_word(message, "MOVED");
             moved || starts_with_word(message, "ASK")) {
    e.kind = !parse_redirect(message, &e.slot, &e.node) ? ErrorReply::Kind::kBadRedirect
             : moved                                    ? ErrorReply::Kind::kMoved
                                                        : ErrorReply::Kind::kAsk;
  } else if (starts_with_word(message, "TRYAGAIN")) {
    e.kind = ErrorReply::Kind::kTryAgain;
  } else if (starts_with_word(message, "NOTLOCAL")) {
    e.kind = ErrorReply::Kind::kNotLocal;
  } else if (starts_with_word(message, "OOM")) {
    e.kind = ErrorReply::Kind::kOutOfMemory;
  } else if (starts_with_word(message, "READONLY")) {
    e.kind = ErrorReply::Kind::kReadOnly;
  } else if (is_server_error(message)) {
    e.kind = ErrorReply::Kind::kServer;
  }
  return e;
}

// The most microseconds a duration of a reply may hold: the most a Nanos holds.
constexpr long long kMaxMicros = std::numeric_limits<int64_t>::max() / 1'000;
// remaining * 2 + allowed, for a remaining below 2^53 (what Lua holds exactly).
constexpr long long kMaxCode = 1LL << 54;

bool read_script_reply(const redisReply* reply, std::span<const CallShape> calls,
                       ScriptAnswer* answer) {
  answer->expired.clear();
  answer->limits.clear();
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 1 + calls.size()) return false;
  const redisReply* const* e = reply->element;
  const size_t size = reply->elements;
  for (size_t i = 0; i < size; ++i) {
    if (e[i]->type != REDIS_REPLY_INTEGER) return false;
  }
  const auto duration = [](long long us) { return us >= 0 && us <= kMaxMicros; };
  if (e[0]->integer <= 0 || e[0]->integer > kMaxMicros) return false;
  answer->redis_time_us = e[0]->integer;
  size_t i = 1;
  for (const CallShape& call : calls) {
    if (i >= size) return false;
    if (e[i]->integer == -1) {
      answer->expired.push_back(1);
      ++i;
      continue;
    }
    answer->expired.push_back(0);
    if (call.refund) {
      if (e[i]->integer != 1) return false;
      ++i;
      continue;
    }
    for (size_t l = 0; l < call.limits; ++l) {
      if (i + 2 > size) return false;
      const long long code = e[i]->integer;
      if (code < 0 || code >= kMaxCode || !duration(e[i + 1]->integer)) return false;
      LimitAnswer a;
      a.allowed = code % 2 == 1;
      a.remaining = static_cast<uint64_t>(code / 2);
      a.reset_after = Nanos{e[i + 1]->integer * 1'000};
      i += 2;
      if (!a.allowed) {
        if (i >= size || !duration(e[i]->integer)) return false;
        a.retry_after = Nanos{e[i]->integer * 1'000};
        ++i;
      }
      answer->limits.push_back(a);
    }
  }
  return i == size;
}

bool read_fast_reply(const redisReply* reply, std::span<const FastShape> calls,
                     ScriptAnswer* answer) {
  answer->expired.clear();
  answer->limits.clear();
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 || calls.empty()) return false;
  const redisReply* const* e = reply->element;
  const size_t size = reply->elements;
  for (size_t i = 0; i < size; ++i) {
    if (e[i]->type != REDIS_REPLY_INTEGER) return false;
  }
  if (e[0]->integer <= 0 || e[0]->integer > kMaxMicros) return false;
  answer->redis_time_us = e[0]->integer;
  if (size == 2 && e[1]->integer == -1) {
    answer->expired.assign(calls.size(), 1);
    return true;
  }
  if (size != calls.size() + 1) return false;
  for (size_t k = 0; k < calls.size(); ++k) {
    const FastShape& call = calls[k];
    const long long code = e[k + 1]->integer;
    if (call.limit == 0 || call.window_us == 0 || code < 0 || code >= kMaxCode) return false;
    LimitAnswer a;
    a.allowed = code % 2 == 1;
    a.remaining = static_cast<uint64_t>(code / 2);
    if (a.remaining > call.limit) return false;
    if (call.now_us < 0 || call.window_us > static_cast<uint64_t>(kMaxMicros)) return false;
    const auto window = static_cast<int64_t>(call.window_us);
    const Nanos to_end{(window - call.now_us % window) * 1'000};
    if (a.allowed) {
      a.reset_after = to_end;
    } else {
      a.reset_after = a.remaining < call.limit ? to_end : Nanos{0};
      a.retry_after = to_end;
    }
    answer->expired.push_back(0);
    answer->limits.push_back(a);
  }
  return true;
}

bool read_time_reply(const redisReply* reply, int64_t* us) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2) return false;
  int64_t parts[2];
  for (size_t i = 0; i < 2; ++i) {
    const redisReply* e = reply->element[i];
    if (e->type != REDIS_REPLY_STRING) return false;
    auto [end, ec] = std::from_chars(e->str, e->str + e->len, parts[i]);
    if (ec != std::errc() || end != e->str + e->len || parts[i] < 0) return false;
  }
  if (parts[0] > kMaxMicros / 1'000'000 || parts[1] >= 1'000'000) return false;
  *us = parts[0] * 1'000'000 + parts[1];
  return *us > 0;
}

namespace {

// "host" and a port of 1 to 65535 -> "host:port", IPv6 hosts in brackets.
bool node_name(std::string_view host, std::string_view port_text, std::string* node) {
  int port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (host.empty() || ec != std::errc() || end != port_text.data() + port_text.size() || port < 1 ||
      port > 65'535 || host.find_first_of(" []") != std::string_view::npos)
    return false;
  node->clear();
  const bool v6 = host.find(':') != std::string_view::npos;
  if (v6) node->push_back('[');
  node->append(host);
  if (v6) node->push_back(']');
  node->push_back(':');
  node->append(port_text);
  return true;
}

}  // namespace

bool read_master_address(const redisReply* reply, std::string* node) {
  if (reply == nullptr) return false;
  if (reply->type == REDIS_REPLY_NIL) {
    node->clear();
    return true;
  }
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2) return false;
  const redisReply* host = reply->element[0];
  const redisReply* port = reply->element[1];
  if (host->type != REDIS_REPLY_STRING || port->type != REDIS_REPLY_STRING) return false;
  return node_name(std::string_view(host->str, host->len), std::string_view(port->str, port->len),
                   node);
}

bool read_switch_master(std::string_view message, std::string_view master, std::string* node) {
  std::string_view words[5];
  size_t n = 0;
  while (!message.empty()) {
    const size_t space = message.find(' ');
    if (n == 5) return false;
    words[n++] = message.substr(0, space);
    if (space == std::string_view::npos) break;
    message.remove_prefix(space + 1);
  }
  return n == 5 && words[0] == master && node_name(words[3], words[4], node);
}

}  // namespace sluice::redis
