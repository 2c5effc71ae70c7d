// Small helpers to build and read the c10::IValue trees that .pth files hold (dicts with
// string keys, lists, numbers, tensors), for checkpoints and optimiser state.
//
// Contract: make_dict() / make_int_dict() create dicts with string / int keys and any values;
// get(d, key, what) returns the value or throws xdino::Error naming `what` and the key;
// find() returns nullptr when absent. as_double / as_int accept Python ints, floats, bools and
// one-element tensors (torch >= 1.12 writes optimiser steps as tensors), else throw.
#pragma once

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>

#include <string>

namespace xdino::ssl {

using IDict = c10::impl::GenericDict;

IDict make_dict();
IDict make_int_dict();
c10::impl::GenericList make_list();

const c10::IValue* find(const IDict& d, const std::string& key);
const c10::IValue& get(const IDict& d, const std::string& key, const std::string& what);
IDict as_dict(const c10::IValue& v, const std::string& what);
double as_double(const c10::IValue& v, const std::string& what);
int64_t as_int(const c10::IValue& v, const std::string& what);

}  // namespace xdino::ssl
