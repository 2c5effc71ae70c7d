// Safetensors files: the format Hugging Face's hub, timm and `safetensors.torch` read and write
// (an 8-byte little-endian header length N, N bytes of JSON, then the tensors' bytes). It holds
// no code to run, unlike a pickle. Hand-written on purpose: no C++ library of it is packaged
// for Debian, and the format is a JSON header (nlohmann, core/json.h) over raw bytes.
//
// Contract:
//  - write_safetensors(path, tensors, metadata): every tensor (any device, copied to
//    contiguous CPU memory) under its name, in name order as safetensors.torch.save_file
//    writes them, with __metadata__ (string to string) when not empty; written through
//    write_file_atomically (core/atomic_file.h): a reader never sees a torn file, and a failed
//    write leaves `path` as it was.
//  - read_safetensors(path) returns the tensors in the order of their data (and the metadata).
//    Everything is checked before anything the file does not justify is allocated, as the
//    reference reader checks it: a header length of at most 100 MB and inside the file, a JSON
//    object whose keys are unique, known dtypes (F64, F32, F16, BF16, I64, I32, I16, I8, U8,
//    BOOL), shapes of non-negative dimensions whose byte size (overflow-checked) is the entry's
//    data_offsets span, and spans that tile the data exactly: starting at 0, each beginning
//    where the one before ends, the last ending at the file's end (so no two overlap). A file
//    that breaks any of it throws xdino::UsageError (a bad --pretrained_weights, exit 2), one
//    line naming the file and the first problem; an unreadable file throws xdino::Error.
//  - is_safetensors(path): whether the file starts like one (a header length that fits the
//    file, then '{'), without reading more than 9 bytes.
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

}  // namespace xdino
