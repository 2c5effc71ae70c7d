#include "models/registry.h"

#include <functional>
#include <map>

#include "core/check.h"
#include "models/pixels.h"
#include "models/vit.h"
#include "models/xcit.h"
#include "models/xvit.h"

namespace xdino::models {

namespace {

using Factory = std::function<std::shared_ptr<Backbone>(const BackboneOptions&)>;

std::shared_ptr<Backbone> make_xcit(XCiTConfig config, const BackboneOptions& options) {
  config.num_classes = options.num_classes;
  config.drop_path_rate = options.drop_path_rate;
  return std::make_shared<XCiT>(std::move(config));
}

std::shared_ptr<Backbone> make_vit(const std::string& name, const BackboneOptions& options) {
  XDINO_CHECK_ARG(options.patch_size == 16 || options.patch_size == 8,
                  "DINO ViTs come with patch size 16 or 8, not ", options.patch_size);
  ViTConfig config = *find_vit_variant(name, options.patch_size);
  config.img_size = options.img_size;
  config.num_classes = options.num_classes;
  config.drop_path_rate = options.drop_path_rate;
  return std::make_shared<VisionTransformer>(std::move(config));
}

std::shared_ptr<Backbone> make_xvit(XViTConfig config, const BackboneOptions& options) {
  config.num_classes = options.num_classes;
  config.drop_path_rate = options.drop_path_rate;
  return std::make_shared<XViT>(std::move(config));
}

const std::map<std::string, Factory>& factories() {
  static const std::map<std::string, Factory> table = [] {
    std::map<std::string, Factory> t;
    for (const auto* table : {&xcit_variants(), &xcit_small_image_variants()})
      for (const XCiTConfig& c : *table)
        t[c.name] = [c](const BackboneOptions& o) { return make_xcit(c, o); };
    for (const XViTConfig& c : xvit_variants())
      t[c.name] = [c](const BackboneOptions& o) { return make_xvit(c, o); };
    for (const char* name : {"vit_tiny", "vit_small", "vit_base"})
      t[name] = [n = std::string(name)](const BackboneOptions& o) { return make_vit(n, o); };
    t["pixels"] = [](const BackboneOptions& o) -> std::shared_ptr<Backbone> {
      return std::make_shared<Pixels>(o.img_size);
    };
    return t;
  }();
  return table;
}

}  // namespace

int64_t patch_size_of(const std::string& arch, int64_t flag) {
  if (const auto c = find_xcit_variant(arch)) return c->patch_size;
  if (const auto c = find_xvit_variant(arch)) return c->patch_size;
  if (arch == "pixels") return 1;
  return flag;
}

std::vector<std::string> backbone_names() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : factories()) names.push_back(name);
  return names;
}

std::string backbone_list(bool with_pixels) {
  std::string out;
  for (const auto& name : backbone_names())
    if (with_pixels || name != "pixels") out += (out.empty() ? "" : ", ") + name;
  return out;
}

std::shared_ptr<Backbone> create_backbone(const std::string& arch, const BackboneOptions& options) {
  const auto& table = factories();
  const auto it = table.find(arch);
  if (it == table.end()) {
    XDINO_FAIL_ARG("unknown architecture '", arch, "' (known: ", backbone_list(), ")");
  }
  return it->second(options);
}

}  // namespace xdino::models
