#include "simulate/simulate_report.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "simulate/time_text.h"
#include "util/json_escape.h"

namespace sluice::simulate {
namespace {

std::string pad_left(const std::string& s, size_t width) {
  return std::string(width > s.size() ? width - s.size() : 0, ' ') + s;
}

std::string pad_right(const std::string& s, size_t width) {
  return s + std::string(width > s.size() ? width - s.size() : 0, ' ');
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  append_json_escaped(s, out);
  out += '"';
  return out;
}

int64_t window_ms(const SimLimit& limit) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(limit.window).count();
}

// Why an algorithm may let more than the limit through in one window-length
// interval. Algorithms sharing a reason are reported on one line.
std::string_view overshoot_reason(Algorithm a) {
  switch (a) {
    case Algorithm::kTokenBucket:
    case Algorithm::kGcra:
      return "a full bucket plus what refills during the interval (up to 2x)";
    case Algorithm::kFixedWindow:
      return "its count restarts at each window boundary; bursts either side add up (up to 2x)";
    case Algorithm::kSlidingWindow:
      return "it estimates the previous window's share and can overshoot (always under 2x)";
    case Algorithm::kSlidingLog:
    case Algorithm::kConcurrency:
      break;
  }
  return "it never exceeds the limit";
}

std::string table(const Traffic& traffic, const SimLimit& limit,
                  std::span<const AlgorithmResult> results) {
  const std::string window = format_duration(limit.window);
  const std::string n = std::to_string(limit.limit);
  const std::vector<std::string> header = {"algorithm", "allowed", "denied",
                                           "max in any " + window};
  std::vector<std::vector<std::string>> rows;
  for (const AlgorithmResult& r : results) {
    rows.push_back({std::string(algorithm_name(r.algorithm)), std::to_string(r.allowed),
                    std::to_string(r.denied), std::to_string(r.max_in_window)});
  }
  std::string out =
      (traffic.source.empty() ? "Scenario " + traffic.name : "Trace " + traffic.source) +
      ", limit " + n + " per " + window + " for every algorithm\n" +
      "Traffic: " + traffic.description + "\n\n";
  out += aligned_table(header, rows);

  bool weighted = false;
  for (const SimRequest& r : traffic.requests) weighted = weighted || r.cost != 1;
  out +=
      "\nallowed, denied: requests each algorithm let through or refused (each keeps its own "
      "state).\n";
  out += "max in any " + window + ": the most requests" + (weighted ? " (summed by cost)" : "") +
         " allowed" + (traffic.keys.size() > 1 ? " to one key" : "") + " within any " + window +
         " interval; the limit means at most " + n + ".\n";

  // Algorithms that let more than N through, grouped by reason, largest first.
  struct Overshoot {
    std::string_view reason;
    std::string who;  // "token_bucket 103, gcra 103"
    uint64_t most;
  };
  std::vector<Overshoot> over;
  for (const AlgorithmResult& r : results) {
    if (r.max_in_window <= limit.limit) continue;
    const std::string_view reason = overshoot_reason(r.algorithm);
    const std::string entry =
        std::string(algorithm_name(r.algorithm)) + " " + std::to_string(r.max_in_window);
    auto it = std::find_if(over.begin(), over.end(),
                           [&](const Overshoot& o) { return o.reason == reason; });
    if (it == over.end()) {
      over.push_back({reason, entry, r.max_in_window});
    } else {
      it->who += ", " + entry;
      it->most = std::max(it->most, r.max_in_window);
    }
  }
  std::stable_sort(over.begin(), over.end(),
                   [](const Overshoot& a, const Overshoot& b) { return a.most > b.most; });
  if (over.empty()) {
    out += "Every algorithm kept within " + n + " in every " + window + " interval.\n";
  } else {
    out += "Above " + n + ":\n";
    for (const Overshoot& o : over) out += "  " + o.who + ": " + std::string(o.reason) + ".\n";
  }
  return out;
}

std::string csv(const Traffic& traffic, const SimLimit& limit,
                std::span<const AlgorithmResult> results) {
  std::string out = "scenario,limit,window_ms,algorithm,allowed,denied,max_in_window\n";
  for (const AlgorithmResult& r : results) {
    out += traffic.name + "," + std::to_string(limit.limit) + "," +
           std::to_string(window_ms(limit)) + "," + std::string(algorithm_name(r.algorithm)) + "," +
           std::to_string(r.allowed) + "," + std::to_string(r.denied) + "," +
           std::to_string(r.max_in_window) + "\n";
  }
  return out;
}

std::string json(const Traffic& traffic, const SimLimit& limit,
                 std::span<const AlgorithmResult> results) {
  std::string out = "{\n";
  out += "  \"scenario\": " + json_string(traffic.name) + ",\n";
  out += "  \"description\": " + json_string(traffic.description) + ",\n";
  out += "  \"limit\": " + std::to_string(limit.limit) + ",\n";
  out += "  \"window_ms\": " + std::to_string(window_ms(limit)) + ",\n";
  out += "  \"results\": [\n";
  for (size_t i = 0; i < results.size(); ++i) {
    const AlgorithmResult& r = results[i];
    out += "    {\"algorithm\": " + json_string(algorithm_name(r.algorithm)) +
           ", \"allowed\": " + std::to_string(r.allowed) +
           ", \"denied\": " + std::to_string(r.denied) +
           ", \"max_in_window\": " + std::to_string(r.max_in_window) + "}" +
           (i + 1 < results.size() ? ",\n" : "\n");
  }
  out += "  ]\n}\n";
  return out;
}

// Milliseconds with three decimals (the turns of a rate such as 3 per second
// are not whole milliseconds): "1767268800333.334".
std::string ms_text(Nanos t) {
  const int64_t ns = t.count();
  char buf[40];
  std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(ns / 1'000'000),
                static_cast<long long>(ns % 1'000'000 / 1000));
  return buf;
}

