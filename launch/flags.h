// Typed command-line and INI flags for one subcommand, on Boost.Program_options.
//
// Contract:
//  - add(name, &field, help) binds --name to `field`; the field's current value is the default
//    (so defaults live in the library's option structs, next to the code that uses them).
//    Supported field types: bool, int, int64_t, double, std::string and std::vector of
//    int64_t, double or std::string (lists take several tokens on the command line, or one
//    "a b c" / "a,b,c" value in an INI file).
//  - parse(args) reads the command line and every --config FILE (repeatable). Precedence:
//    command line > last --config > ... > first --config > defaults.
//  - INI files: `key = value`; keys before any section apply to every subcommand that has them
//    (a key no subcommand knows is an error); keys in [name] apply only to subcommand `name`;
//    keys in [name:variant] apply on top of those when --variant variant is given (how one
//    file describes several runs of one subcommand, e.g. [knn:pixels] and [knn:dino]).
//  - `--name value` and `--name=value` are the same. A flag that takes a value given without
//    one (at the end, or followed by another --flag) is refused naming that flag, as argparse
//    refuses it, never by taking the next flag as its value.
//  - Unknown flags/keys, bad values and missing files throw xdino::UsageError with one line
//    naming the flag and what is expected (exit code 2 in main).
//  - to_ini() renders the effective configuration, which parse() can read back unchanged.
//  - group(title) puts the flags added after it under `title` in --help, as marian's option
//    groups do (main_dino.py's argparse groups for `dino train`); flags added before any group
//    are listed first, under "Flags". groups() lists every flag by its group, for tests.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace xdino::launch {

class Flags {
 public:
  explicit Flags(std::string command);

  Flags& add(const std::string& name, bool* field, const std::string& help);
  // A boolean that may be given bare, like argparse's store_true (`--evaluate`); an explicit
  // value needs the `=` form on the command line (`--evaluate=false`), INI files as usual.
  Flags& add_switch(const std::string& name, bool* field, const std::string& help);
  Flags& add(const std::string& name, int* field, const std::string& help);
  Flags& add(const std::string& name, int64_t* field, const std::string& help);
  Flags& add(const std::string& name, double* field, const std::string& help);
  Flags& add(const std::string& name, std::string* field, const std::string& help);
  Flags& add(const std::string& name, std::vector<int64_t>* field, const std::string& help);
  Flags& add(const std::string& name, std::vector<double>* field, const std::string& help);
  Flags& add(const std::string& name, std::vector<std::string>* field, const std::string& help);
  // The flags added from now on are listed under `title` in --help.
  Flags& group(const std::string& title);
  // (title, the flags of that group in declaration order), in the order of the first flag of
  // each group; "" is the flags added before any group.
  std::vector<std::pair<std::string, std::vector<std::string>>> groups() const;
  // Another spelling of the declared flag `of` (torchrun's --nproc_per_node for --nproc): the
  // same field, listed once in the help, never written by to_ini().
  Flags& alias(const std::string& name, const std::string& of);

  // Keys of other subcommands: an INI key outside any section is only an error if it is
  // unknown to every subcommand.
  void set_known_elsewhere(std::set<std::string> keys) { known_elsewhere_ = std::move(keys); }
  // Section names that belong to other subcommands (skipped, not errors).
  void set_other_sections(std::set<std::string> names) { other_sections_ = std::move(names); }

  // Parses the arguments after the subcommand name. Returns false if --help was given.
  bool parse(const std::vector<std::string>& args);

  // Lets the arguments after a bare "--", or from the first argument that is neither a flag
  // nor a flag's value, through untouched (the command `dino launch` starts, as torchrun takes
  // its script); without this call they are an error.
  void allow_trailing() { allow_trailing_ = true; }
  const std::vector<std::string>& trailing() const { return trailing_; }

  bool is_set(const std::string& name) const { return set_by_user_.count(name) > 0; }
  bool has(const std::string& name) const { return find(name) != nullptr; }
  // The current value of --name as it would be written to config.ini.
  std::string value(const std::string& name) const;
  const std::string& variant() const { return variant_; }
  const std::string& command() const { return command_; }
  std::vector<std::string> names() const;
  const std::vector<std::string>& config_files() const { return config_files_; }

  void print_help(std::ostream& os, const std::string& summary) const;
  std::string to_ini() const;

 private:
  struct Flag {
    std::string name;
    std::string help;
    std::string type;  // shown in help and in error messages: "FLOAT", "INT", "BOOL", ...
    bool list = false;
    std::function<void(const std::vector<std::string>&)> assign;
    std::function<std::string()> render;
    bool bare = false;       // may appear without a value (add_switch)
    std::string group = "";  // its --help heading ("": none)
  };
  Flags& add_flag(Flag flag);
  const Flag* find(const std::string& name) const;  // a declared name or an alias
  bool takes_value(const std::string& name) const;
  size_t trailing_start(const std::vector<std::string>& args) const;
  void assign(const Flag& flag, const std::vector<std::string>& tokens, const std::string& where);

  std::string command_;
  std::vector<Flag> flags_;
  std::vector<std::pair<std::string, std::string>> aliases_;  // (alias, declared name)
  std::set<std::string> known_elsewhere_;
  std::set<std::string> other_sections_;
  std::set<std::string> set_by_user_;
  std::vector<std::string> config_files_;
  std::string variant_;
  std::string group_;  // of the flags added next
  bool allow_trailing_ = false;
  std::vector<std::string> trailing_;
};

}  // namespace xdino::launch
