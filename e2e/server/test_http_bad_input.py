"""ml_server against bad input (issue 16, "Bad input"): every file of shared/data/JSONTestSuite as
the body of POST /v1/chat/completions, then more than 60 malformed HTTP and API requests over raw
sockets and http.client. Each gets its status and OpenAI's error body
{"error":{"message","type","param","code"}}; none may crash or hang the server, which must still
answer /health at the end.

What is expected where the issue is silent (OpenAI's API and llama-server decide):
- a field of the wrong type or out of its range: 400 naming the field (error.param, or the name in
  the message); n other than 1, more than 4 stop strings, response_format other than text: 400;
- a prompt longer than the slot's context: 400 with code context_length_exceeded;
- a body over --max-body: 413, also when announced by Content-Length with Expect: 100-continue
  (the server need not read it); the default limit refuses a 10 MB body;
- --api-key (or KRAFLA_API_KEY): 401 on the API endpoints without "Authorization: Bearer KEY" or
  with a wrong one; /health stays open (load balancers and the nginx replica setup probe it
  unauthenticated, as llama-server keeps it public);
- a request with both Content-Length and Transfer-Encoding: 400, or processed as chunked and the
  connection closed after it (RFC 9112 6.1): never a second request read from the same bytes;
- a header section over the limits (10,000 headers, an 80 KB header): 431 or 400;
- a client that sends its headers one byte per second, or announces a body it never sends, is cut
  off within --timeout (plus slack), whatever the per-read timeouts are.

Usage: test_http_bad_input.py --bin DIR --shared DIR --work DIR"""
import json
import os
import select
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_http_common as c  # noqa: E402

ENV = None
TIMEOUT_S = 2          # --timeout of the main server: slow clients are cut off after it
MAX_BODY = 1 << 20     # --max-body of the main server
CTX = 256
SLACK_S = 3            # what the cut-off may take beyond --timeout (a poll interval, scheduling)
KEY = "sk-test-7f3a9c"
SRV = None             # the main server (setUpModule)
BASE = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "temperature": 0}
CHAT = "/v1/chat/completions"


def setUpModule():
    global SRV
    SRV = c.Server(ENV, c.chat_model(ENV), ["--parallel", "2", "--ctx", CTX, "-t", "1", "--max-body", MAX_BODY,
                                            "--timeout", TIMEOUT_S], name="bad-input")


def tearDownModule():
    if SRV:
        SRV.stop()


def with_(**kw):
    b = json.loads(json.dumps(BASE))
    b.update(kw)
    return b


def without(key):
    b = json.loads(json.dumps(BASE))
    b.pop(key)
    return b


def raw_field(field, json_text):
    """BASE with field set to json_text verbatim (numbers Python cannot write: 1e400, NaN)."""
    return ('{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"temperature":0,"%s":%s}'
            % (field, json_text)).encode()


def msg(m):
    return {"messages": [m], "max_tokens": 2}


def content(v):
    return msg({"role": "user", "content": v})


class Base(unittest.TestCase):
    def assert_error(self, status, body, want, field=None, code=None, what=""):
        p = c.error_problem(status, body, want)
        self.assertIsNone(p, what)
        if field is not None:
            self.assertTrue(c.names_field(body, field), "%s: the error does not name %r: %r" % (what, field, body[:300]))
        if code is not None:
            self.assertEqual(c.error_of(body).get("code"), code, what)

    def assert_chat_ok(self, status, body, what=""):
        self.assertEqual(status, 200, "%s: %r" % (what, body[:300]))
        j = json.loads(body)
        self.assertEqual(j.get("object"), "chat.completion", what)
        self.assertIsInstance(j["choices"][0]["message"]["content"], str, what)

    def assert_healthy(self, srv=None):
        srv = srv or SRV
        self.assertTrue(srv.alive(), "the server died: " + srv.stderr()[-2000:])
        st, _, body = c.request(srv.port, "GET", "/health", timeout=10)
        self.assertEqual(st, 200, body)


