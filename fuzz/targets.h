// Entry points of the fuzz targets (issue 17), shared by the libFuzzer executables
// (fuzz/fuzz_main.cpp, one executable per entry point, built only with -DXDINO_FUZZ=ON) and by
// the ordinary GoogleTest replay of found inputs (tests/core/test_fuzz_regressions.cpp), so a
// regression file exercises exactly the code the fuzzer ran.
//
// Contract:
//  - Each function feeds `data` to one parser of outside input through its public entry point
//    (file-based readers get a private temporary file holding the bytes, removed afterwards).
//  - It returns normally when the parser accepted the input and throws std::exception (in
//    practice xdino::Error) when the parser rejected it; anything else (a crash, a sanitizer
//    report, an unbounded allocation) is the bug the fuzzer looks for.
//  - The libFuzzer wrappers swallow std::exception: a rejected input is a correct outcome.
//  - Where an accepted input promises more (a round trip, a bound), a broken promise aborts
//    through invariant_broken().
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace xdino::fuzz {

// core/json: parse_json, then a python_dumps round trip of what it accepted.
void fuzz_json(const uint8_t* data, size_t size);
// core/pth/zip: ZipReader on the bytes as a file, then every entry read (CRC checked).
void fuzz_pth_zip(const uint8_t* data, size_t size);
// core/pth.h: load_pth on the bytes as a file (zip container + unpickler + tensor records).
void fuzz_pth(const uint8_t* data, size_t size);
// core/safetensors.h: read_safetensors on the bytes as a file; what it accepts survives
// write_safetensors + read_safetensors unchanged.
void fuzz_safetensors(const uint8_t* data, size_t size);
// augment/data/idx_dataset: IdxDataset on a labels file (input bytes 1..data[0]) and an
// images file (the rest), gzipped when the input's byte 1 is 0x1f; then its first and last
// image and label.
void fuzz_idx(const uint8_t* data, size_t size);
// augment/data/decode: jpeg_is_complete and decode_image on the bytes (JPEG, PNG, ... through
// OpenCV, plus our EXIF orientation parsing).
void fuzz_decode(const uint8_t* data, size_t size);

// augment/data/h5_dataset: H5Dataset on an HDF5 shard that the input describes (structure-
// aware: fuzz/h5_builder.h), once or as two shards; then samples' labels, paths and images.
void fuzz_h5(const uint8_t* data, size_t size);
// eval/features_io: read_features on an HDF5 feature file that the input describes; what it
// accepts must survive write_features + read_features bit for bit.
void fuzz_features(const uint8_t* data, size_t size);
// augment/data/decode, the float pipeline's decode (16-bit, 4-channel, float TIFF/PNG): byte 0
// picks the channels (its low 3 bits mod 5: 0 keeps them as stored) and EXIF orientation (bit
// 7); the rest is the file. What it accepts is float32 with those channels, every sample
// finite, in [0, 1] unless the file stored floats.
void fuzz_decode_float(const uint8_t* data, size_t size);
// augment/ops/tensor: --in_chans, --mean and --std as `dino train` declares them (Flags, from
// the NUL-separated arguments), then normalization_for and a Normalizer on a float image and
// an 8-bit one; what it accepts normalises to finite values.
void fuzz_normalization(const uint8_t* data, size_t size);
// eval/features_io: write_features_with_patch_tokens driven by the input (images, token
// shape, the sink's calls with their indices, the rows kept), then read back: what it accepts
// reads back bit for bit, row i the tokens sunk at the kept index i.
void fuzz_patch_tokens(const uint8_t* data, size_t size);
// ssl/warm_start: `dino train --pretrained_weights` on the bytes as a .pth file
// (models::read_pretrained, no checkpoint key, then warm_start into a tiny student); what it
// accepts leaves every student tensor finite.
void fuzz_warm_start(const uint8_t* data, size_t size);
// launch/flags: Flags::parse of an INI file (the bytes up to the first NUL) and command-line
// arguments (the NUL-separated rest); what it accepts must read back unchanged from to_ini().
void fuzz_flags(const uint8_t* data, size_t size);

// core/tensorboard: prune_events on the bytes as an event file, as a resumed run prunes it;
// what it rewrites is whole records of its own (a second prune changes nothing), what it
// leaves is byte for byte the input. Run under AddressSanitizer, it reads nothing out of
// bounds at any cut or corruption of a record (issue 67).
void fuzz_tensorboard(const uint8_t* data, size_t size);

// A property of an accepted input that does not hold: prints `what` and aborts (a rejected input
// throws, which the fuzzers count as correct; this must count as the bug it is).
[[noreturn]] void invariant_broken(const char* what);

// A temporary file holding the bytes, removed when this goes out of scope.
class TempInput {
 public:
  TempInput(const uint8_t* data, size_t size, const char* suffix);
  ~TempInput();
  TempInput(const TempInput&) = delete;
  TempInput& operator=(const TempInput&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace xdino::fuzz
