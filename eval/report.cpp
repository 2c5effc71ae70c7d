#include "eval/report.h"

#include <algorithm>
#include <boost/property_tree/ini_parser.hpp>
#include <boost/property_tree/ptree.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/json.h"
#include "eval/frozen_backbone.h"
#include "models/registry.h"

namespace xdino::eval {
namespace fs = std::filesystem;
namespace {

const char* const kDash = "–";  // U+2013, the paper's "not reported"
const char* const kCachedNote =
    "* linear probe trained on cached features without augmentation (fast mode), not the "
    "official protocol";

// The SSL Method of random weights, by what their BatchNorms hold (ReportRow::batch_norm).
std::string random_init_method(const std::string& batch_norm) {
  if (batch_norm == "initial") return "Random init, initial BatchNorm statistics";
  if (batch_norm == "data") return "Random init, BatchNorm statistics of the data";
  if (batch_norm == "none") return "Random init (no BatchNorm)";
  return "Random init";
}

// What each random-init row of the table is, once per kind (docs/evaluation.md, "The
// random-weights reference").
std::vector<std::string> batch_norm_notes(const std::vector<ReportRow>& rows) {
  std::vector<std::string> notes;
  for (const ReportRow& r : rows) {
    std::string note;
    if (r.batch_norm == "initial")
      note = random_init_method(r.batch_norm) +
             ": the initial weights, BatchNorm running means 0 and variances 1 as initialised.";
    else if (r.batch_norm == "data")
      note = random_init_method(r.batch_norm) +
             ": the same weights, BatchNorm running statistics averaged over " +
             std::to_string(r.bn_images) +
             " train images (as torch.optim.swa_utils.update_bn). A DINO teacher gathers such "
             "statistics in its forward passes without learning anything: DINO's margin over "
             "this row is what it learned (docs/evaluation.md, \"The random-weights "
             "reference\").";
    else if (r.batch_norm == "none")
      note = random_init_method(r.batch_norm) +
             ": the model has no BatchNorm, so random init is also the reference with the "
             "data's statistics (measured once).";
    if (!note.empty() && std::find(notes.begin(), notes.end(), note) == notes.end())
      notes.push_back(note);
  }
  return notes;
}

std::string fixed1(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string format_params(const std::optional<double>& p) {
  if (!p) return kDash;
  if (*p >= 1e6 || *p == 0) return std::to_string(std::llround(*p / 1e6)) + "M";
  return fixed1(*p / 1e6) + "M";
}

std::string format_flops(const std::optional<double>& f) {
  if (!f) return kDash;
  // Small-image models (e.g. 32-pixel Fashion-MNIST) would all read "0.0B".
  if (*f > 0 && *f < 0.1e9) return fixed1(*f / 1e6) + "M";
  return fixed1(*f / 1e9) + "B";
}

std::string format_acc(const std::optional<double>& a, bool cached = false) {
  return a ? fixed1(*a) + (cached ? "*" : "") : kDash;
}

std::vector<std::string> cells(const ReportRow& r) {
  return {r.method,
          r.model,
          format_params(r.params),
          format_flops(r.flops),
          format_acc(r.linear, r.linear_cached),
          format_acc(r.knn)};
}

std::vector<std::string> transfer_cells(const ReportRow& r) {
  return {r.method,
          r.model,
          format_acc(r.copydays_strong),
          format_acc(r.roxford_m),
          format_acc(r.roxford_h),
          format_acc(r.rparis_m),
          format_acc(r.rparis_h),
          format_acc(r.davis_jf),
          format_acc(r.davis_j),
          format_acc(r.davis_f)};
}

const std::vector<std::string>& transfer_header() {
  static const std::vector<std::string> h = {
      "SSL Method", "Model",  "Copydays (strong mAP)", "ROx M", "ROx H",
      "RPar M",     "RPar H", "DAVIS (J&F)m",          "Jm",    "Fm"};
  return h;
}

const std::vector<std::string>& header() {
  static const std::vector<std::string> h = {"SSL Method", "Model",  "#params",
                                             "FLOPs",      "Linear", "k-NN"};
  return h;
}

// Key/value pairs of an INI file, sections flattened (a run's config.ini has one); a missing
// file gives none. Malformed files throw xdino::UsageError naming the line.
std::map<std::string, std::string> read_ini(const fs::path& path) {
  std::map<std::string, std::string> kv;
  if (!fs::exists(path)) return kv;
  boost::property_tree::ptree tree;
  try {
    boost::property_tree::ini_parser::read_ini(path.string(), tree);
  } catch (const boost::property_tree::ini_parser_error& e) {
    XDINO_FAIL_ARG("cannot read ", path.string(), ": ", e.message(), " at line ", e.line());
  }
  for (const auto& [key, node] : tree) {
    if (node.empty()) {
      kv[key] = node.data();
      continue;
    }
    for (const auto& [name, value] : node) kv[name] = value.data();
  }
  return kv;
}

// DIR/name, DIR/<stem>/name, or the single DIR/*/name.
std::optional<fs::path> find_result(const fs::path& dir, const std::string& name,
                                    const std::string& stem) {
  if (fs::is_regular_file(dir / name)) return dir / name;
  if (fs::is_regular_file(dir / stem / name)) return dir / stem / name;
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && fs::is_regular_file(e.path() / name)) found.push_back(e.path() / name);
  XDINO_CHECK_ARG(found.size() <= 1, "run folder '", dir.string(), "' holds several ", name,
                  " files (", found.front().string(), ", ", found[1].string(),
                  "): give each evaluation its own --runs folder");
  if (found.empty()) return std::nullopt;
  return found.front();
}

struct ModelKey {  // unset fields are filled from config.ini, then defaults
  std::string arch;
  std::optional<int64_t> patch_size, image_size;
  std::optional<bool> pretrained;
};

// resolution false: the file's image_size is an evaluation input size (copy detection,
// retrieval), not the model resolution of the first table.
void merge_model(ModelKey& key, const Json& j, const fs::path& file, bool resolution = true) {
  if (j.contains("arch")) {
    const auto arch = j.at("arch").get<std::string>();
    XDINO_CHECK_ARG(key.arch.empty() || key.arch == arch,
                    "run folder results disagree on the architecture: '", key.arch, "' vs '", arch,
                    "' in ", file.string());
    key.arch = arch;
  }
  if (j.contains("patch_size")) key.patch_size = j.at("patch_size").get<int64_t>();
  if (resolution && j.contains("image_size")) key.image_size = j.at("image_size").get<int64_t>();
  if (j.contains("weights")) key.pretrained = j.at("weights").get<std::string>() == "pretrained";
}

std::string latex_escape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (s.compare(i, 3, "↑") == 0) {
      out += "$\\uparrow$";
      i += 2;
    } else if (s.compare(i, 3, kDash) == 0) {
      out += "--";
      i += 2;
    } else if (std::string("&%$#_{}").find(c) != std::string::npos) {
      out += std::string("\\") + c;
    } else if (c == '~') {
      out += "\\textasciitilde{}";
    } else if (c == '^') {
      out += "\\textasciicircum{}";
    } else if (c == '\\') {
      out += "\\textbackslash{}";
    } else {
      out += c;
    }
  }
  return out;
}

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

