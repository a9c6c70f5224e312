"""Benchmark of the simulator's API server (not a timed test).

The server runs in a child process on a bare store (no simulated controllers); this process
is the client. Prints:

* GETs/s from one keep-alive HTTPS client (GET of one ConfigMap);
* LIST of 5,000 pods with a label selector matching 1/10 of them, and without (ms);
* watch fan-out latency p50/p99 with 50 concurrent watchers (time from sending the write
  to each watcher receiving the event).

    .venv/bin/python benchmarks/api_server.py [--seconds 5] [--watchers 50] [--events 100]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import ssl
import statistics
import sys
import tempfile
import threading
import time
from types import SimpleNamespace
from typing import Any


def _serve(conn: Any, pods: int) -> None:
    from harvester_sim.api.resources import Registry
    from harvester_sim.api.server import ApiServer
    from harvester_sim.api.store import Store
    from harvester_sim.clock import Clock

    store = Store(Registry(), Clock(1.0))
    ns_rt = store.registry.get("", "v1", "namespaces")
    pod_rt = store.registry.get("", "v1", "pods")
    cm_rt = store.registry.get("", "v1", "configmaps")
    assert ns_rt and pod_rt and cm_rt
    store.create(ns_rt, {"metadata": {"name": "bench"}})
    store.create(cm_rt, {"metadata": {"name": "cfg"}, "data": {"k": "v" * 64}}, "bench")
    for i in range(pods):
        store.create(pod_rt, {"metadata": {"name": f"pod-{i:05d}",
                                           "labels": {"app": "bench", "shard": str(i % 10)}},
                              "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}],
                                       "nodeName": f"node-{i % 20}"}}, "bench")
    world = SimpleNamespace(store=store, faults=None, extras={}, proxies=None)
    server = ApiServer(world).start()
    conn.send({"port": server.port, "ca": server.ca_pem.decode(), "token": server.token})
    conn.recv()  # stop
    server.stop()


class Client:
    def __init__(self, port: int, ca: str, token: str) -> None:
        self.ctx = ssl.create_default_context()
        with tempfile.NamedTemporaryFile("w", suffix=".crt", delete=False) as f:
            f.write(ca)
        self.ctx.load_verify_locations(f.name)
        os.unlink(f.name)
        self.port = port
        self.headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}

    def conn(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx,
                                           timeout=60)


def bench_gets(cl: Client, seconds: float) -> float:
    c = cl.conn()
    path = "/api/v1/namespaces/bench/configmaps/cfg"
    n = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while time.perf_counter() < end:
        c.request("GET", path, headers=cl.headers)
        r = c.getresponse()
        r.read()
        assert r.status == 200
        n += 1
    return n / (time.perf_counter() - t0)


def bench_list(cl: Client, selector: str | None, rounds: int = 5) -> tuple[float, int]:
    c = cl.conn()
    path = "/api/v1/namespaces/bench/pods" + (f"?labelSelector={selector}" if selector else "")
    times, count = [], 0
    for _ in range(rounds):
        t0 = time.perf_counter()
        c.request("GET", path, headers=cl.headers)
        body = c.getresponse().read()
        count = len(json.loads(body)["items"])
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), count


def bench_watch(cl: Client, watchers: int, events: int) -> tuple[float, float, int]:
    received: dict[str, list[float]] = {}
    lock = threading.Lock()
    ready = threading.Barrier(watchers + 1)

    def watch() -> None:
        c = cl.conn()
        c.request("GET", "/api/v1/namespaces/bench/configmaps?watch=1&resourceVersion=0"
                         "&timeoutSeconds=120", headers=cl.headers)
        r = c.getresponse()
        first = True
        buf = b""
        while True:
            if first:
                # the synthetic ADDED of the existing ConfigMap tells us the stream is live
                line = r.fp.readline()  # chunk size
                data = r.fp.read(int(line.strip(), 16) + 2)
                first = False
                ready.wait()
                continue
            line = r.fp.readline()
            size = int(line.strip() or b"0", 16)
            if size == 0:
                return
            buf += r.fp.read(size + 2)[:-2]
            now = time.perf_counter()
            while b"\n" in buf:
                ev, buf = buf.split(b"\n", 1)
                name = json.loads(ev)["object"]["metadata"]["name"]
                if name == "stop":
                    return
                with lock:
                    received.setdefault(name, []).append(now)
            _ = data

    threads = [threading.Thread(target=watch, daemon=True) for _ in range(watchers)]
    for t in threads:
        t.start()
    ready.wait()
    time.sleep(0.2)
    c = cl.conn()
    sent: dict[str, float] = {}
    for i in range(events):
        name = f"ev-{i}"
        body = json.dumps({"metadata": {"name": name}}).encode()
        sent[name] = time.perf_counter()
        c.request("POST", "/api/v1/namespaces/bench/configmaps", body=body,
                  headers={**cl.headers, "Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        time.sleep(0.02)
    c.request("POST", "/api/v1/namespaces/bench/configmaps",
              body=json.dumps({"metadata": {"name": "stop"}}).encode(),
              headers={**cl.headers, "Content-Type": "application/json"})
    c.getresponse().read()
    for t in threads:
        t.join(30)
    lat = sorted(max(0.0, (t - sent[n]) * 1000) for n, ts in received.items() for t in ts)
    p50 = lat[len(lat) // 2]
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    return p50, p99, len(lat)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--watchers", type=int, default=50)
    ap.add_argument("--events", type=int, default=100)
    args = ap.parse_args(argv)
    parent, child = mp.Pipe()
    proc = mp.get_context("fork").Process(target=_serve, args=(child, args.pods), daemon=True)
    proc.start()
    info = parent.recv()
    cl = Client(info["port"], info["ca"], info["token"])
    try:
        gets = bench_gets(cl, args.seconds)
        print(f"GET (one keep-alive client):          {gets:8.0f} req/s")
        ms, n = bench_list(cl, "shard%3D3")
        print(f"LIST {args.pods} pods, labelSelector ({n} match): {ms:8.1f} ms")
        ms, n = bench_list(cl, None, rounds=3)
        print(f"LIST {args.pods} pods, no selector ({n} items):  {ms:8.1f} ms")
        p50, p99, samples = bench_watch(cl, args.watchers, args.events)
        print(f"watch fan-out, {args.watchers} watchers ({samples} deliveries): "
              f"p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    finally:
        parent.send("stop")
        proc.join(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
