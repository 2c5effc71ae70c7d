// Every executable of the build resolves the C++ standard library from libstdc++, ahead of
// LibTorch (see the comment at add_link_options in the top-level CMakeLists.txt).
//
// Why: a pip wheel's libtorch.so exports std::filesystem symbols of its own. When the linker
// drops libstdc++.so.6 from an executable's needed libraries (--as-needed, the default of
// Ubuntu's toolchain) or lists it after libtorch*, the dynamic linker binds
// std::filesystem::remove_all to libtorch.so's copy, which crashes. Debian's LibTorch does not
// export them, so a wrong order runs here; this test reads the order itself, so CI catches it
// before a GPU user does.
//
// The list of executables is written at configure time (XDINO_EXECUTABLES_FILE, one path a
// line); each file's DT_NEEDED entries are read from its ELF dynamic section.
#include <elf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path + ": build every target first");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

template <typename T>
T at(const std::vector<char>& bytes, uint64_t offset, const std::string& path) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T))
    throw std::runtime_error(path + ": truncated ELF file");
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

// DT_NEEDED entries of a 64-bit little-endian ELF file, in the order the dynamic linker
// loads them.
std::vector<std::string> needed_libraries(const std::string& path) {
  const std::vector<char> bytes = read_file(path);
  const auto eh = at<Elf64_Ehdr>(bytes, 0, path);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64)
    throw std::runtime_error(path + ": not a 64-bit ELF file");
  std::vector<std::string> needed;
  for (uint16_t i = 0; i < eh.e_shnum; ++i) {
    const auto sh = at<Elf64_Shdr>(bytes, eh.e_shoff + uint64_t{i} * eh.e_shentsize, path);
    if (sh.sh_type != SHT_DYNAMIC) continue;
    const auto strtab =
        at<Elf64_Shdr>(bytes, eh.e_shoff + uint64_t{sh.sh_link} * eh.e_shentsize, path);
    for (uint64_t off = sh.sh_offset; off + sizeof(Elf64_Dyn) <= sh.sh_offset + sh.sh_size;
         off += sizeof(Elf64_Dyn)) {
      const auto dyn = at<Elf64_Dyn>(bytes, off, path);
      if (dyn.d_tag == DT_NULL) break;
      if (dyn.d_tag != DT_NEEDED) continue;
      const uint64_t name = strtab.sh_offset + dyn.d_un.d_val;
      if (name >= bytes.size()) throw std::runtime_error(path + ": bad DT_NEEDED offset");
      needed.emplace_back(bytes.data() + name);
    }
  }
  return needed;
}

std::vector<std::string> executables() {
  std::ifstream in(XDINO_EXECUTABLES_FILE);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::ostringstream os;
  for (const auto& s : v) os << s << ' ';
  return os.str();
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

TEST(LinkOrder, ReaderSeesTheCLibraryOfThisTest) {
  // The reader against a fact every dynamically linked program on this platform shares.
  const auto needed = needed_libraries("/proc/self/exe");
  EXPECT_NE(std::find(needed.begin(), needed.end(), "libc.so.6"), needed.end()) << joined(needed);
}

TEST(LinkOrder, ReaderRejectsWhatIsNotElf) {
  EXPECT_THROW(needed_libraries(XDINO_EXECUTABLES_FILE), std::runtime_error);
}

TEST(LinkOrder, LibstdcxxComesBeforeEveryLibTorchLibrary) {
  const auto files = executables();
  // The list must be this build's: it holds this test's own executable (one file per test, or
  // the suite executable it joined; tests/CMakeLists.txt).
  const auto self = std::filesystem::canonical("/proc/self/exe");
  ASSERT_NE(std::find_if(files.begin(), files.end(),
                         [&](const std::string& f) {
                           return std::filesystem::exists(f) &&
                                  std::filesystem::equivalent(f, self);
                         }),
            files.end())
      << XDINO_EXECUTABLES_FILE << " does not list this test's executable " << self
      << ": it is not this build's list";
  bool saw_torch = false;
  for (const auto& file : files) {
    const auto needed = needed_libraries(file);
    const auto stdcxx = std::find(needed.begin(), needed.end(), "libstdc++.so.6");
    ASSERT_NE(stdcxx, needed.end()) << file << " does not list libstdc++.so.6 among its needed "
                                    << "libraries: " << joined(needed);
    for (auto it = needed.begin(); it != needed.end(); ++it) {
      if (!starts_with(*it, "libtorch") && !starts_with(*it, "libc10")) continue;
      saw_torch = true;
      EXPECT_LT(stdcxx, it) << file << " lists " << *it
                            << " before libstdc++.so.6: " << joined(needed);
    }
  }
  EXPECT_TRUE(saw_torch) << "no executable links LibTorch: the list is not this build's";
}
