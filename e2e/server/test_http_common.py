"""Helpers shared by the ml_server HTTP tests (test_http_bad_input.py, test_http_load.py); not a
test itself. Python 3 standard library only.

- the model: a small random body with SmolLM2's tokenizer and Qwen2.5's ChatML template (the
  construction of e2e/cli/test_chat.py), so chat requests render and tokenize for real;
- Server: ml_server started on 127.0.0.1 --port 0, its port read from the first stdout line
  ("listening on http://HOST:PORT"), stopped with SIGTERM (then SIGKILL) whatever happens;
- raw HTTP over sockets (every read bounded by a timeout and a deadline), http.client requests,
  a server-sent-events reader for streamed chats, and the check of OpenAI's error body.
"""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import harness as h  # noqa: E402,F401  (re-exported for the tests)

SMOL = "data/hf/smollm2-135m-instruct/tokenizer.json"
QWEN_CONFIG = "data/hf/qwen2.5-0.5b-instruct/tokenizer_config.json"
QUICK = bool(os.environ.get("KRAFLA_E2E_QUICK"))
# Under ASan/TSan memory and speed bounds mean nothing (quarantine, shadow memory): e2e/CMakeLists.txt
# sets this for the sanitizer presets.
SANITIZED = bool(os.environ.get("KRAFLA_E2E_SANITIZED"))


