#include "core/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "core/check.h"

namespace xdino {
namespace fs = std::filesystem;

namespace {

// fsync a file or a folder; best effort on file systems that refuse it for folders.
void sync_path(const fs::path& p, bool required) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    XDINO_CHECK(!required, "cannot open ", p, " to flush it: ", std::strerror(errno));
    return;
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  XDINO_CHECK(rc == 0 || !required, "cannot flush ", p, " to disk: ", std::strerror(err));
}

// XDINO_TEST_WRITE_DELAY_MS: a pause between writing the temporary file and renaming it, so
// that a test can kill a process inside that window (tests/cli/test_crash_consistency.cpp).
void test_write_delay() {
  static const long ms = [] {
    const char* v = std::getenv("XDINO_TEST_WRITE_DELAY_MS");
    return v == nullptr ? 0L : std::strtol(v, nullptr, 10);
  }();
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

fs::path temp_sibling(const fs::path& path) {
  static std::atomic<unsigned> counter{0};
  fs::path tmp = path;
  tmp += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  return tmp;
}

}  // namespace

void write_atomically(const fs::path& path, const std::function<void(const fs::path&)>& writer) {
  const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
  XDINO_CHECK(fs::is_directory(parent), "cannot write ", path, ": folder ", parent,
              " does not exist");
  const fs::path tmp = temp_sibling(path);
  try {
    writer(tmp);
    XDINO_CHECK(fs::exists(tmp), "writer for ", path, " produced no file");
    sync_path(tmp, true);
    test_write_delay();
    std::error_code ec;
    fs::rename(tmp, path, ec);
    XDINO_CHECK(!ec, "cannot move ", tmp, " over ", path, ": ", ec.message());
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
  sync_path(parent, false);
}

void write_file_atomically(const fs::path& path, std::string_view bytes) {
  write_atomically(path, [&](const fs::path& tmp) {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    XDINO_CHECK(out.good(), "cannot create ", tmp, ": ", std::strerror(errno));
    errno = 0;
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out.good()) throw_write_error(path, errno);
  });
}

namespace {
// Closes a file descriptor on every path out of a scope.
struct FileDescriptor {
  int fd;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
  int release() { return std::exchange(fd, -1); }
};
}  // namespace

void copy_file_atomically(const fs::path& from, const fs::path& to) {
  write_atomically(to, [&](const fs::path& tmp) {
    FileDescriptor in{::open(from.c_str(), O_RDONLY | O_CLOEXEC)};
    XDINO_CHECK(in.fd >= 0, "cannot open ", from, ": ", std::strerror(errno));
    FileDescriptor out{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
    XDINO_CHECK(out.fd >= 0, "cannot create ", tmp, ": ", std::strerror(errno));
    std::vector<char> buffer(1 << 20);
    for (;;) {
      const ssize_t got = ::read(in.fd, buffer.data(), buffer.size());
      if (got < 0 && errno == EINTR) continue;
      XDINO_CHECK(got >= 0, "cannot read ", from, ": ", std::strerror(errno));
      if (got == 0) break;
      for (ssize_t done = 0; done < got;) {
        const ssize_t put = ::write(out.fd, buffer.data() + done, static_cast<size_t>(got - done));
        if (put < 0 && errno == EINTR) continue;
        if (put < 0) throw_write_error(to, errno);
        done += put;
      }
    }
    if (::close(out.release()) != 0) throw_write_error(to, errno);
  });
}

void throw_write_error(const fs::path& path, int err) {
  XDINO_FAIL("cannot write '", path.string(), "': ", err != 0 ? std::strerror(err) : "write failed",
             " (the previous file is left as it was)");
}

void remove_stale_temporaries(const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    // <name>.tmp-<pid>-<n>, as temp_sibling makes them.
    const std::string name = it->path().filename().string();
    const size_t at = name.rfind(".tmp-");
    if (at == std::string::npos) continue;
    const std::string rest = name.substr(at + 5);
    const size_t dash = rest.find('-');
    if (dash == std::string::npos || dash == 0) continue;
    char* end_ptr = nullptr;
    const long pid = std::strtol(rest.c_str(), &end_ptr, 10);
    if (end_ptr != rest.c_str() + dash || pid <= 0) continue;
    if (pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    std::error_code ignored;
    fs::remove(it->path(), ignored);
  }
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  XDINO_CHECK(in.good(), "cannot open ", path, ": ", std::strerror(errno));
  std::ostringstream os;
  os << in.rdbuf();
  XDINO_CHECK(!in.bad(), "cannot read ", path);
  return os.str();
}

}  // namespace xdino
