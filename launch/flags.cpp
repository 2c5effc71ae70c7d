#include "launch/flags.h"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/check.h"
#include "core/paths.h"
#include "core/python_format.h"

namespace po = boost::program_options;

namespace xdino::launch {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Splits INI list values ("0.4 1.0", "0.4,1.0") into tokens; command-line tokens pass through.
std::vector<std::string> split_list(const std::vector<std::string>& tokens) {
  std::vector<std::string> out;
  for (const std::string& t : tokens) {
    std::string cur;
    for (char c : t) {
      if (c == ',' || std::isspace(static_cast<unsigned char>(c))) {
        if (!cur.empty()) out.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    if (!cur.empty()) out.push_back(cur);
  }
  return out;
}

const std::string& single(const std::vector<std::string>& tokens, const std::string& name) {
  XDINO_CHECK_ARG(tokens.size() == 1, "--", name, " takes one value, got ", tokens.size());
  return tokens[0];
}

[[noreturn]] void bad_value(const std::string& name, const std::string& value,
                            const std::string& expected, const std::string& where) {
  XDINO_FAIL_ARG("bad value '", value, "' for --", name, where, ": expected ", expected);
}

double parse_double(const std::string& name, const std::string& s, const std::string& where) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE || std::isnan(v))
    bad_value(name, s, "a number (FLOAT), e.g. 0.0005", where);
  return v;
}

int64_t parse_int(const std::string& name, const std::string& s, const std::string& where) {
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size())
    bad_value(name, s, "an integer (INT)", where);
  return v;
}

bool parse_bool(const std::string& name, const std::string& s, const std::string& where) {
  const std::string v = lower(s);
  if (v == "true" || v == "on" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "off" || v == "0" || v == "no") return false;
  bad_value(name, s, "a boolean (true/false, on/off, 1/0)", where);
}

// config.ini records every effective value (to_ini), and an INI file cannot hold some strings:
// boost's reader ends a value at '#', trims spaces and reads one line. Such a value from the
// command line is refused here rather than recorded as something else (a rerun with that
// config.ini would then write to another --output_dir).
const std::string& recordable(const std::string& name, const std::string& s) {
  const auto bad = [](char c) { return c == '#' || c == '\n' || c == '\r' || c == '\0'; };
  const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  XDINO_CHECK_ARG(std::none_of(s.begin(), s.end(), bad) &&
                      (s.empty() || (!space(s.front()) && !space(s.back()))),
                  "value '", s, "' for --", name,
                  " cannot be recorded in config.ini (no '#', line breaks, or spaces at either "
                  "end): rename it");
  return s;
}

template <typename T, typename Render>
std::string join(const std::vector<T>& v, Render render) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += ' ';
    out += render(v[i]);
  }
  return out;
}

}  // namespace

Flags::Flags(std::string command) : command_(std::move(command)) {}

Flags& Flags::add_flag(Flag flag) {
  XDINO_CHECK(find(flag.name) == nullptr && flag.name != "config" && flag.name != "help", "flag --",
              flag.name, " declared twice in 'dino ", command_, "'");
  flag.group = group_;
  flags_.push_back(std::move(flag));
  return *this;
}

Flags& Flags::group(const std::string& title) {
  group_ = title;
  return *this;
}

std::vector<std::pair<std::string, std::vector<std::string>>> Flags::groups() const {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const Flag& f : flags_) {
    auto it =
        std::find_if(out.begin(), out.end(), [&](const auto& g) { return g.first == f.group; });
    if (it == out.end()) it = out.insert(out.end(), {f.group, {}});
    it->second.push_back(f.name);
  }
  // The ungrouped flags first, whatever their place among the groups.
  std::stable_partition(out.begin(), out.end(), [](const auto& g) { return g.first.empty(); });
  return out;
}

Flags& Flags::alias(const std::string& name, const std::string& of) {
  XDINO_CHECK(find(of) != nullptr && find(name) == nullptr, "alias --", name, " of --", of,
              " in 'dino ", command_, "': --", of, " must be declared and --", name, " not");
  aliases_.emplace_back(name, of);
  return *this;
}

const Flags::Flag* Flags::find(const std::string& name) const {
  for (const Flag& f : flags_)
    if (f.name == name) return &f;
  for (const auto& [alias, of] : aliases_)
    if (alias == name) return find(of);
  return nullptr;
}

