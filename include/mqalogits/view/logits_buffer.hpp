// The logits output: a matrix view whose row stride is aligned, and a small owning buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include "../config.hpp"
#include "../error.hpp"
#include "../format/bf16.hpp"
#include "matrix_view.hpp"

MQALOGITS_NAMESPACE_BEGIN

// Row stride in elements for `cols` columns with rows aligned to `alignment_bytes` (512 by
// default as DeepGEMM-Ascend, 1024 upstream). cols >= 0, alignment_bytes >= 1 and a multiple of
// sizeof(T), and a stride that fits in int64; else mqalogits::error.
template <class T>
constexpr std::int64_t logits_row_stride(std::int64_t cols, std::int64_t alignment_bytes = 512) {
  constexpr auto size = static_cast<std::int64_t>(sizeof(T));
  constexpr const char* where = "logits_row_stride";
  if (cols < 0)
    detail::require(false, where, [&](auto& m) { m << "cols = " << cols << " is negative"; });
  if (alignment_bytes < 1 || alignment_bytes % size != 0)
    detail::require(false, where, [&](auto& m) {
      m << "alignment_bytes = " << alignment_bytes << " is not a positive multiple of the " << size
        << "-byte element";
    });
  const std::int64_t per = alignment_bytes / size;
  if (per > 1 && cols > INT64_MAX - (per - 1))
    detail::require(false, where, [&](auto& m) {
      m << "cols = " << cols << " rounded up to a multiple of " << per
        << " elements overflows int64";
    });
  return per <= 1 ? cols : (cols + (per - 1)) / per * per;
}

template <class T>
using logits_view = matrix_view<T>;

// Owns [rows, stride] elements, the allocation and every row aligned to `alignment_bytes`.
template <class T>
class logits_buffer {
 public:
  static constexpr std::int64_t max_alignment = std::int64_t{1} << 21;  // a 2 MiB huge page

  logits_buffer() = default;
  // rows, cols >= 0; alignment_bytes a power of two up to max_alignment; the size in bytes must
  // fit in int64. Else mqalogits::error, before allocating; an allocation the system refuses is
  // std::bad_alloc.
  logits_buffer(std::int64_t rows, std::int64_t cols, std::int64_t alignment_bytes = 512)
      : rows_(rows), cols_(cols), stride_(checked_stride(rows, cols, alignment_bytes)) {
    const std::size_t align = alignment_bytes < static_cast<std::int64_t>(alignof(T))
                                  ? alignof(T)
                                  : static_cast<std::size_t>(alignment_bytes);
    const std::size_t bytes = static_cast<std::size_t>(rows_ * stride_) * sizeof(T);
    if (bytes) {
      storage_.reset(static_cast<T*>(::operator new (bytes, std::align_val_t{align})));
      storage_.get_deleter().align = align;
      for (std::size_t i = 0; i < bytes / sizeof(T); ++i) new (storage_.get() + i) T{};
    }
  }

  logits_view<T> view() { return {storage_.get(), rows_, cols_, stride_}; }
  logits_view<const T> view() const { return {storage_.get(), rows_, cols_, stride_}; }
  T* data() { return storage_.get(); }
  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t stride() const { return stride_; }
  T& operator()(std::int64_t r, std::int64_t c) { return storage_.get()[r * stride_ + c]; }
  const T& operator()(std::int64_t r, std::int64_t c) const {
    return storage_.get()[r * stride_ + c];
  }

 private:
  static std::int64_t checked_stride(std::int64_t rows, std::int64_t cols, std::int64_t align) {
    constexpr const char* where = "logits_buffer";
    detail::require(rows >= 0 && cols >= 0, where,
                    [&](auto& m) { m << "shape [" << rows << ", " << cols << "] is negative"; });
    detail::require(
        align >= 1 && align <= max_alignment && (align & (align - 1)) == 0, where, [&](auto& m) {
          m << "alignment " << align << " is not a power of two in [1, " << max_alignment << "]";
        });
    // The padded stride and the byte size, without overflow.
    const std::int64_t per = align / static_cast<std::int64_t>(sizeof(T));
    std::int64_t stride = cols, bytes = 0;
    bool fits = true;
    if (per > 1) {
      fits = cols <= INT64_MAX - (per - 1);
      if (fits) stride = (cols + (per - 1)) / per * per;
    }
    fits = fits && !__builtin_mul_overflow(rows, stride, &bytes) &&
           !__builtin_mul_overflow(bytes, static_cast<std::int64_t>(sizeof(T)), &bytes);
    detail::require(fits, where, [&](auto& m) {
      m << "[" << rows << ", " << cols << "] with alignment " << align << " overflows int64 bytes";
    });
    return stride;
  }

  struct aligned_delete {
    std::size_t align = alignof(T);
    void operator()(T* p) const { ::operator delete (p, std::align_val_t{align}); }
  };
  std::unique_ptr<T, aligned_delete> storage_;
  std::int64_t rows_ = 0, cols_ = 0, stride_ = 0;
};

MQALOGITS_NAMESPACE_END
