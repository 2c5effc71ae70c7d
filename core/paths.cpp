#include "core/paths.h"

namespace xdino {

std::string file_problem(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) return "not found";
  if (std::filesystem::is_directory(status)) return "is a directory, not a file";
  if (!std::filesystem::is_regular_file(status)) return "is not a regular file";
  return "";
}

}  // namespace xdino