class JsonTestSuite(Base):
    def test_every_file_as_a_chat_body(self):
        d = ENV.shared_path("data/JSONTestSuite/test_parsing")
        names = sorted(os.listdir(d))
        self.assertGreaterEqual(len(names), 300)
        bad = c.h.Failures()
        counts = {200: 0, 400: 0}
        for n in names:
            data = open(os.path.join(d, n), "rb").read()
            try:
                st, hd, body = c.request(SRV.port, "POST", CHAT, body=data, timeout=20,
                                         headers={"Connection": "close"})
            except Exception as e:  # noqa: BLE001 a dropped connection or a timeout
                bad.check(False, "%s: %s: %s" % (n, type(e).__name__, e))
                if not bad.check(SRV.alive(), "%s killed the server: %s" % (n, SRV.stderr()[-1500:])):
                    break
                continue
            counts[st] = counts.get(st, 0) + 1
            if st == 200:
                continue  # a valid chat request is valid whatever the file's class
            if not bad.check(st == 400, "%s: status %d %r" % (n, st, body[:200])):
                continue
            bad.check(c.error_problem(st, body, 400) is None, "%s: %s" % (n, c.error_problem(st, body, 400)))
            # The oracle: Python's own JSON parser. An object it reads without "messages" must be
            # refused for that field, not as bad JSON; a file of the must-reject class (n_) never
            # reaches the field checks (a lenient parser would complain of the missing messages).
            try:
                parsed = json.loads(data.decode("utf-8"))
            except (ValueError, UnicodeDecodeError, RecursionError):
                parsed = None
            if n.startswith("y_") and isinstance(parsed, dict) and "messages" not in parsed:
                bad.check(c.names_field(body, "messages"), "%s parsed but the error does not name messages: %r"
                          % (n, body[:200]))
            if n.startswith("n_"):
                bad.check(c.error_of(body).get("param") != "messages",
                          "%s is not JSON yet the error is about messages: %r" % (n, body[:200]))
        print("JSONTestSuite: %d files, statuses %s" % (len(names), counts))
        self.assertEqual(bad, [])
        self.assert_healthy()


