// Ranking metrics of the retrieval-style evaluations: average precision as the Holidays /
// revisited Oxford-Paris packages define it, and the revisited protocol's mAP and mP@k.
//
// Contract:
//  - average_precision(ranks, num_positives): `ranks` are the 0-based positions of the true
//    positives in the ranked list, ascending; num_positives (> 0) counts all positives, found
//    or not. The area under the precision-recall curve by trapezoids, each of width
//    1/num_positives, whose left height is j/rank (1 at rank 0) and right height
//    (j+1)/(rank+1) for the j-th positive: eval_copy_detection.py's score_ap_from_ranks_1 and
//    utils.compute_ap are this same formula.
//  - compute_map(ranks, ground, kappas): `ranks` is (database, queries) int64, column q the
//    database indices in ranked order (a permutation). For each query: positions of its `ok`
//    images and of its `junk` images in column q; every positive's position is lowered by the
//    number of junk images ranked before it (junk does not count, either way); AP as above with
//    num_positives = |ok|; precision at k over the 1-based lowered positions, with k capped at
//    the last positive's position. Queries without positives are left out of the means (their
//    entries are NaN) and counted in `empty`. This is utils.compute_map of the official code
//    (docs/evaluation.md).
//  - Errors: xdino::Error for a rank tensor that is not 2-D int64 with one column per query,
//    or num_positives <= 0.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace xdino::eval::retrieval {

double average_precision(const std::vector<int64_t>& ranks, int64_t num_positives);

struct QueryGround {
  std::vector<int64_t> ok;    // database indices that count as positives
  std::vector<int64_t> junk;  // database indices that do not count at all
};

struct MapResult {
  double map = 0;                              // mean AP over queries with positives
  std::vector<double> aps;                     // per query (NaN without positives)
  std::vector<double> mean_precision;          // per k, mean over queries with positives
  std::vector<std::vector<double>> precision;  // [query][k] (NaN without positives)
  int64_t empty = 0;                           // queries without positives
};

MapResult compute_map(const torch::Tensor& ranks, const std::vector<QueryGround>& ground,
                      const std::vector<int64_t>& kappas);

}  // namespace xdino::eval::retrieval
