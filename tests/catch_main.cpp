// The Catch2 main, alone in its translation unit because it takes about 20 s to compile.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
