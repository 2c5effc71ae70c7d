// The name a DINO run's recipe goes by: "DINO", or with DINOv2's additions (ssl/recipe.h)
// "DINO + KoLeo 0.1 + Sinkhorn-Knopp + iBOT 1.0" ("iBOT 1.0 (separate head)"), weights as
// Python prints them. One definition for ssl/ (the training log) and eval/ (the report, which
// reads the options back from the training run's config.ini): the lowest tier both use.
#pragma once

#include <string>

#include "core/python_format.h"

namespace xdino {

inline std::string recipe_name(double koleo_weight, bool sinkhorn_knopp, double ibot_weight,
                               bool separate_head) {
  std::string s = "DINO";
  if (koleo_weight > 0) s += " + KoLeo " + python_repr(koleo_weight);
  if (sinkhorn_knopp) s += " + Sinkhorn-Knopp";
  if (ibot_weight > 0)
    s += " + iBOT " + python_repr(ibot_weight) + (separate_head ? " (separate head)" : "");
  return s;
}

}  // namespace xdino
