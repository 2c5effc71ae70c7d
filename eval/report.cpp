#include "eval/report.h"

#include <filesystem>
#include <iostream>

#include "core/atomic_file.h"
#include "core/check.h"

namespace xdino::eval {
namespace fs = std::filesystem;

std::string write_report(const ReportOptions& options, const ModelFactsFn& facts) {
  XDINO_CHECK_ARG(!options.runs.empty(), "no run folders given (--runs DIR...)");
  const ReportFormat format = format_for(options.output);
  std::vector<ReportRow> rows;
  for (const std::string& run : options.runs)
    for (ReportRow& r : read_run(run, facts)) rows.push_back(std::move(r));
  // Links relative to the report, so the folder can move as a whole.
  const fs::path report_dir =
      options.output == "-" ? fs::path(".") : fs::path(options.output).parent_path();
  for (ReportRow& r : rows)
    if (!r.curves.empty())
      r.curves = fs::relative(r.curves, report_dir.empty() ? fs::path(".") : report_dir).string();
  if (options.with_published)
    for (ReportRow& r : published_rows()) rows.push_back(std::move(r));
  const std::string text = render_report(rows, format);
  if (options.output == "-") {
    std::cout << text;
  } else {
    const fs::path out(options.output);
    if (out.has_parent_path()) fs::create_directories(out.parent_path());
    write_file_atomically(out, text);
  }
  return text;
}

}  // namespace xdino::eval
