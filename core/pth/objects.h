// What the Python callables a torch.save pickle names rebuild (part of core/pth; used by the
// unpickler in core/pth/unpickle.cpp).
//
// Contract:
//  - PythonObjects gives REDUCE (call), NEWOBJ/INST/OBJ (instance), BUILD (build) and BINPERSID
//    (persistent) their meaning for the values pth.h lists: tensors and parameters on storages
//    fetched once per key through the StorageLoader (views share them), OrderedDict as a dict
//    (BUILD state dropped), numpy scalars as numbers, bytes, sets, torch.Size, torch.device,
//    and any other class as a GenericDict {"__class__": "module.Name", ...} that BUILD fills
//    with attributes. Callables are identified by their "module.name" string.
//  - Errors throw xdino::Error through XDINO_PICKLE_CHECK, which names the file and the byte
//    offset of the opcode being run (`where` and `op_pos`, owned by the unpickler).
#pragma once

#include <ATen/core/ivalue.h>

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/check.h"
#include "core/ivalue.h"
#include "core/pth/pickle.h"

// Used inside PythonObjects and the unpickler, whose members are named where_ and op_pos_.
#define XDINO_PICKLE_CHECK(cond, ...) \
  XDINO_CHECK(cond, where_, ": pickle opcode at byte ", op_pos_, ": ", __VA_ARGS__)

namespace xdino::pth {

class PythonObjects {
 public:
  PythonObjects(const StorageLoader& loader, const std::string& where, const size_t& op_pos);

  c10::IValue call(const std::string& fn, std::vector<c10::IValue> args);
  c10::IValue instance(const std::string& cls, std::vector<c10::IValue> args, c10::IValue kwargs);
  void build(c10::IValue& target, c10::IValue state);
  c10::IValue persistent(const c10::IValue& pid);

  // Checked accessors and dict insertion shared with the unpickler.
  std::vector<c10::IValue> tuple_items(const c10::IValue& v, const char* what) const;
  std::string name_of(const c10::IValue& v, const char* what) const;
  void set_item(c10::IValue& dict, c10::IValue key, c10::IValue value) const;

 private:
  c10::IValue rebuild_tensor(const std::vector<c10::IValue>& args,
                             std::optional<at::ScalarType> dtype);
  c10::IValue numpy_scalar(const std::vector<c10::IValue>& args);
  std::string latin1_bytes(const std::string& utf8) const;

  const StorageLoader& loader_;
  const std::string& where_;
  const size_t& op_pos_;
  std::unordered_map<std::string, at::Tensor> storages_;
  std::unordered_set<const void*> objects_;  // dicts standing for instances of Python classes
};

}  // namespace xdino::pth