def api_cases():
    """(name, path, body bytes or JSON value, status(es), field named or None, code or None)."""
    big = 2 ** 70
    cases = [
        # max_tokens / max_completion_tokens
        ("max_tokens string", CHAT, with_(max_tokens="5"), 400, "max_tokens"),
        ("max_tokens fraction", CHAT, with_(max_tokens=1.5), 400, "max_tokens"),
        ("max_tokens negative", CHAT, with_(max_tokens=-1), 400, "max_tokens"),
        ("max_tokens -100", CHAT, with_(max_tokens=-100), 400, "max_tokens"),
        ("max_tokens 1e400", CHAT, raw_field("max_tokens", "1e400"), 400, "max_tokens"),
        ("max_tokens 2**70", CHAT, with_(max_tokens=big), 400, "max_tokens"),
        ("max_tokens true", CHAT, with_(max_tokens=True), 400, "max_tokens"),
        ("max_tokens array", CHAT, with_(max_tokens=[2]), 400, "max_tokens"),
        ("max_completion_tokens string", CHAT, with_(max_completion_tokens="x"), 400, "max_completion_tokens"),
        ("max_completion_tokens negative", CHAT, with_(max_completion_tokens=-5), 400, "max_completion_tokens"),
        # temperature, top_p, top_k, min_p, seed
        ("temperature string", CHAT, with_(temperature="0.5"), 400, "temperature"),
        ("temperature -1", CHAT, with_(temperature=-1), 400, "temperature"),
        ("temperature 3", CHAT, with_(temperature=3), 400, "temperature"),
        ("temperature 1e400", CHAT, raw_field("temperature", "1e400"), 400, "temperature"),
        ("temperature NaN (not JSON)", CHAT, raw_field("temperature", "NaN"), 400, None),
        ("temperature Infinity (not JSON)", CHAT, raw_field("temperature", "Infinity"), 400, None),
        ("top_p 1.5", CHAT, with_(top_p=1.5), 400, "top_p"),
        ("top_p negative", CHAT, with_(top_p=-0.5), 400, "top_p"),
        ("top_p string", CHAT, with_(top_p="1"), 400, "top_p"),
        ("top_k string", CHAT, with_(top_k="5"), 400, "top_k"),
        ("top_k fraction", CHAT, with_(top_k=1.5), 400, "top_k"),
        ("min_p -0.1", CHAT, with_(min_p=-0.1), 400, "min_p"),
        ("min_p 1.5", CHAT, with_(min_p=1.5), 400, "min_p"),
        ("seed string", CHAT, with_(seed="1"), 400, "seed"),
        ("seed fraction", CHAT, with_(seed=1.5), 400, "seed"),
        ("seed 2**70", CHAT, with_(seed=big), 400, "seed"),
        # n, stop, stream
        ("n 2", CHAT, with_(n=2), 400, "n"),
        ("n 0", CHAT, with_(n=0), 400, "n"),
        ("n string", CHAT, with_(n="1"), 400, "n"),
        ("stop with 5 entries", CHAT, with_(stop=["a", "b", "c", "d", "e"]), 400, "stop"),
        ("stop number", CHAT, with_(stop=5), 400, "stop"),
        ("stop array of numbers", CHAT, with_(stop=[1]), 400, "stop"),
        ("stop empty string", CHAT, with_(stop=[""]), 400, "stop"),
        ("stop object", CHAT, with_(stop={}), 400, "stop"),
        ("stream string", CHAT, with_(stream="true"), 400, "stream"),
        ("stream number", CHAT, with_(stream=1), 400, "stream"),
        ("stream_options string", CHAT, with_(stream=True, stream_options="x"), 400, "stream_options"),
        ("include_usage string", CHAT, with_(stream=True, stream_options={"include_usage": "yes"}), 400,
         "include_usage"),
        # logprobs, penalties, response_format, model
        ("logprobs string", CHAT, with_(logprobs="yes"), 400, "logprobs"),
        ("top_logprobs 21", CHAT, with_(logprobs=True, top_logprobs=21), 400, "top_logprobs"),
        ("top_logprobs negative", CHAT, with_(logprobs=True, top_logprobs=-1), 400, "top_logprobs"),
        ("top_logprobs without logprobs", CHAT, with_(top_logprobs=3), 400, "logprobs"),
        ("presence_penalty 3", CHAT, with_(presence_penalty=3), 400, "presence_penalty"),
        ("frequency_penalty string", CHAT, with_(frequency_penalty="x"), 400, "frequency_penalty"),
        ("response_format json_object", CHAT, with_(response_format={"type": "json_object"}), 400, "response_format"),
        ("response_format json_schema", CHAT,
         with_(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}), 400,
         "response_format"),
        ("response_format string", CHAT, with_(response_format="text"), 400, "response_format"),
        ("response_format unknown", CHAT, with_(response_format={"type": "bogus"}), 400, "response_format"),
        ("model number", CHAT, with_(model=5), 400, "model"),
        # messages
        ("messages missing", CHAT, without("messages"), 400, "messages"),
        ("messages empty", CHAT, with_(messages=[]), 400, "messages"),
        ("messages object", CHAT, with_(messages={}), 400, "messages"),
        ("messages string", CHAT, with_(messages="hi"), 400, "messages"),
        ("messages null", CHAT, with_(messages=None), 400, "messages"),
        ("message number", CHAT, with_(messages=[1]), 400, "messages[0]"),
        ("message array", CHAT, with_(messages=[[]]), 400, "messages[0]"),
        ("role missing", CHAT, msg({"content": "hi"}), 400, "messages[0].role"),
        ("role unknown", CHAT, msg({"role": "wizard", "content": "hi"}), 400, "messages[0].role"),
        ("role empty", CHAT, msg({"role": "", "content": "hi"}), 400, "messages[0].role"),
        ("role upper case", CHAT, msg({"role": "USER", "content": "hi"}), 400, "messages[0].role"),
        ("role number", CHAT, msg({"role": 5, "content": "hi"}), 400, "messages[0].role"),
        ("second message bad", CHAT, {"messages": [{"role": "user", "content": "a"}, {"role": "x", "content": "b"}]},
         400, "messages[1].role"),
        ("content missing", CHAT, msg({"role": "user"}), 400, "messages[0].content"),
        ("content null", CHAT, content(None), 400, "messages[0].content"),
        ("content number", CHAT, content(5), 400, "messages[0].content"),
        ("content object", CHAT, content({"text": "x"}), 400, "messages[0].content"),
        ("content part image", CHAT, content([{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]), 400,
         "messages[0].content"),
        ("content part without text", CHAT, content([{"type": "text"}]), 400, "messages[0].content"),
        ("content part text number", CHAT, content([{"type": "text", "text": 5}]), 400, "messages[0].content"),
        ("content part number", CHAT, content([5]), 400, "messages[0].content"),
        # the body as a whole
        ("body array", CHAT, b"[]", 400, None),
        ("body null", CHAT, b"null", 400, None),
        ("body string", CHAT, b'"x"', 400, None),
        ("body number", CHAT, b"5", 400, None),
        ("body empty", CHAT, b"", 400, None),
        ("body empty object", CHAT, b"{}", 400, "messages"),
        ("body truncated", CHAT, b'{"messages":[{"role":"user"', 400, None),
        ("body trailing comma", CHAT, b'{"messages":[{"role":"user","content":"Hi"}],}', 400, None),
        ("body single quotes", CHAT, b"{'messages':[]}", 400, None),
        ("body trailing garbage", CHAT, json.dumps(BASE).encode() + b" x", 400, None),
        ("invalid UTF-8 in content", CHAT, b'{"messages":[{"role":"user","content":"a\xff\xfeb"}],"max_tokens":2}',
         400, None),
        ("overlong UTF-8 in content", CHAT, b'{"messages":[{"role":"user","content":"a\xc0\xafb"}],"max_tokens":2}',
         400, None),
        ("lone surrogate escape", CHAT, b'{"messages":[{"role":"user","content":"a\\ud800b"}],"max_tokens":2}',
         400, None),
        ("UTF-16 body", CHAT, json.dumps(BASE).encode("utf-16"), 400, None),
        ("raw NUL inside a string", CHAT, b'{"messages":[{"role":"user","content":"a\x00b"}],"max_tokens":2}',
         400, None),
        ("NUL after the object", CHAT, json.dumps(BASE).encode() + b"\x00", 400, None),
        ("100,000 [ unclosed", CHAT, b"[" * 100000, 400, None),
        ("100,000 nested arrays", CHAT, b"[" * 100000 + b"]" * 100000, 400, None),
        ("100,000 nested objects", CHAT, b'{"a":' * 100000 + b"1" + b"}" * 100000, 400, None),
        ("content nested 100,000 deep", CHAT,
         b'{"messages":[{"role":"user","content":' + b"[" * 100000 + b"]" * 100000 + b"}]}", 400, None),
        # the context
        ("chat prompt over the context", CHAT, with_(messages=[{"role": "user", "content": "hello " * (CTX * 3)}]),
         400, None, "context_length_exceeded"),
        ("completion prompt over the context", "/v1/completions", {"prompt": "hello " * (CTX * 3), "max_tokens": 2},
         400, None, "context_length_exceeded"),
        ("900 KB prompt", CHAT, with_(messages=[{"role": "user", "content": "word " * 180000}]), 400, None,
         "context_length_exceeded"),
        # /v1/completions
        ("completion prompt missing", "/v1/completions", {"max_tokens": 2}, 400, "prompt"),
        ("completion prompt number", "/v1/completions", {"prompt": 5, "max_tokens": 2}, 400, "prompt"),
        ("completion prompt fraction ids", "/v1/completions", {"prompt": [1.5], "max_tokens": 2}, 400, "prompt"),
        ("completion prompt id -1", "/v1/completions", {"prompt": [-1], "max_tokens": 2}, 400, "prompt"),
        ("completion prompt id past the vocab", "/v1/completions", {"prompt": [49152], "max_tokens": 2}, 400,
         "prompt"),
        ("completion logprobs 6", "/v1/completions", {"prompt": "a", "max_tokens": 2, "logprobs": 6}, 400,
         "logprobs"),
        ("completion messages instead", "/v1/completions", BASE, 400, "prompt"),
        # /tokenize, /detokenize
        ("tokenize content number", "/tokenize", {"content": 5}, 400, "content"),
        ("tokenize content missing", "/tokenize", {}, 400, "content"),
        ("tokenize body array", "/tokenize", b"[]", 400, None),
        ("detokenize tokens string", "/detokenize", {"tokens": "x"}, 400, "tokens"),
        ("detokenize token -1", "/detokenize", {"tokens": [-1]}, 400, "tokens"),
        ("detokenize token past the vocab", "/detokenize", {"tokens": [49152]}, 400, "tokens"),
        ("detokenize token fraction", "/detokenize", {"tokens": [1.5]}, 400, "tokens"),
        ("detokenize token 2**70", "/detokenize", {"tokens": [big]}, 400, "tokens"),
    ]
    return [t + (None,) * (6 - len(t)) for t in cases]


