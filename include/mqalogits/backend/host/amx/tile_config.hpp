// The tile configuration of Intel AMX (palette 1), as LDTILECFG reads it from memory: 8 tile
// registers, each configured with a number of rows (at most 16) and of bytes per row (at most
// 64). Both tile implementations (tile_model.hpp, tile_native.hpp) take this one struct, so the
// configuration a kernel writes is checked by the model exactly as the hardware would load it.
#pragma once

#include <cstdint>

#include "../../../config.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend::amx {

// Palette 1's limits.
inline constexpr int tile_count = 8, max_rows = 16, max_row_bytes = 64;

// The 64-byte memory operand of LDTILECFG: palette, start row, 14 reserved bytes, 16 column
// byte counts (only the first 8 name tiles), 16 row counts (likewise). Everything the palette
// does not use must be zero, or the load faults.
struct alignas(64) tile_config {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};

  // Tile t as `row_count` rows of `row_bytes` bytes.
  constexpr tile_config& shape(int t, int row_count, int row_bytes) {
    rows[t] = static_cast<std::uint8_t>(row_count);
    colsb[t] = static_cast<std::uint16_t>(row_bytes);
    return *this;
  }
};
static_assert(sizeof(tile_config) == 64, "LDTILECFG reads 64 bytes");

// Why LDTILECFG would fault on `c` (#GP), or null when it loads: palette 1 only here, rows and
// bytes within its limits, both zero or both set, unused entries and reserved bytes zero.
constexpr const char* config_fault(const tile_config& c) {
  if (c.palette != 1) return "palette other than 1";
  if (c.start_row != 0) return "start_row not 0";
  for (const std::uint8_t r : c.reserved)
    if (r != 0) return "reserved byte not 0";
  for (int t = 0; t < 16; ++t) {
    if (t >= tile_count && (c.rows[t] != 0 || c.colsb[t] != 0)) return "tile past the eighth";
    if (c.rows[t] > max_rows) return "more than 16 rows";
    if (c.colsb[t] > max_row_bytes) return "more than 64 bytes per row";
    if ((c.rows[t] == 0) != (c.colsb[t] == 0)) return "rows and bytes per row not both set";
  }
  return nullptr;
}

}  // namespace host_backend::amx
MQALOGITS_NAMESPACE_END
