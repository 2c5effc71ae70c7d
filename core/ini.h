// INI files as this project writes and reads them: `dino <command>`'s config.ini records
// (launch/flags.h writes them) and what reads them back outside the flag parser: which
// command a folder's record belongs to (launch/session.h) and a run's options for
// `dino report` (eval/report_runs.cpp). One reader for both, with boost::property_tree's
// ini_parser rules, so that core stays LibTorch-only (the GPU machines have no Boost).
//
// Contract:
//  - read_ini(path): the entries in file order. A line is blank, a comment (first non-space
//    character ';' or '#'), "[section]" (the section of the entries after it; "" before any),
//    or "key = value" (both trimmed; the value may be empty). A missing file gives no entry.
//    Any other line, or a key twice in one section, throws xdino::UsageError naming the file
//    and the line.
//  - IniFile::section_of_first(): the first section's name ("" when there is none).
//  - IniFile::flat(): key -> value over every section (a later section wins).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace xdino {

struct IniEntry {
  std::string section, key, value;
};

struct IniFile {
  std::vector<std::string> sections;  // in file order
  std::vector<IniEntry> entries;

  std::string section_of_first() const { return sections.empty() ? "" : sections.front(); }
  std::map<std::string, std::string> flat() const;
};

IniFile read_ini(const std::filesystem::path& path);

}  // namespace xdino
