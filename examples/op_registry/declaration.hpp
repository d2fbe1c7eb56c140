// One declaration per op, the single source of its name, arguments, defaults and docstring: the
// Python module's signatures (pybind_def.hpp) and the torch op library's schemas
// (torch_schema.hpp) are generated from it, so an argument is declared once and each surface's
// function must take it (pybind11 refuses at compile time, and torch at load time, a function
// whose arguments differ from the declaration). The checks are the library's call contract,
// shared below both surfaces.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>

namespace mqalogits_bindings {

// The surfaces that take an argument (or offer an op).
enum surface : unsigned { python = 1u, torch = 2u, both = 3u };

// One argument: its name, its torch schema type (aliasing marks included, e.g. "Tensor(a!)?"; a
// custom class as "class:Name"), its default as schema text ("None", "True", "0", "\"column\"";
// empty when required), the surfaces that take it, and the Python default where the schema's
// text means something else in Python (a ScalarType's code reads as the dtype's name there).
struct param {
  const char* name;
  const char* type;
  const char* default_value = "";
  unsigned on = both;
  const char* python_default = nullptr;

  constexpr bool required() const { return default_value[0] == '\0'; }
  constexpr bool taken_on(surface s) const { return (on & s) != 0; }
  constexpr const char* default_on(surface s) const {
    return s == python && python_default != nullptr ? python_default : default_value;
  }
};

// The same argument, taken on surface s only.
constexpr param only_on(surface s, param p) {
  p.on = s;
  return p;
}

using params = std::span<const param>;

// The arguments of some groups a surface takes.
template <std::size_t N>
constexpr std::size_t count_in(const std::array<params, N>& groups, surface s) {
  std::size_t n = 0;
  for (std::size_t g = 0; g < N; ++g)
    for (std::size_t k = 0; k < groups[g].size(); ++k) n += groups[g][k].taken_on(s) ? 1 : 0;
  return n;
}

// An op: its positional arguments, then its keyword-only ones, each in groups several ops share
// (an argument several ops take is declared once), its torch return type and its docstring (its
// parts joined).
struct op_declaration {
  const char* name;
  std::array<params, 4> positional{};
  std::array<params, 6> keywords{};
  const char* returns = "Tensor";
  std::array<const char*, 3> doc{};
  unsigned on = both;

  // The arguments a surface takes, positional first, and how many of them are positional.
  // (Index loops: GCC 12 rejects range-for over a reference template argument's members in
  // constant expressions.)
  constexpr std::size_t count(surface s) const { return positional_count(s) + keyword_count(s); }
  constexpr std::size_t positional_count(surface s) const { return count_in(positional, s); }
  constexpr std::size_t keyword_count(surface s) const { return count_in(keywords, s); }
  // The i-th argument a surface takes.
  constexpr const param& at(surface s, std::size_t i) const {
    for (std::size_t g = 0; g < positional.size(); ++g)
      for (std::size_t k = 0; k < positional[g].size(); ++k)
        if (positional[g][k].taken_on(s) && i-- == 0) return positional[g][k];
    for (std::size_t g = 0; g < keywords.size(); ++g)
      for (std::size_t k = 0; k < keywords[g].size(); ++k)
        if (keywords[g][k].taken_on(s) && i-- == 0) return keywords[g][k];
    throw "no such argument";  // a constant expression never reaches this
  }
  std::string docstring() const {
    std::string text;
    for (const char* part : doc)
      if (part != nullptr) text += part;
    return text;
  }
};

}  // namespace mqalogits_bindings
