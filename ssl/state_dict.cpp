#include "ssl/state_dict.h"

#include <map>
#include <set>

#include "core/check.h"

namespace xdino::ssl {
namespace {

void collect(const torch::nn::Module& m, const std::string& prefix,
             std::vector<std::pair<std::string, torch::Tensor>>& out) {
  for (const auto& p : m.named_parameters(/*recurse=*/false))
    out.emplace_back(prefix + p.key(), p.value());
  for (const auto& b : m.named_buffers(/*recurse=*/false))
    out.emplace_back(prefix + b.key(), b.value());
  for (const auto& c : m.named_children()) collect(*c.value(), prefix + c.key() + ".", out);
}

std::string first_few(const std::vector<std::string>& keys) {
  std::string s;
  for (size_t i = 0; i < keys.size() && i < 3; ++i) s += (i ? ", " : "") + keys[i];
  if (keys.size() > 3) s += ", ... (" + std::to_string(keys.size()) + " in all)";
  return s;
}

const std::string kDdp = "module.";

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

}  // namespace

IDict state_dict(const torch::nn::Module& module, const std::string& prefix) {
  std::vector<std::pair<std::string, torch::Tensor>> entries;
  collect(module, prefix, entries);
  auto d = make_dict();
  for (auto& [key, t] : entries) d.insert(key, t.detach().cpu());
  return d;
}

std::string LoadReport::summary() const {
  if (missing.empty() && unexpected.empty()) return "all keys matched";
  std::string s;
  if (!missing.empty()) s += "missing " + first_few(missing);
  if (!unexpected.empty()) s += (s.empty() ? "" : "; ") + ("unexpected " + first_few(unexpected));
  return s;
}

LoadReport load_state_dict(torch::nn::Module& module, const IDict& dict, bool strict,
                           const std::string& what) {
  std::vector<std::pair<std::string, torch::Tensor>> own;
  collect(module, "", own);
  bool strip = !dict.empty();
  for (const auto& e : dict) strip = strip && starts_with(e.key().toStringRef(), kDdp);
  for (const auto& [key, t] : own) strip = strip && !starts_with(key, kDdp);

  std::map<std::string, torch::Tensor> file;
  for (const auto& e : dict) {
    std::string key = e.key().toStringRef();
    if (strip) key = key.substr(kDdp.size());
    XDINO_CHECK(e.value().isTensor(), what, " entry '", key, "' is not a tensor");
    file.emplace(std::move(key), e.value().toTensor());
  }
  LoadReport report;
  std::set<std::string> used;
  torch::NoGradGuard no_grad;
  for (auto& [key, dst] : own) {
    const auto it = file.find(key);
    if (it == file.end()) {
      report.missing.push_back(key);
      continue;
    }
    XDINO_CHECK(it->second.sizes() == dst.sizes(), what, " '", key, "' has shape ",
                it->second.sizes(), " in the file but ", dst.sizes(),
                " in the model: the checkpoint is for another architecture or --out_dim");
    dst.copy_(it->second);
    used.insert(key);
  }
  for (const auto& [key, t] : file)
    if (!used.count(key)) report.unexpected.push_back(key);
  XDINO_CHECK(!strict || (report.missing.empty() && report.unexpected.empty()), what,
              " does not match the model: ", report.summary());
  return report;
}

}  // namespace xdino::ssl
