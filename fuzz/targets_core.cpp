// The LibTorch-free fuzz entry points (see targets.h): kept apart from target_pth.cpp so the
// instrumented build of these targets compiles no LibTorch header.
#include "fuzz/targets.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "core/json.h"
#include "core/pth/zip.h"

namespace xdino::fuzz {

void invariant_broken(const char* what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
  std::abort();
}

TempInput::TempInput(const uint8_t* data, size_t size, const char* suffix) {
  const char* dir = std::getenv("TMPDIR");
  std::string name = std::string(dir && *dir ? dir : "/tmp") + "/xdino_fuzz_XXXXXX" + suffix;
  const int fd = ::mkstemps(name.data(), int(std::strlen(suffix)));
  XDINO_CHECK(fd >= 0, "cannot create a temporary file: ", std::strerror(errno));
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) break;
    done += size_t(n);
  }
  ::close(fd);
  path_ = name;
  XDINO_CHECK(done == size, "cannot write the temporary file ", name);
}

TempInput::~TempInput() {
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

void fuzz_json(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const Json j = parse_json(text, "fuzz input");
  // What was accepted must print (both layouts) as JSON that parses again.
  parse_json(python_dumps(j), "printed fuzz input");
  parse_json(python_dumps(j, 2), "indented fuzz input");
}

void fuzz_pth_zip(const uint8_t* data, size_t size) {
  TempInput file(data, size, ".pth");
  const pth::ZipReader zip(file.path());
  for (const pth::ZipEntry& e : zip.entries()) {
    // Entry sizes were checked against the file at open; reading proves it.
    if (e.size <= (uint64_t(1) << 20)) {
      std::vector<unsigned char> buf(e.size);
      zip.read(e, buf.data());
    }
  }
}

}  // namespace xdino::fuzz
