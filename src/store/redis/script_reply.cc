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
                                "WRONGPASS", "NOPERM", "READONLY", "OOM", "MISCONF", "TRYAGAIN"}) {
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
  } else if (is_server_error(message)) {
    e.kind = ErrorReply::Kind::kServer;
  }
  return e;
}

// The most microseconds a duration of a reply may hold: the most a Nanos holds.
constexpr long long kMaxMicros = std::numeric_limits<int64_t>::max() / 1'000;

bool script_reply_well_formed(const redisReply* reply, std::span<const size_t> limits) {
  size_t expected = 1;
  for (size_t n : limits) expected += 1 + 5 * n;
  bool ok = reply->type == REDIS_REPLY_ARRAY && reply->elements == expected;
  for (size_t i = 0; ok && i < reply->elements; ++i) {
    ok = reply->element[i]->type == REDIS_REPLY_INTEGER && reply->element[i]->integer >= -1;
  }
  ok = ok && reply->element[0]->integer >= 0;
  for (size_t call = 0, i = 1; ok && call < limits.size(); ++call) {
    ok = reply->element[i]->integer >= 0 && reply->element[i]->integer <= kMaxMicros;
    ++i;
    for (size_t l = 0; ok && l < limits[call]; ++l, i += 5) {
      ok = reply->element[i]->integer <= 1 && reply->element[i + 1]->integer >= 0 &&
           reply->element[i + 2]->integer >= 0 && reply->element[i + 3]->integer >= 0 &&
           reply->element[i + 4]->integer >= 0 && reply->element[i + 3]->integer <= kMaxMicros &&
           reply->element[i + 4]->integer <= kMaxMicros;
    }
  }
  return ok;
}

Decision script_decision(const redisReply* const* limit) {
  Decision d;
  d.allowed = limit[0]->integer == 1;
  d.limit = static_cast<uint64_t>(limit[1]->integer);
  d.remaining = static_cast<uint64_t>(limit[2]->integer);
  d.reset_after = Nanos{limit[3]->integer * 1'000};
  d.retry_after = Nanos{limit[4]->integer * 1'000};
  return d;
}

}  // namespace sluice::redis
