// What DINOv2 adds to DINO's recipe, as options of `dino train` named after dinov2's config
// keys (docs/dino.md, "Beyond DINO's recipe"): the KoLeo regulariser on the student's class
// tokens, Sinkhorn-Knopp centering of the teacher's outputs, iBOT's masked-patch loss.
//
// Contract:
//  - RecipeOptions is a plain value type; each option is off by default, so that an official
//    command line trains DINO exactly as without it (the same weights, optimiser state and
//    log.txt; the official checkpoint keys).
//  - check_recipe(options, arch_masks_tokens) throws xdino::UsageError, one line naming the
//    flag and the fix, for a value out of range or iBOT on a backbone without patch tokens.
//  - describe_recipe(options): "DINO" or e.g. "DINO + KoLeo 0.1 + Sinkhorn-Knopp + iBOT 1",
//    what log lines and the report name the run's recipe by.
//  - recipe_args / check_resume_recipe: the options as the checkpoint's args carry them (only
//    the non-default ones are written, so a DINO run's args are the official ones), and the
//    check that a resumed run asks for the same: a difference is one UsageError line naming
//    the flag, both values and the fix. Missing keys read as the defaults (DINO).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/ivalue.h"
#include "ssl/loss.h"

namespace xdino::ssl {

struct RecipeOptions {
  // dino.koleo_loss_weight (dinov2: 0.1); 0: off.
  double koleo_loss_weight = 0;
  // train.centering: "centering" (DINO's running centre) or "sinkhorn_knopp" (3 iterations),
  // for the DINO and the iBOT targets both.
  std::string centering = "centering";
  // ibot.loss_weight (dinov2: 1.0); 0: off.
  double ibot_loss_weight = 0;
  // ibot.mask_ratio_min_max and ibot.mask_sample_probability.
  std::vector<double> mask_ratio_min_max = {0.1, 0.5};
  double mask_sample_probability = 0.5;
  // ibot.separate_head, and its ibot.head_n_prototypes (0: the DINO head's out_dim). The
  // separate head's other widths are the DINO head's.
  bool ibot_separate_head = false;
  int64_t ibot_out_dim = 0;
  // Sinkhorn-Knopp's iterations (dinov2 fixes 3; no flag).
  int64_t sinkhorn_knopp_iterations = 3;

  bool koleo() const { return koleo_loss_weight > 0; }
  bool ibot() const { return ibot_loss_weight > 0; }
  Centering centering_kind() const;
  // A loss term beside DINO's is on (the step computes ssl/recipe_terms.h's, the log shows
  // each term on its own).
  bool adds_terms() const;
  bool any() const { return adds_terms() || centering_kind() != Centering::kCentering; }
};

// The loss terms a recipe adds to DINO's, in the order they are added to the loss: each has
// its name (log.txt's train_<name>_loss, TensorBoard's train/<name>_loss, the epoch meters'
// <name>_loss) and its weight, on where it is > 0. The step's numbers, the meters, the log
// and TensorBoard follow this table: a new term is one line here (docs/contributing.md,
// "Adding a loss term"); ssl/recipe_terms.cpp computes it at its index, term_index(name).
struct LossTerm {
  const char* name;
  double RecipeOptions::*weight;
};
inline constexpr std::array<LossTerm, 2> kLossTerms = {{
    {"koleo", &RecipeOptions::koleo_loss_weight},
    {"ibot", &RecipeOptions::ibot_loss_weight},
}};
inline constexpr size_t kTermCount = kLossTerms.size();

// The index of the term named `name` in kLossTerms; kTermCount for none (a constant
// expression: a constexpr index checked by static_assert fails to compile on a misspelt name).
constexpr size_t term_index(std::string_view name) {
  for (size_t i = 0; i < kTermCount; ++i)
    if (std::string_view(kLossTerms[i].name) == name) return i;
  return kTermCount;
}

// The term's name in the log, the meters and TensorBoard: "<name>_loss" (log.txt prefixes
// "train_", TensorBoard "train/").
inline std::string loss_name(const LossTerm& term) { return std::string(term.name) + "_loss"; }

inline bool RecipeOptions::adds_terms() const {
  for (const LossTerm& t : kLossTerms)
    if (this->*t.weight > 0) return true;
  return false;
}

void check_recipe(const RecipeOptions& options, bool backbone_has_patch_tokens,
                  const std::string& arch);
std::string describe_recipe(const RecipeOptions& options);

// Adds the options that differ from the defaults to `args` (the checkpoint's args dict).
void add_recipe_args(const RecipeOptions& options, IDict& args);
// Throws UsageError when the checkpoint's args (as stored; a missing key is the default) ask
// for another recipe than `options`; `checkpoint` names the file in the message.
void check_resume_recipe(const RecipeOptions& options, const IDict& args,
                         const std::string& checkpoint);

}  // namespace xdino::ssl
