// How ops run in parallel: each op takes the thread pool it may split its work across (null: the
// caller alone). Ops split work in a fixed way (row ranges in multiples of the pack group,
// attention by token and KV head), and every output element is computed by exactly one thread
// with the same kernel, so results are bit-identical for any thread count.
#pragma once
#include "core/threads.h"

// Ops below this many multiply-adds run on the caller alone: waking workers costs more.
inline constexpr double ML_PARALLEL_MIN_MACS = 262144.0;  // 2^18
