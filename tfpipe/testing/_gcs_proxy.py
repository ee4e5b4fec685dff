"""The LocalGCS proxy: runs in its own process, started by `tfpipe.testing.gcs.LocalGCS`.

It listens on 127.0.0.1 and serves three kinds of request:
- CONNECT to the Google storage hosts (TensorFlow via `https_proxy`): TLS is terminated with
  the test certificate and the requests inside the tunnel are forwarded to the emulator.
  CONNECT to any other host is refused with 403.
- origin-form requests (google-cloud-storage via `STORAGE_EMULATOR_HOST`): forwarded as is.
- `/__localgcs/...`: the parent's control API (fault rules, shaping and the request log).

Storage requests on both routes can be shaped (`_shaping.Shaping`: latency to the first byte,
bandwidth per connection, a request rate answered 429 above it); control calls never are.

Every forwarded body is re-framed with a plain Content-Length (TF sends `Transfer-Encoding:
chunked` and `Content-Length` together; the emulator trusts the latter and would store the
chunk framing). It is a separate process because some TF calls hold the GIL during network
I/O, which would deadlock a proxy thread in the caller's process.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import os
import shutil
import socketserver
import ssl
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from email.parser import BytesParser
from typing import Literal
from urllib.parse import parse_qs, quote, urlsplit

if __package__:
    from tfpipe.testing._shaping import CHUNK, Pacer, Shaping, ShapingBox, retry_after
else:  # run as the proxy's script (see LocalGCS.start): this folder is sys.path[0]
    from _shaping import CHUNK, Pacer, Shaping, ShapingBox, retry_after  # type: ignore[no-redef]

GOOGLE_STORAGE_HOSTS = ("www.googleapis.com", "storage.googleapis.com")
Route = Literal["tls", "plain"]
CONTROL_PREFIX = "/__localgcs/"
# Headers that describe one hop; the proxy re-frames every body with a plain Content-Length.
_HOP_HEADERS = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "expect",
        "content-length",
    }
)


@dataclass(frozen=True, slots=True)
class ProxiedRequest:
    """One request the proxy answered.

    `injected`: the status came from a fault rule. `forwarded`: the request reached the
    emulator (False for a plain fault, a throttled request or a refusal; True for `lose_reply`
    faults). `throttled`: answered 429 for going above the shaped request rate.
    `bytes_in`, `bytes_out`: the request's and the response's body sizes. `byte_range`: the
    request's Range header ("bytes=0-67108863"), "" without one.
    """

    route: Route
    method: str
    host: str
    path: str
    status: int
    injected: bool = False
    forwarded: bool = True
    throttled: bool = False
    bytes_in: int = 0
    bytes_out: int = 0
    byte_range: str = ""


def http_request(
    port: int,
    method: str,
    path: str,
    body: bytes = b"",
    headers: list[tuple[str, str]] | None = None,
    host: str | None = None,
    timeout: float = 60.0,
) -> tuple[int, list[tuple[str, str]], bytes]:
    """One request to 127.0.0.1:port on a fresh connection (the emulator speaks HTTP/1.0)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host or f"127.0.0.1:{port}")
        for k, v in headers or ():
            if k.lower() not in _HOP_HEADERS and k.lower() != "host":
                conn.putheader(k, v)
        if body or method in ("POST", "PUT", "PATCH"):
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body or None)
        resp = conn.getresponse()
        return resp.status, resp.getheaders(), resp.read()
    finally:
        conn.close()


def _json_reply(status: int, obj: object) -> tuple[int, list[tuple[str, str]], bytes]:
    return status, [("Content-Type", "application/json")], json.dumps(obj).encode()


def _gcs_error(status: int, message: str, reason: str) -> tuple[int, list[tuple[str, str]], bytes]:
    return _json_reply(
        status,
        {"error": {"code": status, "message": message, "errors": [{"reason": reason, "message": message}]}},
    )


