// The one place for building and reading the c10::IValue trees that .pth files hold (dicts,
// lists, tuples, numbers, tensors): the pickler/unpickler (core/pth/), checkpoints, optimiser
// and scaler state, linear-probe checkpoints.
//
// Contract: make_dict() / make_int_dict() create dicts with string / int keys and any values,
// make_any_dict() one with keys of any type (what an unpickled Python dict is); make_list()
// and make_tuple() hold values of any type;
// get(d, key, what) returns the value or throws xdino::Error naming `what` and the key;
// find() returns nullptr when absent. as_double / as_int accept Python ints, floats, bools and
// one-element tensors (torch >= 1.12 writes optimiser steps as tensors), else throw.
#pragma once

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

namespace xdino {

using IDict = c10::impl::GenericDict;

IDict make_dict();
IDict make_int_dict();
IDict make_any_dict();
c10::impl::GenericList make_list();
c10::IValue make_tuple(std::vector<c10::IValue> items);

// GCC 14's -Wdangling-reference takes the reference a call returns for one into any temporary
// argument (a `what` built in the call); get()'s points into `d`, which the caller holds.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 14
#define XDINO_REFERS_TO_ARGUMENT [[gnu::no_dangling]]
#else
#define XDINO_REFERS_TO_ARGUMENT
#endif

const c10::IValue* find(const IDict& d, const std::string& key);
XDINO_REFERS_TO_ARGUMENT const c10::IValue& get(const IDict& d, const std::string& key,
                                                const std::string& what);
IDict as_dict(const c10::IValue& v, const std::string& what);
double as_double(const c10::IValue& v, const std::string& what);
int64_t as_int(const c10::IValue& v, const std::string& what);

}  // namespace xdino
