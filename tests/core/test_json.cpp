// core/json.h: JSON through nlohmann::ordered_json, written in Python's json.dumps layout.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/check.h"
#include "core/json.h"
#include "tests/support/process.h"
#include "tests/support/require.h"

using xdino::Json;
using xdino::parse_json;
using xdino::python_dumps;

TEST(Json, DumpsLikePythonsJsonModule) {
  Json o = Json::object();
  o["k"] = int64_t{20};
  o["top1"] = 76.04;
  o["lr"] = 3.0;
  o["name"] = "a \"q\"\n\u00e9";
  o["list"] = Json{1e-06, true, nullptr};
  o["empty"] = Json::object();
  // Right-hand sides: json.dumps of the same dict in CPython 3.11.
  EXPECT_EQ(python_dumps(o), R"({"k": 20, "top1": 76.04, "lr": 3.0, "name": "a \"q\"\n\u00e9", )"
                             R"("list": [1e-06, true, null], "empty": {}})");
  EXPECT_EQ(python_dumps(Json{{"a", Json{1, 2}}, {"b", Json::array()}}, 2),
            "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": []\n}");
  // NaN and infinities: what json.dumps writes (and json.loads reads back).
  EXPECT_EQ(python_dumps(Json{std::nan(""), INFINITY, -INFINITY}), "[NaN, Infinity, -Infinity]");
  const Json back = parse_json(python_dumps(o, 2), "test");
  EXPECT_EQ(back, o);
  EXPECT_EQ(back.at("k").get<int64_t>(), 20);
}

TEST(Json, ParseIsStrictAndNamesTheSource) {
  EXPECT_EQ(parse_json(R"("\u00e9\ud83d\ude00")", "t").get<std::string>(), "\u00e9\U0001F600");
  // The hand-written parser this replaced accepted both of these.
  EXPECT_THROW(parse_json("01", "t"), xdino::Error);
  EXPECT_THROW(parse_json(R"("\ud83d")", "t"), xdino::Error);  // a lone surrogate
  try {
    parse_json("{\"a\": }", "broken.json");
    ADD_FAILURE() << "no error";
  } catch (const xdino::Error& e) {
    EXPECT_NE(std::string(e.what()).find("broken.json"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_json("[1, 2", "t"), xdino::Error);
}

// 10^6 nested arrays crashed nlohmann's parser (a knn.json read by `dino report`); the
// nesting is counted first. Brackets inside strings do not count; 10^4 levels still parse.
TEST(Json, NestingPastTheBoundIsOneErrorNotACrash) {
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  try {
    parse_json(deep, "knn.json");
    ADD_FAILURE() << "no error";
  } catch (const xdino::Error& e) {
    EXPECT_NE(std::string(e.what()).find("knn.json as JSON: it nests deeper than 1000 levels "
                                         "at byte 1000"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parse_json(std::string(1001, '{') + "}", "t"), xdino::Error);
  Json j = parse_json(std::string(1000, '[') + std::string(1000, ']'), "t");
  EXPECT_EQ(parse_json(python_dumps(j, 2), "t"), j);  // writing it back recurses as deep
  int depth = 0;
  for (const Json* v = &j; v->is_array(); v = &(*v)[0]) {
    ++depth;
    if (v->empty()) break;
  }
  EXPECT_EQ(depth, 1000);
  const std::string in_string = "[\"" + std::string(1000, '[') + "\\\"\"]";
  EXPECT_EQ(parse_json(in_string, "t")[0].get<std::string>(), std::string(1000, '[') + "\"");
}

TEST(Json, PythonReadsWhatWeWrite) {
  if (!std::filesystem::exists("/usr/bin/python3")) XDINO_SKIP_MISSING() << "no /usr/bin/python3";
  Json o = Json::object();
  o["a"] = 0.1;
  o["b"] = -3;
  o["c"] = "\u00fc\t";
  o["d"] = Json::array();
  o["e"] = std::nan("");
  const auto r = xdino::testing::run_process(
      {"/usr/bin/python3", "-c",
       "import json,math,sys; s=sys.argv[1]; d=json.loads(s); e=d.pop('e'); "
       "assert math.isnan(e); assert d == {'a': 0.1, 'b': -3, 'c': '\\u00fc\\t', 'd': []}, d; "
       "d['e']=e; assert json.dumps(d) == s, (json.dumps(d), s); print('ok')",
       python_dumps(o)});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}
