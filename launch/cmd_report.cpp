// `dino report`: the XCiT paper's Table 3 from evaluation run folders.
#include <iostream>

#include "core/log.h"
#include "eval/report.h"
#include "launch/command.h"

namespace xdino::launch {
namespace {

class ReportCommand : public Command {
 public:
  void declare(Flags& f) override {
    eval::ReportOptions& o = opt_;
    f.add("runs", &o.runs,
          "run folders, one table row each (knn.json / linear.json inside, or in knn/ and "
          "linear/ subfolders)")
        .add("output", &o.output,
             "report file; the format follows the extension: .md, .tex, .csv or .json "
             "(- prints Markdown)")
        .add_switch("with_published", &o.with_published,
                    "append the XCiT paper's published Table 3 rows, marked as published");
  }

  int run(const Flags&) override {
    const std::string text = eval::write_report(opt_);
    // A Markdown report is also shown, so the end of a pipeline's log has the table.
    if (opt_.output != "-" && eval::format_for(opt_.output) == eval::ReportFormat::kMarkdown)
      log::info(text);
    if (opt_.output != "-")
      log::info("wrote ", opt_.output, " (", opt_.runs.size(), " run",
                opt_.runs.size() == 1 ? "" : "s", opt_.with_published ? " + published rows" : "",
                ")");
    return 0;
  }

 private:
  eval::ReportOptions opt_;
};

}  // namespace

std::unique_ptr<Command> make_report_command() { return std::make_unique<ReportCommand>(); }

}  // namespace xdino::launch
