// `dino retrieval`: eval_image_retrieval.py on revisited Oxford / Paris.
//
// Contract:
//  - read_revisited_ground(path): the gnd_<dataset>.pkl pickle (read with core/pth's
//    unpickler): a dict with "imlist" and "qimlist" (lists of image names without ".jpg") and
//    "gnd" (one dict per query with "easy", "hard", "junk": lists of database indices, and
//    "bbx", which the script does not use). Errors are one line naming the file: not a
//    pickle, a missing key, a wrong type, gnd and qimlist of different lengths, an index
//    outside [0, len(imlist)).
//  - write_revisited_ground(path, ground): the same dict, pickled by core/pth (protocol 2),
//    readable by Python's pickle (for test sets; atomically).
//  - evaluate_retrieval(ranks, ground): the script's two protocols over compute_map
//    (ranking.h) with k = 1, 5, 10: Medium (ok = easy + hard, junk = junk) and Hard (ok = hard,
//    junk = junk + easy).
//  - run_retrieval(): images <data_path>/<dataset>/jpg/<name>.jpg; database and query
//    features by features.h retrieval_features (dumped to
//    <output_dir>/retrieval_features/{database,queries}.h5), L2-normalised, ranked by cosine
//    similarity (descending; ties in index order); prints the script's ">> <dataset>: mAP M:
//    .., H: .." and mP@k lines and writes <output_dir>/retrieval.json: protocol, dataset,
//    model fields, imsize, multiscale, num_database, num_queries, mAP_M, mAP_H,
//    mP@k_M, mP@k_H ({k: value}), seconds. Percentages. Rank 0 evaluates.
//  - Flags: the script's (--data_path, --dataset roxford5k|rparis6k, --multiscale false,
//    --imsize 224, --arch vit_small, --patch_size 16, --pretrained_weights,
//    --checkpoint_key teacher, --num_workers 10), ours --output_dir. Without weights the
//    model keeps random weights (this build never downloads the Google-Landmark ones).
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/json.h"
#include "distributed/communicator.h"
#include "eval/checks_passed.h"
#include "eval/frozen_backbone.h"

namespace xdino::eval::retrieval {

struct RevisitedQuery {
  std::vector<int64_t> easy, hard, junk;
  std::vector<double> bbx;  // x1, y1, x2, y2 (unused by the script)
};

struct RevisitedGround {
  std::vector<std::string> imlist;   // database image names
  std::vector<std::string> qimlist;  // query image names
  std::vector<RevisitedQuery> gnd;   // one per query
};

RevisitedGround read_revisited_ground(const std::filesystem::path& path);
void write_revisited_ground(const std::filesystem::path& path, const RevisitedGround& ground);

struct RetrievalScores {
  double map_medium = 0, map_hard = 0;     // fractions
  std::vector<double> mp_medium, mp_hard;  // at kKappas
  static constexpr int64_t kKappas[3] = {1, 5, 10};
};

RetrievalScores evaluate_retrieval(const torch::Tensor& ranks, const RevisitedGround& ground);

struct RetrievalOptions {
  BackboneSpec model{"vit_small", 16, "", "teacher", 0};
  std::string data_path = "/path/to/revisited_paris_oxford/";
  std::string dataset = "roxford5k";
  bool multiscale = false;
  // --imsize (each thumbnail's longer side) and --num_workers; one image per batch.
  ImageInput input{1, 10, 224, 3};
  bool use_cuda = true;          // rank on the GPU (when the run has one), as eval_knn.py's flag
  std::string output_dir = ".";  // ours
};

Json run_retrieval(const RetrievalOptions& options, Communicator& comm, torch::Device device,
                   const ChecksPassed& checks_passed = {});

}  // namespace xdino::eval::retrieval
