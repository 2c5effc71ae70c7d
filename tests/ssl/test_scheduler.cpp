// When the training loop saves, stops and warns (ssl/scheduler.h), as tables with a clock the
// test sets: timed saves, a signal mid-epoch and at an epoch's end, the epoch's last step, and
// the collapse heuristics at their thresholds.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "ssl/scheduler.h"
#include "ssl/trainer.h"

namespace xdino::ssl {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;
using After = Scheduler::AfterStep;

TEST(Scheduler, TimedSavesFollowTheClockOfTheLastSave) {
  const auto t0 = Scheduler::Clock::time_point{} + std::chrono::hours(1);
  Scheduler off({3, 100, 0});
  off.started(t0);
  EXPECT_FALSE(off.timed_save_due(t0 + std::chrono::hours(10))) << "0: epoch ends only";
  Scheduler every30({3, 100, 30});
  every30.started(t0);
  EXPECT_FALSE(every30.timed_save_due(t0 + minutes(29) + seconds(59)));
  EXPECT_TRUE(every30.timed_save_due(t0 + minutes(30)));
  every30.saved(t0 + minutes(31));
  EXPECT_FALSE(every30.timed_save_due(t0 + minutes(60)));
  EXPECT_TRUE(every30.timed_save_due(t0 + minutes(61)));
}

TEST(Scheduler, WhatFollowsAStep) {
  const Scheduler s({3, 100, 30});
  struct Row {
    int64_t epoch, batch;
    bool stop, save_due;
    After want;
  };
  for (const Row& r : std::vector<Row>{
           {0, 10, false, false, After::kGoOn},
           {0, 10, true, false, After::kStop},
           {0, 10, false, true, After::kSaveTimed},
           {0, 10, true, true, After::kStop},      // the stop's save is the timed one too
           {0, 99, true, true, After::kGoOn},      // the epoch's end saves (and stops) anyway
           {2, 99, false, true, After::kGoOn}}) {  // the last epoch's last step
    SCOPED_TRACE("epoch " + std::to_string(r.epoch) + " batch " + std::to_string(r.batch));
    EXPECT_EQ(s.after_step(r.epoch, r.batch, r.stop, r.save_due), r.want);
  }
  EXPECT_TRUE(s.stop_after_epoch(0, true));
  EXPECT_FALSE(s.stop_after_epoch(0, false));
  EXPECT_FALSE(s.stop_after_epoch(2, true)) << "the run is complete: nothing to stop";
}

TEST(Scheduler, CollapseIsWarnedAtItsThresholds) {
  const int64_t K = 1024;
  const double ln_k = std::log(static_cast<double>(K));
  EXPECT_TRUE(collapse_warnings(3, 0.8 * ln_k, 0.9 * ln_k, K).empty()) << "at, not above";
  const auto dominated = collapse_warnings(3, 0.81 * ln_k, 1.0, K);
  ASSERT_EQ(dominated.size(), 1u);
  EXPECT_NE(dominated[0].find("epoch 3: the teacher maps nearly every image to the same few"),
            std::string::npos)
      << dominated[0];
  const auto uniform = collapse_warnings(4, 0.1, 0.95 * ln_k, K);
  ASSERT_EQ(uniform.size(), 1u);
  EXPECT_NE(uniform[0].find("the teacher outputs are nearly uniform"), std::string::npos);
  EXPECT_EQ(collapse_warnings(5, 0.9 * ln_k, 0.95 * ln_k, K).size(), 2u);
}

TEST(Scheduler, TheEpochsTimeLineSaysWhereTheTimeWent) {
  StepTimes spent;
  spent.steps = 10;
  spent.data = 2.0;
  spent.forward = 3.0;
  EXPECT_EQ(epoch_time_line(1, spent, 20.0, 64),
            "Epoch 1: 10 steps in 20.0 s, 32.0 img/s; waiting for data 10.0% of it (data 2.0 s, "
            "forward 3.0 s, backward 0.0 s, optimizer 0.0 s, EMA 0.0 s)");
  EXPECT_EQ(epoch_time_line(1, StepTimes{}, 20.0, 64), "") << "no step";
}

}  // namespace
}  // namespace xdino::ssl
