// Every class of bad input, through the real binary: the exit code and the line the user sees.
// The same rows make up docs/usage.md's bad-input table (between the `bad-inputs` markers); the
// last test checks that each row there says what the binary says here, so the table cannot
// drift from the code.
#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <sstream>

#include "core/atomic_file.h"
#include "core/pth.h"
#include "tests/support/cli_args.h"
#include "tests/support/files.h"
#include "tests/support/process.h"

namespace cli = xdino::testing::cli;
namespace fs = std::filesystem;
using xdino::read_file;
using xdino::testing::count_lines;
using xdino::testing::dino_binary;
using xdino::testing::run_process;

namespace {

// One row of the table. `line` is the part of the stderr line that does not depend on where
// the test's files are; docs/usage.md's row shows it verbatim.
struct BadInput {
  std::string title;  // the table's first cell
  int exit_code;
  std::string line;
  std::function<std::vector<std::string>(const fs::path& root)> args;
  std::map<std::string, std::string> env = {};
  int file_size_limit = 0;  // > 0: run under sh's `ulimit -f` (a full disk, as a write sees it)
};

// Arguments that name no file of the test's.
std::function<std::vector<std::string>(const fs::path&)> fixed_args(std::vector<std::string> args) {
  return [args = std::move(args)](const fs::path&) { return args; };
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

// A safetensors file's first bytes: the header's length (8 bytes, little-endian) and the header.
std::string safetensors_bytes(const std::string& header) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(uint64_t{header.size()} >> (8 * i));
  return out + header;
}

void gzip_file(const fs::path& from, const fs::path& to) {
  const std::string bytes = read_file(from);
  gzFile f = gzopen(to.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  gzclose(f);
}

// `train` of xcit_nano_12_p16 on the image folder root/img/train for one epoch, no warm-up, at
// batch 2: what the checkpoint SetUpTestSuite makes and the rows that train share.
std::vector<std::string> train_on_images(const fs::path& root) {
  return cli::concat(
      {{"train", "--arch", "xcit_nano_12_p16", "--data_path", (root / "img" / "train").string()},
       cli::epochs(1, 0),
       {"--batch_size_per_gpu", "2"}});
}

// Files every row reads, made once: an image folder, a small DINO checkpoint of
// xcit_nano_12_p16 trained on it, and IDX folders with one defect each.
class BadInputs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = xdino::testing::fresh_dir("bad_inputs");
    xdino::testing::write_ppm_folder(root_ / "img", 3, 36, 30);
    const auto r = run_process(cli::concat({{dino_binary()},
                                            train_on_images(root_),
                                            cli::dino_head(64, 32, 16),
                                            cli::multi_crop(32, 16, 1),
                                            {"--num_workers", "0", "--device", "cpu", "--use_fp16",
                                             "false", "--output_dir", (root_ / "run").string()}}));
    ASSERT_EQ(r.exit_code, 0) << r.err;

    fs::create_directories(root_ / "a_dir");
    write_file(root_ / "empty.pth", "");
    write_file(root_ / "text.pth", "hello, not a checkpoint\n");
    std::string damaged = read_file(root_ / "run" / "checkpoint.pth");
    damaged[damaged.size() / 2] ^= 0x40;  // inside a tensor record: only its CRC-32 can tell
    write_file(root_ / "damaged.pth", damaged);
    // 10^6 nested lists in data.pkl (PROTO 2, MARK x 10^6, LIST x 10^6, STOP): 2 MB, made
    // here rather than stored. Once a stack overflow (SIGSEGV) in LibTorch's IValue code.
    {
      const size_t depth = 1000000;
      const std::string pkl =
          std::string("\x80\x02") + std::string(depth, '(') + std::string(depth, 'l') + ".";
      caffe2::serialize::PyTorchStreamWriter zip((root_ / "deep.pth").string());
      zip.writeRecord("data.pkl", pkl.data(), pkl.size());
      zip.writeEndOfFile();
    }
    write_file(root_ / "a_file", "x");

    // IDX: one with a wrong magic number, one whose gzipped images are cut in half.
    for (const char* name : {"idx_magic", "idx_cut"}) {
      fs::create_directories(root_ / name);
      xdino::testing::write_random_idx(root_ / name, 64);
    }
    std::string images = read_file(root_ / "idx_magic" / "train-images-idx3-ubyte");
    images[0] = 'P';
    write_file(root_ / "idx_magic" / "train-images-idx3-ubyte", images);
    const fs::path plain = root_ / "idx_cut" / "train-images-idx3-ubyte";
    const fs::path gz = root_ / "idx_cut" / "train-images-idx3-ubyte.gz";
    gzip_file(plain, gz);
    fs::remove(plain);
    fs::resize_file(gz, fs::file_size(gz) / 2);

    // An HDF5 shard cut in half.
    fs::create_directories(root_ / "shards");
    const auto p = run_process({dino_binary(), "pack", "--data_path", (root_ / "img").string(),
                                "--output_dir", (root_ / "shards").string()});
    ASSERT_EQ(p.exit_code, 0) << p.err;
    fs::resize_file(root_ / "shards" / "train.h5",
                    fs::file_size(root_ / "shards" / "train.h5") / 2);

    // An image that is not one, among good ones (a copy of the folder).
    fs::copy(root_ / "img", root_ / "img_bad", fs::copy_options::recursive);
    write_file(root_ / "img_bad" / "train" / "a" / "broken.png", "not a png");

    // The float pipeline's images: 16-bit 4-channel TIFFs, and among them one of each defect a
    // multispectral folder can hold.
    const fs::path fl = root_ / "float" / "train";
    for (const char* cls : {"a", "b"}) {
      fs::create_directories(fl / cls);
      for (int i = 0; i < 4; ++i) {
        cv::Mat m(36, 30, CV_16UC4);
        cv::randu(m, 0, 65535);
        ASSERT_TRUE(cv::imwrite((fl / cls / (std::to_string(i) + ".tif")).string(), m));
      }
    }
    cv::Mat nan(36, 30, CV_32FC4, cv::Scalar::all(0.5));
    nan.at<cv::Vec4f>(3, 4)[2] = std::numeric_limits<float>::quiet_NaN();
    nan.at<cv::Vec4f>(5, 6)[0] = std::numeric_limits<float>::infinity();
    ASSERT_TRUE(cv::imwrite((fl / "a" / "nan.tif").string(), nan));
    cv::Mat rgb(36, 30, CV_16UC3, cv::Scalar::all(1000));
    ASSERT_TRUE(cv::imwrite((fl / "b" / "three_channels.tif").string(), rgb));
    fs::copy_file(fl / "a" / "0.tif", fl / "a" / "truncated.tif");
    fs::resize_file(fl / "a" / "truncated.tif", fs::file_size(fl / "a" / "0.tif") / 2);
    {  // a 16-bit PNG whose header declares 100000 x 100000 pixels (40 GB as RGBA16)
      cv::Mat small(4, 4, CV_16UC4, cv::Scalar::all(7));
      std::vector<uint8_t> png;
      ASSERT_TRUE(cv::imencode(".png", small, png));
      for (int at : {16, 20}) {  // IHDR's width and height, big-endian
        const uint32_t v = 100000;
        for (int k = 0; k < 4; ++k) png[at + k] = static_cast<uint8_t>(v >> (24 - 8 * k));
      }
      write_file(fl / "b" / "huge.png", std::string(png.begin(), png.end()));
    }

    {  // a 32-bit float TIFF with one finite sample far beyond any pixel range (3e38)
      cv::Mat huge(36, 30, CV_32FC4, cv::Scalar::all(0.5));
      huge.at<cv::Vec4f>(7, 8)[1] = 3e38f;
      ASSERT_TRUE(cv::imwrite((fl / "b" / "huge_sample.tif").string(), huge));
    }

    // Weights files with one defect each: a safetensors header after white space, a name with
    // terminal escapes, and the run's checkpoint with its input convolution made to take 0 and
    // then 5 channels (the count is the file's, not a flag's).
    write_file(
        root_ / "space.safetensors",
        safetensors_bytes(R"( {"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})") + "abcd");
    write_file(
        root_ / "escape.safetensors",
        safetensors_bytes(
            "{\"a\\u001b[31mred\":{\"dtype\":\"F9\",\"shape\":[1],\"data_offsets\":[0,4]}}") +
            "abcd");
    for (const int64_t channels : {int64_t{0}, int64_t{5}}) {
      c10::IValue file = xdino::load_pth(root_ / "run" / "checkpoint.pth");
      auto teacher = file.toGenericDict().at("teacher").toGenericDict();
      for (const auto& item : teacher) {
        const std::string key = item.key().toStringRef();
        if (key.size() < 27 || key.compare(key.size() - 27, 27, "patch_embed.proj.0.0.weight") != 0)
          continue;
        const torch::Tensor w = item.value().toTensor();
        teacher.insert_or_assign(key, torch::randn({w.size(0), channels, w.size(2), w.size(3)}));
      }
      xdino::save_pth(root_ / ("chans" + std::to_string(channels) + ".pth"), file);
    }
    ASSERT_EQ(mkfifo((root_ / "pipe.pth").c_str(), 0600), 0);

    write_file(root_ / "unknown_key.ini", "[train]\nlearning_rate = 0.1\n");
    write_file(root_ / "wrong_type.ini", "[train]\nepochs = ten\n");
    write_file(root_ / "f_big.h5", kPrevious);  // what a failed write must leave alone
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  static fs::path root_;
  static constexpr const char* kPrevious = "the previous file\n";
};
fs::path BadInputs::root_;

// `dino knn` on the image folder with these weights.
std::vector<std::string> knn_with(const fs::path& root, const std::string& weights,
                                  const std::vector<std::string>& more = {}) {
  std::vector<std::string> a{"knn",
                             "--arch",
                             "xcit_nano_12_p16",
                             "--data_path",
                             (root / "img").string(),
                             "--image_size",
                             "32",
                             "--nb_knn",
                             "2",
                             "--output_dir",
                             (root / "out").string(),
                             "--pretrained_weights",
                             weights};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

std::vector<std::string> features_of(const fs::path& data, const fs::path& out,
                                     const std::string& arch = "xcit_nano_12_p16",
                                     const std::vector<std::string>& more = {}) {
  std::vector<std::string> a{"features",    "--arch",       arch,
                             "--data_path", data.string(),  "--split",
                             "train",       "--image_size", arch == "pixels" ? "28" : "32",
                             "--output",    out.string()};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// `dino features` on the 16-bit 4-channel folder, with --in_chans 4 and its normalisation.
std::vector<std::string> float_features(const fs::path& root, const fs::path& out,
                                        const std::vector<std::string>& more = {}) {
  std::vector<std::string> m{"--in_chans", "4", "--mean", "0.5", "--std", "0.25"};
  m.insert(m.end(), more.begin(), more.end());
  return features_of(root / "float", out, "xcit_nano_12_p16", m);
}

// `dino train` for one tiny epoch on the image folder, with `more` after it.
std::vector<std::string> train_with(const fs::path& root, const std::vector<std::string>& more) {
  return cli::concat(
      {train_on_images(root),
       {"--out_dim", "64", "--device", "cpu", "--output_dir", (root / "train_out").string()},
       more});
}

const std::vector<BadInput>& table() {
  static const std::vector<BadInput> rows = {
      {"a missing file", 2, "weights file '/no/such/weights.pth' not found (--pretrained_weights)",
       [](const fs::path& r) { return knn_with(r, "/no/such/weights.pth"); }},
      {"a directory instead of a file", 2, "is a directory, not a file (--pretrained_weights)",
       [](const fs::path& r) { return knn_with(r, (r / "a_dir").string()); }},
      {"an empty file", 1, "empty.pth' is empty",
       [](const fs::path& r) { return knn_with(r, (r / "empty.pth").string()); }},
      {"a wrong magic (checkpoint)", 1,
       "text.pth' is not a torch.save file (it does not start with a zip header)",
       [](const fs::path& r) { return knn_with(r, (r / "text.pth").string()); }},
      {"a wrong magic (IDX)", 1, "train-images-idx3-ubyte\" is not an IDX file (bad magic number)",
       [](const fs::path& r) { return features_of(r / "idx_magic", r / "f.h5", "pixels"); }},
      {"a damaged checkpoint (one byte flipped)", 1, "fails its CRC-32 check",
       [](const fs::path& r) { return knn_with(r, (r / "damaged.pth").string()); }},
      {"a checkpoint whose data.pkl nests 10^6 lists", 1, "containers nest deeper than 256 levels",
       [](const fs::path& r) { return knn_with(r, (r / "deep.pth").string()); }},
      {"a safetensors header after white space", 2,
       "space.safetensors': its header does not start with '{' (it starts with ' {\"a\":{\"')",
       [](const fs::path& r) { return knn_with(r, (r / "space.safetensors").string()); }},
      {"a tensor name holding terminal escapes (quoted)", 2,
       "tensor 'a\\x1b[31mred' has dtype \"F9\", which this reader does not know",
       [](const fs::path& r) { return knn_with(r, (r / "escape.safetensors").string()); }},
      {"weights whose input convolution takes no channel", 2,
       "its input convolution 'patch_embed.proj.0.0.weight' has shape [16, 0, 3, 3], which takes "
       "no input channel; a model needs at least one",
       [](const fs::path& r) { return knn_with(r, (r / "chans0.pth").string()); }},
      {"weights of more channels than an image holds", 2,
       "chans5.pth' (key 'teacher') take 5-channel images, and the images read here hold at most "
       "4 channels",
       [](const fs::path& r) { return knn_with(r, (r / "chans5.pth").string()); }},
      {"a truncated checkpoint", 1,
       "has no zip directory at its end: the file is truncated or is not a torch.save file",
       [](const fs::path& r) {
         const fs::path cut = r / "cut.pth";
         if (!fs::exists(cut)) {
           fs::copy_file(r / "run" / "checkpoint.pth", cut);
           fs::resize_file(cut, 5000);
         }
         return knn_with(r, cut.string());
       }},
      {"a truncated gzipped IDX", 1, "unexpected end of file (truncated or corrupt gzip)",
       [](const fs::path& r) { return features_of(r / "idx_cut", r / "f.h5", "pixels"); }},
      {"a truncated HDF5 shard", 1, "train.h5: truncated file",
       [](const fs::path& r) { return features_of(r / "shards", r / "f.h5"); }},
      {"a checkpoint of another architecture", 1,
       "checkpoint key 'cls_token' has shape [1, 1, 128] but the model expects [1, 1, 192]",
       [](const fs::path& r) {
         auto a = knn_with(r, (r / "run" / "checkpoint.pth").string());
         a[2] = "xcit_tiny_12_p16";
         return a;
       }},
      {"a checkpoint key that does not exist", 2,
       "has no key 'studnt' (--checkpoint_key); it holds 'student', 'teacher', 'optimizer', "
       "'epoch', 'args', 'dino_loss', 'xdino_resume'",
       [](const fs::path& r) {
         return knn_with(r, (r / "run" / "checkpoint.pth").string(),
                         {"--checkpoint_key", "studnt"});
       }},
      {"a non-image in an ImageFolder (skipped and counted; exit 0)", 0,
       "warning: 1 of 7 images of ",
       [](const fs::path& r) { return features_of(r / "img_bad", r / "f_ok.h5"); }},
      {"16-bit 4-channel images with a truncated one, NaN samples, a sample of 3e38, a "
       "10^10-pixel header and 3 channels among 4 (each skipped and named; exit 0)",
       0, "warning: 5 of 13 images of ",
       [](const fs::path& r) { return float_features(r, r / "f_float.h5"); }},
      {"an --in_chans no image file holds", 2,
       "--in_chans 100000: the images read here hold at most 4 channels",
       [](const fs::path& r) {
         auto a = float_features(r, r / "f.h5");
         a[std::find(a.begin(), a.end(), "4") - a.begin()] = "100000";
         return a;
       }},
      {"a --std that is not a positive number", 2,
       "--std -0.25 is not a positive finite number (a standard deviation)",
       [](const fs::path& r) {
         auto a = float_features(r, r / "f.h5");
         *std::find(a.begin(), a.end(), "0.25") = "-0.25";
         return a;
       }},
      {"an output file that is a directory (features, patch tokens)", 2,
       "is a directory, not a file (--output)",
       [](const fs::path& r) {
         return features_of(r / "img", r / "a_dir", "xcit_nano_12_p16", {"--patch_tokens"});
       }},
      {"warm-start weights from a named pipe (train)", 2,
       "pipe.pth' is not a regular file (--pretrained_weights)",
       [](const fs::path& r) {
         return train_with(r, {"--pretrained_weights", (r / "pipe.pth").string()});
       }},
      {"warm-start weights that are not a checkpoint (train)", 1,
       "text.pth' is not a torch.save file (it does not start with a zip header)",
       [](const fs::path& r) {
         return train_with(r, {"--pretrained_weights", (r / "text.pth").string()});
       }},
      {"batches larger than memory (train)", 1, "cannot allocate the data loader's batch buffers (",
       [](const fs::path& r) {
         return train_with(r, {"--global_crops_size", "200000", "--num_workers", "1"});
       }},
      {"a label out of range", 2,
       "the data has 2 classes but --num_labels is 1: raise --num_labels",
       [](const fs::path& r) {
         return std::vector<std::string>{"linear",
                                         "--arch",
                                         "xcit_nano_12_p16",
                                         "--data_path",
                                         (r / "img").string(),
                                         "--image_size",
                                         "32",
                                         "--num_labels",
                                         "1",
                                         "--epochs",
                                         "1",
                                         "--output_dir",
                                         (r / "lin").string()};
       }},
      {"a probe refused before it writes (linear)", 2, "--num_labels must be >= 1, got 0",
       [](const fs::path& r) {
         return std::vector<std::string>{
             "linear", "--data_path",  (r / "img").string(), "--num_labels",
             "0",      "--output_dir", (r / "lin0").string()};
       }},
      {"an unknown INI key", 2, "unknown key 'learning_rate' in config file",
       [](const fs::path& r) {
         return std::vector<std::string>{"train", "--config", (r / "unknown_key.ini").string()};
       }},
      {"a value of the wrong type", 2, "bad value 'ten' for --epochs: expected an integer (INT)",
       [](const fs::path& r) {
         return std::vector<std::string>{"train", "--config", (r / "wrong_type.ini").string()};
       }},
      {"conflicting flags", 2, "--precision fp16 needs a CUDA device (on CPU use bf16 or fp32)",
       [](const fs::path& r) {
         return std::vector<std::string>{"train",    "--data_path", (r / "img").string(),
                                         "--device", "cpu",         "--precision",
                                         "fp16"};
       }},
      {"iBOT on a backbone without patch tokens", 2,
       "--ibot_loss_weight needs patch tokens to mask, and resnet18 has none; use an xcit_*, "
       "xvit_* or vit_* architecture, or --ibot_loss_weight 0",
       [](const fs::path& r) {
         return train_with(r, {"--arch", "resnet18", "--ibot_loss_weight", "1"});
       }},
      {"a stray argument", 2,
       "unexpected argument for 'dino train': flags take the form --name value",
       fixed_args({"train", "runs/exp"})},
      {"a value config.ini cannot record", 2,
       "value 'runs/exp#1' for --output_dir cannot be recorded in config.ini",
       fixed_args({"train", "--output_dir", "runs/exp#1"})},
      {"an output dir that cannot be created", 1, "cannot create directories: Not a directory",
       [](const fs::path& r) {
         return knn_with(r, "", {"--output_dir", (r / "a_file" / "o").string()});
       }},
      {"a full disk or a file-size limit while writing (ENOSPC, EFBIG)",
       1,
       "f_big.h5': File too large (the previous file is left as it was)",
       [](const fs::path& r) {
         // --force: the previous file is not a feature file (features would refuse it).
         return features_of(r / "img", r / "f_big.h5", "xcit_nano_12_p16", {"--force"});
       },
       {},
       2},
      {"a rendezvous timeout that is not a finite number of seconds (launch)", 2,
       "--rdzv_timeout must be a number of seconds in (0, 1e+06], got inf",
       fixed_args({"launch", "--rdzv_timeout", "inf", "--", "knn"})},
      {"a --rdzv_conf key that torchrun's c10d rendezvous ignores (launch)", 2,
       "--rdzv_conf timeout: torchrun's c10d rendezvous does not read it either",
       fixed_args({"launch", "--rdzv_conf", "timeout=900", "--", "knn"})},
      {"an etcd password holding a ',' (launch)", 2,
       "--rdzv_conf: the item after password= is not key=value (a password cannot hold ','): "
       "give it in password_file=FILE or the environment variable XDINO_RDZV_PASSWORD",
       fixed_args({"launch", "--rdzv_backend", "etcd", "--rdzv_endpoint", "127.0.0.1:2379",
                   "--rdzv_conf", "user=u,password=se,cret", "--", "knn"})},
      {"an etcd password file that is not there (launch)", 2,
       "--rdzv_conf password_file '/no/secret' not found",
       fixed_args({"launch", "--rdzv_backend", "etcd", "--rdzv_endpoint", "127.0.0.1:2379",
                   "--rdzv_conf", "user=u,password_file=/no/secret", "--", "knn"})},
      {"an etcd password from the environment without a user (launch)",
       2,
       "etcd: a password without a user; give user= too",
       fixed_args(
           {"launch", "--rdzv_backend", "etcd", "--rdzv_endpoint", "127.0.0.1:2379", "--", "knn"}),
       {{"XDINO_RDZV_PASSWORD", "s3cret"}}},
      {"an etcd TLS file that is a folder (launch)", 2,
       "etcd TLS file '/' is a directory, not a file",
       fixed_args({"launch", "--rdzv_backend", "etcd", "--rdzv_endpoint", "127.0.0.1:2379",
                   "--rdzv_conf", "ca_cert=/", "--", "knn"})},
      {"a reversed mask ratio range with iBOT off (train)", 2,
       "--mask_ratio_min_max takes two ratios 0 <= min <= max <= 1 with max > 0",
       [](const fs::path& r) {
         return train_with(r, {"--mask_ratio_min_max", "0.5", "0.1"});
       }},
      {"more processes than this machine has cores or GPUs (launch)", 2,
       "--nproc_per_node 100000 is more than this machine runs side by side (",
       fixed_args({"launch", "--nproc_per_node", "100000", "--", "knn"})},
      {"node 0 told to serve the store at another host's address (launch)", 2,
       "--node_rank 0 serves the rendezvous store, but '192.0.2.1' (--rdzv_endpoint or "
       "--master_addr) is not an address of this host",
       fixed_args({"launch", "--nnodes", "2", "--node_rank", "0", "--master_addr", "192.0.2.1",
                   "--master_port", "29999", "--", "knn"})},
      {"an export onto a folder it did not write (export --force)", 2,
       "was not written by dino export (it holds 'checkpoint.pth'): --force replaces only a "
       "folder of an earlier export; give another --output",
       [](const fs::path& r) {
         return std::vector<std::string>{
             "export",   "--pretrained_weights",     (r / "run" / "checkpoint.pth").string(),
             "--output", (r / "run").string() + "/", "--force"};
       }},
      {"the launcher's environment disagreeing with itself",
       2,
       "rank 2 is not below the world size 2 (torchrun environment)",
       [](const fs::path& r) { return knn_with(r, ""); },
       {{"RANK", "2"},
        {"WORLD_SIZE", "2"},
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", "29511"}}},
  };
  return rows;
}

TEST_F(BadInputs, EachGivesItsExitCodeAndOneLine) {
  for (const BadInput& row : table()) {
    SCOPED_TRACE(row.title);
    std::vector<std::string> argv{dino_binary()};
    for (const std::string& a : row.args(root_)) argv.push_back(a);
    // An empty --pretrained_weights evaluates random weights: drop the pair.
    for (size_t i = 0; i + 1 < argv.size(); ++i)
      if (argv[i] == "--pretrained_weights" && argv[i + 1].empty())
        argv.erase(argv.begin() + i, argv.begin() + i + 2);
    if (row.file_size_limit > 0) {
      std::string command = "ulimit -f " + std::to_string(row.file_size_limit) + " && exec";
      for (const std::string& a : argv) command += " '" + a + "'";
      argv = {"/bin/sh", "-c", command};
    }
    const auto r = run_process(argv, row.env, 120);
    EXPECT_EQ(r.exit_code, row.exit_code) << r.err;
    EXPECT_NE(r.err.find(row.line), std::string::npos) << r.err;
    if (row.exit_code != 0) {
      // The error is the last line; a warning (random weights) may come before it.
      const std::string last = r.err.substr(r.err.rfind('\n', r.err.size() - 2) + 1);
      EXPECT_EQ(last.rfind("dino ", 0), 0u) << r.err;
      EXPECT_NE(last.find(row.line), std::string::npos) << r.err;
      EXPECT_EQ(count_lines(last), 1u) << r.err;
      EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
    }
  }
  // The failed runs left no result file behind (the one that succeeded wrote f_ok.h5).
  EXPECT_FALSE(fs::exists(root_ / "out" / "knn.json"));
  EXPECT_FALSE(fs::exists(root_ / "lin" / "checkpoint.pth"));
  EXPECT_FALSE(fs::exists(root_ / "lin0")) << "a refused probe made its folder";
  EXPECT_TRUE(fs::exists(root_ / "run" / "checkpoint.pth")) << "export --force removed a run";
  EXPECT_FALSE(fs::exists(root_ / "f.h5"));
  EXPECT_TRUE(fs::exists(root_ / "f_ok.h5"));
  EXPECT_EQ(read_file(root_ / "f_big.h5"), kPrevious);
}

// docs/usage.md's table, between `<!-- bad-inputs:begin -->` and `<!-- bad-inputs:end -->`, has
// one row per entry of table(), in the same order: `| title | command | exit | line |`.
TEST(BadInputsReadme, TheTableMatchesTheTests) {
  const std::string readme = read_file(
      fs::path(xdino::testing::test_data_dir()).parent_path().parent_path() / "docs" / "usage.md");
  const size_t begin = readme.find("<!-- bad-inputs:begin -->");
  const size_t end = readme.find("<!-- bad-inputs:end -->");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  std::vector<std::string> rows;
  std::istringstream in(readme.substr(begin, end - begin));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("| ", 0) == 0 && line.find("---") == std::string::npos &&
        line.rfind("| bad input |", 0) != 0)
      rows.push_back(line);
  ASSERT_EQ(rows.size(), table().size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const BadInput& t = table()[i];
    SCOPED_TRACE(t.title);
    EXPECT_EQ(rows[i].rfind("| " + t.title + " |", 0), 0u) << rows[i];
    EXPECT_NE(rows[i].find("| " + std::to_string(t.exit_code) + " |"), std::string::npos)
        << rows[i];
    EXPECT_NE(rows[i].find(t.line), std::string::npos) << rows[i];
  }
}

}  // namespace