bool Flags::takes_value(const std::string& name) const {
  const Flag* flag = find(name);
  return name == "config" || name == "variant" || (flag != nullptr && !flag->bare);
}

// Where the arguments of the command `dino launch` starts begin: at a "--" (skipped by the
// caller) or at the first argument that is neither a --flag nor the value of one.
size_t Flags::trailing_start(const std::vector<std::string>& args) const {
  const auto dashes = std::find(args.begin(), args.end(), "--");
  if (!allow_trailing_) return static_cast<size_t>(dashes - args.begin());
  size_t i = 0;
  while (i < args.size() && args[i] != "--" && args[i].size() > 1 && args[i][0] == '-') {
    const std::string name =
        args[i].substr(std::min(args[i].find_first_not_of('-'), args[i].size()));
    const bool inline_value = name.find('=') != std::string::npos;
    i += !inline_value && takes_value(name) ? 2 : 1;
  }
  return std::min(i, args.size());
}

std::vector<std::string> Flags::names() const {
  std::vector<std::string> out;
  for (const Flag& f : flags_) out.push_back(f.name);
  return out;
}

Flags& Flags::add(const std::string& name, bool* field, const std::string& help) {
  return add_flag(
      {name, help, "BOOL", false,
       [=](const std::vector<std::string>& t) { *field = parse_bool(name, single(t, name), ""); },
       [=] { return std::string(*field ? "true" : "false"); }});
}

Flags& Flags::add_switch(const std::string& name, bool* field, const std::string& help) {
  add(name, field, help);
  flags_.back().bare = true;
  flags_.back().type = "[BOOL]";
  return *this;
}

Flags& Flags::add(const std::string& name, int* field, const std::string& help) {
  return add_flag({name, help, "INT", false,
                   [=](const std::vector<std::string>& t) {
                     const int64_t v = parse_int(name, single(t, name), "");
                     XDINO_CHECK_ARG(v >= INT32_MIN && v <= INT32_MAX, "value ", v, " for --", name,
                                     " is out of range for INT");
                     *field = static_cast<int>(v);
                   },
                   [=] { return std::to_string(*field); }});
}

Flags& Flags::add(const std::string& name, int64_t* field, const std::string& help) {
  return add_flag(
      {name, help, "INT", false,
       [=](const std::vector<std::string>& t) { *field = parse_int(name, single(t, name), ""); },
       [=] { return std::to_string(*field); }});
}

Flags& Flags::add(const std::string& name, double* field, const std::string& help) {
  return add_flag(
      {name, help, "FLOAT", false,
       [=](const std::vector<std::string>& t) { *field = parse_double(name, single(t, name), ""); },
       [=] { return python_repr(*field); }});
}

Flags& Flags::add(const std::string& name, std::string* field, const std::string& help) {
  return add_flag(
      {name, help, "STR", false,
       [=](const std::vector<std::string>& t) { *field = recordable(name, single(t, name)); },
       [=] { return *field; }});
}

Flags& Flags::add(const std::string& name, std::vector<int64_t>* field, const std::string& help) {
  return add_flag({name, help, "INT...", true,
                   [=](const std::vector<std::string>& t) {
                     field->clear();
                     for (const auto& s : t) field->push_back(parse_int(name, s, ""));
                   },
                   [=] { return join(*field, [](int64_t v) { return std::to_string(v); }); }});
}

Flags& Flags::add(const std::string& name, std::vector<double>* field, const std::string& help) {
  return add_flag({name, help, "FLOAT...", true,
                   [=](const std::vector<std::string>& t) {
                     field->clear();
                     for (const auto& s : t) field->push_back(parse_double(name, s, ""));
                   },
                   [=] { return join(*field, python_repr); }});
}

Flags& Flags::add(const std::string& name, std::vector<std::string>* field,
                  const std::string& help) {
  return add_flag({name, help, "STR...", true,
                   [=](const std::vector<std::string>& t) {
                     for (const auto& s : t) recordable(name, s);
                     *field = t;
                   },
                   [=] { return join(*field, [](const std::string& s) { return s; }); }});
}

