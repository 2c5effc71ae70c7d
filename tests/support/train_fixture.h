// Tiny DINO training set-ups shared by the trainer tests: a temporary output folder, options
// for a CPU run of a few seconds, and a Trainer on TinyBackbone + SyntheticCrops.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "models/registry.h"
#include "ssl/trainer.h"
#include "tests/support/files.h"
#include "tests/support/synthetic_crops.h"
#include "tests/support/tiny_backbone.h"

namespace xdino::testing {

// A fresh scratch folder (tests/support/files.h), removed when the object goes.
class TempDir {
 public:
  TempDir() {
    static int count = 0;
    path_ = fresh_dir("train_" + std::to_string(count++));
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// 2 epochs x 3 iterations, batch 2, 2 global crops of 16 px + 2 local crops of 8 px.
inline ssl::DinoOptions tiny_options(const std::filesystem::path& output_dir) {
  ssl::DinoOptions o;
  o.arch = "tiny_test";
  o.head.out_dim = 32;
  o.epochs = 2;
  o.batch_size_per_gpu = 2;
  o.local_crops_number = 2;
  o.global_crops_size = 16;
  o.local_crops_size = 8;
  o.lr = 0.05;
  o.warmup_epochs = 1;
  o.drop_path_rate = 0.2;  // puts the RNG state into play
  o.saveckp_freq = 1;
  o.device = "cpu";
  o.output_dir = output_dir.string();
  return o;
}

// kernels: the XCiT blocks' normalisation path (models/layers.h) of both backbones.
inline std::unique_ptr<ssl::Trainer> tiny_trainer(
    const ssl::DinoOptions& o, std::shared_ptr<ssl::DataSource> data = nullptr,
    models::LayerKernels kernels = models::LayerKernels::kAuto) {
  if (!data)
    data = std::make_shared<SyntheticCrops>(3, o.batch_size_per_gpu, o.local_crops_number,
                                            o.global_crops_size, o.local_crops_size);
  // arch "tiny_test": TinyBackbone; anything else from the registry.
  ssl::BackboneFactory factory =
      [arch = o.arch, kernels](models::BackboneOptions bo) -> std::shared_ptr<models::Backbone> {
    if (arch == "tiny_test") return std::make_shared<TinyBackbone>(8, 4, bo.drop_path_rate);
    bo.layer_kernels = kernels;
    return models::create_backbone(arch, bo);
  };
  return std::make_unique<ssl::Trainer>(o, factory, data);
}

}  // namespace xdino::testing
