// The TensorBoard pruning fuzz entry point (see targets.h): core/tensorboard.h's prune_events on
// the bytes as an event file of a folder of its own, as a resumed run calls it.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/tensorboard.h"
#include "fuzz/targets.h"

namespace xdino::fuzz {

namespace {

std::string bytes_of(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

void fuzz_tensorboard(const uint8_t* data, size_t size) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/xdino_fuzz_tb_XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) return;
  const std::filesystem::path file = std::filesystem::path(dir) / "events.out.tfevents.1.fuzz";
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(data), size);
  const auto keep = [](const std::string&, int64_t step) { return step % 2 == 0; };
  try {
    tensorboard::prune_events(dir, keep);
    // What it rewrote is whole records of its own: a second prune changes nothing.
    const std::string once = bytes_of(file);
    tensorboard::prune_events(dir, keep);
    if (bytes_of(file) != once) invariant_broken("pruning an event file twice changed it again");
    // What it left alone is byte for byte the input.
    if (once.size() > size || (once.size() == size && std::memcmp(once.data(), data, size) != 0))
      invariant_broken("an event file left as it was differs from its input");
  } catch (...) {
    std::filesystem::remove_all(dir);
    throw;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace xdino::fuzz
