// Calls the library's tagless dense kernel (MXFP8 and MXFP4, fp32 logits) on fixed inputs and
// checks it against a float64 reference computed here. Built at -O0 so no call is inlined: if
// two differently built units shared a symbol, the linker would keep one body for both, and one
// unit would report the other's ISA or backend.
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <vector>

#include <mqalogits/neuron.hpp>

#include "unit.hpp"

namespace ml = mqalogits;

namespace {

template <class Format>
bool check_dense(std::ostringstream& why, bool& neuron_ran) {
  constexpr int num_q = 3, heads = 5, num_kv = 40, dim = 128;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> qf(num_q * heads * dim), kf(num_kv * dim), w(num_q * heads);
  for (float& x : qf) x = normal(rng);
  for (float& x : kf) x = normal(rng);
  for (float& x : w) x = normal(rng);
  const auto q = ml::quantize_rows<Format>(std::span<const float>(qf));
  const auto kv = ml::quantize_rows<Format>(std::span<const float>(kf));
  const std::vector<std::int32_t> ks = {0, 5, 17}, ke = {40, 22, 30};
  ml::logits_buffer<float> out(num_q, num_kv);
  ml::neuron_backend::report rep;
  {
    ml::neuron_backend::capture cap(rep);
    ml::fp8_fp4_mqa_logits(
        q.view(), kv.view(), ml::matrix_view<const float>(w.data(), num_q, heads),
        std::span<const std::int32_t>(ks), std::span<const std::int32_t>(ke), 0, out.view());
  }
  neuron_ran = rep.calls > 0;
  std::vector<float> qd(dim), kd(dim);
  for (int r = 0; r < num_q; ++r)
    for (int t = 0; t < num_kv; ++t) {
      const float got = out.view()(r, t);
      if (t < ks[r] || t >= ke[r]) {
        if (!(std::isinf(got) && got < 0)) {
          why << Format::name << " [" << r << "][" << t << "] = " << got << ", expected -inf; ";
          return false;
        }
        continue;
      }
      double exact = 0, mag = 0;
      Format::decode_row(kv.view().row(t), kv.view().scale(t), kd.data());
      for (int h = 0; h < heads; ++h) {
        Format::decode_row(q.view().row(r * heads + h), q.view().scale(r * heads + h), qd.data());
        double dot = 0, abs_dot = 0;
        for (int i = 0; i < dim; ++i) {
          dot += double(qd[i]) * kd[i];
          abs_dot += std::abs(double(qd[i]) * kd[i]);
        }
        exact += std::max(dot, 0.0) * w[r * heads + h];
        mag += std::abs(w[r * heads + h]) * abs_dot;
      }
      if (std::abs(got - exact) > std::ldexp(std::abs(exact), -7) + std::ldexp(mag, -14)) {
        why << Format::name << " [" << r << "][" << t << "] = " << got << ", exact " << exact
            << "; ";
        return false;
      }
    }
  return true;
}

}  // namespace

unit_result ODR_ENTRY() {
  unit_result res;
  res.isa = ml::host_isa_name();
  std::ostringstream why;
  bool neuron8 = false, neuron4 = false;
  res.correct = check_dense<ml::mxfp8>(why, neuron8) && check_dense<ml::mxfp4>(why, neuron4);
  res.backend = neuron8 ? "neuron" : "host";
  if (neuron8 != neuron4) why << "MXFP8 and MXFP4 ran on different backends; ";
  res.detail = why.str();
  return res;
}