# Accepted requests: the same fields in their valid forms (so the refusals above are about the
# values, not the fields).
VALID = [
    ("base", BASE),
    ("content parts", content([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])),
    ("max_tokens null", with_(max_tokens=None)),
    ("max_completion_tokens", dict(without("max_tokens"), max_completion_tokens=2)),
    ("temperature 2", with_(temperature=2)),
    ("top_p 1", with_(top_p=1)),
    ("top_k 5 min_p 0.1", with_(top_k=5, min_p=0.1)),
    ("seed", with_(seed=123, temperature=1)),
    ("n 1", with_(n=1)),
    ("stop string", with_(stop="x")),
    ("stop 4 entries", with_(stop=["a", "b", "c", "d"])),
    ("response_format text", with_(response_format={"type": "text"})),
    ("system and assistant", {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                                           {"role": "assistant", "content": "a"}, {"role": "user", "content": "u2"}],
                              "max_tokens": 2}),
    ("escaped NUL in content", content("a\u0000b")),
    ("model name any string", with_(model="whatever")),
]


class ApiCases(Base):
    def test_field_errors(self):
        cases = api_cases()
        for name, path, body, want, field, code in cases:
            with self.subTest(name):
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                st, hd, rb = c.request(SRV.port, "POST", path, body=data, timeout=60)
                self.assert_error(st, rb, want, field, code, name)
                self.assertTrue(hd.get("content-type", "").startswith("application/json"), name)
        self.assert_healthy()
        print("API cases: %d" % len(cases))

    def test_valid_forms(self):
        for name, body in VALID:
            with self.subTest(name):
                st, _, rb = c.request(SRV.port, "POST", CHAT, body=body, timeout=60)
                self.assert_chat_ok(st, rb, name)

    def test_top_p_0_is_greedy(self):
        # OpenAI accepts top_p 0 (llama-server too): only the most probable token is left, so the
        # reply at temperature 1 with any seed is the greedy one.
        body = with_(messages=[{"role": "user", "content": "Count to ten."}], max_tokens=12)
        st, _, greedy = c.request(SRV.port, "POST", CHAT, body=dict(body, temperature=0), timeout=60)
        self.assert_chat_ok(st, greedy, "temperature 0")
        for seed in (1, 2):
            st, _, rb = c.request(SRV.port, "POST", CHAT, body=dict(body, temperature=1, top_p=0, seed=seed), timeout=60)
            self.assert_chat_ok(st, rb, "top_p 0")
            self.assertEqual(json.loads(rb)["choices"][0]["message"]["content"],
                             json.loads(greedy)["choices"][0]["message"]["content"], "top_p 0, seed %d" % seed)

    def test_penalties_honoured_or_refused(self):
        # The issue: presence/frequency penalties are honoured or refused clearly, never ignored.
        for f in ("presence_penalty", "frequency_penalty"):
            st, _, rb = c.request(SRV.port, "POST", CHAT, body=with_(**{f: 0.5}), timeout=60)
            if st == 200:
                continue
            self.assert_error(st, rb, 400, f, None, f)


