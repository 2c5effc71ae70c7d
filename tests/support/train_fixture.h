// Tiny DINO training set-ups shared by the trainer tests: a temporary output folder, options
// for a CPU run of a few seconds, and a Trainer on TinyBackbone + SyntheticCrops.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "ssl/trainer.h"
#include "tests/support/synthetic_crops.h"
#include "tests/support/tiny_backbone.h"

namespace xdino::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "xdino_test_XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
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
inline ssl::TrainOptions tiny_options(const std::filesystem::path& output_dir) {
  ssl::TrainOptions o;
  o.arch = "tiny_test";
  o.out_dim = 32;
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

inline std::unique_ptr<ssl::Trainer> tiny_trainer(
    const ssl::TrainOptions& o, std::shared_ptr<ssl::DataSource> data = nullptr) {
  if (!data)
    data = std::make_shared<SyntheticCrops>(3, o.batch_size_per_gpu, o.local_crops_number,
                                            o.global_crops_size, o.local_crops_size);
  auto factory = [](const models::BackboneOptions& bo) {
    return std::make_shared<TinyBackbone>(8, 4, bo.drop_path_rate);
  };
  return std::make_unique<ssl::Trainer>(o, factory, data);
}

}  // namespace xdino::testing
