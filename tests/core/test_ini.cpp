// core/ini.h against what boost::property_tree's ini_parser (which eval/report_runs.cpp used
// before) and Flags::to_ini (launch/flags.cpp) agree an INI file is: the cases written out, and
// a config.ini of the layout the flags write read back whole.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/ini.h"
#include "tests/support/files.h"

namespace fs = std::filesystem;

TEST(Ini, ReadsSectionsKeysAndValuesInOrder) {
  const fs::path dir = xdino::testing::fresh_dir("ini");
  xdino::write_file_atomically(dir / "config.ini",
                               "# Effective configuration of 'dino knn'.\n"
                               "top = 1\n"
                               "[knn:dino]\n"
                               "  arch   =  xcit_nano_12_p16  \n"
                               "; a comment\n"
                               "empty =\n"
                               "\n"
                               "[train]\n"
                               "arch = vit_small\n");
  const xdino::IniFile ini = xdino::read_ini(dir / "config.ini");
  EXPECT_EQ(ini.section_of_first(), "knn:dino");
  ASSERT_EQ(ini.entries.size(), 4u);
  EXPECT_EQ(ini.entries[0].section, "");
  EXPECT_EQ(ini.entries[1].key, "arch");
  EXPECT_EQ(ini.entries[1].value, "xcit_nano_12_p16");
  EXPECT_EQ(ini.entries[2].value, "");
  EXPECT_EQ(ini.flat().at("arch"), "vit_small") << "a later section wins";
  EXPECT_TRUE(xdino::read_ini(dir / "missing.ini").entries.empty());
  fs::remove_all(dir);
}

TEST(Ini, AMalformedLineIsOneUsageErrorNamingIt) {
  const fs::path dir = xdino::testing::fresh_dir("ini_bad");
  for (const char* text : {"[train\narch = x\n", "arch\n", "= x\n", "[a]\nk = 1\nk = 2\n"}) {
    xdino::write_file_atomically(dir / "bad.ini", text);
    try {
      xdino::read_ini(dir / "bad.ini");
      ADD_FAILURE() << "read: " << text;
    } catch (const xdino::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("bad.ini"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("at line "), std::string::npos) << e.what();
    }
  }
  fs::remove_all(dir);
}
