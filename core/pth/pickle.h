// Python pickles <-> c10::IValue, the way torch.save / torch.load use them (part of core/pth;
// used by pth.cpp and its tests).
//
// Contract:
//  - unpickle(bytes, load_storage, where) runs the pickle program in `bytes` (protocols 0-5;
//    the text opcodes of protocol 0 except STRING/PERSID) and returns its value (see pth.h for
//    how Python values map to IValues). Storages are fetched through `load_storage(key, dtype,
//    numel)`, once per key, which returns a 1-D contiguous CPU tensor of `numel` elements
//    spanning the whole storage; tensors built on the same key share it. Errors throw
//    xdino::Error naming `where` and the byte offset of the opcode.
//  - pickle(value, where) writes `value` as protocol 2, as torch.save does: tensors become
//    torch._utils._rebuild_tensor_v2 calls on persistent storage ids ('storage',
//    torch.<Type>Storage, key, 'cpu', numel), one storage per distinct c10::StorageImpl, so views
//    and shared storages survive; the same tensor twice is written once (memo). GenericDicts
//    whose first key is "__class__" ("module.Name") become instances of that class with the
//    other keys as attributes ("__args__" / "__state__", as load_pth produces them, are passed
//    to the constructor / BUILD). Strings that are not UTF-8 are written as bytes.
//    `storages[i].data` is a 1-D contiguous tensor spanning storage `key` on its own device.
#pragma once

#include <ATen/core/ivalue.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace xdino::pth {

using StorageLoader =
    std::function<at::Tensor(const std::string& key, at::ScalarType dtype, int64_t numel)>;

c10::IValue unpickle(std::string_view bytes, const StorageLoader& load_storage,
                     const std::string& where);

struct PickledStorage {
  std::string key;
  at::Tensor data;
};

struct Pickled {
  std::string bytes;
  std::vector<PickledStorage> storages;
};

Pickled pickle(const c10::IValue& value, const std::string& where);

// torch.<Name>Storage class name of a dtype ("FloatStorage"), or "" when torch.save has none;
// and back ("FloatStorage" -> kFloat; "UntypedStorage" -> kByte), nullopt when unknown.
std::string storage_class(at::ScalarType dtype);
std::optional<at::ScalarType> storage_dtype(std::string_view class_name);

}  // namespace xdino::pth