void Flags::assign(const Flag& flag, const std::vector<std::string>& tokens,
                   const std::string& where) {
  try {
    if (flag.bare && tokens.empty())
      flag.assign({"true"});  // boost leaves a bare implicit-value option's tokens empty
    else
      flag.assign(flag.list ? split_list(tokens) : tokens);
  } catch (const UsageError& e) {
    if (where.empty()) throw;
    // Name the file the bad value came from.
    throw UsageError(std::string(e.what()) + " (in " + where + ")");
  }
  set_by_user_.insert(flag.name);
}

bool Flags::parse(const std::vector<std::string>& all_args) {
  std::vector<std::string> args = all_args;
  const size_t start = trailing_start(args);
  if (start < args.size()) {
    const bool dashes = args[start] == "--";
    XDINO_CHECK_ARG(allow_trailing_, "'dino ", command_, "' takes no arguments after '--'");
    trailing_.assign(args.begin() + static_cast<std::ptrdiff_t>(start + (dashes ? 1 : 0)),
                     args.end());
    args.resize(start);
  }
  // boost would take the next --flag as the value of a flag given bare (`--use_fp16 --lr 1`)
  // and then blame what follows; argparse names the bare flag, and so do we.
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind("--", 0) != 0 || args[i].find('=') != std::string::npos) continue;
    const std::string name = args[i].substr(2);
    const bool value_follows = i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0;
    if (!takes_value(name) || value_follows) continue;
    const Flag* flag = find(name);
    const std::string type = flag != nullptr ? flag->type : "FILE";
    if (type == "BOOL")
      XDINO_FAIL_ARG("--", name, " needs a value: --", name, " true or --", name,
                     " false (as in the official scripts)");
    XDINO_FAIL_ARG("--", name, " needs a value (", type, "): --", name, " VALUE");
  }
  po::options_description desc;
  desc.add_options()("help,h", "")("config", po::value<std::vector<std::string>>(), "")(
      "variant", po::value<std::string>(), "");
  const auto declare = [&](const std::string& name, const Flag& f) {
    if (f.list)
      desc.add_options()(name.c_str(), po::value<std::vector<std::string>>()->multitoken(), "");
    else if (f.bare)
      desc.add_options()(name.c_str(),
                         po::value<std::vector<std::string>>()->implicit_value(
                             std::vector<std::string>{"true"}, "true"),
                         "");
    else
      desc.add_options()(name.c_str(), po::value<std::vector<std::string>>(), "");
  };
  for (const Flag& f : flags_) declare(f.name, f);
  for (const auto& [alias, of] : aliases_) declare(alias, *find(of));

  po::parsed_options cli(&desc);
  try {
    // An empty positional description makes boost throw on a stray argument; without one it
    // returns the argument as an option with no name.
    const po::positional_options_description no_positionals;
    cli =
        po::command_line_parser(args)
            .options(desc)
            .positional(no_positionals)
            .style(po::command_line_style::default_style & ~po::command_line_style::allow_guessing)
            .run();
  } catch (const po::unknown_option& e) {
    std::string name = e.get_option_name();
    while (!name.empty() && name[0] == '-') name.erase(0, 1);
    name = name.substr(0, name.find('='));  // --name=value: the name alone
    XDINO_FAIL_ARG("unknown flag '", name, "' for 'dino ", command_, "' (see 'dino ", command_,
                   " --help')");
  } catch (const po::too_many_positional_options_error&) {
    XDINO_FAIL_ARG("unexpected argument for 'dino ", command_,
                   "': flags take the form --name value (see 'dino ", command_, " --help')");
  } catch (const po::error& e) {
    // main() already opens the line with "dino <command>: error:".
    XDINO_FAIL_ARG(e.what(), " (see 'dino ", command_, " --help')");
  }

  // Highest precedence last: files in the order given, then the command line.
  std::vector<std::pair<std::string, std::vector<std::string>>> cli_values;
  for (const po::option& o : cli.options) {
    if (o.string_key == "help") return false;
    if (o.string_key == "config") {
      for (const auto& v : o.value) config_files_.push_back(v);
      continue;
    }
    if (o.string_key == "variant") {
      variant_ = o.value.at(0);
      continue;
    }
    cli_values.emplace_back(o.string_key, o.value);
  }

  bool found_variant = false;
  for (const std::string& file : config_files_) {
    const std::string problem = file_problem(file);
    XDINO_CHECK_ARG(problem.empty(), "config file '", file, "' ", problem, " (--config)");
    std::ifstream in(file);
    XDINO_CHECK_ARG(in.good(), "cannot read config file '", file, "'");
    po::parsed_options parsed(&desc);
    try {
      parsed = po::parse_config_file(in, desc, /*allow_unregistered=*/true);
    } catch (const po::error& e) {
      XDINO_FAIL_ARG("config file '", file, "': ", e.what());
    }
    // [command:variant] keys apply after everything else in the same file.
    std::vector<std::pair<const Flag*, std::vector<std::string>>> variant_values;
    for (const po::option& o : parsed.options) {
      std::string key = o.string_key;
      const auto dot = key.find('.');
      bool in_variant = false;
      if (dot != std::string::npos) {
        const std::string section = key.substr(0, dot);
        const std::string base = section.substr(0, section.find(':'));
        in_variant = !variant_.empty() && section == command_ + ":" + variant_;
        if (section != command_ && !in_variant) {
          XDINO_CHECK_ARG(other_sections_.count(base) > 0 || base == command_, "unknown section [",
                          section, "] in config file '", file,
                          "': sections name subcommands, optionally as [subcommand:variant]");
          continue;
        }
        found_variant = found_variant || in_variant;
        key = key.substr(dot + 1);
      }
      XDINO_CHECK_ARG(key != "config" && key != "help" && key != "variant", "key '", key,
                      "' is not allowed in config file '", file, "'");
      const Flag* flag = find(key);
      if (flag == nullptr) {
        XDINO_CHECK_ARG(dot == std::string::npos && known_elsewhere_.count(key) > 0,
                        "unknown key '", key, "' in config file '", file, "' for 'dino ", command_,
                        "' (see 'dino ", command_, " --help')");
        continue;
      }
      if (in_variant)
        variant_values.emplace_back(flag, o.value);
      else
        assign(*flag, o.value, "config file '" + file + "'");
    }
    for (const auto& [flag, tokens] : variant_values)
      assign(*flag, tokens, "config file '" + file + "'");
  }
  XDINO_CHECK_ARG(variant_.empty() || found_variant, "--variant ", variant_, ": no [", command_,
                  ":", variant_, "] section in the config files");
  for (const auto& [name, tokens] : cli_values) {
    const Flag* flag = find(name);
    XDINO_CHECK_ARG(flag != nullptr, "unexpected argument '", name, "' for 'dino ", command_,
                    "' (see 'dino ", command_, " --help')");
    assign(*flag, tokens, "");
  }
  return true;
}

