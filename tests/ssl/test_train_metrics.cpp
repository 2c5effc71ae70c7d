// Epoch statistics and the log.txt line: official keys in the official order, numbers
// formatted as Python's json.dumps formats floats (values from CPython's repr()).
#include <gtest/gtest.h>

#include "core/python_format.h"
#include "ssl/metrics.h"

using namespace xdino::ssl;
using xdino::IDict;
using xdino::python_json_number;

TEST(JsonNumber, MatchesPythonRepr) {
  // Right-hand sides are repr(float(x)) in CPython 3.11.
  EXPECT_EQ(python_json_number(0.0005), "0.0005");
  EXPECT_EQ(python_json_number(1e-06), "1e-06");
  EXPECT_EQ(python_json_number(0.0001), "0.0001");
  EXPECT_EQ(python_json_number(0.00012), "0.00012");
  EXPECT_EQ(python_json_number(3.0), "3.0");
  EXPECT_EQ(python_json_number(10.5), "10.5");
  EXPECT_EQ(python_json_number(-2.25), "-2.25");
  EXPECT_EQ(python_json_number(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(python_json_number(1e16), "1e+16");
  EXPECT_EQ(python_json_number(123456789012345.6), "123456789012345.6");
  EXPECT_EQ(python_json_number(1.5e-07), "1.5e-07");
  EXPECT_EQ(python_json_number(0.0), "0.0");
  EXPECT_EQ(python_json_number(std::nan("")), "NaN");
}

TEST(EpochMeters, AveragesAndLogLineKeyOrder) {
  EpochMeters m;
  IterationStats s;
  s.loss = 10;
  s.dino_loss = 10;
  s.lr = 0.25;
  s.wd = 0.04;
  s.teacher_entropy = 2;
  m.add(s);
  s.loss = s.dino_loss = 8;
  s.lr = 0.75;
  m.add(s);
  const auto avg = m.averages(*xdino::local_communicator());
  EXPECT_DOUBLE_EQ(avg.loss, 9.0);
  EXPECT_DOUBLE_EQ(avg.lr, 0.5);
  const std::string line = log_line(3, avg);
  EXPECT_EQ(line.rfind("{\"train_loss\": 9.0, \"train_lr\": 0.5, \"train_wd\": 0.04, "
                       "\"epoch\": 3, ",
                       0),
            0u)
      << line;
  EXPECT_NE(line.find("\"train_kl_teacher_student\": 7.0"), std::string::npos) << line;

  EpochMeters restored;
  restored.from_ivalue(m.to_ivalue());
  EXPECT_EQ(restored.count(), 2);
  const auto again = restored.averages(*xdino::local_communicator());
  for (const auto& f : xdino::ssl::stat_fields())
    EXPECT_DOUBLE_EQ(f.of(again), f.of(avg)) << f.name;

  // A checkpoint from before the loss had terms: the DINO term is the whole loss.
  IDict old = m.to_ivalue().toGenericDict();
  for (const char* key : {"dino_loss_sum", "koleo_loss_sum", "ibot_loss_sum"})
    EXPECT_EQ(old.erase(key), 1u) << key;
  EpochMeters from_old;
  from_old.from_ivalue(old);
  const auto old_avg = from_old.averages(*xdino::local_communicator());
  EXPECT_DOUBLE_EQ(old_avg.dino_loss, 9.0);
  for (const double term : old_avg.terms) EXPECT_DOUBLE_EQ(term, 0.0);
  EXPECT_EQ(log_line(3, old_avg), line);
}

// The recipe's terms follow ssl/recipe.h's table from the step to the log: each term's sums
// under the checkpoint key it has always had, and log.txt's train_<name>_loss for the terms that
// are on, after train_dino_loss, in the table's order.
TEST(EpochMeters, TheRecipesTermsGoToTheLogByTheirNames) {
  using xdino::ssl::term_index;
  constexpr size_t koleo = term_index("koleo"), ibot = term_index("ibot");
  static_assert(koleo < xdino::ssl::kTermCount && ibot < xdino::ssl::kTermCount);
  EXPECT_EQ(term_index("no such term"), xdino::ssl::kTermCount);
  EpochMeters m;
  IterationStats s;
  s.loss = 3.5;
  s.dino_loss = 3;
  s.terms[koleo] = 0.25;
  s.terms[ibot] = 0.25;
  m.add(s);
  const IDict saved = m.to_ivalue().toGenericDict();
  EXPECT_DOUBLE_EQ(saved.at("koleo_loss_sum").toDouble(), 0.25);
  EXPECT_DOUBLE_EQ(saved.at("ibot_loss_sum").toDouble(), 0.25);
  const auto avg = m.averages(*xdino::local_communicator());
  xdino::ssl::RecipeOptions recipe;
  EXPECT_EQ(xdino::ssl::loss_terms(avg, recipe).dump(), "{}") << "DINO's line has no terms";
  recipe.ibot_loss_weight = 1.0;
  EXPECT_EQ(xdino::ssl::loss_terms(avg, recipe).dump(),
            R"({"train_dino_loss":3.0,"train_ibot_loss":0.25})");
  recipe.koleo_loss_weight = 0.1;
  EXPECT_EQ(xdino::ssl::loss_terms(avg, recipe).dump(),
            R"({"train_dino_loss":3.0,"train_koleo_loss":0.25,"train_ibot_loss":0.25})");
}
