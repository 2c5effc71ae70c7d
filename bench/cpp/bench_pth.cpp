// Loading and saving a ~100 MB checkpoint: load_pth against reading the bytes alone and against
// LibTorch's torch::pickle_load, plus save_pth and load_state_dict.
//   build/bench/bench_pth [folder=/tmp] [repeats=5]
// The file is read from the page cache after the first pass, so the numbers are the cost beyond
// disk reads. Python's torch.load / torch.save of the same file:
// bench/reference/bench_pth_python.py (bench/results/pth.md).
#include <fcntl.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/torch.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "core/atomic_file.h"
#include "core/pth.h"
#include "core/pth/zip.h"
#include "models/weights.h"

namespace {

double seconds(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The floor for any loader: the file's bytes copied from the page cache with read(2) into a
// buffer whose pages are already mapped.
void read_raw(const std::filesystem::path& file, at::Tensor& buffer) {
  const int fd = ::open(file.c_str(), O_RDONLY);
  auto* p = static_cast<char*>(buffer.data_ptr());
  for (int64_t left = buffer.numel(); left > 0;) {
    const ssize_t n = ::read(fd, p, size_t(std::min<int64_t>(left, 1 << 30)));
    if (n <= 0) break;
    p += n;
    left -= n;
  }
  ::close(fd);
}

std::vector<char> read_bytes(const std::filesystem::path& file) {
  std::vector<char> data(std::filesystem::file_size(file));
  std::ifstream in(file, std::ios::binary);
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  return data;
}

double median_of(int repeats, const std::function<void()>& fn) {
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) t.push_back(seconds(fn));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Parameter shapes of xcit_small_12_p16 blocks (tests/data/xcit_small_12_p16_keys.txt), 14 blocks:
// ~100 MB.
struct Params : torch::nn::Module {
  Params() {
    register_parameter("cls_token", torch::randn({1, 1, 384}));
    for (int b = 0; b < 14; ++b) {
      const std::string p = "blocks_" + std::to_string(b) + "_";
      register_parameter(p + "attn_qkv_weight", torch::randn({1152, 384}));
      register_parameter(p + "attn_qkv_bias", torch::randn({1152}));
      register_parameter(p + "attn_proj_weight", torch::randn({384, 384}));
      register_parameter(p + "mlp_fc1_weight", torch::randn({1536, 384}));
      register_parameter(p + "mlp_fc2_weight", torch::randn({384, 1536}));
      for (const char* v : {"gamma1", "gamma2", "gamma3", "norm1_weight", "norm1_bias"})
        register_parameter(p + v, torch::randn({384}));
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path dir = argc > 1 ? argv[1] : "/tmp";
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  torch::set_num_threads(1);
  const std::filesystem::path file = dir / "bench_pth_checkpoint.pth";
  auto source = std::make_shared<Params>();
  auto target = std::make_shared<Params>();
  const auto state = xdino::models::state_dict(*source);
  const c10::IValue value = xdino::models::to_ivalue(state);

  const double save = median_of(repeats, [&] { xdino::save_pth(file, value); });
  const double size_mb = std::filesystem::file_size(file) / 1e6;

  at::Tensor buffer = at::zeros({int64_t(std::filesystem::file_size(file))}, at::kByte);
  const double read = median_of(repeats, [&] { read_raw(file, buffer); });
  std::string whole = xdino::read_file(file);
  const double crc = median_of(
      repeats, [&] { crc32_z(0, reinterpret_cast<const Bytef*>(whole.data()), whole.size()); });
  whole.clear();
  // Each result is freed inside the timed call, as `torch.load(f)` in a Python loop frees it.
  const double load = median_of(repeats, [&] { xdino::load_pth(file); });
  const int threads = std::max(1u, std::thread::hardware_concurrency());
  torch::set_num_threads(threads);
  const double load_threads = median_of(repeats, [&] { xdino::load_pth(file); });
  torch::set_num_threads(1);
  const double torch_load = median_of(repeats, [&] { torch::pickle_load(read_bytes(file)); });
  const auto loaded_state = xdino::models::from_ivalue(xdino::load_pth(file));
  const double copy =
      median_of(repeats, [&] { xdino::models::load_state_dict(*target, loaded_state); });

  std::printf("checkpoint: %zu tensors, %.1f MB, median of %d runs, 1 thread unless said\n",
              state.size(), size_mb, repeats);
  std::printf("  read(2) the file into mapped memory      %7.3f s\n", read);
  std::printf("  CRC-32 of the whole file                 %7.3f s\n", crc);
  std::printf("  load_pth                                 %7.3f s  (%.2fx the plain read)\n", load,
              load / read);
  std::printf("  load_pth, %2d threads                     %7.3f s  (%.2fx the plain read)\n",
              threads, load_threads, load_threads / read);
  std::printf("  torch::pickle_load incl. reading         %7.3f s  (%.2fx load_pth)\n", torch_load,
              torch_load / load);
  std::printf("  load_state_dict (copy into the module)   %7.3f s\n", copy);
  std::printf("  save_pth (incl. fsync)                   %7.3f s\n", save);
  std::filesystem::remove(file);
  return 0;
}