std::string Flags::value(const std::string& name) const {
  const Flag* flag = find(name);
  XDINO_CHECK(flag != nullptr, "'dino ", command_, "' has no flag --", name);
  return flag->render();
}

void Flags::print_help(std::ostream& os, const std::string& summary) const {
  os << "usage: dino " << command_ << " [--config FILE.ini]... [--flag value]...\n\n"
     << summary << "\n\n"
     << "Flags (an INI file given with --config may set any of them; the command line wins):\n";
  for (const auto& [title, names] : groups()) {
    if (!title.empty()) os << "\n" << title << ":\n";
    for (const std::string& name : names) {
      const Flag& f = *find(name);
      std::string head = "  --" + f.name + " " + f.type;
      if (head.size() < 36)
        head.resize(36, ' ');
      else
        head += "\n" + std::string(36, ' ');
      const std::string def = f.render();
      os << head << f.help << " [default: " << (def.empty() ? "\"\"" : def) << "]\n";
      for (const auto& [alias, of] : aliases_) {
        if (of != f.name) continue;
        std::string line = "  --" + alias + " " + f.type;
        line.resize(std::max<size_t>(line.size() + 1, 36), ' ');
        os << line << "same as --" << f.name << "\n";
      }
    }
  }
  os << "\n  --config FILE.ini                 read flags from an INI file (repeatable; later "
        "files win)\n"
     << "  --variant NAME                    also apply the files' [" << command_
     << ":NAME] sections\n"
     << "  --help                            show this help\n";
}

std::string Flags::to_ini() const {
  std::ostringstream os;
  os << "# Effective configuration of 'dino " << command_ << "'. Rerun with: dino " << command_
     << " --config config.ini\n";
  os << "[" << command_ << "]\n";
  for (const Flag& f : flags_) os << f.name << " = " << f.render() << "\n";
  return os.str();
}

}  // namespace xdino::launch
