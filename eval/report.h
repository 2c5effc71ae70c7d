// The XCiT paper's Table 3 from evaluation run folders (`dino report`).
//
// Contract:
//  - Columns: SSL Method | Model | #params | FLOPs | Linear | k-NN (the XCiT paper's Table 3;
//    README, "Evaluation and pictures"), plus
//    Source (ours / published) when published rows are appended.
//  - A run folder DIR yields one row (two for random weights measured with --recalibrate_bn,
//    below). Its results are DIR/knn.json and DIR/linear.json, else
//    DIR/knn/knn.json and DIR/linear/linear.json, else the only such file one folder below
//    DIR. The model (arch, patch_size, image_size, weights) comes from those files, else from
//    DIR/config.ini (written by every dino subcommand). A folder with neither result, or with
//    results of two different models, throws xdino::UsageError naming it.
//  - SSL Method: "DINO" when weights were loaded ("DINO + KoLeo 0.1 + ..." when the training
//    run's config.ini beside them has DINOv2's options, core/recipe_name.h), "None" for the
//    pixels baseline, and for
//    random weights what they are, from knn.json's batch_norm (eval/knn_eval.h): "Random init,
//    initial BatchNorm statistics", "Random init (no BatchNorm)", or "Random init" (not
//    recorded). A knn.json with data_batch_norm adds the row "Random init, BatchNorm
//    statistics of the data" (its k-NN, no linear) after the run's row: the reference that
//    DINO's margin must beat (docs/evaluation.md, "The random-weights reference").
//    Markdown and LaTeX say under the table what each random-init row is.
//    Model: "XCiT-S12/16", "ViT-S/16", "Pixels", ... with "↑384" when the
//    evaluation resolution is not 224. #params and FLOPs come from `facts` (default: the
//    model registry: backbone parameters without classifier, fvcore-convention FLOPs at the
//    evaluation resolution). Linear = best top-1 of linear.json; k-NN = top-1 of its reported
//    k (20). A linear result from the cached-features fast mode is marked with "*" and a
//    footnote, never passed off as the official protocol.
//  - Formatting: accuracies and FLOPs one decimal ("4.9B"; below 0.1B in millions, "46.1M"),
//    params in whole millions ("26M"; one decimal below 1M), "–" when missing. Output format
//    by the extension of `output`:
//    .md/.markdown, .tex, .csv, .json; anything else throws xdino::UsageError.
//    `output` "-" prints Markdown to stdout.
//  - with_published appends the rows of the XCiT paper's Table 3 (published_rows() in
//    report.cpp), Source "published".
//  - The second table, in the DINO paper's layout for the transfer evaluations (its Tables 3-5:
//    SSL Method | Model | Copydays (strong mAP) | ROx M | ROx H | RPar M | RPar H |
//    DAVIS (J&F)m | Jm | Fm), comes after the first when any run has copy_detection.json,
//    retrieval.json (one per dataset: roxford5k or rparis6k, at DIR or one folder below) or
//    video_segmentation.json; percentages, one decimal, "–" when missing. Markdown and LaTeX
//    print it as a second table, CSV after a blank line, JSON as "transfer" fields of each
//    row. A run folder needs at least one result of either table.
//  - A row whose weights file has a curves.png beside it (`dino train` writes one) gets it
//    linked: Markdown embeds it below the table (path relative to the report), JSON has
//    "curves"; the other formats leave it out.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace xdino::eval {

struct ReportOptions {
  std::vector<std::string> runs;
  std::string output = "report.md";
  bool with_published = false;
};

struct ModelFacts {
  double params = 0.0;  // parameter count
  double flops = 0.0;   // forward FLOPs of one image
};

using ModelFactsFn =
    std::function<ModelFacts(const std::string& arch, int64_t patch_size, int64_t image_size)>;

// #params and FLOPs of a registered backbone (models/registry.h).
ModelFacts registry_facts(const std::string& arch, int64_t patch_size, int64_t image_size);

struct ReportRow {
  std::string method;
  std::string model;
  std::optional<double> params, flops, linear, knn;
  bool linear_cached = false;   // linear.json came from the cached-features fast mode
  std::string source = "ours";  // or "published"
  std::string run;              // run folder ("" for published rows)
  std::string arch;
  int64_t image_size = 224;
  int64_t knn_k = 0;   // k of the k-NN column (0: none)
  std::string curves;  // the training run's curves.png next to the evaluated weights, if any
  // Random weights: "initial" or "none" (knn.json's batch_norm), "data" for the row with the
  // BatchNorm statistics of bn_images train images; "" otherwise or not recorded.
  std::string batch_norm;
  int64_t bn_images = 0;
  // The transfer table (percent).
  std::optional<double> copydays_strong, roxford_m, roxford_h, rparis_m, rparis_h, davis_jf,
      davis_j, davis_f;
  bool has_transfer() const { return copydays_strong || roxford_m || rparis_m || davis_jf; }
};

enum class ReportFormat { kMarkdown, kLatex, kCsv, kJson };

ReportFormat format_for(const std::string& output);

// The reading half (report_runs.cpp). The run's row, and after it the row with the BatchNorm
// statistics of the data if measured.
std::vector<ReportRow> read_run(const std::string& dir, const ModelFactsFn& facts);
// The SSL Method of random weights, by what their BatchNorms hold (ReportRow::batch_norm).
std::string random_init_method(const std::string& batch_norm);
std::vector<ReportRow> published_rows();
// "XCiT-S12/16", "ViT-B/8", "Pixels", with "↑384" for other resolutions.
std::string display_model_name(const std::string& arch, int64_t patch_size, int64_t image_size);

// The rendering half (report_render.cpp).
std::string render_report(const std::vector<ReportRow>& rows, ReportFormat format);

// Reads every run, renders, writes `options.output` atomically (or prints for "-"); returns
// the rendered text.
std::string write_report(const ReportOptions& options, const ModelFactsFn& facts = registry_facts);

}  // namespace xdino::eval
