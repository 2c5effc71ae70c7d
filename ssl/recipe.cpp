#include "ssl/recipe.h"

#include <cmath>
#include <sstream>

#include "core/check.h"
#include "core/python_format.h"
#include "core/recipe_name.h"

namespace xdino::ssl {
namespace {

// The options as the checkpoint's args name them, each with its text for messages.
struct Arg {
  const char* key;
  c10::IValue value;
  std::string text;
};

std::string number(double v) { return python_repr(v); }

std::vector<Arg> recipe_arg_list(const RecipeOptions& o) {
  auto ratios = c10::impl::GenericList(c10::AnyType::get());
  for (double r : o.mask_ratio_min_max) ratios.push_back(r);
  std::string ratio_text;
  for (double r : o.mask_ratio_min_max) {
    if (!ratio_text.empty()) ratio_text += ' ';
    ratio_text += number(r);
  }
  return {
      {"koleo_loss_weight", o.koleo_loss_weight, number(o.koleo_loss_weight)},
      {"centering", o.centering, o.centering},
      {"ibot_loss_weight", o.ibot_loss_weight, number(o.ibot_loss_weight)},
      {"mask_ratio_min_max", ratios, ratio_text},
      {"mask_sample_probability", o.mask_sample_probability, number(o.mask_sample_probability)},
      {"ibot_separate_head", o.ibot_separate_head, o.ibot_separate_head ? "true" : "false"},
      {"ibot_out_dim", o.ibot_out_dim, std::to_string(o.ibot_out_dim)},
  };
}

// The stored value's text, in the form recipe_arg_list writes it ("" when it is not one).
std::string stored_text(const c10::IValue& v) {
  if (v.isString()) return v.toStringRef();
  if (v.isBool()) return v.toBool() ? "true" : "false";
  if (v.isInt()) return std::to_string(v.toInt());
  if (v.isDouble()) return number(v.toDouble());
  if (v.isList()) {
    std::string out;
    for (const c10::IValue& e : v.toListRef()) {
      if (!e.isDouble() && !e.isInt()) return "";
      if (!out.empty()) out += ' ';
      out += number(e.isDouble() ? e.toDouble() : static_cast<double>(e.toInt()));
    }
    return out;
  }
  return "";
}

}  // namespace

Centering RecipeOptions::centering_kind() const {
  return centering == "sinkhorn_knopp" ? Centering::kSinkhornKnopp : Centering::kCentering;
}

void check_recipe(const RecipeOptions& o, bool backbone_has_patch_tokens, const std::string& arch) {
  XDINO_CHECK_ARG(o.centering == "centering" || o.centering == "sinkhorn_knopp",
                  "--centering must be centering or sinkhorn_knopp (dinov2's train.centering), "
                  "got ",
                  quote(o.centering));
  XDINO_CHECK_ARG(std::isfinite(o.koleo_loss_weight) && o.koleo_loss_weight >= 0,
                  "--koleo_loss_weight must be >= 0 (0: off; dinov2 uses 0.1), got ",
                  o.koleo_loss_weight);
  XDINO_CHECK_ARG(std::isfinite(o.ibot_loss_weight) && o.ibot_loss_weight >= 0,
                  "--ibot_loss_weight must be >= 0 (0: off; dinov2 uses 1.0), got ",
                  o.ibot_loss_weight);
  XDINO_CHECK_ARG(o.ibot_out_dim >= 0,
                  "--ibot_out_dim must be >= 0 (0: the DINO head's --out_dim), got ",
                  o.ibot_out_dim);
  XDINO_CHECK_ARG(o.ibot_out_dim == 0 || o.ibot_separate_head, "--ibot_out_dim ", o.ibot_out_dim,
                  " needs --ibot_separate_head true (the shared head has --out_dim outputs)");
  XDINO_CHECK_ARG(o.sinkhorn_knopp_iterations >= 1, "Sinkhorn-Knopp needs at least 1 iteration");
  // The masking flags are checked whatever else is on: config.ini records them, and a value
  // refused only once iBOT is turned on would be a surprise then.
  const auto& r = o.mask_ratio_min_max;
  XDINO_CHECK_ARG(r.size() == 2 && r[0] >= 0 && r[0] <= r[1] && r[1] > 0 && r[1] <= 1,
                  "--mask_ratio_min_max takes two ratios 0 <= min <= max <= 1 with max > 0 "
                  "(dinov2: 0.1 0.5)");
  XDINO_CHECK_ARG(o.mask_sample_probability > 0 && o.mask_sample_probability <= 1,
                  "--mask_sample_probability must be in (0, 1] (dinov2: 0.5), got ",
                  o.mask_sample_probability);
  if (!o.ibot()) return;
  XDINO_CHECK_ARG(backbone_has_patch_tokens, "--ibot_loss_weight needs patch tokens to mask, and ",
                  arch,
                  " has none; use an xcit_*, xvit_* or vit_* architecture, or "
                  "--ibot_loss_weight 0");
}

std::string describe_recipe(const RecipeOptions& o) {
  return recipe_name(o.koleo_loss_weight, o.centering_kind() == Centering::kSinkhornKnopp,
                     o.ibot_loss_weight, o.ibot_separate_head);
}

void add_recipe_args(const RecipeOptions& o, IDict& args) {
  const std::vector<Arg> mine = recipe_arg_list(o), defaults = recipe_arg_list(RecipeOptions{});
  for (size_t i = 0; i < mine.size(); ++i)
    if (mine[i].text != defaults[i].text) args.insert(mine[i].key, mine[i].value);
}

void check_resume_recipe(const RecipeOptions& o, const IDict& args, const std::string& checkpoint) {
  const std::vector<Arg> mine = recipe_arg_list(o), defaults = recipe_arg_list(RecipeOptions{});
  for (size_t i = 0; i < mine.size(); ++i) {
    const c10::IValue* stored = find(args, mine[i].key);
    const std::string was = stored ? stored_text(*stored) : defaults[i].text;
    XDINO_CHECK_ARG(was == mine[i].text, checkpoint, " was trained with --", mine[i].key, " ",
                    was.empty() ? "(unreadable)" : was, " and this run asks for ", mine[i].text,
                    ": resume with the same value, or start a new run in another --output_dir");
  }
}

}  // namespace xdino::ssl