Json number_or_null(const std::optional<double>& v) { return v ? Json(*v) : Json(); }

}  // namespace

ModelFacts registry_facts(const std::string& arch, int64_t patch_size, int64_t image_size) {
  const auto model =
      models::create_backbone(arch, eval_backbone_options(arch, patch_size, image_size));
  ModelFacts f;
  for (const auto& p : model->parameters()) f.params += static_cast<double>(p.numel());
  f.flops = model->flops(image_size, image_size);
  return f;
}

std::string display_model_name(const std::string& arch, int64_t patch_size, int64_t image_size) {
  std::string name = models::paper_name(arch, patch_size);
  if (image_size != 224) name += "↑" + std::to_string(image_size);
  return name;
}

ReportFormat format_for(const std::string& output) {
  if (output == "-") return ReportFormat::kMarkdown;
  std::string ext = fs::path(output).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ext == ".md" || ext == ".markdown") return ReportFormat::kMarkdown;
  if (ext == ".tex") return ReportFormat::kLatex;
  if (ext == ".csv") return ReportFormat::kCsv;
  if (ext == ".json") return ReportFormat::kJson;
  XDINO_FAIL_ARG("cannot tell the report format from '", output,
                 "': --output must end in .md, .tex, .csv or .json (or be - for stdout)");
}

