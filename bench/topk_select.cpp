// The selection steps under the fused top-k, alone, on the candidates of one prefill row: 8192
// Gaussian scores (what a row of logits looks like to the selection), k = 512 and 2048. Per
// compiled host ISA where the step is per ISA (admission, the cuts), so one run shows what the
// vector paths save. The fused top-k's cost over the logits kernel is the sum of these per row
// (topk/paired/... measures that whole): admit every score, cut to at least k, sort, write.
//   selection/admit/<isa>            8192 scores into an empty buffer (nothing rejected)
//   selection/keep_at_least/<isa>/k  8192 keys cut to at least their k best
//   selection/keep_best/<isa>/k      8192 keys cut to exactly their k best
//   selection/sort/k                 what keep_at_least kept, sorted (ISA-independent)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <mqalogits/mqalogits.hpp>

namespace {

namespace ml = mqalogits;
namespace hb = mqalogits::host_backend;
using ml::detail::topk_key;

constexpr std::int64_t columns = 8192;
constexpr int rows = 64;  // distinct rows, cycled: the cuts depend on the data

const std::vector<float>& scores() {
  static const std::vector<float> s = [] {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(10.f, 3.f);
    std::vector<float> v(static_cast<std::size_t>(rows * columns));
    for (float& x : v) x = normal(rng);
    return v;
  }();
  return s;
}

std::vector<std::uint64_t> keys_of_row(int r) {
  std::vector<std::uint64_t> k(static_cast<std::size_t>(columns));
  const float* s = scores().data() + std::int64_t{r} * columns;
  for (std::int64_t c = 0; c < columns; ++c)
    k[static_cast<std::size_t>(c)] = topk_key::make(s[c], c);
  return k;
}

const std::vector<std::vector<std::uint64_t>>& all_keys() {
  static const auto v = [] {
    std::vector<std::vector<std::uint64_t>> out;
    for (int r = 0; r < rows; ++r) out.push_back(keys_of_row(r));
    return out;
  }();
  return v;
}

template <class I>
void admit(benchmark::State& st) {
  const std::vector<unsigned char> valid(static_cast<std::size_t>(columns), 1);
  std::vector<std::uint64_t> out(static_cast<std::size_t>(columns));
  int r = 0;
  for (auto _ : st) {
    const float* s = scores().data() + std::int64_t{r} * columns;
    r = (r + 1) % rows;
    benchmark::DoNotOptimize(I::admit_keys(s, valid.data(), columns, 0, 0,
                                           -std::numeric_limits<float>::infinity(), out.data()));
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(st.iterations() * columns);
}

// Each iteration copies a row's keys into the buffer first (the cuts work in place); the copy
// is a small part (8192 keys from L2).
template <class Cut>
void cut(benchmark::State& st, Cut c) {
  std::vector<std::uint64_t> buf(static_cast<std::size_t>(columns));
  int r = 0;
  for (auto _ : st) {
    const auto& k = all_keys()[static_cast<std::size_t>(r)];
    r = (r + 1) % rows;
    std::copy(k.begin(), k.end(), buf.begin());
    benchmark::DoNotOptimize(c(buf.data(), st.range(0)));
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(st.iterations() * columns);
}

void sort_kept(benchmark::State& st) {
  // The inputs: what keep_at_least keeps of each row.
  std::vector<std::vector<std::uint64_t>> kept;
  for (const auto& k : all_keys()) {
    std::vector<std::uint64_t> v = k;
    v.resize(
        static_cast<std::size_t>(ml::detail::keep_at_least(v.data(), columns, st.range(0)).count));
    kept.push_back(std::move(v));
  }
  std::vector<std::uint64_t> buf(static_cast<std::size_t>(columns)), tmp(buf.size());
  std::int64_t sorted = 0;
  int r = 0;
  for (auto _ : st) {
    const auto& k = kept[static_cast<std::size_t>(r)];
    r = (r + 1) % rows;
    std::copy(k.begin(), k.end(), buf.begin());
    ml::detail::sort_descending(buf.data(), static_cast<std::int64_t>(k.size()), tmp.data());
    benchmark::ClobberMemory();
    sorted += static_cast<std::int64_t>(k.size());
  }
  st.counters["keys_per_row"] = static_cast<double>(sorted) / static_cast<double>(st.iterations());
  st.SetItemsProcessed(sorted);
}

template <class I>
void register_isa() {
  const std::string isa = I::name;
  benchmark::RegisterBenchmark(("selection/admit/" + isa).c_str(), admit<I>);
  benchmark::RegisterBenchmark(("selection/keep_at_least/" + isa).c_str(),
                               [](benchmark::State& st) {
                                 cut(st, [](std::uint64_t* k, std::int64_t n) {
                                   return ml::detail::keep_at_least<I>(k, columns, n).count;
                                 });
                               })
      ->ArgName("k")
      ->Arg(512)
      ->Arg(2048);
  benchmark::RegisterBenchmark(("selection/keep_best/" + isa).c_str(),
                               [](benchmark::State& st) {
                                 cut(st, [](std::uint64_t* k, std::int64_t n) {
                                   return ml::detail::keep_best<I>(k, columns, n);
                                 });
                               })
      ->ArgName("k")
      ->Arg(512)
      ->Arg(2048);
}

const bool registered = [] {
  std::apply([](auto... isa) { (register_isa<decltype(isa)>(), ...); }, hb::compiled_isas{});
  benchmark::RegisterBenchmark("selection/sort", sort_kept)->ArgName("k")->Arg(512)->Arg(2048);
  return true;
}();

}  // namespace
