#include "models/registry.h"

#include <functional>
#include <map>

#include "core/check.h"

namespace xdino::models {

torch::Tensor Backbone::cls_attention(torch::Tensor, int64_t) {
  XDINO_FAIL_ARG("architecture '", arch(), "' has no CLS attention to show");
}

QKNorms Backbone::qk_norms(torch::Tensor, int64_t) {
  XDINO_FAIL_ARG("architecture '", arch(), "' has no XCA blocks (|Q|/|K| maps are XCiT only)");
}

namespace {

using Factory = std::function<std::shared_ptr<Backbone>(const BackboneOptions&)>;

const std::map<std::string, Factory>& factories() {
  static const std::map<std::string, Factory> table = {};
  return table;
}

}  // namespace

std::vector<std::string> backbone_names() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : factories()) names.push_back(name);
  return names;
}

std::shared_ptr<Backbone> create_backbone(const std::string& arch,
                                          const BackboneOptions& options) {
  const auto& table = factories();
  const auto it = table.find(arch);
  if (it == table.end()) {
    std::string known;
    for (const auto& name : backbone_names()) known += (known.empty() ? "" : ", ") + name;
    XDINO_FAIL_ARG("unknown architecture '", arch, "' (known: ", known, ")");
  }
  return it->second(options);
}

}  // namespace xdino::models
