#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string_view>

namespace xdino::log {
namespace {

std::atomic<int> g_rank{0};
std::atomic<int> g_world{1};

Level level_from_env() {
  const char* env = std::getenv("XDINO_LOG_LEVEL");
  if (env == nullptr) return Level::kInfo;
  const std::string_view v(env);
  if (v == "debug") return Level::kDebug;
  if (v == "warn") return Level::kWarn;
  if (v == "error") return Level::kError;
  return Level::kInfo;
}

std::atomic<Level>& level_ref() {
  static std::atomic<Level> level{level_from_env()};
  return level;
}

std::mutex& output_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

void set_rank(int rank, int world_size) {
  g_rank = rank;
  g_world = world_size;
}
int rank() { return g_rank; }
int world_size() { return g_world; }
void set_level(Level level) { level_ref() = level; }
Level level() { return level_ref(); }

bool enabled(Level lvl) {
  if (lvl < level_ref().load()) return false;
  if (lvl >= Level::kWarn) return true;
  return g_rank == 0;
}

void write(Level lvl, const std::string& line) {
  std::string out;
  if (g_world > 1) out += "[rank " + std::to_string(g_rank) + "] ";
  if (lvl == Level::kWarn) out += "warning: ";
  if (lvl == Level::kError) out += "error: ";
  out += line;
  out += '\n';
  std::lock_guard<std::mutex> lock(output_mutex());
  FILE* stream = lvl >= Level::kWarn ? stderr : stdout;
  std::fwrite(out.data(), 1, out.size(), stream);
  std::fflush(stream);
}

}  // namespace xdino::log
