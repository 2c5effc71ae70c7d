// Reading and writing PyTorch `.pth` files (torch.save's zip container + pickle) without Python.
//
// Contract:
//  - load_pth(path) reads any file torch.save (PyTorch >= 1.6, zip format, any pickle protocol
//    up to 5) wrote from the constructs checkpoints use, into CPU memory whatever device the
//    file names. Python values map to c10::IValue as follows:
//      dict, collections.OrderedDict -> GenericDict in the file's key order (keys: str, int,
//                                       float, bool; OrderedDict's `_metadata` is dropped)
//      list, set, frozenset -> GenericList;  tuple, torch.Size -> Tuple
//      str -> String;  bytes -> String holding the raw bytes;  int -> Int (int64; larger
//      integers are an error);  float -> Double;  bool -> Bool;  None -> None
//      numpy scalars (numpy.core/_core.multiarray.scalar) -> Int, Double or Bool
//      tensors, nn.Parameter -> Tensor with the saved dtype, sizes, strides, storage offset and
//                               requires_grad; tensors that shared a storage share one again
//      torch.device -> String ("cuda:0");  classes and functions themselves -> String
//                      ("module.name", e.g. a torch.dtype becomes "torch.float32")
//      any other object (argparse.Namespace, ...) -> GenericDict {"__class__": "module.Name",
//                      then its attributes; "__args__" / "__state__" when it was built from
//                      constructor arguments or a non-dict state}
//    Tensor dtypes: float32/64, float16, bfloat16, int64/32/16/8, uint8, bool, complex64/128.
//    Storage records are read in slices over the intra-op threads (at::get_num_threads()) and
//    each record's CRC-32 is verified (except where the file stores 0, as PyTorch >= 2.5 may).
//  - save_pth(path, value) writes `value` atomically (temp file + rename) as a zip-format file,
//    pickle protocol 2, that Python's torch.load (1.6 .. 2.x) opens into the same values:
//    GenericDicts load as dict (a dict whose first key is "__class__" as an instance of that
//    class), Tuples as tuple, Lists as list, Devices as str; tensors keep dtype, sizes, strides,
//    views and storage sharing, and load on the CPU (storages of device tensors are copied to
//    the host one at a time; host tensors are written from their own memory, no copy).
//    Strings that are not UTF-8 are written as bytes.
//  - Errors throw xdino::Error with one line naming the file and the problem: missing file, not a
//    zip, a legacy (pre-1.6) file, a TorchScript archive, a truncated or damaged archive (CRC-32
//    checked), an unsupported pickle opcode or class with its byte offset, a missing storage,
//    a value save_pth cannot express (sparse tensors, custom classes).
#pragma once

#include <ATen/core/ivalue.h>

#include <filesystem>

namespace xdino {

c10::IValue load_pth(const std::filesystem::path& path);

void save_pth(const std::filesystem::path& path, const c10::IValue& value);

}  // namespace xdino
