#include "ssl/warm_start.h"

#include "core/check.h"

namespace xdino::ssl {

std::string warm_start(MultiCropWrapperImpl& student, const models::PretrainedWeights& weights) {
  // The DINO head's tensors, under the head's own names.
  models::StateDict head;
  for (const auto& item : weights.weights) {
    if (!item.key().isString() || !item.value().isTensor()) continue;
    const std::string name = models::pretrained_name(item.key().toStringRef());
    if (models::is_dino_head_key(name)) head.insert(name.substr(5), item.value().toTensor());
  }
  if (!head.is_empty()) {
    // A head of another --out_dim fails here, naming the key and both shapes.
    models::load_state_dict(*student.head, head, /*strict=*/true,
                            weights.source + " (the DINO head)");
  }
  // iBOT's mask token starts at zeros when the file has none (a DINO checkpoint); every other
  // tensor must be there, as a strict load requires.
  const bool masked = student.backbone->has_mask_token();
  const auto report = models::load_pretrained(*student.backbone, weights, /*strict=*/!masked);
  if (masked) {
    std::vector<std::string> missing;
    for (const std::string& key : report.missing)
      if (key != "mask_token") missing.push_back(key);
    XDINO_CHECK_ARG(missing.empty() && report.unexpected.empty(), weights.source,
                    " does not fit the backbone: ", report.summary());
  }
  return "student and teacher start from " + weights.source + ": backbone " +
         std::to_string(report.loaded) + " tensors, " +
         (head.is_empty() ? std::string("head newly initialised (the file has none)")
                          : "DINO head " + std::to_string(head.size()) + " tensors");
}

}  // namespace xdino::ssl
