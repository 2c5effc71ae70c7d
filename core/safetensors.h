// Safetensors files: the format Hugging Face's hub, timm and `safetensors.torch` read and write
// (an 8-byte little-endian header length N, N bytes of JSON, then the tensors' bytes). It holds
// no code to run, unlike a pickle. Hand-written on purpose: no C++ library of it is packaged
// for Debian, and the format is a JSON header (nlohmann, core/json.h) over raw bytes.
//
// Contract:
//  - write_safetensors(path, tensors, metadata): every tensor (any device, copied to
//    contiguous CPU memory) under its name, laid out as safetensors.torch.save_file lays them
//    out (by dtype, widest first: I64, F64, F32, I32, BF16, F16, I16, I8, U8, BOOL; then by
//    name), so the same tensors give the reference's bytes, with __metadata__ (string to
//    string) first when not empty; written through
//    write_file_atomically (core/atomic_file.h): a reader never sees a torn file, and a failed
//    write leaves `path` as it was.
//  - read_safetensors(path) returns the tensors in the order of their data (and the metadata).
//    Everything is checked before anything the file does not justify is allocated, as the
//    reference reader checks it: a header length of 2 bytes to 100 MB, inside the file, of a
//    JSON object that starts at its first byte (no white space before '{'), whose keys are
//    unique (read in O(n log n) for n tensors), known dtypes (F64, F32, F16, BF16, I64, I32, I16,
//    I8, U8, BOOL), shapes of non-negative dimensions whose byte size (overflow-checked) is the
//    entry's data_offsets span, and spans that tile the data exactly: starting at 0, each beginning
//    where the one before ends, the last ending at the file's end (so no two overlap). A file
//    that breaks any of it throws xdino::UsageError (a bad --pretrained_weights, exit 2), one
//    line naming the file and the first problem (names from the file quoted, core/check.h);
//    an unreadable file, or one whose tensors need more than this machine's physical memory
//    (a sparse file can claim terabytes), throws xdino::Error, naming the file.
//  - is_safetensors(path): whether the file starts like one (a header length that fits the
//    file, then '{'), without reading more than 9 bytes.
//  - looks_like_pth(path): whether it starts as a torch.save file does (a zip header, or a
//    legacy file's pickle opcode 0x80): the readers of weights send every other file to
//    read_safetensors, whose errors then say what is wrong.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <string>

namespace xdino {

using TensorDict = torch::OrderedDict<std::string, torch::Tensor>;

struct Safetensors {
  TensorDict tensors;
  std::map<std::string, std::string> metadata;
};

void write_safetensors(const std::filesystem::path& path, const TensorDict& tensors,
                       const std::map<std::string, std::string>& metadata = {});

Safetensors read_safetensors(const std::filesystem::path& path);

bool is_safetensors(const std::filesystem::path& path);
bool looks_like_pth(const std::filesystem::path& path);

}  // namespace xdino
