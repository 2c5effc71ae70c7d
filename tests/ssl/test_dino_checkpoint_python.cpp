// Checkpoints move both ways between this project and PyTorch: Python's torch.load reads ours
// (official keys, the official head loads strictly, torch.optim.AdamW takes the optimizer
// state), and our trainer resumes from the layout main_dino.py writes (pickled Namespace args,
// integer steps, no resume state). Skipped when /usr/bin/python3 cannot import torch.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/pth.h"
#include "ssl/trainer.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/require.h"
#include "tests/support/train_fixture.h"

using namespace xdino::ssl;
namespace fs = std::filesystem;
using xdino::testing::kPython;
using xdino::testing::run_process;
using xdino::testing::TempDir;

namespace {

std::string checkpoint_script() {
  return (fs::path(xdino::testing::test_data_dir()) / ".." / "support" / "dino_checkpoint.py")
      .string();
}

}  // namespace

TEST(DinoCheckpointPython, TorchLoadsOursWithOfficialKeys) {
  if (!xdino::testing::python_has("torch"))
    XDINO_SKIP_MISSING() << kPython << " cannot import torch";
  TempDir dir;
  auto opt = xdino::testing::tiny_options(dir.path());
  opt.epochs = 1;
  ASSERT_EQ(xdino::testing::tiny_trainer(opt)->train(), TrainOutcome::kCompleted);
  const auto r = run_process(
      {kPython, checkpoint_script(), "check", (dir.path() / "checkpoint.pth").string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("OK"), std::string::npos) << r.out << r.err;
}

TEST(DinoCheckpointPython, ResumesFromTheOfficialLayout) {
  if (!xdino::testing::python_has("torch"))
    XDINO_SKIP_MISSING() << kPython << " cannot import torch";
  TempDir ours, official;
  auto opt = xdino::testing::tiny_options(ours.path());
  ASSERT_EQ(xdino::testing::tiny_trainer(opt)->train(), TrainOutcome::kCompleted);
  const auto r = run_process({kPython, checkpoint_script(), "official",
                              (ours.path() / "checkpoint.pth").string(),
                              (official.path() / "checkpoint.pth").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;

  // epoch = 2 = epochs: the run loads everything and has nothing left to do.
  opt.output_dir = official.path().string();
  auto trainer = xdino::testing::tiny_trainer(opt);
  EXPECT_EQ(trainer->train(), TrainOutcome::kCompleted);
  const auto file = xdino::load_pth(official.path() / "checkpoint.pth").toGenericDict();
  EXPECT_TRUE(file.at("args").isGenericDict());  // the Namespace, as its attributes
  const auto student = file.at("student").toGenericDict();
  for (const auto& item : trainer->student()->named_parameters())
    EXPECT_TRUE(torch::equal(item.value(), student.at("module." + item.key()).toTensor()))
        << item.key();
  const auto teacher = file.at("teacher").toGenericDict();
  for (const auto& item : trainer->teacher()->named_buffers())
    EXPECT_TRUE(torch::equal(item.value(), teacher.at("module." + item.key()).toTensor()))
        << item.key();
  EXPECT_TRUE(torch::equal(trainer->loss()->center,
                           file.at("dino_loss").toGenericDict().at("center").toTensor()));
  const auto sd = trainer->optimizer().state_dict().toGenericDict();
  EXPECT_EQ(sd.at("state").toGenericDict().at(int64_t{0}).toGenericDict().at("step").toInt(), 6);
}