std::vector<ReportRow> read_run(const std::string& dir_text, const ModelFactsFn& facts) {
  const fs::path dir(dir_text);
  XDINO_CHECK_ARG(fs::is_directory(dir), "run folder '", dir_text, "' not found (--runs)");
  const auto knn_file = find_result(dir, "knn.json", "knn");
  const auto linear_file = find_result(dir, "linear.json", "linear");
  const auto copy_file = find_result(dir, "copy_detection.json", "copy_detection");
  const auto davis_file = find_result(dir, "video_segmentation.json", "video_segmentation");
  std::vector<fs::path> retrieval_files;  // one per dataset
  if (fs::is_regular_file(dir / "retrieval.json"))
    retrieval_files.push_back(dir / "retrieval.json");
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && fs::is_regular_file(e.path() / "retrieval.json"))
      retrieval_files.push_back(e.path() / "retrieval.json");
  std::sort(retrieval_files.begin(), retrieval_files.end());
  const std::optional<fs::path> any_file = knn_file      ? knn_file
                                           : linear_file ? linear_file
                                           : copy_file   ? copy_file
                                           : davis_file  ? davis_file
                                           : retrieval_files.empty()
                                               ? std::nullopt
                                               : std::optional<fs::path>(retrieval_files.front());
  XDINO_CHECK_ARG(any_file, "run folder '", dir_text,
                  "' has no knn.json, linear.json, copy_detection.json, retrieval.json or "
                  "video_segmentation.json: run an evaluation with --output_dir there first");
  ReportRow row, bn_row;  // bn_row: random weights with the data's BatchNorm statistics
  row.run = dir_text;
  ModelKey key;
  // A missing key or a value of the wrong type names the file.
  const auto read_result = [&](const fs::path& file, const auto& use, bool resolution = true) {
    const Json j = parse_json(read_file(file), file.string());
    try {
      merge_model(key, j, file, resolution);
      use(j);
    } catch (const Json::exception& e) {
      XDINO_FAIL_ARG("unexpected content in ", file.string(), ": ", e.what());
    }
  };
  if (knn_file) {
    read_result(*knn_file, [&](const Json& j) {
      const Json& rep = j.at("reported");
      row.knn = rep.at("top1").get<double>();
      row.knn_k = rep.at("k").get<int64_t>();
      if (j.contains("batch_norm")) row.batch_norm = j.at("batch_norm").get<std::string>();
      if (j.contains("data_batch_norm")) {
        const Json& bn = j.at("data_batch_norm");
        bn_row.knn = bn.at("reported").at("top1").get<double>();
        bn_row.knn_k = bn.at("reported").at("k").get<int64_t>();
        bn_row.bn_images = bn.at("images").get<int64_t>();
        bn_row.batch_norm = "data";
      }
    });
  }
  if (linear_file) {
    read_result(*linear_file, [&](const Json& j) {
      row.linear = j.at("best").at("acc1").get<double>();
      row.linear_cached = j.at("protocol").get<std::string>().rfind("cached-features", 0) == 0;
    });
  }
  if (copy_file)
    read_result(
        *copy_file, [&](const Json& j) { row.copydays_strong = j.at("strong_mAP").get<double>(); },
        false);
  for (const fs::path& f : retrieval_files) {
    read_result(
        f,
        [&](const Json& j) {
          const std::string dataset = j.at("dataset").get<std::string>();
          auto& m = dataset == "roxford5k" ? row.roxford_m : row.rparis_m;
          auto& h = dataset == "roxford5k" ? row.roxford_h : row.rparis_h;
          XDINO_CHECK_ARG(!m, "run folder '", dir_text, "' holds two retrieval.json files for ",
                          dataset, ": give each its own --runs folder");
          m = j.at("mAP_M").get<double>();
          h = j.at("mAP_H").get<double>();
        },
        false);
  }
  if (davis_file) {
    read_result(
        *davis_file,
        [&](const Json& j) {
          if (!j.contains("J&F-Mean")) return;  // segmented without --evaluate
          row.davis_jf = 100.0 * j.at("J&F-Mean").get<double>();
          row.davis_j = 100.0 * j.at("J-Mean").get<double>();
          row.davis_f = 100.0 * j.at("F-Mean").get<double>();
        },
        false);
  }
  // Results written by older or other tools may lack fields: the run's config.ini has them.
  const fs::path ini = any_file->parent_path() / "config.ini";
  const auto kv = read_ini(fs::exists(ini) ? ini : dir / "config.ini");
  const auto int_of = [&](const std::string& k) -> std::optional<int64_t> {
    if (!kv.count(k)) return std::nullopt;
    try {
      return std::stoll(kv.at(k));
    } catch (const std::exception&) {
      XDINO_FAIL_ARG("bad value '", kv.at(k), "' for ", k, " in ", ini.string());
    }
  };
  if (key.arch.empty() && kv.count("arch")) key.arch = kv.at("arch");
  if (!key.patch_size) key.patch_size = int_of("patch_size");
  if (!key.image_size) key.image_size = int_of("image_size");
  if (!key.pretrained && kv.count("pretrained_weights"))
    key.pretrained = !kv.at("pretrained_weights").empty();
  if (kv.count("pretrained_weights") && !kv.at("pretrained_weights").empty()) {
    const fs::path curves = fs::path(kv.at("pretrained_weights")).parent_path() / "curves.png";
    if (fs::exists(curves)) row.curves = curves.string();
  }
  XDINO_CHECK_ARG(!key.arch.empty(), "run folder '", dir_text,
                  "': no architecture in its results or config.ini");
  const int64_t patch = key.patch_size.value_or(16), size = key.image_size.value_or(224);
  row.arch = key.arch;
  row.image_size = size;
  row.model = display_model_name(key.arch, patch, size);
  row.method = key.arch == "pixels"            ? "None"
               : key.pretrained.value_or(true) ? "DINO"
                                               : random_init_method(row.batch_norm);
  if (facts) {
    const ModelFacts f = facts(key.arch, patch, size);
    row.params = f.params;
    row.flops = f.flops;
  }
  std::vector<ReportRow> rows{row};
  if (bn_row.knn) {
    bn_row.method = random_init_method(bn_row.batch_norm);
    bn_row.model = row.model;
    bn_row.params = row.params;
    bn_row.flops = row.flops;
    bn_row.run = row.run;
    bn_row.arch = row.arch;
    bn_row.image_size = row.image_size;
    rows.push_back(bn_row);
  }
  return rows;
}

