"""ml_server.exe, the Windows build, under wine (e2e.server.win; the win_scalar preset): it listens
on 127.0.0.1 --port 0 (winsock through wine), loads stories260K, answers GET /health and
GET /v1/models, and a greedy /v1/completions reply is the text the Linux scalar ml_run writes for
the same prompt and length (the oracle: a separate build, OS and code path). It is then stopped
(SIGTERM to wine, SIGKILL after 30 s). Python 3 standard library only.

  test_win_server.py --bin EMU_BIN --ref-bin SCALAR_BIN --shared SHARED --work WORK
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_http_common as c  # noqa: E402

PROMPT = "Once upon a time"
N = 24


def main():
    env, _ = c.h.env_from_args(ref_bin=True)
    model = c.h.stories260k(env)
    # The oracle: Linux scalar ml_run writes the prompt, the continuation and a newline.
    want = c.h.generate(env, model, ["-p", PROMPT, "-n", N, "--temp", 0], ref=True)
    assert want.startswith(PROMPT) and want.endswith("\n"), "ml_run wrote %r" % want
    want = want[len(PROMPT):-1]
    fails = c.h.Failures()
    with c.Server(env, model, ["--parallel", "1", "-t", "1"], name="win-server", start_timeout=180) as srv:
        st, _, body = c.request(srv.port, "GET", "/health")
        fails.check(st == 200 and json.loads(body) == {"status": "ok"}, "GET /health: %d %r" % (st, body[:200]))
        st, _, body = c.request(srv.port, "GET", "/v1/models")
        ids = [m.get("id") for m in json.loads(body).get("data", [])] if st == 200 else []
        fails.check(ids == [os.path.basename(model)], "GET /v1/models: %d %r" % (st, body[:300]))
        st, _, body = c.request(srv.port, "POST", "/v1/completions",
                                {"prompt": PROMPT, "max_tokens": N, "temperature": 0}, timeout=120)
        fails.check(st == 200, "POST /v1/completions: %d %r" % (st, body[:300]))
        if st == 200:
            j = json.loads(body)
            text = j["choices"][0]["text"]
            print("ml_server.exe: %r" % text)
            print("ml_run (Linux scalar): %r" % want)
            fails.check(text == want, "the completion %r is not ml_run's %r" % (text, want))
            fails.check(j["usage"]["completion_tokens"] == N, "usage: %r" % j["usage"])
            fails.check(j["choices"][0]["finish_reason"] == "length", "finish_reason: %r" % j["choices"][0])
        if fails:
            print("ml_server.exe stderr:\n" + srv.stderr()[-3000:])
    if fails:
        print("%d check(s) failed" % len(fails))
        sys.exit(1)
    print("ok: ml_server.exe served /health, /v1/models and a greedy completion equal to ml_run's")


if __name__ == "__main__":
    main()
