#include "eval/retrieval/image_retrieval.h"

#include <chrono>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/ivalue.h"
#include "core/log.h"
#include "core/pth/pickle.h"
#include "core/python_format.h"
#include "eval/retrieval/features.h"
#include "eval/retrieval/ranking.h"

namespace fs = std::filesystem;

namespace xdino::eval::retrieval {
namespace {

// A view of the list `v` holds, valid while `v` is (iterated as plain IValues, not through
// c10::List's proxies).
XDINO_REFERS_TO_ARGUMENT c10::ArrayRef<c10::IValue> as_list(const c10::IValue& v,
                                                            const std::string& what) {
  XDINO_CHECK(v.isList(), what, " is not a list");
  return v.toListRef();
}

std::vector<std::string> string_list(const IDict& d, const std::string& key,
                                     const std::string& file) {
  std::vector<std::string> out;
  for (const c10::IValue& v : as_list(get(d, key, file), file + ": '" + key + "'")) {
    XDINO_CHECK(v.isString(), file, ": '", key, "' holds a ", v.tagKind(), ", not a string");
    out.push_back(v.toStringRef());
  }
  return out;
}

std::vector<int64_t> index_list(const IDict& d, const std::string& key, int64_t size,
                                const std::string& where) {
  std::vector<int64_t> out;
  for (const c10::IValue& v : as_list(get(d, key, where), where + " '" + key + "'")) {
    const int64_t i = as_int(v, where + " '" + key + "'");
    XDINO_CHECK(i >= 0 && i < size, where, " '", key, "' holds index ", i, ", outside the ", size,
                " images of imlist");
    out.push_back(i);
  }
  return out;
}

c10::IValue int_list(const std::vector<int64_t>& v) {
  c10::impl::GenericList l = make_list();
  for (int64_t i : v) l.push_back(i);
  return l;
}

}  // namespace

RevisitedGround read_revisited_ground(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  XDINO_CHECK_ARG(in.good(), "cannot open the ground truth ", path.string());
  std::ostringstream bytes;
  bytes << in.rdbuf();
  const std::string file = path.string();
  const c10::IValue value = pth::unpickle(
      bytes.str(),
      [&](const std::string&, at::ScalarType, int64_t) -> at::Tensor {
        XDINO_FAIL(file, " holds tensors; a gnd pickle holds lists of names and indices");
      },
      file);
  const IDict d = as_dict(value, file);
  RevisitedGround g;
  g.imlist = string_list(d, "imlist", file);
  g.qimlist = string_list(d, "qimlist", file);
  const auto gnd = as_list(get(d, "gnd", file), file + ": 'gnd'");
  XDINO_CHECK(gnd.size() == g.qimlist.size(), file, ": 'gnd' has ", gnd.size(), " entries for ",
              g.qimlist.size(), " queries in 'qimlist'");
  const int64_t n = static_cast<int64_t>(g.imlist.size());
  for (size_t q = 0; q < gnd.size(); ++q) {
    const std::string where = file + ": gnd[" + std::to_string(q) + "]";
    const IDict e = as_dict(gnd[q], where);
    RevisitedQuery r;
    r.easy = index_list(e, "easy", n, where);
    r.hard = index_list(e, "hard", n, where);
    r.junk = index_list(e, "junk", n, where);
    if (const c10::IValue* b = find(e, "bbx"))
      for (const c10::IValue& v : as_list(*b, where + " 'bbx'"))
        r.bbx.push_back(as_double(v, where + " 'bbx'"));
    g.gnd.push_back(std::move(r));
  }
  return g;
}

void write_revisited_ground(const fs::path& path, const RevisitedGround& g) {
  IDict d = make_dict();
  c10::impl::GenericList im = make_list(), qim = make_list(), gnd = make_list();
  for (const std::string& s : g.imlist) im.push_back(s);
  for (const std::string& s : g.qimlist) qim.push_back(s);
  for (const RevisitedQuery& q : g.gnd) {
    IDict e = make_dict();
    c10::impl::GenericList bbx = make_list();
    for (double v : q.bbx) bbx.push_back(v);
    e.insert("bbx", bbx);
    e.insert("easy", int_list(q.easy));
    e.insert("hard", int_list(q.hard));
    e.insert("junk", int_list(q.junk));
    gnd.push_back(e);
  }
  d.insert("gnd", gnd);
  d.insert("imlist", im);
  d.insert("qimlist", qim);
  write_file_atomically(path, pth::pickle(d, path.string()).bytes);
}

RetrievalScores evaluate_retrieval(const torch::Tensor& ranks, const RevisitedGround& g) {
  const std::vector<int64_t> ks(std::begin(RetrievalScores::kKappas),
                                std::end(RetrievalScores::kKappas));
  std::vector<QueryGround> medium, hard;
  for (const RevisitedQuery& q : g.gnd) {
    QueryGround m{q.easy, q.junk};
    m.ok.insert(m.ok.end(), q.hard.begin(), q.hard.end());
    medium.push_back(std::move(m));
    QueryGround h{q.hard, q.junk};
    h.junk.insert(h.junk.end(), q.easy.begin(), q.easy.end());
    hard.push_back(std::move(h));
  }
  const MapResult m = compute_map(ranks, medium, ks);
  const MapResult h = compute_map(ranks, hard, ks);
  return {m.map, h.map, m.mean_precision, h.mean_precision};
}

Json run_retrieval(const RetrievalOptions& o, Communicator& comm, torch::Device device,
                   const ChecksPassed& checks_passed) {
  XDINO_CHECK_ARG(o.dataset == "roxford5k" || o.dataset == "rparis6k",
                  "--dataset must be roxford5k or rparis6k, got '", o.dataset, "'");
  models::check_arch(o.model.arch);
  const auto start = std::chrono::steady_clock::now();
  const fs::path dir = fs::path(o.data_path) / o.dataset;
  const fs::path gnd_file = dir / ("gnd_" + o.dataset + ".pkl");
  XDINO_CHECK_ARG(fs::is_regular_file(gnd_file), "no ground truth ", gnd_file.string(),
                  " (--data_path must hold ", o.dataset, "/gnd_", o.dataset, ".pkl and ", o.dataset,
                  "/jpg/)");
  const RevisitedGround g = read_revisited_ground(gnd_file);
  const auto image_paths = [&](const std::vector<std::string>& names) {
    std::vector<std::string> paths;
    for (const std::string& n : names) paths.push_back((dir / "jpg" / (n + ".jpg")).string());
    return paths;
  };
  log::info("train: ", g.imlist.size(), " imgs / query: ", g.qimlist.size(), " imgs");
  const BackboneSpec& spec = o.model;
  const auto model = load_frozen_backbone(spec, o.input, device, "image retrieval").model;
  const ImageInput& x = o.input;
  FeatureSet database = retrieval_features(*model, image_paths(g.imlist), o.dataset + " database",
                                           x, o.multiscale, comm, device);
  FeatureSet queries = retrieval_features(*model, image_paths(g.qimlist), o.dataset + " queries", x,
                                          o.multiscale, comm, device);
  const double extraction_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Json j;
  notify(checks_passed);
  if (comm.is_main()) {
    const fs::path dump = fs::path(o.output_dir) / "retrieval_features";
    fs::create_directories(dump);
    for (FeatureSet* set : {&database, &queries}) {
      const std::string name = set == &database ? "database" : "queries";
      set_model_attributes(set->attributes, spec, name);
      write_features(dump / (name + ".h5"), *set);
    }
    namespace F = torch::nn::functional;
    const auto l2 = F::NormalizeFuncOptions().p(2).dim(1);
    const torch::Device rank_on = o.use_cuda && device.is_cuda() ? device : torch::kCPU;
    const torch::Tensor sim = torch::mm(F::normalize(database.features.to(rank_on), l2),
                                        F::normalize(queries.features.to(rank_on), l2).t());
    const torch::Tensor ranks =
        std::get<1>(sim.sort(/*stable=*/true, /*dim=*/0, /*descending=*/true)).cpu();
    const RetrievalScores s = evaluate_retrieval(ranks, g);
    // The script's lines: np.around(x * 100, decimals=2) (half to even), printed by numpy.
    const auto pct = [](double v) { return numpy_around(v * 100.0, 2); };
    const auto pcts = [&](const auto& v) { return numpy_str({pct(v[0]), pct(v[1]), pct(v[2])}); };
    log::info(">> ", o.dataset, ": mAP M: ", python_repr(pct(s.map_medium)),
              ", H: ", python_repr(pct(s.map_hard)));
    log::info(">> ", o.dataset, ": mP@k[ 1  5 10] M: ", pcts(s.mp_medium),
              ", H: ", pcts(s.mp_hard));
    j = Json::object();
    j["protocol"] = "image retrieval (eval_image_retrieval.py)";
    j["dataset"] = o.dataset;
    add_model_fields(j, spec, o.input.image_size);
    j["imsize"] = o.input.image_size;
    j["multiscale"] = o.multiscale;
    j["num_database"] = static_cast<int64_t>(g.imlist.size());
    j["num_queries"] = static_cast<int64_t>(g.qimlist.size());
    j["mAP_M"] = 100.0 * s.map_medium;
    j["mAP_H"] = 100.0 * s.map_hard;
    Json mp_m = Json::object(), mp_h = Json::object();
    for (size_t k = 0; k < 3; ++k) {
      mp_m[std::to_string(RetrievalScores::kKappas[k])] = 100.0 * s.mp_medium[k];
      mp_h[std::to_string(RetrievalScores::kKappas[k])] = 100.0 * s.mp_hard[k];
    }
    j["mP@k_M"] = mp_m;
    j["mP@k_H"] = mp_h;
    j["seconds"] = Json{{"extraction", extraction_s}};
    write_file_atomically(fs::path(o.output_dir) / "retrieval.json", python_dumps(j, 2) + "\n");
    log::info("wrote ", (fs::path(o.output_dir) / "retrieval.json").string());
  }
  comm.barrier();
  return j;
}

}  // namespace xdino::eval::retrieval
