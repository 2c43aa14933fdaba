// The AMX tile vocabulary of the amx ISA's packed matmul (kernels/x86_amx.h): a tile
// configuration and the five tile instructions it uses, so that the kernel is written once over a
// tile type with two implementations:
//   TilesEmu (here)                      plain C++, each instruction's semantics as the pseudo-code of
//                                        Intel's SDM (vol. 2, "TILELOADD", "TDPBSUD", ...) states them;
//                                        runs on any CPU (tests/kernels/test_amx_emu.cpp)
//   TilesHw  (kernels/amx/matmul_pk.cpp) the instructions (_tile_loadconfig, _tile_loadd, ...)
// The tile registers are template arguments: the instructions encode them as immediates.
//
//   config(c)              LDTILECFG: palette 1, 8 tiles of rows[i] <= 16 rows x colsb[i] <= 64 bytes;
//                          zeroes every tile
//   load<T>(p, stride)     TILELOADD: row r of tile T = the colsb[T] bytes at p + r * stride
//   zero<T>()              TILEZERO
//   dpbsud<C, A, B>()      TDPBSUD: C[m][n] += sum over k < colsb[A]/4, i < 4 of
//                          sext(A[m][4k+i]) * zext(B[k][4n+i])   (int32; A signed, B unsigned bytes)
//                          (TilesEmu also has dpbssd, TDPBSSD: B signed too, for tools/amx_variants)
//   store<T>(p, stride)    TILESTORED: the colsb[T] bytes of row r to p + r * stride
//   release()              TILERELEASE: back to the unconfigured state
//
// TilesEmu also records, in `fault`, every use that the hardware refuses with #UD (an unconfigured
// tile unit, a tile beyond the configuration, a TDPBSUD whose shapes disagree or whose registers
// coincide, a bad configuration): the tests check it, so a shape error found here is not a crash
// waiting on the first AMX machine.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ml::k::amx_tiles {

inline constexpr int kTiles = 8, kMaxRows = 16, kMaxColsb = 64;

// The 64-byte memory operand of LDTILECFG (SDM vol. 1, "Tile Configuration").
struct alignas(64) Config {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes per row of tile i (i < 8); 0 with rows 0: tile unused
  uint8_t rows[16] = {};
};
static_assert(sizeof(Config) == 64, "LDTILECFG reads 64 bytes");

struct TilesEmu {
  Config cfg{};
  bool configured = false;
  bool fault = false;
  alignas(64) uint8_t t[kTiles][kMaxRows][kMaxColsb] = {};

  // Configured and in use (rows and colsb both non-zero).
  bool valid(int i) const { return configured && i >= 0 && i < kTiles && cfg.rows[i] && cfg.colsb[i]; }

  void config(const Config& c) {
    bool ok = c.palette == 1;
    for (int i = 0; i < 16; ++i) {
      if (i >= kTiles) ok = ok && !c.rows[i] && !c.colsb[i];
      else ok = ok && c.rows[i] <= kMaxRows && c.colsb[i] <= kMaxColsb && ((c.rows[i] == 0) == (c.colsb[i] == 0));
    }
    for (uint8_t r : c.reserved) ok = ok && r == 0;
    if (!ok) {
      fault = true;
      return;
    }
    cfg = c;
    cfg.start_row = 0;
    configured = true;
    std::memset(t, 0, sizeof t);
  }

  template <int T>
  void load(const void* p, size_t stride) {
    if (!valid(T)) {
      fault = true;
      return;
    }
    const uint8_t* base = static_cast<const uint8_t*>(p);
    std::memset(t[T], 0, sizeof t[T]);  // bytes past colsb and rows past rows read as zero
    for (int r = 0; r < cfg.rows[T]; ++r) std::memcpy(t[T][r], base + (size_t)r * stride, cfg.colsb[T]);
  }

  template <int T>
  void zero() {
    if (!valid(T)) fault = true;
    else std::memset(t[T], 0, sizeof t[T]);
  }

  template <int C, int A, int B>
  void dpbsud() {
    dp<C, A, B, false>();
  }
  template <int C, int A, int B>
  void dpbssd() {
    dp<C, A, B, true>();
  }
  // TDPBSUD (B_signed false) or TDPBSSD.
  template <int C, int A, int B, bool B_signed>
  void dp() {
    const bool ok = valid(C) && valid(A) && valid(B) && C != A && C != B && A != B &&
                    cfg.colsb[C] % 4 == 0 && cfg.colsb[A] % 4 == 0 && cfg.colsb[B] == cfg.colsb[C] &&
                    cfg.rows[A] == cfg.rows[C] && cfg.colsb[A] / 4 == cfg.rows[B];
    if (!ok) {
      fault = true;
      return;
    }
    for (int m = 0; m < cfg.rows[C]; ++m)
      for (int n = 0; n < cfg.colsb[C] / 4; ++n) {
        int32_t c;
        std::memcpy(&c, &t[C][m][4 * n], 4);
        for (int k = 0; k < cfg.colsb[A] / 4; ++k)
          for (int i = 0; i < 4; ++i)  // int32 arithmetic wraps on the hardware; no sum here comes near
            c = (int32_t)((uint32_t)c + (uint32_t)((int32_t)(int8_t)t[A][m][4 * k + i] *
                                                   (B_signed ? (int32_t)(int8_t)t[B][k][4 * n + i] : (int32_t)t[B][k][4 * n + i])));
        std::memcpy(&t[C][m][4 * n], &c, 4);
      }
  }

  template <int T>
  void store(void* p, size_t stride) {
    if (!valid(T)) {
      fault = true;
      return;
    }
    uint8_t* base = static_cast<uint8_t*>(p);
    for (int r = 0; r < cfg.rows[T]; ++r) std::memcpy(base + (size_t)r * stride, t[T][r], cfg.colsb[T]);
  }

  void release() {
    configured = false;
    cfg = Config{};
    std::memset(t, 0, sizeof t);
  }
};

}  // namespace ml::k::amx_tiles
