// TensorBoard event files, as torch.utils.tensorboard's SummaryWriter writes them, so that a
// run shows in `tensorboard --logdir runs` beside those of solo-learn, lightly or Lightning.
//
// The format: a sequence of records, each an 8-byte little-endian length, the masked CRC-32C
// of those 8 bytes, the data, and the masked CRC-32C of the data (TFRecord framing); each
// record's data is one Event message of TensorBoard's protobuf schema (event.proto,
// summary.proto): wall_time (1, double), step (2, int64) and either file_version (3, string:
// the first record, "brain.Event:2") or summary (5): one Value of tag (1, string) and
// simple_value (2, float) or image (4: height 1, width 2, colorspace 3, encoded PNG 4).
// Hand-written on purpose: those are the only fields used, a protobuf dependency would bring
// protoc and a copy of TensorFlow's schema into the build for them, and tests read the files
// with the tensorboard package's own reader (tests/cli/test_tensorboard.cpp).
//
// Contract:
//  - EventWriter(dir) creates `dir` and a new file
//    events.out.tfevents.<seconds>.<host>.<pid>.<n>.xdino in it (SummaryWriter's name with
//    our own filename_suffix, kOwnSuffix: how prune_events knows its files), starting with
//    the file_version
//    event. scalar() and image() append one event each (wall time now); flush() pushes them to
//    the file, the destructor flushes and closes. Not thread-safe; one writer per process.
//  - prune_events(dir, keep): rewrites every event file this writer wrote in `dir` (by its
//    name's suffix; a regular file, not a symbolic link, that we may write), each
//    atomically through core/atomic_file.h, without the events for which keep(tag, step) is
//    false: what a run that resumes calls for the steps it will log again, so the curves carry
//    no duplicate step. A last record cut short at any byte (a run killed mid-write) is
//    dropped with them. Any other file is never opened for writing: another program's event
//    files (a user's own SummaryWriter in the run folder), a link, a read-only file. Every
//    record's framing is checked too (both CRC-32Cs): a file of ours that does not parse (a
//    wrong CRC, a record that is not an event, a first record that is not whole) is left as
//    it is, byte for byte, with a warning. A missing dir: nothing.
//  - crc32c(), masked_crc32c(): the checksums of the framing (exposed for tests).
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace xdino::tensorboard {

inline constexpr const char* kOwnSuffix = ".xdino";

class EventWriter {
 public:
  explicit EventWriter(const std::filesystem::path& dir);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  void scalar(const std::string& tag, double value, int64_t step);
  // png: an encoded PNG of width x height pixels and `channels` channels (1, 3 or 4).
  void image(const std::string& tag, std::string_view png, int width, int height, int channels,
             int64_t step);
  void flush();
  const std::filesystem::path& path() const { return path_; }

 private:
  void write_event(const std::string& what, int64_t step);

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

void prune_events(const std::filesystem::path& dir,
                  const std::function<bool(const std::string& tag, int64_t step)>& keep);

uint32_t crc32c(std::string_view data);
uint32_t masked_crc32c(std::string_view data);

}  // namespace xdino::tensorboard
