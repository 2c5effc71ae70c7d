// Decoding: pixels identical to PIL's convert("RGB") (golden files from
// tests/data/datasets/make_fixtures.py), EXIF orientation, corrupt and truncated inputs.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "augment/data/decode.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "tests/support/files.h"

namespace fs = std::filesystem;
using xdino::augment::decode_image;
using xdino::augment::Image;
using xdino::augment::jpeg_is_complete;
using xdino::augment::read_image;
using xdino::testing::fixture;

namespace {

struct Golden {
  std::string rel;
  int width = 0, height = 0;
  std::string rgb;  // height * width * 3 bytes
};

std::vector<Golden> decode_goldens() {
  std::vector<Golden> out;
  std::ifstream in(fixture("datasets/decoded.txt"));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    Golden g;
    std::string file;
    ls >> g.rel >> g.width >> g.height >> file;
    g.rgb = xdino::read_file(fixture("datasets/" + file));
    out.push_back(g);
  }
  return out;
}

std::string image_bytes(const Image& m) {
  return std::string(reinterpret_cast<const char*>(m.data), m.total() * m.elemSize());
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const xdino::Error& e) {
    return e.what();
  }
  return "(no exception)";
}

}  // namespace

TEST(Decode, EveryFormatMatchesPillowBitExactly) {
  const std::vector<Golden> all = decode_goldens();
  ASSERT_GE(all.size(), 20u);
  for (const Golden& g : all) {
    const Image m = read_image(fixture("datasets/" + g.rel));
    ASSERT_EQ(m.type(), CV_8UC3) << g.rel;
    ASSERT_TRUE(m.isContinuous()) << g.rel;
    ASSERT_EQ(m.cols, g.width) << g.rel;
    ASSERT_EQ(m.rows, g.height) << g.rel;
    EXPECT_EQ(image_bytes(m), g.rgb) << g.rel << ": pixels differ from PIL's convert(\"RGB\")";
  }
}

TEST(Decode, ExifOrientationIsAppliedOrIgnoredOnRequest) {
  // The stored pixels are 10 wide, 6 high; orientations 6 and 8 turn them by 90 degrees.
  for (const char* name : {"rot3.jpg", "rot6.jpg", "rot8.jpg"}) {
    const fs::path file = fixture(std::string("datasets/exif/") + name);
    const Image upright = read_image(file, true);
    const Image stored = read_image(file, false);
    EXPECT_EQ(stored.cols, 10) << name;
    EXPECT_EQ(stored.rows, 6) << name;
    Image expected;
    if (name[3] == '3') cv::rotate(stored, expected, cv::ROTATE_180);
    if (name[3] == '6') cv::rotate(stored, expected, cv::ROTATE_90_CLOCKWISE);
    if (name[3] == '8') cv::rotate(stored, expected, cv::ROTATE_90_COUNTERCLOCKWISE);
    EXPECT_EQ(image_bytes(upright), image_bytes(expected)) << name;
  }
}

// The float pipeline reads what OpenCV stores (IMREAD_UNCHANGED, no orientation) and turns it
// itself: the same pixels as the 8-bit path's, in the same orientation, or as stored.
TEST(Decode, TheFloatPathTurnsByExifOrientationAsThe8BitPathDoes) {
  for (const char* name : {"rot3.jpg", "rot6.jpg", "rot8.jpg"}) {
    const fs::path file = fixture(std::string("datasets/exif/") + name);
    for (const bool exif : {true, false}) {
      const Image eight = read_image(file, exif);
      xdino::augment::DecodeOptions o;
      o.pixels = xdino::augment::DecodeOptions::Pixels::kFloat;
      o.channels = 3;
      o.exif_orientation = exif;
      const Image f = read_image(file, o);
      ASSERT_EQ(f.type(), CV_32FC3) << name;
      ASSERT_EQ(f.size(), eight.size()) << name << " exif " << exif;
      Image back;
      f.convertTo(back, CV_8UC3, 255.0);
      EXPECT_EQ(image_bytes(back), image_bytes(eight)) << name << " exif " << exif;
    }
  }
}

TEST(Decode, CorruptInputsThrowNamingTheFile) {
  for (const char* name : {"truncated.jpg", "truncated.png", "not_an_image.png"}) {
    const fs::path file = fixture(std::string("datasets/corrupt/") + name);
    const std::string msg = message_of([&] { read_image(file); });
    EXPECT_NE(msg.find(name), std::string::npos) << msg;
    EXPECT_NE(msg.find("cannot decode"), std::string::npos) << msg;
  }
  EXPECT_NE(message_of([] { decode_image("", "empty.jpg"); }).find("empty"), std::string::npos);
  EXPECT_NE(message_of([] { read_image("/nonexistent/x.png"); }).find("/nonexistent/x.png"),
            std::string::npos);
}

TEST(Decode, TruncatedJpegIsDetectedByItsMissingEndMarker) {
  const std::string good = xdino::read_file(fixture("datasets/folder/train/cat/b.jpg"));
  EXPECT_TRUE(jpeg_is_complete(good));
  EXPECT_TRUE(jpeg_is_complete(good + std::string("trailing junk after the end marker")));
  EXPECT_TRUE(jpeg_is_complete("\x89PNG not a jpeg"));  // other formats: the decoder judges
  // Every cut inside the scan data loses the end marker; libjpeg alone would pad with grey.
  for (size_t cut : {good.size() - 1, good.size() - 2, good.size() * 3 / 4, good.size() / 2}) {
    EXPECT_FALSE(jpeg_is_complete(good.substr(0, cut))) << cut;
    const std::string msg = message_of([&] { decode_image(good.substr(0, cut), "cut.jpg"); });
    EXPECT_NE(msg.find("truncated JPEG"), std::string::npos) << msg;
  }
  // An end marker inside an APP segment (an EXIF thumbnail) is not the image's.
  std::string with_app =
      good.substr(0, 2) + std::string("\xFF\xE1\x00\x06\xFF\xD9\x00\x00", 8) + good.substr(2);
  EXPECT_TRUE(jpeg_is_complete(with_app));
  EXPECT_FALSE(jpeg_is_complete(with_app.substr(0, with_app.size() - 2)));
  EXPECT_EQ(image_bytes(decode_image(with_app, "app.jpg")),
            image_bytes(decode_image(good, "b.jpg")));
}
