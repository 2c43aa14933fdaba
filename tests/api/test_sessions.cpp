// Sessions sharing one model and one executor (krafla.h): tokens of two to eight sessions,
// interleaved in one batch in random orders and sizes, give every session exactly the logits it
// gets alone -- byte for byte, for every thread count, step size, weight and KV type -- and
// truncate-and-continue equals a fresh run. The oracle is the same session fed alone, one token
// per step, on one thread (itself checked against tools/ref_forward by the e2e tests).
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "api/api_fixture.h"


TEST_CASE("sessions: interleaved in one batch, each session's logits equal its solo run byte for byte",
          "[api][sessions]") {
  const int wtype = GENERATE(ML_DT_Q8, ML_DT_Q4);
  const int kv = GENERATE(ML_KV_F32, ML_KV_Q8, ML_KV_F16);
  const std::string path = api::random_model(wtype == ML_DT_Q8 ? "s8" : "s4", wtype);
  api::model m(path);
  const int vocab = ml_model_get_info(m.m).vocab_size;
  std::mt19937 rng(1234u + (unsigned)wtype * 7 + (unsigned)kv);

  // (sessions, threads, tokens per step): every count of each appears, in mixed combinations
  // (all 27 would multiply the run time under qemu without testing anything new).
  struct combo {
    int sessions, threads, step;
  };
  const combo combos[] = {{2, 1, 128}, {2, 3, 1}, {3, 2, 7}, {3, 1, 1}, {8, 1, 7}, {8, 2, 128}, {8, 3, 1}};
  int prepared = 0;
  std::vector<std::vector<int32_t>> seqs;
  std::vector<std::vector<std::vector<float>>> solo;
  for (const combo& cmb : combos) {
    const int n_sessions = cmb.sessions, threads = cmb.threads, step = cmb.step;
    // Each session's whole sequence, and its solo logits at every position (made once per
    // session count, for up to 8 sessions).
    if (prepared != n_sessions) {
      seqs.assign((size_t)n_sessions, {});
      solo.assign((size_t)n_sessions, {});
      for (int s = 0; s < n_sessions; ++s) {
        const int len = 20 + (int)(rng() % 60);  // crosses the attention's 64-position blocks
        seqs[(size_t)s].push_back(1);
        for (int i = 1; i < len; ++i) seqs[(size_t)s].push_back(3 + (int32_t)(rng() % (unsigned)(vocab - 3)));
        solo[(size_t)s] = api::solo_logits(m.m, seqs[(size_t)s], kv);
      }
      prepared = n_sessions;
    }
    {
      {
        CAPTURE(n_sessions, threads, step, wtype, kv);
        api::exec ex(m.m, threads, step);
        std::vector<std::unique_ptr<api::session>> ss;
        for (int s = 0; s < n_sessions; ++s) ss.push_back(std::make_unique<api::session>(m.m, kv));
        // The batch: tokens of random sessions in random runs, every one asking for logits.
        std::vector<size_t> next((size_t)n_sessions, 0);
        std::vector<ml_batch_token> all;
        std::vector<std::pair<int, int>> where;  // (session, position) of each batch token
        for (;;) {
          std::vector<int> open;
          for (int s = 0; s < n_sessions; ++s)
            if (next[(size_t)s] < seqs[(size_t)s].size()) open.push_back(s);
          if (open.empty()) break;
          const int s = open[rng() % open.size()];
          const size_t run = 1 + rng() % 9;
          for (size_t r = 0; r < run && next[(size_t)s] < seqs[(size_t)s].size(); ++r) {
            all.push_back({ss[(size_t)s]->s, seqs[(size_t)s][next[(size_t)s]], 1});
            where.emplace_back(s, (int)next[(size_t)s]++);
          }
        }
        // Fed in calls of random sizes (each cut again into steps of the executor's batch).
        size_t mismatches = 0, checked = 0;
        struct ctx_t {
          const std::vector<std::pair<int, int>>* where;
          const std::vector<std::vector<std::vector<float>>>* solo;
          size_t base;
          int vocab;
          size_t* mismatches;
          size_t* checked;
        };
        for (size_t i = 0; i < all.size();) {
          const size_t len = std::min(all.size() - i, (size_t)(1 + rng() % 40));
          ctx_t c{&where, &solo, i, vocab, &mismatches, &checked};
          auto cb = [](void* user, size_t idx, const float* l) {
            auto* x = static_cast<ctx_t*>(user);
            const auto [who, pos] = (*x->where)[x->base + idx];
            ++*x->checked;
            if (std::memcmp(l, (*x->solo)[(size_t)who][(size_t)pos].data(), sizeof(float) * (size_t)x->vocab) != 0)
              ++*x->mismatches;
            return 0;
          };
          ml_error err;
          REQUIRE(ml_eval_batch(ex.e, all.data() + i, len, cb, &c, &err) == ML_OK);
          i += len;
        }
        CHECK(checked == all.size());
        CHECK(mismatches == 0);
        for (int s = 0; s < n_sessions; ++s) {
          CHECK(ml_session_pos(ss[(size_t)s]->s) == (int)seqs[(size_t)s].size());
          CHECK(std::memcmp(ml_session_tokens(ss[(size_t)s]->s), seqs[(size_t)s].data(),
                            seqs[(size_t)s].size() * sizeof(int32_t)) == 0);
          CHECK(std::memcmp(ml_session_logits(ss[(size_t)s]->s), solo[(size_t)s].back().data(),
                            sizeof(float) * (size_t)vocab) == 0);
        }
      }
    }
  }
}