std::vector<ReportRow> published_rows() {
  struct P {
    const char* method;
    const char* model;
    double params_m, flops_b;
    double linear, knn;  // < 0: not reported
  };
  static const P table[] = {
      {"MoBY", "Swin-T", 29, 4.5, 75.0, -1},           {"DINO", "ResNet-50", 23, 4.1, 74.5, 65.6},
      {"DINO", "ViT-S/16", 22, 4.6, 76.1, 72.8},       {"DINO", "ViT-S/8", 22, 22.4, 79.2, 77.2},
      {"DINO", "XCiT-S12/16", 26, 4.9, 77.8, 76.0},    {"DINO", "XCiT-S12/8", 26, 18.9, 79.2, 77.1},
      {"DINO", "ViT-B/16", 87, 17.5, 78.2, 76.1},      {"DINO", "ViT-B/8", 87, 78.2, 80.1, 77.4},
      {"DINO", "XCiT-M24/16", 84, 16.2, 78.8, 76.4},   {"DINO", "XCiT-M24/8", 84, 64.0, 80.3, 77.9},
      {"DINO", "XCiT-M24/8↑384", 84, 188.0, 80.9, -1},
  };
  std::vector<ReportRow> rows;
  for (const P& p : table) {
    ReportRow r;
    r.method = p.method;
    r.model = p.model;
    r.params = p.params_m * 1e6;
    r.flops = p.flops_b * 1e9;
    if (p.linear >= 0) r.linear = p.linear;
    if (p.knn >= 0) {
      r.knn = p.knn;
      r.knn_k = 20;
    }
    r.source = "published";
    r.image_size = std::string(p.model).find("↑384") != std::string::npos ? 384 : 224;
    rows.push_back(r);
  }
  return rows;
}

