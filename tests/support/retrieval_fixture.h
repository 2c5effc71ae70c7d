// The revisited Oxford/Paris ground truth that tests/data/retrieval/make_sets.py writes as JSON
// (imlist, qimlist, gnd with easy/hard/junk/bbx per query), read back into the type our pickler
// writes as gnd_<dataset>.pkl (eval/retrieval/image_retrieval.h). Throws on a malformed file.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/json.h"
#include "eval/retrieval/image_retrieval.h"

namespace xdino::testing {

inline eval::retrieval::RevisitedGround ground_from_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const Json j = parse_json(text.str(), path.string());
  eval::retrieval::RevisitedGround g;
  for (const auto& s : j["imlist"]) g.imlist.push_back(s.get<std::string>());
  for (const auto& s : j["qimlist"]) g.qimlist.push_back(s.get<std::string>());
  for (const auto& q : j["gnd"]) {
    eval::retrieval::RevisitedQuery r;
    for (const auto& v : q["easy"]) r.easy.push_back(v.get<int64_t>());
    for (const auto& v : q["hard"]) r.hard.push_back(v.get<int64_t>());
    for (const auto& v : q["junk"]) r.junk.push_back(v.get<int64_t>());
    for (const auto& v : q["bbx"]) r.bbx.push_back(v.get<double>());
    g.gnd.push_back(r);
  }
  return g;
}

}  // namespace xdino::testing