TEST_CASE("sessions: truncate and continue equals a fresh run", "[api][sessions]") {
  const std::string path = api::random_model("s8", ML_DT_Q8);
  api::model m(path);
  api::exec ex(m.m, 2, 16);
  const std::vector<int32_t> a = {1, 5, 9, 14, 20, 33, 41, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 21, 22};
  const std::vector<int32_t> b = {60, 61, 62, 63, 64, 65, 66, 67};
  const std::vector<int32_t> c = {70, 3, 4, 90, 91, 92};
  std::vector<int32_t> ac = a;
  ac.insert(ac.end(), c.begin(), c.end());
  const auto fresh = api::solo_logits(m.m, ac, ML_KV_F32);

  api::session s(m.m);
  ml_error err;
  REQUIRE(ml_session_feed(ex.e, s.s, a.data(), a.size(), &err) == ML_OK);
  REQUIRE(ml_session_feed(ex.e, s.s, b.data(), b.size(), &err) == ML_OK);
  CHECK(ml_session_pos(s.s) == (int)(a.size() + b.size()));
  REQUIRE(ml_session_truncate(s.s, (int)a.size(), &err) == ML_OK);
  CHECK(ml_session_logits(s.s) == nullptr);  // what it held belonged to the dropped tokens
  REQUIRE(ml_session_feed(ex.e, s.s, c.data(), c.size(), &err) == ML_OK);
  const int vocab = ml_model_get_info(m.m).vocab_size;
  CHECK(std::memcmp(ml_session_logits(s.s), fresh.back().data(), sizeof(float) * (size_t)vocab) == 0);
  CHECK(std::memcmp(ml_session_tokens(s.s), ac.data(), ac.size() * sizeof(int32_t)) == 0);

  CHECK(ml_session_truncate(s.s, (int)ac.size() + 1, &err) == ML_E_ARG);
  CHECK(ml_session_truncate(s.s, -1, &err) == ML_E_ARG);
  REQUIRE(ml_session_truncate(s.s, 0, &err) == ML_OK);
  CHECK(ml_session_pos(s.s) == 0);
}

TEST_CASE("sessions: bad batches are refused whole, naming the token", "[api][sessions]") {
  const std::string path = api::random_model("s8", ML_DT_Q8);
  api::model m(path);
  api::exec ex(m.m, 1, 8);
  api::session a(m.m, ML_KV_F32, 4), b(m.m);
  ml_error err;
  std::vector<ml_batch_token> t = {{a.s, 1, 1}, {b.s, 1, 1}, {b.s, 96, 1}};
  CHECK(ml_eval_batch(ex.e, t.data(), t.size(), nullptr, nullptr, &err) == ML_E_ARG);
  CHECK_THAT(err.msg, Catch::Contains("token id 96 at index 2"));
  CHECK(ml_session_pos(a.s) == 0);
  CHECK(ml_session_pos(b.s) == 0);
  t = {{a.s, 1, 0}, {a.s, 2, 0}, {b.s, 3, 0}, {a.s, 4, 0}, {a.s, 5, 0}, {a.s, 6, 1}};  // a holds 4
  CHECK(ml_eval_batch(ex.e, t.data(), t.size(), nullptr, nullptr, &err) == ML_E_ARG);
  CHECK_THAT(err.msg, Catch::Contains("context of 4"));
  CHECK(ml_session_pos(a.s) == 0);
  CHECK(ml_session_pos(b.s) == 0);
  // A session of another model.
  api::model other(api::random_model("o8", ML_DT_Q8, 32));
  api::session c(other.m);
  t = {{c.s, 1, 1}};
  CHECK(ml_eval_batch(ex.e, t.data(), t.size(), nullptr, nullptr, &err) == ML_E_ARG);
  CHECK_THAT(err.msg, Catch::Contains("another model"));
}

TEST_CASE("sessions: memory is one copy of the model plus one cache per session", "[api][sessions]") {
  const std::string path = api::random_model("big", ML_DT_Q8, 256, 2, 2, 512, 512);
  api::model m(path);
  const size_t one = [&] {
    api::session s(m.m, ML_KV_F32, 100);
    return ml_session_bytes(s.s);
  }();
  std::vector<std::unique_ptr<api::session>> ss;
  for (int i = 0; i < 8; ++i) ss.push_back(std::make_unique<api::session>(m.m, ML_KV_F32, 100));
  for (const auto& s : ss) CHECK(ml_session_bytes(s->s) == one);
  // A session holds its cache (layers x ctx x kv_dim x K and V), history, logits and sampler:
  // nothing the size of the weights.
  const ml_model_info info = ml_model_get_info(m.m);
  const size_t cache = (size_t)info.n_layers * 100 * (size_t)(info.n_kv_heads * info.head_dim) * 2 * sizeof(float);
  CHECK(one >= cache);
  CHECK(one < cache + 100 * 4 + (size_t)info.vocab_size * 32 + 4096);
  CHECK(one < info.model_bytes / 4);
}
