// J and F of DAVIS 2017 (semi-supervised), as the davis2017-evaluation toolkit defines them;
// that toolkit is a separate Python program, this is the same computation in C++.
//
// Contract:
//  - region_similarity(gt, mask, void) = J: |gt & mask| / |gt | mask| over pixels that are not
//    void; 1 when the union is empty. Masks are CV_8UC1, non-zero = inside; `void` may be
//    empty (no void pixels). Sizes must agree (xdino::Error otherwise).
//  - boundary_map(mask): the toolkit's _seg2bmap at the mask's own size: a pixel is boundary
//    when it differs from its right, lower or lower-right neighbour (the last row compares
//    with the right neighbour only, the last column with the lower one, the corner is 0).
//  - boundary_measure(gt, mask, void, bound_th = 0.008) = F: the tolerance is
//    ceil(bound_th x image diagonal) pixels (bound_th >= 1: that many pixels); each boundary
//    is dilated by a disk of that radius (x^2 + y^2 <= r^2, skimage's disk); precision =
//    mask-boundary pixels within the gt's dilated boundary / mask-boundary pixels, recall the
//    other way; F = 2PR / (P + R), 0 when P + R = 0. Empty boundaries: both empty P = R = 1;
//    only the mask's empty P = 1, R = 0; only the gt's empty P = 0, R = 1. Void pixels are
//    removed from both masks first.
//  - statistics(per_frame): the toolkit's db_statistics: mean (NaN ignored), recall (share of
//    frames above 0.5), decay (mean of the first of 4 bins minus mean of the last, bin edges
//    round(linspace(1, n, 5)) - 1).
//  - evaluate_sequence(gt, results): per object id 1..max label of the ground truth, over every
//    frame but the first and the last (the semi-supervised protocol), J and F per frame and
//    their statistics. Pixels labelled 255 in the ground truth are void. `results` holds one
//    label image per frame of `gt`, same sizes.
#pragma once

#include <opencv2/core.hpp>
#include <vector>

namespace xdino::eval::video {

double region_similarity(const cv::Mat& gt, const cv::Mat& mask, const cv::Mat& void_pixels);
cv::Mat boundary_map(const cv::Mat& mask);
double boundary_measure(const cv::Mat& gt, const cv::Mat& mask, const cv::Mat& void_pixels,
                        double bound_th = 0.008);

struct Statistics {
  double mean = 0, recall = 0, decay = 0;
};
Statistics statistics(const std::vector<double>& per_frame);

struct ObjectScores {
  std::vector<double> j, f;  // per evaluated frame
  Statistics j_stats, f_stats;
};

std::vector<ObjectScores> evaluate_sequence(const std::vector<cv::Mat>& gt,
                                            const std::vector<cv::Mat>& results);

}  // namespace xdino::eval::video