def H(method, path, body=b"", headers=None, version="HTTP/1.1"):
    return c.http_request_bytes(method, path, body, headers, version)


GOOD = json.dumps(BASE).encode()


class HttpCases(Base):
    def raw(self, data, timeout=10, chunks=None):
        return c.raw_exchange(SRV.port, data, timeout, chunks)

    def assert_raw_error(self, r, want, what):
        self.assertIsNotNone(r.status, "%s: no response: %r" % (what, r))
        self.assert_error(r.status, r.body, want, what=what)

    def test_methods_and_paths(self):
        cases = [("GET", CHAT, 405), ("DELETE", "/health", 405), ("PUT", "/v1/models", 405), ("POST", "/health", 405),
                 ("GET", "/tokenize", 405), ("GET", "/v1/completions", 405), ("PATCH", "/metrics", 405),
                 ("GET", "/nope", 404), ("POST", "/v1/nope", 404), ("GET", CHAT + "X", 404), ("GET", "/v1", 404),
                 ("GET", "/../../etc/passwd", (400, 404)), ("BREW", "/health", (400, 405, 501))]
        for m, p, want in cases:
            with self.subTest("%s %s" % (m, p)):
                r = self.raw(H(m, p, GOOD if m in ("POST", "PUT", "PATCH") else b""))
                self.assert_raw_error(r, want, "%s %s" % (m, p))
        self.assert_healthy()

    def test_request_line_and_headers(self):
        cases = [
            ("garbage request line", b"GARBAGE\r\n\r\n", 400),
            ("header without colon", b"GET /health HTTP/1.1\r\nHost: x\r\nBadHeader\r\n\r\n", 400),
            ("Content-Length not a number", H("POST", CHAT, GOOD, {"Content-Length": "abc"}), 400),
            ("Content-Length negative", H("POST", CHAT, GOOD, {"Content-Length": "-1"}), (400, 413)),
            ("Content-Length with a plus", H("POST", CHAT, GOOD, {"Content-Length": "+%d" % len(GOOD)}), 400),
            ("Content-Length 2**64+", H("POST", CHAT, GOOD, {"Content-Length": "99999999999999999999"}), (400, 413)),
            ("two different Content-Lengths",
             b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nContent-Length: 3\r\n\r\n" % (CHAT.encode(), len(GOOD))
             + GOOD, 400),
            ("unknown Transfer-Encoding", H("POST", CHAT, GOOD, {"Transfer-Encoding": "gzip", "Content-Length": None}),
             (400, 501)),
            ("bad chunk size", H("POST", CHAT, b"zz\r\nabc\r\n0\r\n\r\n",
                                 {"Transfer-Encoding": "chunked", "Content-Length": None}), 400),
        ]
        # The framing is unknown after each of these, so the connection must be closed after the
        # error (RFC 9112 6.3), else what follows is read as a request.
        for name, data, want in cases:
            with self.subTest(name):
                r = c.raw_exchange(SRV.port, data, 10, check_close=3)
                self.assert_raw_error(r, want, name)
                self.assertTrue(r.then_closed, "%s: the connection stayed open after the error (then %r)"
                                % (name, r.after[:200]))
                # Closed at once, not by the read or keep-alive timeout (--timeout) running out.
                self.assertLess(r.close_wait, TIMEOUT_S / 2, "%s: closed only %.1f s after the error"
                                % (name, r.close_wait))
        # NUL in a header value, an obsolete folded header, bare LF line ends: refused or tolerated,
        # never a crash.
        for name, data in [("NUL in a header", b"GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n"),
                           ("folded header", b"GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n"),
                           ("bare LF", b"GET /health HTTP/1.1\nHost: x\n\n")]:
            with self.subTest(name):
                r = self.raw(data)
                if r.status != 200:
                    self.assert_raw_error(r, 400, name)
        self.assert_healthy()

    def test_header_flood(self):
        many = b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(10000)) + b"\r\n"
        long = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 80000 + b"\r\n\r\n"
        url = H("GET", "/health?" + "a" * 100000)
        some = b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(150)) + b"\r\n"
        for name, data, want in [("150 headers", some, 431), ("10,000 headers", many, (400, 431)), ("an 80 KB header", long, (400, 431)),
                                 ("URL of 100 KB", url, (400, 414, 431))]:
            with self.subTest(name):
                self.assert_raw_error(self.raw(data), want, name)
        self.assert_healthy()

    def test_chunked_body_works(self):
        body = GOOD
        parts = [body[:10], body[10:25], body[25:]]
        chunked = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"
        r = self.raw(H("POST", CHAT, chunked, {"Transfer-Encoding": "chunked", "Content-Length": None}))
        self.assert_chat_ok(r.status, r.body, "chunked body")
        # Sent in pieces with pauses: still one request.
        pieces = [H("POST", CHAT, b"", {"Transfer-Encoding": "chunked", "Content-Length": None})] + \
                 [b"%x\r\n%s\r\n" % (len(p), p) for p in parts] + [b"0\r\n\r\n"]
        s = c.raw_connect(SRV.port)
        try:
            for p in pieces:
                s.sendall(p)
                time.sleep(0.2)
            r = c.read_response(s, 30)
        finally:
            s.close()
        self.assert_chat_ok(r.status, r.body, "chunked body in pieces")
        # A chunked body over --max-body: 413.
        big = b"".join(b"%x\r\n%s\r\n" % (65536, b" " * 65536) for _ in range(MAX_BODY // 65536 + 2)) + b"0\r\n\r\n"
        r = self.raw(H("POST", CHAT, b"", {"Transfer-Encoding": "chunked", "Content-Length": None}) + big, 30)
        self.assert_raw_error(r, 413, "chunked body over --max-body")

    def test_expect_100_continue(self):
        s = c.raw_connect(SRV.port)
        try:
            s.sendall(H("POST", CHAT, b"", {"Content-Length": str(len(GOOD)), "Expect": "100-continue"}))
            r = c.read_response(s, 10, head_only=True)
            self.assertEqual(r.status, 100, "no 100 Continue: %r" % r)
            s.sendall(r.rest + GOOD if r.rest else GOOD)
            r = c.read_response(s, 30)
        finally:
            s.close()
        self.assert_chat_ok(r.status, r.body, "after 100 Continue")
        # Announcing a body over --max-body: refused before it is sent (417 is allowed too).
        s = c.raw_connect(SRV.port)
        try:
            s.sendall(H("POST", CHAT, b"", {"Content-Length": str(10 * MAX_BODY), "Expect": "100-continue"}))
            r = c.read_response(s, 10)
        finally:
            s.close()
        self.assertNotEqual(r.status, 100, "100 Continue for a body announced over --max-body (RFC 9110 10.1.1: "
                                           "answer with the final status instead)")
        self.assert_raw_error(r, (413, 417), "Expect with a body over --max-body")

    def test_body_size_limits(self):
        # Exactly --max-body (valid JSON padded with spaces) passes; one byte more is 413.
        exact = GOOD + b" " * (MAX_BODY - len(GOOD))
        st, _, body = c.request(SRV.port, "POST", CHAT, body=exact, timeout=60)
        self.assert_chat_ok(st, body, "a body of exactly --max-body")
        st, _, body = c.request(SRV.port, "POST", CHAT, body=exact + b" ", timeout=60)
        self.assert_error(st, body, 413, what="--max-body + 1")
        ten = b'{"messages":[{"role":"user","content":"' + b"a" * (10 << 20) + b'"}]}'
        r = self.raw(H("POST", CHAT, ten), 30)
        self.assert_raw_error(r, 413, "10 MB body with --max-body")
        self.assert_healthy()

    def test_truncated_body_times_out(self):
        s = c.raw_connect(SRV.port)
        t0 = time.monotonic()
        try:
            s.sendall(H("POST", CHAT, b"", {"Content-Length": "1000"}) + GOOD[:10])
            r = c.read_response(s, TIMEOUT_S + SLACK_S + 5)
        finally:
            s.close()
        took = time.monotonic() - t0
        self.assertFalse(r.timed_out, "the connection was still open after %.1f s: %r" % (took, r))
        self.assertLessEqual(took, TIMEOUT_S + SLACK_S, "cut off after %.1f s" % took)
        self.assertNotEqual(r.status, 200, r)
        if r.status is not None:
            self.assert_raw_error(r, (400, 408), "truncated body")
        self.assert_healthy()

    def slowloris(self, prefix, trickle):
        """Sends prefix, then one byte of trickle per second; returns (seconds until the server
        cut the connection or None, bytes sent)."""
        s = c.raw_connect(SRV.port)
        t0 = time.monotonic()
        sent = 0
        try:
            s.sendall(prefix)
            for b in trickle[:TIMEOUT_S + SLACK_S + 6]:
                closed, _, _ = c.wait_closed(s, 1.0)
                if closed:
                    return time.monotonic() - t0, sent
                try:
                    s.sendall(bytes([b]))
                except (BrokenPipeError, ConnectionResetError):
                    return time.monotonic() - t0, sent
                sent += 1
            return None, sent
        finally:
            s.close()

    def test_slowloris(self):
        # Headers one byte a second, and a body one byte a second: each read comes well within a
        # per-read timeout, so only a deadline on the whole request cuts them off (the headers':
        # third_party/cpp-httplib's patch; the body's: http_guard, 408).
        for name, prefix, trickle in [
                ("request line", b"", b"GET /health?" + b"a" * 40),
                ("headers", b"GET /health HTTP/1.1\r\n", b"X-Slow: " + b"a" * 40),
                ("body", H("POST", CHAT, b"", {"Content-Length": str(len(GOOD))}), GOOD)]:
            with self.subTest(name):
                took, sent = self.slowloris(prefix, trickle)
                self.assertIsNotNone(took, "a client sending its %s one byte a second was never cut off (%d bytes "
                                           "in %d s, --timeout %d)" % (name, sent, sent, TIMEOUT_S))
                self.assertLessEqual(took, TIMEOUT_S + SLACK_S, "cut off only after %.1f s" % took)
        self.assert_healthy()

    def test_smuggling(self):
        # Both headers: a chunked empty body, then a second request inside what Content-Length
        # would count. RFC 9112 6.1: refuse (400) or treat as chunked and close after it; a second
        # response would mean the server read a request a proxy in front would not have seen.
        tail = b"GET /v1/nope HTTP/1.1\r\nHost: x\r\n\r\n"
        body = b"0\r\n\r\n" + tail
        data = H("POST", CHAT, body, {"Content-Length": str(len(body)), "Transfer-Encoding": "chunked"})
        s = c.raw_connect(SRV.port)
        try:
            s.sendall(data)
            r1 = c.read_response(s, 10)
            self.assert_raw_error(r1, 400, "CL and TE")
            r2 = c.read_response(s, 3) if not r1.closed else None
            self.assertTrue(r2 is None or (r2.status is None and not r2.timed_out),
                            "the connection was not closed after a request with both Content-Length and "
                            "Transfer-Encoding (RFC 9112 6.3: MUST close): %r" % r2)
        finally:
            s.close()
        # A Transfer-Encoding the server cannot honour beside a Content-Length framing a valid body:
        # 501 or 400 (RFC 9112 6.1), never the body read by Content-Length as if it were absent.
        for te in ("chunked, identity", "xchunked", "gzip, chunked, x"):
            with self.subTest(te):
                r = self.raw(H("POST", CHAT, GOOD, {"Transfer-Encoding": te}))
                self.assertIn(r.status, (400, 501), "%r: %r" % (te, r))
        self.assert_healthy()

    def test_pipelining_and_http10(self):
        self.http10()
        s = c.raw_connect(SRV.port)
        try:
            s.sendall(H("GET", "/health") + H("GET", "/v1/models"))
            r1 = c.read_response(s, 10)
            self.assertEqual(r1.status, 200, r1)
            # The second response may already be in r1.rest (third_party/cpp-httplib's patch keeps
            # one read buffer per connection, so the second request is not dropped with the first's).
            r2 = c.read_response(c.Replay(s, r1.rest), 10)
            self.assertEqual(r2.status, 200, r2)
            self.assertEqual(json.loads(r2.body).get("object"), "list")
        finally:
            s.close()

    def http10(self):
        s = c.raw_connect(SRV.port)
        try:
            s.sendall(b"GET /health HTTP/1.0\r\n\r\n")
            r = c.read_response(s, 10)
            self.assertEqual(r.status, 200, r)
            closed, _, _ = c.wait_closed(s, 5)
            self.assertTrue(closed, "HTTP/1.0 without keep-alive: the connection stayed open")
        finally:
            s.close()

    def test_many_idle_connections(self):
        # 128 connections that send nothing and 128 that made a request and keep the connection
        # (more than a thread pool sized by --parallel and the queue): others are still served,
        # and the server closes the idle ones (fds back to the level before).
        before = SRV.fd_count()
        idle = []
        try:
            for i in range(256):
                s = c.raw_connect(SRV.port)
                if i % 2:
                    s.sendall(H("GET", "/health"))  # its answer is read (and dropped) below
                idle.append(s)
            t0 = time.monotonic()
            st, _, body = c.request(SRV.port, "POST", CHAT, body=BASE, timeout=TIMEOUT_S * 2 + 10)
            took = time.monotonic() - t0
            self.assert_chat_ok(st, body, "beside 256 idle connections")
            self.assertLessEqual(took, TIMEOUT_S * 2 + SLACK_S, "served only after %.1f s" % took)
            deadline = time.monotonic() + 60
            open_ = set(idle)
            while open_ and time.monotonic() < deadline:
                readable, _, _ = select.select(list(open_), [], [], 1.0)
                for s in readable:
                    try:
                        if s.recv(65536) == b"":
                            open_.discard(s)
                    except OSError:
                        open_.discard(s)
            self.assertEqual(len(open_), 0, "%d idle connections still open after 60 s" % len(open_))
        finally:
            for s in idle:
                s.close()
        deadline = time.monotonic() + 10
        while SRV.fd_count() > before + 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertLessEqual(SRV.fd_count(), before + 2, "fds: %d before, %d after" % (before, SRV.fd_count()))
        self.assert_healthy()


class ApiKey(Base):
    def test_key(self):
        bearer = {"Authorization": "Bearer " + KEY}
        for how, extra in [("--api-key", {}), ("KRAFLA_API_KEY", {"KRAFLA_API_KEY": KEY})]:
            args = ["--ctx", CTX, "-t", "1"] + (["--api-key", KEY] if not extra else [])
            with c.Server(ENV, c.chat_model(ENV), args, name="api-key", env_vars=extra) as srv:
                wrong = [None, "Bearer wrong", "Bearer " + KEY[:-1], "Bearer " + KEY + "x", "Basic " + KEY, KEY,
                         "Bearer"]
                for path, body in [(CHAT, BASE), ("/v1/completions", {"prompt": "a", "max_tokens": 2}),
                                   ("/tokenize", {"content": "a"}), ("/detokenize", {"tokens": [1]})]:
                    for auth in wrong:
                        with self.subTest("%s %s %r" % (how, path, auth)):
                            st, _, rb = c.request(srv.port, "POST", path, body=body,
                                                  headers={"Authorization": auth} if auth else {})
                            self.assert_error(st, rb, 401, what="%s %r" % (path, auth))
                    st, _, rb = c.request(srv.port, "POST", path, body=body, headers=bearer)
                    self.assertEqual(st, 200, "%s %s with the key: %r" % (how, path, rb[:300]))
                st, _, _ = c.request(srv.port, "GET", "/health")
                self.assertEqual(st, 200, "/health must stay open without the key")
                # A 10 MB body with the default --max-body (and the right key): 413.
                ten = b'{"messages":[{"role":"user","content":"' + b"a" * (10 << 20) + b'"}]}'
                r = c.raw_exchange(srv.port, H("POST", CHAT, ten, bearer), 30)
                self.assertIsNotNone(r.status, "10 MB body, default --max-body: %r" % r)
                self.assert_error(r.status, r.body, 413, what="10 MB body, default --max-body")
                self.assertTrue(srv.alive())
                for p in ("/v1/models", "/metrics"):
                    st, _, _ = c.request(srv.port, "GET", p)
                    print("%s without the key: %d (not asserted: OpenAI asks the key, llama-server leaves "
                          "/v1/models open)" % (p, st))


class Survives(Base):
    def test_zz_still_healthy(self):
        self.assert_healthy()
        st, _, body = c.request(SRV.port, "POST", CHAT, body=BASE, timeout=60)
        self.assert_chat_ok(st, body, "after everything")


def main():
    global ENV
    ENV = c.h.env_from_args()[0]
    c.h.skip_if_cpu_lacks_isa(ENV)
    c.h.run_cases(JsonTestSuite, ApiCases, HttpCases, ApiKey, Survives)


if __name__ == "__main__":
    main()
