#!/usr/bin/env python3
"""Two ml_server replicas behind nginx (e2e/server/nginx.conf.in, docs/server.md "Replicas"):
both serve, a conversation (X-Session-Id) stays on one replica, the replicas give the same greedy
reply, and when one is killed its conversations move to the other without an error.

  test_replicas.py --bin BUILD/bin --shared SHARED --work DIR [--nginx /usr/sbin/nginx]

Prints SKIP (and exits 0, a CTest skip) only when nginx is not installed."""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cli"))
import harness as h  # noqa: E402

SMOL = "data/hf/smollm2-135m-instruct/tokenizer.json"
DEADLINE = 60  # seconds for anything to come up


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_replica(exe, model, log):
    """ml_server --port 0 prints `listening on http://HOST:PORT` as its first line."""
    p = subprocess.Popen([exe, model, "--host", "127.0.0.1", "--port", "0", "--parallel", "2", "--ctx", "256"],
                         stdout=subprocess.PIPE, stderr=log, text=True)
    line = p.stdout.readline().strip()
    if not line.startswith("listening on http://"):
        p.kill()
        raise RuntimeError("ml_server did not start: first line %r" % line)
    return p, line[len("listening on http://"):]


def request(base, path, body=None, session=None, timeout=30):
    """(status, headers, parsed JSON body or text)."""
    data = json.dumps(body).encode() if body is not None else None
    rq = urllib.request.Request(base + path, data=data, method="POST" if body is not None else "GET")
    rq.add_header("Content-Type", "application/json")
    if session:
        rq.add_header("X-Session-Id", session)
    try:
        with urllib.request.urlopen(rq, timeout=timeout) as r:
            raw, status, headers = r.read(), r.status, r.headers
    except urllib.error.HTTPError as e:
        raw, status, headers = e.read(), e.code, e.headers
    try:
        return status, headers, json.loads(raw)
    except ValueError:
        return status, headers, raw.decode(errors="replace")


def wait_until(fn, what):
    end = time.time() + DEADLINE
    while time.time() < end:
        try:
            if fn():
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("timed out waiting for " + what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nginx", default="/usr/sbin/nginx")
    env, a = h.env_from_args(ap)
    if not os.path.exists(a.nginx):
        print("SKIP (nginx): %s is not installed (Debian package nginx; scripts/install-deps installs it)" % a.nginx)
        return 0
    model = env.path("replica-model.mlb")
    if not os.path.exists(model):
        h.run([env.exe("ml_convert"), "random", "--dim", "64", "--hidden", "128", "--layers", "2", "--heads", "2",
               "--kv-heads", "1", "--vocab", "49152", "--max-seq", "512", "--rope-type", "half", "--tokenizer",
               env.shared_path(SMOL), "-o", model])
    tmp = tempfile.mkdtemp(prefix="krafla-nginx-")
    procs = []
    fails = h.Failures()
    try:
        log = open(os.path.join(tmp, "replicas.log"), "w")
        r1, addr1 = start_replica(env.exe("ml_server"), model, log)
        procs.append(r1)
        r2, addr2 = start_replica(env.exe("ml_server"), model, log)
        procs.append(r2)
        # ml_server listens before it loads the model and answers /health with 503 until then;
        # nginx would take a loading replica for a failed one (proxy_next_upstream) and skip it.
        for addr in (addr1, addr2):
            wait_until(lambda addr=addr: request("http://" + addr, "/health")[0] == 200, "replica " + addr)
        port = free_port()
        conf = open(os.path.join(HERE, "nginx.conf.in")).read()
        for k, v in {"@PREFIX@": tmp, "@LISTEN@": "127.0.0.1:%d" % port, "@REPLICA_1@": addr1,
                     "@REPLICA_2@": addr2}.items():
            conf = conf.replace(k, v)
        with open(os.path.join(tmp, "nginx.conf"), "w") as f:
            f.write(conf)
        ng = subprocess.Popen([a.nginx, "-p", tmp, "-c", os.path.join(tmp, "nginx.conf"), "-g", "daemon off;"],
                              stdout=log, stderr=log)
        procs.append(ng)
        base = "http://127.0.0.1:%d" % port
        wait_until(lambda: request(base, "/health")[0] == 200, "nginx and the replicas")

        body = {"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}
        served = {}  # session -> replica address
        replies = {}
        for i in range(16):
            sid = "conversation-%d" % i
            st, hd, js = request(base, "/v1/completions", body, session=sid)
            fails.check(st == 200, "%s: status %d %s" % (sid, st, js))
            served[sid] = hd.get("X-Upstream")
            replies[sid] = js["choices"][0]["text"] if st == 200 else None
        fails.check(set(served.values()) == {addr1, addr2},
                    "both replicas serve: %s" % sorted(set(served.values())))
        fails.check(len(set(replies.values())) == 1, "every replica gives the same greedy reply: %s" % set(replies.values()))
        # Affinity: a conversation's next turns go to the replica that holds its prefix.
        for sid in list(served)[:6]:
            for _ in range(2):
                st, hd, _ = request(base, "/v1/completions", body, session=sid)
                fails.check(st == 200 and hd.get("X-Upstream") == served[sid],
                            "%s stays on %s (got %s, status %d)" % (sid, served[sid], hd.get("X-Upstream"), st))
        # A killed replica's conversations move to the other one, without an error.
        r1.send_signal(signal.SIGKILL)
        r1.wait(timeout=DEADLINE)
        moved = [sid for sid, addr in served.items() if addr == addr1]
        for sid in moved:
            st, hd, js = request(base, "/v1/completions", body, session=sid)
            fails.check(st == 200, "%s after the kill: status %d %s" % (sid, st, js))
            fails.check(hd.get("X-Upstream", "").split(",")[-1].strip() == addr2,
                        "%s now served by %s (got %s)" % (sid, addr2, hd.get("X-Upstream")))
            if st == 200:
                fails.check(js["choices"][0]["text"] == replies[sid], "%s: the same reply on the other replica" % sid)
        print("%d conversations, %d moved after the kill" % (len(served), len(moved)))
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGQUIT if p is procs[-1] else signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        if fails:
            print(open(os.path.join(tmp, "replicas.log")).read()[-4000:])
            print(open(os.path.join(tmp, "error.log")).read()[-2000:] if os.path.exists(os.path.join(tmp, "error.log")) else "")
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failed" % len(fails) if fails else "OK")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
