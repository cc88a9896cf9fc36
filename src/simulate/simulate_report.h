// Prints the results of `sluice simulate` as an aligned table (for people), CSV
// or JSON (for scripts). Pure formatting: the text is returned, not written.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "simulate/simulation.h"
#include "simulate/simulation_queue.h"

namespace sluice::simulate {

enum class ReportFormat { kTable, kCsv, kJson };

// "table", "csv", "json".
std::optional<ReportFormat> parse_report_format(std::string_view name);

// The header and rows as columns: the first left-aligned, the others
// right-aligned, two spaces apart, one line each.
std::string aligned_table(const std::vector<std::string>& header,
                          const std::vector<std::vector<std::string>>& rows);

std::string format_report(ReportFormat format, const Traffic& traffic, const SimLimit& limit,
                          std::span<const AlgorithmResult> results);

// `--delay`: one line per request, when it was served (or that it was denied).
// `turns` holds one entry per request of `traffic`.
std::string format_queued_report(ReportFormat format, const Traffic& traffic, const SimLimit& limit,
                                 Nanos delay, std::span<const QueuedTurn> turns);

}  // namespace sluice::simulate
