"""moto's S3 server on 127.0.0.1 with every request counted, for bench/shapes.py."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

# moto's server behind a WSGI middleware counting requests by kind (and response bytes), in its
# own process: Spark's Python workers are processes of their own, so counting at the server is
# the one place every request is seen. GET /_requests returns the counts (?reset clears them).
MOTO_SERVER = r"""
import json, sys, threading
from collections import Counter
from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

app = DomainDispatcherApplication(create_backend_app)
counts, lock = Counter(), threading.Lock()

def kind(environ):
    method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "/")
    bucket, _, key = path.lstrip("/").partition("/")
    if not key:
        return "LIST" if method == "GET" else method + " bucket"
    if method == "GET":
        return "GET range" if environ.get("HTTP_RANGE") else "GET"
    return method

def counting(environ, start_response):
    if environ.get("PATH_INFO") == "/_requests":
        with lock:
            body = json.dumps(dict(counts)).encode()
            if environ.get("QUERY_STRING") == "reset":
                counts.clear()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]
    with lock:
        counts[kind(environ)] += 1
        counts["bytes_in"] += int(environ.get("CONTENT_LENGTH") or 0)

    def start(status, headers, *rest):
        size = next((int(v) for k, v in headers if k.lower() == "content-length"), 0)
        with lock:
            counts["bytes_out"] += size
        return start_response(status, headers, *rest)
    return app(environ, start)

server = make_server("127.0.0.1", int(sys.argv[1]), counting, threaded=True, request_handler=MotoRequestHandler)
server.serve_forever()
"""


class RequestCounter:
    def __init__(self, endpoint: str):
        self.endpoint = endpoint

    def _get(self, query: str = "") -> dict:
        with urllib.request.urlopen(f"{self.endpoint}/_requests{query}", timeout=10) as r:
            return json.loads(r.read())

    def reset(self) -> None:
        self._get("?reset")

    def read(self) -> dict:
        return self._get()


def start_moto() -> tuple[subprocess.Popen, str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-c", MOTO_SERVER, str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            RequestCounter(endpoint).read()
            return server, endpoint
        except OSError:
            if time.time() > deadline or server.poll() is not None:
                server.kill()
                raise RuntimeError("moto's S3 server did not start")
            time.sleep(0.2)


def hadoop_aws_available() -> bool:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    return any("hadoop-aws" in p.name for p in jars.glob("*.jar"))
