// The rendering half of `dino report` (eval/report.h): rows to Markdown, LaTeX, CSV or JSON.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/check.h"
#include "core/json.h"
#include "eval/report.h"

namespace xdino::eval {
namespace fs = std::filesystem;
namespace {

const char* const kDash = "–";  // U+2013, the paper's "not reported"
const char* const kCachedNote =
    "* linear probe trained on cached features without augmentation (fast mode), not the "
    "official protocol";

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

}  // namespace xdino::eval
