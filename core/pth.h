// Reading and writing PyTorch `.pth` files (torch.save's zip container + pickle protocol 2)
// without Python.
//
// Contract:
//  - load_pth(path) reads any file torch.save (torch >= 1.6, zip format) wrote from the
//    constructs official DINO/XCiT checkpoints use: dicts and collections.OrderedDict (the
//    `_metadata` attribute is dropped), lists, tuples, str, int, float, bool, None, bytes,
//    tensors of every dtype torch.save stores (storages shared between tensors stay shared),
//    nn.Parameter (loaded as a plain tensor), numpy scalars (as int/float), and
//    argparse.Namespace and other unknown Python objects (as a GenericDict holding
//    "__class__": "module.Name" plus their attributes/state). Values come back as c10::IValue:
//    dicts as GenericDict with the file's key order.
//  - save_pth(path, value) writes `value` atomically (temp file + rename) as a zip-format file
//    that Python's torch.load opens; GenericDicts load as dict, tuples as tuple, lists as list.
//  - Errors throw xdino::Error with one line naming the file and the problem (not a zip, a
//    truncated archive, an unsupported pickle opcode with its byte offset, a missing storage).
#pragma once

#include <ATen/core/ivalue.h>

#include <filesystem>

namespace xdino {

c10::IValue load_pth(const std::filesystem::path& path);

void save_pth(const std::filesystem::path& path, const c10::IValue& value);

}  // namespace xdino
