// The warm-start fuzz entry point (see targets.h): `dino train --pretrained_weights F
// [--checkpoint_key K]` on a tiny XCiT-shaped student (tests/support/tiny_backbone.h) with a
// DINO head, the file's bytes through the same two calls the trainer makes.
#include <string>

#include "fuzz/targets.h"
#include "models/weights.h"
#include "ssl/head.h"
#include "ssl/warm_start.h"
#include "tests/support/tiny_backbone.h"

namespace xdino::fuzz {

void fuzz_warm_start(const uint8_t* data, size_t size) {
  if (size == 0) return;
  // Byte 0 picks the key as train's flag would: none (a flat file of weights), the teacher,
  // the student.
  static const char* const kKeys[] = {"", "teacher", "student"};
  const std::string key = kKeys[data[0] % 3];
  TempInput file(data + 1, size - 1, ".pth");
  const models::PretrainedWeights weights = models::read_pretrained(file.path(), key);
  auto backbone = std::make_shared<testing::TinyBackbone>(8, 4);
  ssl::DINOHeadOptions options;
  options.in_dim = 8;
  options.out_dim = 16;
  options.hidden_dim = 8;
  options.bottleneck_dim = 4;
  ssl::MultiCropWrapper student(backbone, ssl::DINOHead(options));
  (void)ssl::warm_start(*student, weights);
  // What it accepted has every tensor in its place and shape: a forward pass runs.
  torch::NoGradGuard no_grad;
  const torch::Tensor out = student->forward({torch::zeros({1, 3, 8, 8})});
  if (out.sizes() != torch::IntArrayRef({1, 16}))
    invariant_broken("an accepted warm start left a student that does not run");
}

}  // namespace xdino::fuzz
