// The XCiT paper's Table 3 rows (`dino report --with_published`, eval/report.h).
#include "eval/report.h"

namespace xdino::eval {

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

}  // namespace xdino::eval
