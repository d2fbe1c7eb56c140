// Eigen interop (optional: the only header of mqalogits that includes Eigen). Row-major Eigen
// matrices, Maps and Refs become the matrix_views the kernels take (weights, logits, block
// tables, indices), contiguous vectors become std::spans (ks, ke, context lengths):
//
//   using RowF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
//   Eigen::Map<const RowF> w(weights, num_q, H);
//   Eigen::VectorXi ks = ..., ke = ...;
//   RowF logits(num_q, max_seqlen_k);
//   ml::fp8_fp4_mqa_logits(q, kv, ml::as_matrix_view(w), ml::as_span(ks), ml::as_span(ke),
//                          max_seqlen_k, ml::as_matrix_view(logits));
//
// Nothing is copied: the views alias the Eigen storage. Read-only expressions (const objects,
// Map<const ...>, Ref<const ...>) give views of const elements.
#pragma once

// Eigen is a third-party header: its own warnings under a consumer's strict flags (old-style
// casts, sign conversions, ...) are not the consumer's to fix, so it is read as a system header
// would be, whether it was found with -isystem or with a plain -I.
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wsign-conversion"
#pragma GCC diagnostic ignored "-Wold-style-cast"
#pragma GCC diagnostic ignored "-Wdouble-promotion"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-variable"
#pragma GCC diagnostic ignored "-Wdeprecated-copy"
#endif
#include <Eigen/Core>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#include <cstdint>
#include <span>
#include <type_traits>

#include "../config.hpp"
#include "../error.hpp"
#include "../view/matrix_view.hpp"

MQALOGITS_NAMESPACE_BEGIN

namespace detail {
// Eigen objects with direct access to their storage (Matrix, Map, Ref, Block of those).
template <class E>
concept eigen_direct =
    std::is_base_of_v<Eigen::DenseBase<std::remove_cvref_t<E>>, std::remove_cvref_t<E>> &&
    requires(E& e) {
  e.data();
  e.innerStride();
  e.outerStride();
};
}  // namespace detail

// A row-major Eigen matrix (or a column vector, as [n, 1]) as a matrix_view over its storage.
template <class E>
requires detail::eigen_direct<E>
auto as_matrix_view(E&& m) {
  using D = std::remove_cvref_t<E>;
  using T = std::remove_pointer_t<decltype(m.data())>;  // const T for read-only expressions
  static_assert(D::IsRowMajor || D::ColsAtCompileTime == 1,
                "mqalogits: as_matrix_view needs a row-major matrix (Eigen::RowMajor) or a "
                "column vector");
  detail::require(m.innerStride() == 1, "as_matrix_view", [&](auto& msg) {
    msg << "the Eigen matrix has inner stride " << static_cast<std::int64_t>(m.innerStride())
        << "; rows must be contiguous";
  });
  const std::int64_t rows = m.rows(), cols = m.cols();
  const std::int64_t stride = D::IsRowMajor ? static_cast<std::int64_t>(m.outerStride()) : 1;
  return matrix_view<T>(m.data(), rows, cols, stride < cols ? cols : stride);
}

// A contiguous Eigen vector (VectorXi, a Map of int32, a row of a row-major matrix) as a span.
template <class E>
requires detail::eigen_direct<E>
auto as_span(E&& v) {
  using D = std::remove_cvref_t<E>;
  using T = std::remove_pointer_t<decltype(v.data())>;
  static_assert(D::IsVectorAtCompileTime, "mqalogits: as_span needs an Eigen vector");
  detail::require(v.size() <= 1 || v.innerStride() == 1, "as_span", [&](auto& msg) {
    msg << "the Eigen vector has inner stride " << static_cast<std::int64_t>(v.innerStride())
        << "; it must be contiguous";
  });
  return std::span<T>(v.data(), static_cast<std::size_t>(v.size()));
}

MQALOGITS_NAMESPACE_END