class _ProxyState:
    """Fault rules, shaping, the request log and upload preconditions, shared by the proxy threads."""

    def __init__(self, emulator_port: int) -> None:
        self.emulator_port = emulator_port
        self.shaping = ShapingBox()
        self.lock = threading.Lock()
        self.write_lock = threading.Lock()  # precondition check + write, as one step
        self.rules: dict[int, dict] = {}
        self.log: list[dict] = []
        self.resumable: dict[str, tuple[str, str, int]] = {}  # upload_id -> precondition
        self.has_bytes: set[str] = set()  # upload_ids the emulator holds data for
        self.completed: dict[str, tuple[int, list[tuple[str, str]], bytes]] = {}
        self.in_flight = 0  # storage requests between their headers and their reply's end
        self.peak_in_flight = 0

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """Counts one storage request in flight, for `peak_in_flight`."""
        with self.lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            yield
        finally:
            with self.lock:
                self.in_flight -= 1

    def control(self, method: str, path: str, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        """The parent's API: faults (add, read, cancel), shaping (read, set) and the request log."""
        url = urlsplit(path)
        what = url.path[len(CONTROL_PREFIX) :].strip("/").split("/")
        if what == ["shaping"]:
            if method == "POST":
                try:
                    self.shaping.set(Shaping.from_json(json.loads(body)))
                except (ValueError, TypeError) as e:
                    return _json_reply(400, {"error": str(e)})
            return _json_reply(200, self.shaping.shaping.to_json())
        with self.lock:
            if what == ["concurrency"]:
                peak = self.peak_in_flight
                if method == "DELETE":
                    self.peak_in_flight = self.in_flight
                return _json_reply(200, {"peak": peak, "now": self.in_flight})
            if what == ["faults"] and method == "POST":
                rule = {**json.loads(body), "served": 0, "id": len(self.rules) + 1}
                self.rules[rule["id"]] = rule
                return _json_reply(200, rule)
            if what == ["faults"] and method == "DELETE":
                for rule in self.rules.values():
                    rule["count"] = rule["served"]
                return _json_reply(200, {})
            if len(what) == 2 and what[0] == "faults" and int(what[1]) in self.rules:
                rule = self.rules[int(what[1])]
                if method == "DELETE":
                    rule["count"] = rule["served"]
                return _json_reply(200, rule)
            if what == ["requests", "count"] and method == "GET":
                return _json_reply(200, len(self.log))
            if what == ["requests"] and method == "GET":
                since = int(parse_qs(url.query).get("since", ["0"])[0])
                return _json_reply(200, self.log[since:])
        return _json_reply(404, {"error": f"no control endpoint {method} {path}"})

    def record(self, entry: ProxiedRequest) -> None:
        with self.lock:
            self.log.append(asdict(entry))

    def take_fault(self, route: Route, method: str, path: str) -> dict | None:
        with self.lock:
            for rule in self.rules.values():
                if (
                    rule["served"] < rule["count"]
                    and (not rule["methods"] or method in rule["methods"])
                    and (not rule["path_contains"] or rule["path_contains"] in path)
                    and (not rule["route"] or rule["route"] == route)
                ):
                    rule["served"] += 1
                    return rule
        return None

    def handle(
        self, route: Route, method: str, host: str, path: str, headers: list[tuple[str, str]], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        byte_range = next((v for k, v in headers if k.lower() == "range"), "")
        entry = ProxiedRequest(route, method, host, path, 0, bytes_in=len(body), byte_range=byte_range)
        wait = self.shaping.admit(method)
        if wait:
            status, out, data = _gcs_error(
                429, "LocalGCS: above the shaped request rate", "rateLimitExceeded"
            )
            self.record(replace(entry, status=429, forwarded=False, throttled=True, bytes_out=len(data)))
            return status, [*out, ("Retry-After", retry_after(wait))], data
        rule = self.take_fault(route, method, path)
        if rule is not None and not rule["lose_reply"]:
            reply = _gcs_error(rule["status"], "injected by LocalGCS", "backendError")
            self.record(
                replace(entry, status=reply[0], injected=True, forwarded=False, bytes_out=len(reply[2]))
            )
            return reply
        try:
            reply = self.forward(method, host, path, headers, body)
        except (OSError, http.client.HTTPException) as e:
            reply = 502, [], f"LocalGCS: the emulator failed: {e!r}".encode()
        if rule is not None:  # lose_reply: the request landed, the client hears a failure
            reply = _gcs_error(rule["status"], "injected by LocalGCS after forwarding", "backendError")
            self.record(replace(entry, status=reply[0], injected=True, bytes_out=len(reply[2])))
            return reply
        self.record(replace(entry, status=reply[0], bytes_out=len(reply[2])))
        return reply

    def forward(
        self, method: str, host: str, path: str, headers: list[tuple[str, str]], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        query = parse_qs(urlsplit(path).query)
        upload_id = query.get("upload_id", [None])[0]
        want = query.get("ifGenerationMatch", [None])[0]
        target = None
        if method == "POST" and want is not None:
            target = _upload_target(path, {k.lower(): v for k, v in headers}, body)
        elif method == "PUT" and upload_id in self.completed:
            # GCS answers a finished upload's status query with the object; the emulator has
            # forgotten the session (404), which would make TF upload everything again.
            return self.completed[upload_id]
        elif method == "PUT" and upload_id in self.resumable:
            *target, want = self.resumable[upload_id]
        with self.write_lock if target else contextlib.nullcontext():
            if target and (current := self.generation(*target)) != int(want):
                return _gcs_error(
                    412,
                    f"ifGenerationMatch={want} but gs://{target[0]}/{target[1]} is at generation {current}",
                    "conditionNotMet",
                )
            status, out, data = http_request(self.emulator_port, method, path, body, headers, host)
        if method == "PUT" and upload_id:
            out = self._fix_resume_range(upload_id, status, out, body)
            if status in (200, 201):
                self.completed[upload_id] = status, out, data
        for k, v in out:  # a resumable upload: check the precondition again as it completes
            if target and method == "POST" and k.lower() == "location" and "upload_id=" in v:
                self.resumable[parse_qs(urlsplit(v).query)["upload_id"][0]] = (*target, int(want))
        return status, out, data

    def _fix_resume_range(
        self, upload_id: str, status: int, headers: list[tuple[str, str]], body: bytes
    ) -> list[tuple[str, str]]:
        """Drops the emulator's `Range: bytes=0-0` when it holds no byte of the upload.

        GCS sends no Range header then; the emulator's claim of one byte makes TF resume at
        offset 1 after a failed PUT, and the upload fails with 400.
        """
        if body and status in (200, 308):
            self.has_bytes.add(upload_id)
        if status == 308 and upload_id not in self.has_bytes:
            return [(k, v) for k, v in headers if k.lower() != "range"]
        return headers

    def generation(self, bucket: str, name: str) -> int:
        path = f"/storage/v1/b/{quote(bucket, safe='')}/o/{quote(name, safe='')}"
        status, _, data = http_request(self.emulator_port, "GET", path)
        return int(json.loads(data)["generation"]) if status == 200 else 0


def _upload_target(path: str, headers: dict[str, str], body: bytes) -> tuple[str, str] | None:
    """(bucket, object) of an upload-starting POST (media, multipart or resumable), or None."""
    url = urlsplit(path)
    parts = url.path.split("/")  # ['', 'upload', 'storage', 'v1', 'b', BUCKET, 'o']
    if not (url.path.startswith("/upload/storage/v1/b/") and len(parts) == 7 and parts[6] == "o"):
        return None
    query = parse_qs(url.query)
    if "name" in query:
        return parts[5], query["name"][0]
    ctype = headers.get("content-type", "")
    with contextlib.suppress(ValueError, LookupError, AttributeError, TypeError):
        if ctype.startswith("multipart/"):
            # Only the first part (the metadata) is parsed: the whole body costs the proxy
            # 30 ms of CPU per MB, which competes with the code under test.
            boundary = BytesParser().parsebytes(f"Content-Type: {ctype}\r\n\r\n".encode()).get_boundary()
            delimiter = b"--" + boundary.encode()
            start = body.index(delimiter) + len(delimiter)
            first = BytesParser().parsebytes(body[start : body.index(delimiter, start)].lstrip(b"\r\n"))
            return parts[5], json.loads(first.get_payload())["name"]
        return parts[5], json.loads(body)["name"]
    return None


class _ProxyServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def __init__(self, state: _ProxyState, ssl_context: ssl.SSLContext) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.state = state
        self.ssl_context = ssl_context

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client hanging up mid-request is routine (curl drops idle connections)


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, and BaseHTTPRequestHandler sends 100 Continue
    server: _ProxyServer
    tls_host: str | None = None

    def log_message(self, format: str, *args: object) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        # One pacer per direction of this connection (a TLS tunnel keeps its handler).
        self._pace_in = Pacer(self.server.state.shaping)
        self._pace_out = Pacer(self.server.state.shaping)

    def do_CONNECT(self) -> None:
        host, _, port = self.path.rpartition(":")
        if host not in GOOGLE_STORAGE_HOSTS or port != "443":
            self._refuse(host or self.path)
            return
        self.send_response(200, "Connection established")
        self.end_headers()
        tls = self.server.ssl_context.wrap_socket(self.connection, server_side=True)
        self.connection = tls
        self.rfile = tls.makefile("rb", -1)
        self.wfile = socketserver._SocketWriter(tls)  # type: ignore[attr-defined]
        self.tls_host = host
        self.close_connection = False  # go on serving the requests inside the tunnel

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        if self.tls_host:
            with contextlib.suppress(OSError):
                self.connection.close()

    def do_request(self) -> None:
        arrival = time.monotonic()  # the headers are read: the first byte's delay counts from here
        route: Route = "tls" if self.tls_host else "plain"
        host, path = self.tls_host or self.headers.get("Host", ""), self.path
        if "://" in path:  # absolute-form: a client using us as its plain-HTTP forward proxy
            url = urlsplit(path)
            host, path = url.hostname or "", url.path + (f"?{url.query}" if url.query else "")
            if host not in GOOGLE_STORAGE_HOSTS:
                self._refuse(host)
                return
        state = self.server.state
        if route == "plain" and path.startswith(CONTROL_PREFIX):
            self._reply(*state.control(self.command, path, self._read_body(paced=False)))
            return
        with state.serving():
            body = self._read_body(paced=True)
            status, headers, data = state.handle(
                route, self.command, host, path, list(self.headers.items()), body
            )
            if self.tls_host:
                # The emulator builds Location from Host as http://; keep TF inside the tunnel.
                headers = [
                    (k, v.replace(f"http://{host}/", f"https://{host}/", 1) if k.lower() == "location" else v)
                    for k, v in headers
                ]
            self._reply(status, headers, data, first_byte_at=state.shaping.first_byte_at(arrival))

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_request

    def _read_body(self, paced: bool) -> bytes:
        read = self._read_paced if paced else self.rfile.read
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            # Chunked framing wins over Content-Length (RFC 9112, 6.3); TF sends both.
            parts = []
            while size := int(self.rfile.readline(1 << 16).split(b";")[0].strip() or b"0", 16):
                parts.append(read(size))
                self.rfile.readline(1 << 16)
            while self.rfile.readline(1 << 16).strip():
                pass  # trailers
            return b"".join(parts)
        n = int(self.headers.get("Content-Length") or 0)
        return read(n) if n else b""

    def _read_paced(self, n: int) -> bytes:
        """`n` bytes of the request body, read no faster than mbps_per_stream."""
        parts = []
        self._pace_in.begin()
        while n > 0:
            self._pace_in.wait(min(n, CHUNK))
            part = self.rfile.read(min(n, CHUNK))
            if not part:
                break
            parts.append(part)
            n -= len(part)
        return b"".join(parts)

    def _refuse(self, host: str) -> None:
        self.server.state.record(ProxiedRequest("plain", self.command, host, self.path, 403, False, False))
        self.close_connection = True
        self._reply(
            403,
            [],
            f"LocalGCS proxy serves only {', '.join(GOOGLE_STORAGE_HOSTS)}; refused {host}\n".encode(),
        )

    def _reply(
        self, status: int, headers: list[tuple[str, str]], data: bytes, first_byte_at: float | None = None
    ) -> None:
        """Sends a response; a storage response (`first_byte_at` given) is shaped: its first
        byte waits for that monotonic time, and its body goes at mbps_per_stream."""
        if first_byte_at is not None and (delay := first_byte_at - time.monotonic()) > 0:
            time.sleep(delay)
        self.send_response(status)
        for k, v in headers:
            if k.lower() not in _HOP_HEADERS and k.lower() not in ("server", "date"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command == "HEAD":
            return
        if first_byte_at is None:
            self.wfile.write(data)
            return
        view = memoryview(data)
        self._pace_out.begin()
        for start in range(0, len(view), CHUNK):
            self._pace_out.wait(len(view[start : start + CHUNK]))
            self.wfile.write(view[start : start + CHUNK])


def _exit_when_stdin_closes(owned_dir: str | None = None) -> None:
    """Ends this child when the parent closes the pipe or dies, even by SIGKILL.

    `owned_dir`, the LocalGCS temp dir (certificates, logs), is removed on the way out: a
    SIGKILLed parent cannot remove it itself.
    """

    def watch() -> None:
        sys.stdin.buffer.read()
        if owned_dir:
            shutil.rmtree(owned_dir, ignore_errors=True)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def main(emulator_port: int, cert: str, key: str, owned_dir: str | None = None) -> None:
    _exit_when_stdin_closes(owned_dir)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server = _ProxyServer(_ProxyState(emulator_port), ctx)
    print(f"READY {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3], *sys.argv[4:5])
