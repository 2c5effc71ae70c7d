// `dino train --pretrained_weights` (ssl/warm_start.h): student and teacher start equal to the
// file, bit for bit; the DINO head comes from the file when it has one and is the fresh
// initialisation otherwise; a file that does not fit fails in one line before training.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/check.h"
#include "core/ivalue.h"
#include "core/pth.h"
#include "models/weights.h"
#include "ssl/trainer.h"
#include "tests/support/train_fixture.h"

using namespace xdino::ssl;
namespace fs = std::filesystem;
using xdino::testing::TempDir;
using xdino::testing::tiny_options;
using xdino::testing::tiny_trainer;

namespace {

// A finished one-epoch run's checkpoint.pth, made once.
const fs::path& trained_checkpoint() {
  static TempDir dir;
  static const fs::path path = [] {
    auto o = tiny_options(dir.path());
    o.epochs = 1;
    auto trainer = tiny_trainer(o);
    EXPECT_EQ(trainer->train(), TrainOutcome::kCompleted);
    return dir.path() / "checkpoint.pth";
  }();
  return path;
}

// The network `key` of a training checkpoint as {"backbone.x" | "head.x": tensor}.
xdino::models::StateDict network_in_file(const fs::path& file, const std::string& key) {
  const auto ckpt = xdino::load_pth(file).toGenericDict();
  xdino::models::StateDict out;
  for (const auto& item : ckpt.at(key).toGenericDict()) {
    std::string name = item.key().toStringRef();
    if (name.rfind("module.", 0) == 0) name = name.substr(7);
    out.insert(name, item.value().toTensor());
  }
  return out;
}

void expect_network_equals(const xdino::models::StateDict& expected, torch::nn::Module& network,
                           const std::string& what) {
  const auto actual = xdino::models::state_dict(network);
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (const auto& item : expected) {
    ASSERT_TRUE(actual.contains(item.key())) << what << ": " << item.key();
    EXPECT_TRUE(torch::equal(actual[item.key()], item.value())) << what << ": " << item.key();
  }
}

}  // namespace

TEST(WarmStart, StudentAndTeacherStartFromATrainingCheckpointsTeacherHeadIncluded) {
  for (const std::string key : {"teacher", "student"}) {
    TempDir dir;
    auto o = tiny_options(dir.path());
    o.seed = 5;  // another seed: nothing may come from the initialisation
    o.pretrained_weights = trained_checkpoint().string();
    o.checkpoint_key = key;
    auto trainer = tiny_trainer(o);
    const auto file = network_in_file(trained_checkpoint(), key);
    expect_network_equals(file, *trainer->student(), "student from " + key);
    expect_network_equals(file, *trainer->teacher(), "teacher from " + key);
  }
}

TEST(WarmStart, ABackboneFileLeavesTheHeadFresh) {
  TempDir dir;
  // Official-style backbone file: the bare backbone keys, plus a classifier the loader drops.
  const auto teacher = network_in_file(trained_checkpoint(), "teacher");
  auto flat = xdino::make_dict();
  for (const auto& item : teacher)
    if (item.key().rfind("backbone.", 0) == 0) flat.insert(item.key().substr(9), item.value());
  flat.insert("head.weight", torch::ones({10, 8}));
  flat.insert("head.bias", torch::zeros({10}));
  const fs::path file = dir.path() / "backbone.pth";
  xdino::save_pth(file, flat);

  auto o = tiny_options(dir.path() / "run");
  o.pretrained_weights = file.string();
  auto warm = tiny_trainer(o);
  auto fresh_options = o;
  fresh_options.pretrained_weights.clear();
  auto fresh = tiny_trainer(fresh_options);

  xdino::models::StateDict backbone;
  for (const auto& item : teacher)
    if (item.key().rfind("backbone.", 0) == 0) backbone.insert(item.key().substr(9), item.value());
  expect_network_equals(backbone, *warm->student()->backbone, "backbone");
  // The head is the one the seed gives: loading drew no random numbers.
  expect_network_equals(xdino::models::state_dict(*fresh->student()->head), *warm->student()->head,
                        "head");
  expect_network_equals(xdino::models::state_dict(*warm->student()), *warm->teacher(),
                        "teacher = student");
}

TEST(WarmStart, AFileThatDoesNotFitFailsInOneLine) {
  TempDir dir;
  auto o = tiny_options(dir.path());
  o.pretrained_weights = trained_checkpoint().string();
  o.head.out_dim = 64;  // the file's head has 32
  try {
    tiny_trainer(o);
    ADD_FAILURE() << "a head of another out_dim loaded";
  } catch (const xdino::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("DINO head"), std::string::npos) << what;
    EXPECT_NE(what.find("64"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  o.head.out_dim = 32;
  o.checkpoint_key = "nonsense";
  EXPECT_THROW(tiny_trainer(o), xdino::UsageError);  // names the keys the file holds
  o.checkpoint_key = "teacher";
  o.pretrained_weights = (dir.path() / "missing.pth").string();
  EXPECT_THROW(tiny_trainer(o), xdino::Error);
  EXPECT_FALSE(fs::exists(dir.path() / "checkpoint.pth"));
}
