#include "tests/support/pth_testing.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <unordered_map>

#include "core/pth/pickle.h"
#include "core/pth/zip.h"
#include "tests/support/process.h"

namespace xdino::testing {
namespace {

std::string escaped(const std::string& s) {
  std::string out;
  char buf[8];
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c > 0x20 && c < 0x7f && c != '\\') {
      out.push_back(ch);
    } else {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

std::string number(double x) {
  if (std::isnan(x)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

std::string dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return "torch.float32";
    case at::kDouble:
      return "torch.float64";
    case at::kHalf:
      return "torch.float16";
    case at::kBFloat16:
      return "torch.bfloat16";
    case at::kLong:
      return "torch.int64";
    case at::kInt:
      return "torch.int32";
    case at::kShort:
      return "torch.int16";
    case at::kChar:
      return "torch.int8";
    case at::kByte:
      return "torch.uint8";
    case at::kBool:
      return "torch.bool";
    default:
      return std::string("unsupported:") + c10::toString(t);
  }
}

std::string list_text(c10::IntArrayRef v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

class Describer {
 public:
  void run(const c10::IValue& v, const std::string& path) {
    if (v.isNone()) return add(path + " None");
    if (v.isBool()) return add(path + " bool " + (v.toBool() ? "True" : "False"));
    if (v.isInt()) return add(path + " int " + std::to_string(v.toInt()));
    if (v.isDouble()) return add(path + " float " + number(v.toDouble()));
    if (v.isString()) return add(path + " str " + escaped(v.toStringRef()));
    if (v.isTensor()) return tensor(v.toTensor(), path);
    if (v.isList() || v.isTuple()) {
      const std::vector<c10::IValue> items =
          v.isList() ? v.toListRef().vec() : v.toTupleRef().elements().vec();
      add(path + (v.isList() ? " list " : " tuple ") + std::to_string(items.size()));
      for (size_t i = 0; i < items.size(); ++i) run(items[i], path + "[" + std::to_string(i) + "]");
      return;
    }
    if (v.isGenericDict()) {
      const auto dict = v.toGenericDict();
      const bool object = dict.size() > 0 && dict.begin()->key().isString() &&
                          dict.begin()->key().toStringRef() == "__class__";
      if (object)
        add(path + " object " + dict.begin()->value().toStringRef());
      else
        add(path + " dict " + std::to_string(dict.size()));
      bool first = true;
      for (const auto& item : dict) {
        if (object && first) {
          first = false;
          continue;
        }
        const c10::IValue& k = item.key();
        std::string key = k.isString() ? escaped(k.toStringRef())
                          : k.isInt()  ? std::to_string(k.toInt())
                                       : "?";
        if (object)
          run(item.value(), path + "." + key);
        else
          run(item.value(), path + "/" + (k.isString() ? "s:" : k.isInt() ? "i:" : "x:") + key);
      }
      return;
    }
    add(path + " unsupported " + v.tagKind());
  }
  std::vector<std::string> lines;

 private:
  void add(std::string line) { lines.push_back(std::move(line)); }
  void tensor(const at::Tensor& t, const std::string& path) {
    std::string sid = "-";
    if (t.storage().nbytes() > 0) {
      const auto* impl = t.storage().unsafeGetStorageImpl();
      const auto it = storages_.emplace(impl, storages_.size()).first;
      sid = std::to_string(it->second);
    }
    std::string values;
    const at::Tensor flat = t.detach().cpu().reshape(-1);
    const bool floating = t.is_floating_point();
    const at::Tensor as = floating ? flat.to(at::kDouble) : flat.to(at::kLong);
    for (int64_t i = 0; i < as.numel(); ++i) {
      if (i) values += ",";
      values +=
          floating ? number(as.data_ptr<double>()[i]) : std::to_string(as.data_ptr<int64_t>()[i]);
    }
    add(path + " tensor " + dtype_name(t.scalar_type()) + " size=" + list_text(t.sizes()) +
        " stride=" + list_text(t.strides()) + " offset=" + std::to_string(t.storage_offset()) +
        " grad=" + (t.requires_grad() ? "1" : "0") + " storage=" + sid + " values=" + values);
  }
  std::unordered_map<const void*, size_t> storages_;
};

}  // namespace

std::vector<std::string> describe(const c10::IValue& value) {
  Describer d;
  d.run(value, "$");
  return d.lines;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return lines;
}

bool python_torch_available() {
  // find_spec locates the packages without importing torch (which takes seconds).
  static const bool available =
      run_process({kPython, "-c",
                   "import importlib.util as u, sys; "
                   "sys.exit(u.find_spec('torch') is None or u.find_spec('numpy') is None)"},
                  {}, 60)
          .exit_code == 0;
  return available;
}

std::string pickle_data_dir() { return test_data_dir() + "/pickle"; }

std::string run_pth_tool(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kPython, pickle_data_dir() + "/pth_tool.py"};
  argv.insert(argv.end(), args.begin(), args.end());
  const ProcessResult r = run_process(argv, {}, 300);
  if (r.exit_code != 0)
    throw std::runtime_error("pth_tool.py " + args.at(0) + " failed (" +
                             std::to_string(r.exit_code) + "): " + r.err);
  return r.out;
}

std::map<std::string, std::vector<std::string>> expected_descriptions() {
  std::ifstream in(pickle_data_dir() + "/expected.txt");
  if (!in) throw std::runtime_error("cannot read expected.txt");
  std::map<std::string, std::vector<std::string>> out;
  std::string line, file;
  while (std::getline(in, line)) {
    if (line.rfind("# ", 0) == 0)
      file = line.substr(2);
    else if (!line.empty())
      out[file].push_back(line);
  }
  return out;
}

c10::impl::GenericDict any_dict() {
  return c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get());
}

void save_pth_zip64(const std::filesystem::path& path, const c10::IValue& value) {
  const pth::Pickled pickled = pth::pickle(value, path.string());
  // LibTorch's writer (miniz) puts ZIP64 extra fields on every entry.
  caffe2::serialize::PyTorchStreamWriter zip(path.string());
  zip.writeRecord("data.pkl", pickled.bytes.data(), pickled.bytes.size());
  for (const pth::PickledStorage& s : pickled.storages)
    zip.writeRecord("data/" + s.key, s.data.data_ptr(), s.data.nbytes());
  zip.writeEndOfFile();
}

}  // namespace xdino::testing
