#include "ssl/checkpoint.h"

#include "core/check.h"
#include "core/log.h"
#include "models/weights.h"

namespace xdino::ssl {
namespace {

// A copy of the tree with every tensor on the CPU (containers rebuilt, CPU tensors shared).
c10::IValue to_cpu(const c10::IValue& v) {
  if (v.isTensor()) return v.toTensor().cpu();
  if (v.isGenericDict()) {
    const auto d = v.toGenericDict();
    IDict out(d.keyType(), d.valueType());
    for (const auto& e : d) out.insert(e.key(), to_cpu(e.value()));
    return out;
  }
  if (v.isList() && !v.isIntList() && !v.isDoubleList() && !v.isBoolList()) {
    auto out = make_list();
    for (const auto& e : v.toListRef()) out.push_back(to_cpu(e));
    return out;
  }
  return v;
}

c10::impl::GenericList double_list(const std::vector<double>& v) {
  auto l = make_list();
  for (double x : v) l.push_back(x);
  return l;
}

// The module's state dict as {prefix + key: CPU tensor}, in PyTorch's order.
IDict state_dict(const torch::nn::Module& m, const std::string& prefix = "") {
  auto d = make_dict();
  for (const auto& item : models::state_dict(m)) d.insert(prefix + item.key(), item.value().cpu());
  return d;
}

// Non-strict load, as restart_from_checkpoint does; keys saved from a DDP-wrapped model carry
// "module.", which goes when every key has it and the module's own keys do not.
models::LoadReport load_module(torch::nn::Module& m, const c10::IValue& value,
                               const std::string& what) {
  models::StateDict state = models::from_ivalue(value, what);
  const auto has_prefix = [](const std::string& k) { return k.rfind("module.", 0) == 0; };
  bool strip = !state.is_empty();
  for (const auto& item : state) strip = strip && has_prefix(item.key());
  for (const auto& item : models::state_dict(m)) strip = strip && !has_prefix(item.key());
  if (strip) {
    models::StateDict bare;
    for (const auto& item : state) bare.insert(item.key().substr(7), item.value());
    state = std::move(bare);
  }
  return models::load_state_dict(m, state, /*strict=*/false, what);
}

void load_model(const IDict& ckpt, const char* key, torch::nn::Module& m,
                const std::string& source) {
  const c10::IValue* v = find(ckpt, key);
  if (v == nullptr) {
    log::warn("=> key '", key, "' not found in checkpoint '", source, "'");
    return;
  }
  const auto report = load_module(m, *v, std::string(key) + " in '" + source + "'");
  log::info("=> loaded '", key, "' from checkpoint '", source, "': ", report.summary());
}

}  // namespace

IDict options_dict(const DinoOptions& o) {
  auto d = make_dict();
  d.insert("arch", o.arch);
  d.insert("patch_size", o.patch_size);
  d.insert("in_chans", o.in_chans);
  d.insert("mean", double_list(o.mean));
  d.insert("std", double_list(o.std));
  d.insert("out_dim", o.head.out_dim);
  d.insert("norm_last_layer", o.head.norm_last_layer);
  d.insert("momentum_teacher", o.momentum_teacher);
  d.insert("pretrained_weights", o.pretrained_weights);
  d.insert("checkpoint_key", o.checkpoint_key);
  d.insert("use_bn_in_head", o.head.use_bn);
  d.insert("warmup_teacher_temp", o.loss.warmup_teacher_temp);
  d.insert("teacher_temp", o.loss.teacher_temp);
  d.insert("warmup_teacher_temp_epochs", o.loss.warmup_teacher_temp_epochs);
  d.insert("use_fp16", o.use_fp16);
  d.insert("precision", o.precision);
  d.insert("device", o.device);
  d.insert("weight_decay", o.weight_decay);
  d.insert("weight_decay_end", o.weight_decay_end);
  d.insert("clip_grad", o.clip_grad);
  d.insert("batch_size_per_gpu", o.batch_size_per_gpu);
  d.insert("accum_iter", o.accum_iter);
  d.insert("epochs", o.epochs);
  d.insert("freeze_last_layer", o.freeze_last_layer);
  d.insert("lr", o.lr);
  d.insert("warmup_epochs", o.warmup_epochs);
  d.insert("min_lr", o.min_lr);
  d.insert("optimizer", o.optimizer);
  d.insert("drop_path_rate", o.drop_path_rate);
  d.insert("global_crops_scale", double_list(o.global_crops_scale));
  d.insert("local_crops_number", o.local_crops_number);
  d.insert("local_crops_scale", double_list(o.local_crops_scale));
  d.insert("global_crops_size", o.global_crops_size);
  d.insert("local_crops_size", o.local_crops_size);
  d.insert("data_path", o.data_path);
  d.insert("max_samples", o.max_samples);
  d.insert("output_dir", o.output_dir);
  d.insert("saveckp_freq", o.saveckp_freq);
  d.insert("saveckp_minutes", o.saveckp_minutes);
  d.insert("seed", o.seed);
  d.insert("num_workers", o.num_workers);
  add_recipe_args(o.recipe, d);
  // What every run has: env:// is the only rendezvous accepted, --local_rank is ignored
  // (distributed/launcher_env.h); main_dino.py's args carry both.
  d.insert("dist_url", std::string("env://"));
  d.insert("local_rank", int64_t{0});
  return d;
}

c10::IValue make_checkpoint(const CheckpointParts& p, const DinoOptions& options,
                            const TrainingState& where) {
  auto ckpt = make_dict();
  ckpt.insert("student", state_dict(*p.student, "module."));
  ckpt.insert("teacher", state_dict(*p.teacher, p.teacher_ddp_prefix ? "module." : ""));
  ckpt.insert("optimizer", to_cpu(p.optimizer->state_dict()));
  ckpt.insert("epoch", where.epoch);
  ckpt.insert("args", options_dict(options));
  ckpt.insert("dino_loss", state_dict(*p.loss));
  if (p.ibot_loss != nullptr) ckpt.insert("ibot_patch_loss", state_dict(*p.ibot_loss));
  if (p.scaler != nullptr) ckpt.insert("fp16_scaler", p.scaler->state_dict());

  ckpt.insert("xdino_resume", where.to_dict());
  return ckpt;
}

TrainingState restore_checkpoint(const c10::IValue& value, const CheckpointParts& p,
                                 const std::string& source) {
  const auto ckpt = as_dict(value, "checkpoint '" + source + "'");
  // The official file's args are an argparse.Namespace, which says nothing of our options.
  if (const c10::IValue* args = find(ckpt, "args"); p.recipe && args && args->isGenericDict())
    check_resume_recipe(*p.recipe, args->toGenericDict(), "checkpoint '" + source + "'");
  load_model(ckpt, "student", *p.student, source);
  load_model(ckpt, "teacher", *p.teacher, source);
  if (const c10::IValue* opt = find(ckpt, "optimizer")) {
    try {
      p.optimizer->load_state_dict(*opt);
      log::info("=> loaded 'optimizer' from checkpoint '", source, "'");
    } catch (const Error& e) {
      // main_dino.py also goes on with a fresh optimiser when its state does not fit.
      log::warn("=> failed to load 'optimizer' from checkpoint '", source, "' (", e.what(),
                "); continuing with a fresh optimizer state");
    }
  } else {
    log::warn("=> key 'optimizer' not found in checkpoint '", source, "'");
  }
  if (p.scaler != nullptr) {
    if (const c10::IValue* s = find(ckpt, "fp16_scaler"))
      p.scaler->load_state_dict(*s);
    else
      log::warn("=> key 'fp16_scaler' not found in checkpoint '", source, "'");
  }
  if (const c10::IValue* l = find(ckpt, "dino_loss"))
    load_module(*p.loss, *l, "dino_loss in '" + source + "'");
  else
    log::warn("=> key 'dino_loss' not found in checkpoint '", source, "'");
  if (p.ibot_loss != nullptr) {
    if (const c10::IValue* l = find(ckpt, "ibot_patch_loss"))
      load_module(*p.ibot_loss, *l, "ibot_patch_loss in '" + source + "'");
    else
      log::warn("=> key 'ibot_patch_loss' not found in checkpoint '", source, "'");
  }

  TrainingState where;
  if (const c10::IValue* e = find(ckpt, "epoch")) where.epoch = as_int(*e, "epoch");
  if (const c10::IValue* r = find(ckpt, "xdino_resume"))
    where.from_dict(as_dict(*r, "xdino_resume"), "xdino_resume in " + source);
  return where;
}

}  // namespace xdino::ssl
