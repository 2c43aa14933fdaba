// ml_exec_time_matrices: the matrix products of one decode step alone (behind ml_bench
// --probe-mb's "matrices alone" line). The bytes it reports are the weights a token reads,
// computed here from the model's shape (every matrix once; tests/archs covers tied classifiers and
// the other architectures), with the scales as the kernels read them (f32 where packing widens f16
// ones); the same for any thread count. A call overwrites only the
// executor's scratch: a session fed before and after one gets the logits of a session fed
// without it, byte for byte.
#include <vector>

#include "api/api_fixture.h"

namespace {

// Weight bytes of one decode step of a random model: quants (1 or 1/2 byte each) and one scale per
// 32 weights (f16 or f32) of every layer's seven matrices and of the classifier.
double expected_bytes(const ml_model_info& i, int wtype, bool scales_f16) {
  const double dim = i.dim, hidden = i.hidden_dim, q = (double)i.n_heads * i.head_dim,
               kv = (double)i.n_kv_heads * i.head_dim;
  const double layer = q * dim + 2 * kv * dim + dim * q + 3 * hidden * dim;  // wq, wk + wv, wo, w1 + w2 + w3
  const double weights = layer * i.n_layers + (double)i.vocab_size * dim;
  return weights * ((wtype == ML_DT_Q4 ? 0.5 : 1.0) + (scales_f16 ? 2.0 : 4.0) / 32);
}

// The fixture's random model with 3 layers of dim 128 (hidden 224) and 160 ids, with f16 or f32
// scales.
std::string model_with_scales(const std::string& name, int wtype, bool f16) {
  return api::random_model(name, wtype, 128, 2, 3, 160, 64, f16);
}

}  // namespace

TEST_CASE("time_matrices: reads every weight of a decode step once, packed or not, on any thread count",
          "[api][time_matrices]") {
  for (const int wtype : {ML_DT_Q8, ML_DT_Q4})
    for (const bool f16 : {false, true}) {
      const std::string path = model_with_scales(std::string("tm_") + (wtype == ML_DT_Q8 ? "q8" : "q4") +
                                                     (f16 ? "_f16" : "_f32"), wtype, f16);
      for (const int no_pack : {0, 1}) {
        ml_model_params mp{};
        mp.no_pack = no_pack;
        api::model m(path, &mp);
        const ml_model_info info = ml_model_get_info(m.m);
        for (const int threads : {1, 3}) {
          CAPTURE(wtype, f16, no_pack, threads);
          api::exec ex(m.m, threads, 4);
          double seconds = -1, bytes = -1;
          ml_error err;
          REQUIRE(ml_exec_time_matrices(ex.e, &seconds, &bytes, &err) == ML_OK);
          CHECK(seconds > 0);
          if (!info.packed) {
            CHECK(bytes == expected_bytes(info, wtype, f16));
          } else {
            // Packing keeps f16 scales where the ISA's kernels widen them on the fly and stores
            // them as f32 elsewhere (sse2, sse41): the bytes are one of the two, and the packed
            // region is those bytes plus under 64 bytes of alignment after each matrix's quants
            // and scales.
            CHECK((bytes == expected_bytes(info, wtype, f16) || (f16 && bytes == expected_bytes(info, wtype, false))));
            const double matrices = 7.0 * info.n_layers + 1;
            CHECK(bytes <= (double)info.packed_bytes);
            CHECK((double)info.packed_bytes - bytes < 2 * 64 * matrices);
          }
        }
      }
    }
}

TEST_CASE("time_matrices: a session fed across a call gets the logits of one fed without it", "[api][time_matrices]") {
  const std::string path = model_with_scales("tm_session", ML_DT_Q4, true);
  api::model m(path);
  const std::vector<int32_t> ids = {1, 17, 42, 5, 99, 23, 64, 8};
  const std::vector<std::vector<float>> solo = api::solo_logits(m.m, ids, ML_KV_F16);
  for (const int threads : {1, 2}) {
    CAPTURE(threads);
    api::exec ex(m.m, threads, 4);
    api::session s(m.m, ML_KV_F16);
    ml_error err;
    const int vocab = ml_model_get_info(m.m).vocab_size;
    for (size_t i = 0; i < ids.size(); ++i) {
      REQUIRE(ml_session_feed(ex.e, s.s, &ids[i], 1, &err) == ML_OK);
      const float* l = ml_session_logits(s.s);
      CAPTURE(i);
      CHECK(std::vector<float>(l, l + vocab) == solo[i]);
      double seconds, bytes;
      REQUIRE(ml_exec_time_matrices(ex.e, &seconds, &bytes, &err) == ML_OK);
    }
  }
}

TEST_CASE("time_matrices: a null argument is refused", "[api][time_matrices]") {
  const std::string path = model_with_scales("tm_null", ML_DT_Q8, false);
  api::model m(path);
  api::exec ex(m.m, 1, 1);
  double v;
  ml_error err;
  CHECK(ml_exec_time_matrices(nullptr, &v, &v, &err) == ML_E_ARG);
  CHECK(ml_exec_time_matrices(ex.e, nullptr, &v, &err) == ML_E_ARG);
  CHECK(ml_exec_time_matrices(ex.e, &v, nullptr, &err) == ML_E_ARG);
}