def chatml_folder(env):
    """A Hugging Face folder: SmolLM2's tokenizer.json and a tokenizer_config.json with ChatML."""
    d = env.path("smol-chatml")
    if not os.path.isdir(d):
        tmp = d + ".tmp%d" % os.getpid()
        os.makedirs(tmp)
        shutil.copy(env.shared_path(SMOL), os.path.join(tmp, "tokenizer.json"))
        tmpl = json.load(open(env.shared_path(QWEN_CONFIG), encoding="utf-8"))["chat_template"]
        with open(os.path.join(tmp, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump({"chat_template": tmpl, "eos_token": "<|im_end|>", "bos_token": None}, f)
        try:
            os.rename(tmp, d)
        except OSError:  # another test made it meanwhile
            shutil.rmtree(tmp, ignore_errors=True)
    return d


def chat_model(env, dim=64, hidden=128, layers=2, max_seq=512, name=None):
    """A random model over SmolLM2's 49,152-token vocabulary with a ChatML template."""
    out = env.path(name or "srv-smol-d%d-l%d-s%d.mlb" % (dim, layers, max_seq))
    if not os.path.exists(out):
        tmp = out + ".tmp%d" % os.getpid()
        h.run([env.exe("ml_convert"), "random", "--dim", dim, "--hidden", hidden, "--layers", layers, "--heads", "2",
               "--kv-heads", "1", "--vocab", "49152", "--max-seq", max_seq, "--rope-type", "half", "--tokenizer",
               chatml_folder(env), "-o", tmp])
        os.rename(tmp, out)
    return out


class Server:
    """ml_server MODEL --host 127.0.0.1 --port 0 ARGS; use as a context manager. stdout and stderr
    go to files in the work folder (a pipe nobody reads could fill and block the server)."""

    def __init__(self, env, model, args=(), name="server", start_timeout=120, env_vars=None):
        self.env = env
        self.log_out = env.path(name + ".stdout")
        self.log_err = env.path(name + ".stderr")
        cmd = [env.exe("ml_server"), model, "--host", "127.0.0.1", "--port", "0"] + [str(a) for a in args]
        e = dict(os.environ)
        e.pop("KRAFLA_API_KEY", None)
        e.update(env_vars or {})
        with open(self.log_out, "wb") as fo, open(self.log_err, "wb") as fe:
            self.proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL, env=e)
        self.pid = self.proc.pid
        self.host, self.port = "127.0.0.1", None
        deadline = time.monotonic() + start_timeout
        while time.monotonic() < deadline:
            first = open(self.log_out, "rb").read().split(b"\n", 1)
            if len(first) == 2:
                m = re.match(rb"listening on http://([0-9.]+):(\d+)\s*$", first[0])
                if not m:
                    self.kill()
                    raise AssertionError("ml_server's first stdout line is %r, not 'listening on http://HOST:PORT'"
                                         % first[0][:200])
                self.host, self.port = m.group(1).decode(), int(m.group(2))
                break
            if self.proc.poll() is not None:
                raise AssertionError("ml_server exited with %d before listening: %s"
                                     % (self.proc.returncode, self.stderr()[-2000:]))
            time.sleep(0.05)
        if self.port is None:
            self.kill()
            raise AssertionError("ml_server printed no 'listening on' line within %d s" % start_timeout)
        # /health answers "loading" (503) until the model is ready.
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                st, _, _ = request(self.port, "GET", "/health", timeout=5)
                if st == 200:
                    break
            except (OSError, http.client.HTTPException):
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.kill()
                raise AssertionError("ml_server never became healthy: " + self.stderr()[-2000:])
            time.sleep(0.1)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def stderr(self):
        return open(self.log_err, "rb").read().decode("utf-8", "replace")

    def alive(self):
        return self.proc.poll() is None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def stop(self, timeout=30):
        """SIGTERM, then SIGKILL after timeout; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    # /proc views of the server process.
    def rss_kib(self):
        for line in open("/proc/%d/status" % self.pid):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def fd_count(self):
        return len(os.listdir("/proc/%d/fd" % self.pid))

    def thread_count(self):
        return len(os.listdir("/proc/%d/task" % self.pid))


# ---- HTTP -----------------------------------------------------------------------------------------

def request(port, method, path, body=None, headers=None, timeout=30):
    """One request over a fresh http.client connection; returns (status, headers dict lower-cased,
    body bytes)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        hd = {"Content-Type": "application/json"} if body is not None else {}
        hd.update(headers or {})
        c.request(method, path, body=body, headers=hd)
        r = c.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        c.close()


def error_problem(status, body, want_status=None):
    """None when body is OpenAI's error {"error":{"message","type","param","code"}} (message and
    type non-empty strings, param and code present: a string or null) and status is want_status
    (any 4xx/5xx when None); else what is wrong."""
    if want_status is not None:
        if isinstance(want_status, int):
            want_status = (want_status,)
        if status not in want_status:
            return "status %s, want %s; body %r" % (status, "/".join(map(str, want_status)), body[:300])
    elif not 400 <= status < 600:
        return "status %s is not an error; body %r" % (status, body[:300])
    try:
        j = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return "status %d with a body that is not JSON: %r" % (status, body[:300])
    e = j.get("error") if isinstance(j, dict) else None
    if not isinstance(e, dict):
        return "no error object: %r" % body[:300]
    for k in ("message", "type"):
        if not isinstance(e.get(k), str) or not e.get(k):
            return "error.%s is not a non-empty string: %r" % (k, body[:300])
    for k in ("param", "code"):
        if k not in e or not (e[k] is None or isinstance(e[k], (str, int))):
            return "error.%s missing or not a string/null: %r" % (k, body[:300])
    return None


def error_of(body):
    try:
        return json.loads(body)["error"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return {}


def names_field(body, field):
    """The error names field: as its param, or in its message."""
    e = error_of(body)
    return e.get("param") == field or field in str(e.get("message", "")) or field in str(e.get("param") or "")


class RawResponse:
    """What came back on a raw connection: status (None when nothing parsed), headers, body, and
    how it ended."""

    def __init__(self):
        self.status = None
        self.headers = {}
        self.body = b""
        self.raw = b""
        self.closed = False     # the server closed the connection (EOF or reset)
        self.reset = False      # ... with a reset
        self.timed_out = False  # nothing more within the timeout (connection left open)
        self.complete = False   # the body ended where its framing said
        self.then_closed = None # raw_exchange(check_close=...): closed after the answer
        self.close_wait = None  # ... after how many seconds
        self.after = b""
        self.rest = b""

    def __repr__(self):
        return "<status %s closed %s reset %s timed_out %s raw %r>" % (
            self.status, self.closed, self.reset, self.timed_out, self.raw[:200])


class Replay:
    """A socket whose first recv returns data already read (a response read after a probe)."""

    def __init__(self, sock, data):
        self.sock, self.data = sock, data

    def settimeout(self, t):
        self.sock.settimeout(t)

    def recv(self, n):
        if self.data:
            d, self.data = self.data, b""
            return d
        return self.sock.recv(n)


def raw_connect(port, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.settimeout(timeout)
    return s


def recv_some(sock, timeout):
    """Up to 64 KiB; b"" on EOF; None on timeout; raises ConnectionResetError on a reset."""
    sock.settimeout(timeout)
    try:
        return sock.recv(65536)
    except socket.timeout:
        return None


def read_response(sock, timeout=10, head_only=False):
    """Reads one HTTP response (Content-Length, chunked, or until close) from sock, waiting at
    most timeout seconds in all. Returns a RawResponse; leftover bytes stay in .rest."""
    r = RawResponse()
    buf = b""
    deadline = time.monotonic() + timeout

    def more():
        nonlocal buf
        left = deadline - time.monotonic()
        if left <= 0:
            r.timed_out = True
            return False
        try:
            d = recv_some(sock, left)
        except (ConnectionResetError, BrokenPipeError):
            r.closed = r.reset = True
            return False
        if d is None:
            r.timed_out = True
            return False
        if d == b"":
            r.closed = True
            return False
        buf += d
        r.raw += d
        return True

    while b"\r\n\r\n" not in buf:
        if not more():
            r.rest = buf
            return r
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    m = re.match(rb"HTTP/1\.[01] (\d{3})", lines[0])
    if not m:
        r.rest = buf
        return r
    r.status = int(m.group(1))
    for ln in lines[1:]:
        if b":" in ln:
            k, v = ln.split(b":", 1)
            r.headers[k.strip().lower().decode("latin-1")] = v.strip().decode("latin-1")
    if head_only or r.status in (100, 204, 304):
        r.rest = buf
        return r
    if r.headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            while b"\r\n" not in buf:
                if not more():
                    r.body, r.rest = body, buf
                    return r
            size_line, buf = buf.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            while len(buf) < size + 2:
                if not more():
                    r.body, r.rest = body, buf
                    return r
            if size == 0:
                # trailers end with an empty line
                while not (buf.startswith(b"\r\n") or b"\r\n\r\n" in buf):
                    if not more():
                        break
                buf = buf.split(b"\r\n", 1)[1] if buf.startswith(b"\r\n") else buf.split(b"\r\n\r\n", 1)[-1]
                r.body, r.rest = body, buf
                r.complete = True
                return r
            body += buf[:size]
            buf = buf[size + 2:]
    if "content-length" in r.headers:
        n = int(r.headers["content-length"])
        while len(buf) < n:
            if not more():
                break
        r.body, r.rest = buf[:n], buf[n:]
        r.complete = len(r.body) == n
        return r
    while more():
        pass
    r.body, r.rest = buf, b""
    r.complete = r.closed
    return r


def raw_exchange(port, data, timeout=10, chunks=None, check_close=0):
    """Sends data (or the list chunks, one send each) on a fresh connection from a thread of its
    own while this one reads one response, so a server that answers (413) before reading a big body
    is seen answering; a send into a connection the server closed just ends the sending."""
    s = raw_connect(port, timeout)

    def send():
        try:
            for part in (chunks if chunks is not None else [data]):
                s.sendall(part)
        except OSError:
            pass

    t = threading.Thread(target=send, daemon=True)
    t.start()
    try:
        r = read_response(s, timeout)
        if check_close:
            # Did the server close the connection after its answer (within check_close seconds),
            # without a second answer? Set as r.then_closed.
            closed, waited, seen = (True, 0, b"") if r.closed else wait_closed(s, check_close)
            r.then_closed = closed and not (r.rest + seen).strip()
            r.close_wait = waited  # seconds from the answer to the close
            r.after = r.rest + seen
        return r
    finally:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()
        t.join(timeout)


def wait_closed(sock, timeout):
    """Reads and discards until EOF/reset; returns (closed, seconds waited, bytes seen)."""
    t0 = time.monotonic()
    seen = b""
    while time.monotonic() - t0 < timeout:
        try:
            d = recv_some(sock, max(0.01, timeout - (time.monotonic() - t0)))
        except (ConnectionResetError, BrokenPipeError):
            return True, time.monotonic() - t0, seen
        if d == b"":
            return True, time.monotonic() - t0, seen
        if d is None:
            break
        seen += d
    return False, time.monotonic() - t0, seen


def http_request_bytes(method, path, body=b"", headers=None, version="HTTP/1.1"):
    hd = {"Host": "127.0.0.1", "Content-Type": "application/json", "Content-Length": str(len(body))}
    hd.update(headers or {})
    head = "%s %s %s\r\n" % (method, path, version) + "".join(
        "%s: %s\r\n" % (k, v) for k, v in hd.items() if v is not None) + "\r\n"
    return head.encode("latin-1") + body


# ---- streamed chats -------------------------------------------------------------------------------

class Stream:
    """A streamed chat read to its end: the concatenated delta contents as UTF-8 bytes,
    finish_reason, usage, whether [DONE] came, and every problem seen on the way."""

    def __init__(self):
        self.status = None
        self.content = b""
        self.finish_reason = None
        self.usage = None
        self.done = False
        self.chunks = 0
        self.problems = []
        self.error_body = b""

    def ok(self):
        return self.status == 200 and self.done and self.finish_reason is not None and not self.problems


def parse_sse_events(text_lines, st):
    """Feeds the SSE lines (str, without newline) of one chat stream into the Stream st."""
    ids = set()
    for line in text_lines:
        if not line.startswith("data:"):
            if line.strip() and not line.startswith(":"):  # ":" starts an SSE comment (keep-alive)
                st.problems.append("unexpected SSE line %r" % line[:100])
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            if st.done:
                st.problems.append("two [DONE]")
            st.done = True
            continue
        if st.done:
            st.problems.append("data after [DONE]")
        try:
            c = json.loads(payload)
        except ValueError:
            st.problems.append("chunk is not JSON: %r" % payload[:100])
            continue
        st.chunks += 1
        if c.get("object") != "chat.completion.chunk":
            st.problems.append("chunk object %r" % c.get("object"))
        ids.add(c.get("id"))
        if c.get("usage"):
            st.usage = c["usage"]
        for ch in c.get("choices", []):
            d = ch.get("delta", {})
            if isinstance(d.get("content"), str):
                st.content += d["content"].encode("utf-8")
            if ch.get("finish_reason") is not None:
                if st.finish_reason is not None:
                    st.problems.append("two finish_reasons")
                st.finish_reason = ch["finish_reason"]
    if len(ids) > 1:
        st.problems.append("chunk ids differ: %r" % sorted(map(str, ids))[:3])


def stream_chat(port, body, timeout=120, headers=None):
    """POSTs body (stream: true added) to /v1/chat/completions and reads the SSE stream to its end
    with http.client (which checks the chunked framing: an unterminated body raises)."""
    st = Stream()
    body = dict(body, stream=True)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    deadline = time.monotonic() + timeout
    try:
        c.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(),
                  headers=dict({"Content-Type": "application/json"}, **(headers or {})))
        r = c.getresponse()
        st.status = r.status
        if r.status != 200:
            st.error_body = r.read()
            st.problems.append("status %d: %r" % (r.status, st.error_body[:200]))
            return st
        ctype = r.getheader("Content-Type", "")
        if not ctype.startswith("text/event-stream"):
            st.problems.append("Content-Type %r" % ctype)
        lines = []
        while time.monotonic() < deadline:
            ln = r.readline()
            if not ln:
                break
            lines.append(ln.decode("utf-8", "strict").rstrip("\r\n"))
        else:
            st.problems.append("stream still open after %d s" % timeout)
        parse_sse_events(lines, st)
        if not st.done:
            st.problems.append("no data: [DONE]")
    except (OSError, http.client.HTTPException, UnicodeDecodeError) as e:
        st.problems.append("%s: %s" % (type(e).__name__, e))
    finally:
        c.close()
    return st


def chat_body(text, max_tokens=24, seed=7, temperature=1.0, system=None, **extra):
    msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
    b = {"model": "m", "messages": msgs, "max_tokens": max_tokens, "seed": seed, "temperature": temperature}
    b.update(extra)
    return b


# ---- /metrics -------------------------------------------------------------------------------------

def metrics(port, timeout=10):
    """GET /metrics parsed: {name: value} for every sample line (labels folded into the name)."""
    st, hd, body = request(port, "GET", "/metrics", timeout=timeout, headers={"Connection": "close"})
    if st != 200:
        raise AssertionError("/metrics: %d %r" % (st, body[:200]))
    out = {}
    for line in body.decode("utf-8", "replace").splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([A-Za-z_:][A-Za-z0-9_:]*(?:\{[^}]*\})?)\s+(\S+)", line)
        if m:
            try:
                out[m.group(1)] = float(m.group(2))
            except ValueError:
                pass
    return out


def find_metric(ms, *patterns):
    """The value of the first metric whose name matches one of the regexes; raises naming them all."""
    for p in patterns:
        for k, v in ms.items():
            if re.search(p, k):
                return v
    raise AssertionError("no metric matching %s among %s" % (patterns, sorted(ms)))


ACTIVE_SLOTS = (r"active_slots", r"slots_active", r"slots_processing", r"requests_processing")
GENERATED = (r"generated_tokens", r"tokens_generated", r"tokens_predicted", r"completion_tokens")
