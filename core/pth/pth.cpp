#include "core/pth.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <caffe2/serialize/inline_container.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <unordered_map>
#include <vector>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/pth/pickle.h"
#include "core/pth/zip.h"

namespace xdino {
namespace {

bool little_endian_host() {
  const uint16_t probe = 1;
  return *reinterpret_cast<const uint8_t*>(&probe) == 1;
}

// Recognises what a non-zip file is, so the error can say what to do.
void check_zip_magic(const std::filesystem::path& path, const std::string& where) {
  XDINO_CHECK(!std::filesystem::is_directory(path), where, " is a folder, not a .pth file");
  std::ifstream in(path, std::ios::binary);
  XDINO_CHECK(in.good(), "cannot open ", where, ": ", std::strerror(errno));
  unsigned char head[4] = {0, 0, 0, 0};
  in.read(reinterpret_cast<char*>(head), 4);
  const std::streamsize got = in.gcount();
  XDINO_CHECK(got > 0, where, " is empty");
  if (got == 4 && head[0] == 'P' && head[1] == 'K' && head[2] == 3 && head[3] == 4) return;
  XDINO_CHECK(head[0] != 0x80, where,
              " is a legacy (PyTorch < 1.6) torch.save file, which this loader does not read; ",
              "convert it once with torch.save(torch.load(f), f) in PyTorch >= 1.6");
  XDINO_FAIL(where, " is not a torch.save file (it does not start with a zip header)");
}

void swap_bytes(at::Tensor& t) {
  const size_t element = t.element_size();
  if (element == 1) return;
  auto* p = static_cast<uint8_t*>(t.data_ptr());
  for (int64_t i = 0; i < t.numel(); ++i, p += element) std::reverse(p, p + element);
}

// Reads every storage record ("<folder>/data/<key>") into its own byte buffer, in slices spread
// over the intra-op threads, and checks each record's CRC-32. Returns key -> bytes.
std::unordered_map<std::string, at::Tensor> read_storages(const pth::ZipReader& zip,
                                                          const std::string& folder) {
  constexpr uint64_t kSlice = 4u << 20;
  struct Slice {
    size_t record;
    uint64_t offset, size;
    uint32_t crc = 0;
  };
  std::vector<const pth::ZipEntry*> entries;
  std::vector<at::Tensor> buffers;
  std::vector<Slice> slices;
  for (const pth::ZipEntry& e : zip.entries()) {
    if (e.name.compare(0, folder.size(), folder) != 0) continue;
    for (uint64_t offset = 0; offset < e.size; offset += kSlice)
      slices.push_back({entries.size(), offset, std::min(kSlice, e.size - offset)});
    entries.push_back(&e);
    buffers.push_back(at::empty({int64_t(e.size)}, at::kByte));
  }
  // One task per thread, each taking the next slice until none is left (sizes vary a lot).
  std::atomic<size_t> next{0};
  at::parallel_for(0, std::max<int64_t>(1, at::get_num_threads()), 1, [&](int64_t, int64_t) {
    for (size_t i = next++; i < slices.size(); i = next++) {
      Slice& s = slices[i];
      s.crc = zip.read_range(*entries[s.record], s.offset, s.size,
                             buffers[s.record].data_ptr<uint8_t>() + s.offset);
    }
  });
  std::vector<uint32_t> crcs(entries.size(), 0);
  for (const Slice& s : slices)
    crcs[s.record] = static_cast<uint32_t>(
        crc32_combine64(crcs[s.record], s.crc, static_cast<z_off64_t>(s.size)));
  std::unordered_map<std::string, at::Tensor> out;
  for (size_t r = 0; r < entries.size(); ++r) {
    zip.check_crc(*entries[r], crcs[r]);
    out.emplace(entries[r]->name.substr(folder.size()), std::move(buffers[r]));
  }
  return out;
}

}  // namespace

c10::IValue load_pth(const std::filesystem::path& path) {
  const std::string where = "'" + path.string() + "'";
  check_zip_magic(path, where);
  pth::ZipReader zip(path);

  // Records live under one folder: "archive/" (torch >= 2) or the file's stem (torch 1.x).
  const pth::ZipEntry* pickle = nullptr;
  bool torchscript = false;
  for (const pth::ZipEntry& e : zip.entries()) {
    const size_t slash = e.name.find('/');
    if (slash == std::string::npos) continue;
    const std::string rest = e.name.substr(slash + 1);
    if (rest == "data.pkl") pickle = &e;
    if (rest == "constants.pkl" || rest.rfind("code/", 0) == 0) torchscript = true;
  }
  XDINO_CHECK(!torchscript, where, " is a TorchScript archive (torch.jit.save), not a ",
              "torch.save file; save the module's state_dict() with torch.save instead");
  XDINO_CHECK(pickle != nullptr, where, " is a zip file without data.pkl, not a torch.save file");
  const std::string prefix = pickle->name.substr(0, pickle->name.size() - 8);

  bool swap = false;
  if (const pth::ZipEntry* order = zip.find(prefix + "byteorder")) {
    const std::string value = zip.read_string(*order);
    XDINO_CHECK(value == "little" || value == "big", where, " has an unknown byteorder record '",
                value, "'");
    swap = (value == "little") != little_endian_host();
  }

  const std::unordered_map<std::string, at::Tensor> records = read_storages(zip, prefix + "data/");
  const pth::StorageLoader load_storage = [&](const std::string& key, at::ScalarType dtype,
                                              int64_t numel) {
    const auto it = records.find(key);
    XDINO_CHECK(it != records.end(), where, " is damaged: storage record '", prefix, "data/", key,
                "' is missing");
    const uint64_t size = uint64_t(it->second.numel());
    const uint64_t element = at::elementSize(dtype);
    XDINO_CHECK(uint64_t(numel) <= size / element && size == uint64_t(numel) * element, where,
                " is damaged: storage record '", prefix, "data/", key, "' holds ", size,
                " bytes but its ", numel, " ", dtype, " elements need ", uint64_t(numel) * element);
    at::Tensor storage = at::empty({0}, at::TensorOptions().dtype(dtype))
                             .set_(it->second.storage(), 0, {numel}, {1});
    if (swap) swap_bytes(storage);
    return storage;
  };
  return pth::unpickle(zip.read_string(*pickle), load_storage, where);
}

void save_pth(const std::filesystem::path& path, const c10::IValue& value) {
  const std::string where = "'" + path.string() + "'";
  const pth::Pickled pickled = pth::pickle(value, where);
  write_atomically(path, [&](const std::filesystem::path& tmp) {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    XDINO_CHECK(out.is_open(), "cannot create ", tmp, ": ", std::strerror(errno));
    // The first failed write's errno (ENOSPC, EFBIG, EIO...); 0 while all is well.
    int write_error = 0;
    try {
      // LibTorch's own zip writer (64-byte aligned records, as torch.save writes them), fed
      // through a function so that the bytes go to our temporary file. The function never
      // reports a short write: the writer would throw, and throw again from its destructor
      // (which finishes the archive), and that second throw terminates the process. A
      // failure is remembered instead, later bytes are dropped, and it is reported below.
      caffe2::serialize::PyTorchStreamWriter zip([&](const void* data, size_t size) -> size_t {
        if (write_error != 0) return size;
        errno = 0;
        out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
        if (!out) write_error = errno != 0 ? errno : EIO;
        return size;
      });
      zip.writeRecord("data.pkl", pickled.bytes.data(), pickled.bytes.size());
      const std::string order = little_endian_host() ? "little" : "big";
      zip.writeRecord("byteorder", order.data(), order.size());
      for (const pth::PickledStorage& s : pickled.storages) {
        // Device storages come to the host one at a time; host ones are written in place.
        const at::Tensor host = s.data.device().is_cpu() ? s.data : s.data.cpu();
        zip.writeRecord("data/" + s.key, host.data_ptr(), host.nbytes());
      }
      zip.writeEndOfFile();  // adds the `version` record, then the central directory
    } catch (const c10::Error& e) {
      XDINO_FAIL("cannot write ", where, ": ", e.what_without_backtrace());
    }
    if (write_error != 0) throw_write_error(path, write_error);
    out.close();
    XDINO_CHECK(!out.fail(), "cannot write ", where, ": ", std::strerror(errno));
  });
}

}  // namespace xdino