std::string render_report(const std::vector<ReportRow>& rows, ReportFormat format) {
  const std::vector<std::string> notes = batch_norm_notes(rows);
  bool with_source = false, any_cached = false, any_transfer = false;
  for (const ReportRow& r : rows) {
    with_source |= r.source != "ours";
    any_cached |= r.linear_cached;
    any_transfer |= r.has_transfer();
  }
  std::vector<std::string> head = header();
  if (with_source) head.push_back("Source");
  auto row_cells = [&](const ReportRow& r) {
    auto c = cells(r);
    if (with_source) c.push_back(r.source);
    return c;
  };
  std::string out;
  if (format == ReportFormat::kMarkdown) {
    auto line = [&](const std::vector<std::string>& c) {
      out += "|";
      for (const auto& s : c) out += " " + s + " |";
      out += "\n";
    };
    line(head);
    out += "|---|---|--:|--:|--:|--:|" + std::string(with_source ? "---|" : "") + "\n";
    for (const ReportRow& r : rows) line(row_cells(r));
    if (any_cached) out += std::string("\n") + kCachedNote + "\n";
    for (const std::string& note : notes) out += "\n" + note + "\n";
    if (any_transfer) {
      out += "\nTransfer (DINO paper layout: retrieval mAP, copy detection mAP, DAVIS 2017):\n\n";
      line(transfer_header());
      out += "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n";
      for (const ReportRow& r : rows)
        if (r.has_transfer()) line(transfer_cells(r));
    }
    for (const ReportRow& r : rows)
      if (!r.curves.empty())
        out += "\nTraining curves of " + r.method + " " + r.model + ":\n\n![training curves](" +
               r.curves + ")\n";
  } else if (format == ReportFormat::kLatex) {
    out += "% XCiT paper Table 3 layout; needs \\usepackage{booktabs}\n";
    out +=
        std::string("\\begin{tabular}{ll") + "rrrr" + (with_source ? "l" : "") + "}\n\\toprule\n";
    auto line = [&](const std::vector<std::string>& c) {
      for (size_t i = 0; i < c.size(); ++i) out += (i ? " & " : "") + latex_escape(c[i]);
      out += " \\\\\n";
    };
    out += std::string("SSL Method & Model & \\#params & FLOPs & Linear & $k$-NN") +
           (with_source ? " & Source" : "") + " \\\\\n";
    out += "\\midrule\n";
    for (const ReportRow& r : rows) line(row_cells(r));
    out += "\\bottomrule\n\\end{tabular}\n";
    if (any_cached) out += std::string("% ") + kCachedNote + "\n";
    for (const std::string& note : notes) out += "% " + note + "\n";
    if (any_transfer) {
      out += "% Transfer: DINO paper layout\n\\begin{tabular}{llrrrrrrrr}\n\\toprule\n";
      line(transfer_header());
      out += "\\midrule\n";
      for (const ReportRow& r : rows)
        if (r.has_transfer()) line(transfer_cells(r));
      out += "\\bottomrule\n\\end{tabular}\n";
    }
  } else if (format == ReportFormat::kCsv) {
    auto line = [&](const std::vector<std::string>& c) {
      for (size_t i = 0; i < c.size(); ++i) out += (i ? "," : "") + csv_cell(c[i]);
      out += "\n";
    };
    line(head);
    for (const ReportRow& r : rows) line(row_cells(r));
    if (any_transfer) {
      out += "\n";
      line(transfer_header());
      for (const ReportRow& r : rows)
        if (r.has_transfer()) line(transfer_cells(r));
    }
  } else {
    Json j = Json::object();
    j["columns"] = head;
    Json list = Json::array();
    for (const ReportRow& r : rows) {
      Json o = Json::object();
      o["ssl_method"] = r.method;
      o["model"] = r.model;
      o["arch"] = r.arch;
      o["image_size"] = r.image_size;
      // A count: an integer in the file, as Python would write it.
      o["params"] = r.params ? Json(std::llround(*r.params)) : Json();
      o["flops"] = number_or_null(r.flops);
      o["linear"] = number_or_null(r.linear);
      o["linear_protocol"] =
          r.linear ? Json(r.linear_cached ? "cached-features" : "official") : Json();
      o["knn"] = number_or_null(r.knn);
      o["knn_k"] = r.knn_k ? Json(r.knn_k) : Json();
      o["source"] = r.source;
      o["run"] = r.run;
      if (!r.batch_norm.empty()) o["batch_norm"] = r.batch_norm;
      if (r.bn_images > 0) o["batch_norm_images"] = r.bn_images;
      if (!r.curves.empty()) o["curves"] = r.curves;
      if (r.has_transfer()) {
        o["transfer"] = Json{{"copydays_strong_mAP", number_or_null(r.copydays_strong)},
                             {"roxford5k_mAP_M", number_or_null(r.roxford_m)},
                             {"roxford5k_mAP_H", number_or_null(r.roxford_h)},
                             {"rparis6k_mAP_M", number_or_null(r.rparis_m)},
                             {"rparis6k_mAP_H", number_or_null(r.rparis_h)},
                             {"davis_JF_mean", number_or_null(r.davis_jf)},
                             {"davis_J_mean", number_or_null(r.davis_j)},
                             {"davis_F_mean", number_or_null(r.davis_f)}};
      }
      o["cells"] = [&] {
        Json c = Json::array();
        for (const auto& s : cells(r)) c.push_back(s);
        return c;
      }();
      list.push_back(o);
    }
    j["rows"] = list;
    if (any_cached) j["notes"] = kCachedNote;
    out = python_dumps(j, 2) + "\n";
  }
  return out;
}

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
