#include "augment/data/dataset.h"

#include <algorithm>

#include "core/check.h"

namespace xdino::augment {
void Dataset::check_index(int64_t i) const {
  XDINO_CHECK(i >= 0 && i < size(), "sample index ", i, " out of range for ", location(), " (",
              size(), " samples)");
}

std::vector<int64_t> Dataset::labels() const {
  std::vector<int64_t> out(static_cast<size_t>(size()));
  for (int64_t i = 0; i < size(); ++i) out[static_cast<size_t>(i)] = label(i);
  return out;
}

std::string Dataset::describe() const {
  std::string s = format() + " " + location() + ": " + std::to_string(size()) + " images, ";
  s += num_classes() == 0 ? "unlabeled" : std::to_string(num_classes()) + " classes";
  return s;
}

SubsetDataset::SubsetDataset(DatasetPtr base, std::vector<int64_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {
  for (int64_t i : indices_)
    XDINO_CHECK(i >= 0 && i < base_->size(), "subset index ", i, " out of range for ",
                base_->location(), " (", base_->size(), " samples)");
}

int64_t SubsetDataset::base_index(int64_t i) const {
  check_index(i);
  return indices_[static_cast<size_t>(i)];
}
int64_t SubsetDataset::label(int64_t i) const { return base_->label(base_index(i)); }
std::string SubsetDataset::path(int64_t i) const { return base_->path(base_index(i)); }
Image SubsetDataset::load(int64_t i) const { return base_->load(base_index(i)); }

void StringList::push_back(std::string_view s) {
  chars_.append(s.data(), s.size());
  ends_.push_back(chars_.size());
}

void StringList::reserve(size_t count, size_t chars) {
  ends_.reserve(count);
  chars_.reserve(chars);
}

std::vector<int64_t> balanced_subset(const Dataset& dataset, int64_t max_samples) {
  const int64_t n = dataset.size();
  std::vector<int64_t> out;
  if (max_samples <= 0 || max_samples >= n) {
    out.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = i;
    return out;
  }
  if (dataset.num_classes() == 0) {
    for (int64_t i = 0; i < max_samples; ++i) out.push_back(i);
    return out;
  }
  std::vector<std::vector<int64_t>> per_class(static_cast<size_t>(dataset.num_classes()));
  for (int64_t i = 0; i < n; ++i) per_class[static_cast<size_t>(dataset.label(i))].push_back(i);
  std::vector<size_t> taken(per_class.size(), 0);
  while (static_cast<int64_t>(out.size()) < max_samples) {
    for (size_t c = 0; c < per_class.size() && static_cast<int64_t>(out.size()) < max_samples; ++c)
      if (taken[c] < per_class[c].size()) out.push_back(per_class[c][taken[c]++]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace xdino::augment
