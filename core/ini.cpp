#include "core/ini.h"

#include <fstream>
#include <set>
#include <utility>

#include "core/check.h"

namespace xdino {
namespace {

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r") - a + 1);
}

}  // namespace

std::map<std::string, std::string> IniFile::flat() const {
  std::map<std::string, std::string> kv;
  for (const IniEntry& e : entries) kv[e.key] = e.value;
  return kv;
}

IniFile read_ini(const std::filesystem::path& path) {
  IniFile ini;
  std::ifstream in(path);
  if (!in) return ini;
  std::string section;
  std::set<std::pair<std::string, std::string>> seen;
  int number = 0;
  for (std::string raw; std::getline(in, raw);) {
    ++number;
    const std::string line = trim(raw);
    if (line.empty() || line[0] == ';' || line[0] == '#') continue;
    const auto bad = [&](const char* what) {
      XDINO_FAIL_ARG("cannot read ", path.string(), ": ", what, " at line ", number);
    };
    if (line[0] == '[') {
      if (line.back() != ']') bad("a section without its closing ']'");
      section = trim(line.substr(1, line.size() - 2));
      ini.sections.push_back(section);
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos) bad("a line that is neither key = value nor [section]");
    IniEntry e{section, trim(line.substr(0, eq)), trim(line.substr(eq + 1))};
    if (e.key.empty()) bad("a value without a key");
    if (!seen.insert({e.section, e.key}).second) bad("a key given twice in one section");
    ini.entries.push_back(std::move(e));
  }
  return ini;
}

}  // namespace xdino