std::string queued_table(const Traffic& traffic, const SimLimit& limit, Nanos delay,
                         std::span<const QueuedTurn> turns) {
  size_t held = 0;
  size_t denied = 0;
  for (const QueuedTurn& t : turns) {
    held += t.served && t.wait.count() > 0;
    denied += !t.served;
  }
  std::string out =
      (traffic.source.empty() ? "Scenario " + traffic.name : "Trace " + traffic.source) +
      ", token_bucket " + std::to_string(limit.limit) + " per " + format_duration(limit.window) +
      " with delay " + format_duration(delay) + " (gcra serves at the same turns)\n" +
      "Traffic: " + traffic.description + "\n" + std::to_string(turns.size() - denied) +
      " served (" + std::to_string(held) + " of them held), " + std::to_string(denied) +
      " denied\n\n";
  size_t key_width = 3;
  for (const std::string& k : traffic.keys) key_width = std::max(key_width, k.size());
  out += pad_right("arrived", 12) + "  " + pad_right("key", key_width) + "  cost  " +
         pad_right("served", 12) + "  waited\n";
  for (size_t i = 0; i < turns.size(); ++i) {
    const SimRequest& r = traffic.requests[i];
    const QueuedTurn& t = turns[i];
    out += pad_right(format_time_of_day(r.at), 12) + "  " +
           pad_right(traffic.keys[r.key], key_width) + "  " + pad_left(std::to_string(r.cost), 4) +
           "  " + pad_right(t.served ? format_time_of_day(r.at + t.wait) : "denied", 12) + "  " +
           (t.served ? format_duration(t.wait) : "-") + "\n";
  }
  return out;
}

std::string queued_csv(const Traffic& traffic, std::span<const QueuedTurn> turns) {
  std::string out = "time_ms,key,cost,served,served_ms,wait_ms\n";
  for (size_t i = 0; i < turns.size(); ++i) {
    const SimRequest& r = traffic.requests[i];
    const QueuedTurn& t = turns[i];
    out += ms_text(r.at) + "," + traffic.keys[r.key] + "," + std::to_string(r.cost) + "," +
           (t.served ? "true," + ms_text(r.at + t.wait) + "," + ms_text(t.wait) : "false,,") + "\n";
  }
  return out;
}

std::string queued_json(const Traffic& traffic, const SimLimit& limit, Nanos delay,
                        std::span<const QueuedTurn> turns) {
  std::string out = "{\n";
  out += "  \"scenario\": " + json_string(traffic.name) + ",\n";
  out += "  \"algorithm\": \"token_bucket\",\n";
  out += "  \"limit\": " + std::to_string(limit.limit) + ",\n";
  out += "  \"window_ms\": " + std::to_string(window_ms(limit)) + ",\n";
  out += "  \"delay_ms\": " + ms_text(delay) + ",\n";
  out += "  \"requests\": [\n";
  for (size_t i = 0; i < turns.size(); ++i) {
    const SimRequest& r = traffic.requests[i];
    const QueuedTurn& t = turns[i];
    out += "    {\"time_ms\": " + ms_text(r.at) + ", \"key\": " + json_string(traffic.keys[r.key]) +
           ", \"cost\": " + std::to_string(r.cost) +
           (t.served ? ", \"served\": true, \"served_ms\": " + ms_text(r.at + t.wait) +
                           ", \"wait_ms\": " + ms_text(t.wait)
                     : std::string(", \"served\": false")) +
           "}" + (i + 1 < turns.size() ? ",\n" : "\n");
  }
  out += "  ]\n}\n";
  return out;
}

}  // namespace

std::string aligned_table(const std::vector<std::string>& header,
                          const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string out = pad_right(cells[0], width[0]);
    for (size_t c = 1; c < cells.size(); ++c) out += "  " + pad_left(cells[c], width[c]);
    return out + "\n";
  };
  std::string out = line(header);
  for (const auto& row : rows) out += line(row);
  return out;
}

std::optional<ReportFormat> parse_report_format(std::string_view name) {
  if (name == "table") return ReportFormat::kTable;
  if (name == "csv") return ReportFormat::kCsv;
  if (name == "json") return ReportFormat::kJson;
  return std::nullopt;
}

std::string format_report(ReportFormat format, const Traffic& traffic, const SimLimit& limit,
                          std::span<const AlgorithmResult> results) {
  switch (format) {
    case ReportFormat::kTable:
      return table(traffic, limit, results);
    case ReportFormat::kCsv:
      return csv(traffic, limit, results);
    case ReportFormat::kJson:
      return json(traffic, limit, results);
  }
  return {};
}

std::string format_queued_report(ReportFormat format, const Traffic& traffic, const SimLimit& limit,
                                 Nanos delay, std::span<const QueuedTurn> turns) {
  switch (format) {
    case ReportFormat::kTable:
      return queued_table(traffic, limit, delay, turns);
    case ReportFormat::kCsv:
      return queued_csv(traffic, turns);
    case ReportFormat::kJson:
      return queued_json(traffic, limit, delay, turns);
  }
  return {};
}

}  // namespace sluice::simulate
