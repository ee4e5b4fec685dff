"""A local twin of Google Cloud Storage that TensorFlow's own gs:// code can talk to.

TensorFlow 2.21 compiles the Google hosts into its GCS filesystem and reads no emulator
variable, so an emulator alone is not enough. `LocalGCS` starts two child processes:

- gcp-storage-emulator, in memory, on 127.0.0.1;
- a threaded proxy on 127.0.0.1 that TensorFlow reaches through `https_proxy` (CONNECT to
  the Google storage hosts only, TLS terminated with a certificate from a throwaway CA), and
  that the google-cloud-storage client reaches as `STORAGE_EMULATOR_HOST` (plain HTTP). Both
  paths share fault injection, shaping and a request log. The proxy also fixes what the emulator
  lacks: it de-chunks TF's uploads (TF sends `Transfer-Encoding: chunked` *and*
  `Content-Length`), answers `100 Continue` itself, and enforces `ifGenerationMatch` on
  uploads, which gcp-storage-emulator accepts but ignores.

The proxy is a separate process on purpose: some TF calls (`tf.io.TFRecordWriter`) hold the
GIL while they do network I/O, so a proxy thread in the test process would deadlock them.
Both children exit when their stdin pipe closes, so they die with the test process
(`_gcs_children` starts them, waits until they serve and ends them).

Ordering: TensorFlow reads the `GCS_*` tuning variables (retries, stat cache) once, when its
gs:// filesystem is created inside `import tensorflow`: set `TF_GCS_TEST_ENV` before TF is
imported (tests/conftest.py does). The proxy, CA and token variables are read per request, so
`activate()` works at any time. TF also sleeps 0-1 s of random jitter before every retry,
whatever the retry variables say, so each fault injected on TF's path costs ~0.5 s.

Shaping makes loopback behave like a network to GCS (all off by default; see `Shaping`):
`LocalGCS(first_byte_ms=30, mbps_per_stream=150)`, `LocalGCS.like_gcs()` for published GCS
figures, or `gcs.shape(...)` / `with gcs.shaped(...):` while it runs.

Example:
    with LocalGCS() as gcs, gcs.activate():
        bucket = gcs.create_bucket("my-test-bucket")      # "gs://my-test-bucket"
        tf.io.gfile.GFile(bucket + "/a.txt", "w").write("hi")
        with gcs.inject_faults(status=503, count=2, methods=("GET",)) as fault:
            assert tf.io.gfile.GFile(bucket + "/a.txt").read() == "hi"
        assert fault.served == 2
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from typing import Any

from tfpipe import storage
from tfpipe.testing._certs import make_certs
from tfpipe.testing._gcs_children import end, start_emulator, start_proxy
from tfpipe.testing._gcs_proxy import (
    CONTROL_PREFIX,
    GOOGLE_STORAGE_HOSTS,
    ProxiedRequest,
    Route,
    http_request,
)
from tfpipe.testing._shaping import LIKE_GCS, Shaping

__all__ = [
    "GOOGLE_STORAGE_HOSTS",
    "LIKE_GCS",
    "TF_GCS_TEST_ENV",
    "FaultRule",
    "LocalGCS",
    "ProxiedRequest",
    "Shaping",
]


# ---- the parent-side API ----


class FaultRule:
    """A handle on injected faults. As a context manager, leaving cancels what is unserved."""

    def __init__(self, gcs: LocalGCS, rule: dict) -> None:
        self._gcs, self.id = gcs, rule["id"]
        self.status, self.count = rule["status"], rule["count"]

    @property
    def served(self) -> int:
        """How many requests got this fault so far (asked of the proxy)."""
        return self._gcs._control("GET", f"faults/{self.id}")["served"]

    def cancel(self) -> None:
        self._gcs._control("DELETE", f"faults/{self.id}")

    def __enter__(self) -> FaultRule:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class LocalGCS:
    """Emulator + TLS proxy + fault injection + shaping, as a context manager.

    The four arguments are the `Shaping` of storage requests from the start (all off by
    default); `shape()` changes it later.

    Args:
      first_byte_ms: the delay to a storage response's first byte (0: none).
      mbps_per_stream: MB/s per connection, each direction (None: no limit).
      max_requests_per_s: requests a second above which the twin answers HTTP 429 (None: no limit).
      max_writes_per_s: the same for uploads, updates and deletes (None: no limit).

    Attributes:
      endpoint: plain-HTTP URL of the proxy: `STORAGE_EMULATOR_HOST` and `https_proxy`.
      ca_file: PEM of the throwaway CA (`CURL_CA_BUNDLE`).
      emulator_port: where gcp-storage-emulator itself listens (bypasses faults, shaping and
        the log).
    """

    def __init__(
        self,
        *,
        first_byte_ms: float = 0.0,
        mbps_per_stream: float | None = None,
        max_requests_per_s: float | None = None,
        max_writes_per_s: float | None = None,
    ) -> None:
        self._shaping = Shaping(first_byte_ms, mbps_per_stream, max_requests_per_s, max_writes_per_s)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._emulator: subprocess.Popen[bytes] | None = None
        self._proxy: subprocess.Popen[bytes] | None = None
        self.emulator_port = 0
        self.proxy_port = 0
        self.ca_file = ""

    @classmethod
    def like_gcs(cls, **overrides: float | None) -> LocalGCS:
        """A LocalGCS shaped like a Standard-class regional bucket read from a VM in its region
        (`LIKE_GCS`), with `overrides` of any `Shaping` field. The figures:

        - first_byte_ms=30: GCS gives "time to first byte typically tens of milliseconds"
          (https://cloud.google.com/storage/docs/storage-classes). No Google page gives one
          figure; 30 ms is what Google's own Cloud Storage FUSE benchmark implies: one thread
          reading 4 KiB files one at a time gets 0.13 MB/s, 31 ms a file, all of it latency
          (https://github.com/GoogleCloudPlatform/gcsfuse/blob/master/docs/grpc_benchmarks.md,
          HTTP, direct=0; 51 ms with direct=1).
        - mbps_per_stream=150: the same benchmark reads 1 GiB files on one thread at 157-180
          MB/s over HTTP (118-139 MB/s for 50 MB files, a first byte per file included). Its
          one-thread writes reach 53-67 MB/s, which one figure for both directions does not
          model.
        - max_requests_per_s=5000, max_writes_per_s=1000: a bucket's initial capacity,
          "approximately 1000 object write requests per second ... approximately 5000 object
          read requests per second" (https://cloud.google.com/storage/docs/request-rate). GCS
          counts reads and writes apart; the twin counts a write against both limits. GCS
          raises the capacity as a sustained load ramps up (doubling no faster than every 20
          minutes, same page); the twin's limits stay put.
        """
        return cls(**(dataclasses.asdict(LIKE_GCS) | overrides))

    def __enter__(self) -> LocalGCS:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> LocalGCS:
        """Starts the emulator and the proxy; stops whatever started if a step fails."""
        try:
            # The proxy child removes it too when this process dies: see _gcs_proxy.main.
            self._tmp = tempfile.TemporaryDirectory(prefix="tfpipe-localgcs-", ignore_cleanup_errors=True)
            self.ca_file, cert, key = make_certs(self._tmp.name)
            self._emulator, self.emulator_port = start_emulator(self._tmp.name)
            self._proxy, self.proxy_port = start_proxy(self._tmp.name, self.emulator_port, cert, key)
            if self._shaping.active:
                self._set_shaping(self._shaping)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stops both children and deletes the certificates. Safe to call twice."""
        end(self._proxy)
        end(self._emulator)
        self._proxy = self._emulator = None
        self.proxy_port = self.emulator_port = 0
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    # -- addresses and environment --

    @property
    def endpoint(self) -> str:
        if not self.proxy_port:
            raise RuntimeError("LocalGCS is not running: use `with LocalGCS() as gcs:`")
        return f"http://127.0.0.1:{self.proxy_port}"

    @property
    def env(self) -> dict[str, str]:
        """Variables that point TensorFlow's gs:// code and google-cloud-storage here."""
        return {
            # TF checks this before any credential file or metadata server.
            "GOOGLE_AUTH_TOKEN_FOR_TESTING": "tfpipe-local-gcs",
            "NO_GCE_CHECK": "true",
            "CURL_CA_BUNDLE": self.ca_file,
            "https_proxy": self.endpoint,
            "HTTPS_PROXY": self.endpoint,
            # A stray plain-http request lands here too, and is refused unless it is for Google.
            "http_proxy": self.endpoint,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            **TF_GCS_TEST_ENV,
            # google-cloud-storage (and gcsfs) use the proxy's plain-HTTP side.
            "STORAGE_EMULATOR_HOST": self.endpoint,
        }

    @contextlib.contextmanager
    def activate(self, **overrides: str) -> Iterator[LocalGCS]:
        """Sets `env` (plus `overrides`) in os.environ, restored on exit.

        Also resets tfpipe.storage's cached client on entry and exit. Warns if TensorFlow was
        imported before the `GCS_*` values were in the environment: it keeps its defaults.
        """
        new = {**self.env, **overrides}
        saved = {k: os.environ.get(k) for k in new}
        late = [k for k in new if k.startswith("GCS_") and saved[k] != new[k]]
        if late and "tensorflow" in sys.modules:
            warnings.warn(
                f"TensorFlow was imported before {', '.join(late)} were set; its gs:// "
                "filesystem keeps its defaults for them (set TF_GCS_TEST_ENV first)",
                stacklevel=3,
            )
        os.environ.update(new)
        storage.reset_client()
        try:
            yield self
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            storage.reset_client()

    def create_bucket(self, name: str) -> str:
        """Creates bucket `name` in the emulator; returns "gs://name"."""
        status, _, data = http_request(
            self.emulator_port,
            "POST",
            "/storage/v1/b?project=tfpipe-local",
            json.dumps({"name": name}).encode(),
            [("Content-Type", "application/json")],
        )
        if status != 200:
            raise RuntimeError(f"creating bucket {name!r} failed: HTTP {status} {data[:300]!r}")
        return f"gs://{name}"

    # -- faults and the request log --

    def inject_faults(
        self,
        status: int = 503,
        count: int = 1,
        *,
        methods: tuple[str, ...] | None = None,
        path_contains: str | None = None,
        route: Route | None = None,
        lose_reply: bool = False,
    ) -> FaultRule:
        """Answers the next `count` matching requests with HTTP `status`.

        Args:
          status: the HTTP status to answer with (e.g. 503, 429, 500).
          count: how many requests get it.
          methods: only these methods, e.g. ("POST", "PUT"); None matches all.
          path_contains: only paths (query included) containing this substring.
          route: "tls" (TensorFlow, via https_proxy), "plain" (STORAGE_EMULATOR_HOST clients),
            or None for both.
          lose_reply: forward the request first, then answer `status`: the write lands but
            the client sees a failure, like a reply lost on the way back.

        Returns:
          A FaultRule; `rule.served` counts the faults answered so far.
        """
        if route not in (None, "tls", "plain"):
            raise ValueError(f"route must be 'tls', 'plain' or None. Received: route={route!r}")
        if not 400 <= status <= 599 or count < 1:
            raise ValueError(
                f"Expected an HTTP error status (400-599) and count >= 1. "
                f"Received: status={status!r}, count={count!r}"
            )
        rule = self._control(
            "POST",
            "faults",
            {
                "status": status,
                "count": count,
                "route": route,
                "lose_reply": lose_reply,
                "methods": [m.upper() for m in methods] if methods else None,
                "path_contains": path_contains,
            },
        )
        return FaultRule(self, rule)

    def peak_in_flight(self, *, reset: bool = False) -> int:
        """The most storage requests served at once (headers read to reply written) since the
        start or the last reset; `reset` starts a new count from the requests in flight now.

        Example:
          >>> gcs.peak_in_flight(reset=True)
          >>> upload_four_files_in_parallel()
          >>> assert gcs.peak_in_flight() == 4
        """
        return int(self._control("DELETE" if reset else "GET", "concurrency")["peak"])

    def clear_faults(self) -> None:
        """Cancels every fault not yet served."""
        self._control("DELETE", "faults")

    # -- shaping --

    @property
    def shaping(self) -> Shaping:
        """The current shaping of storage requests."""
        return self._shaping

    def shape(self, **fields: float | None) -> Shaping:
        """Changes the given `Shaping` fields at once, for requests that arrive from now on
        (a body already being paced goes on at the new rate); the others stay as they are.

        Example:
          >>> gcs.shape(mbps_per_stream=5)  # bandwidth only
          >>> gcs.shape(mbps_per_stream=None)  # unlimited again

        Raises:
          ValueError: an unknown field or a value out of range (nothing changes then).
        """
        unknown = set(fields) - {f.name for f in dataclasses.fields(Shaping)}
        if unknown:
            raise ValueError(
                f"Expected fields of Shaping ({', '.join(f.name for f in dataclasses.fields(Shaping))}). "
                f"Received: {sorted(unknown)}"
            )
        return self._set_shaping(dataclasses.replace(self._shaping, **fields))

    @contextlib.contextmanager
    def shaped(self, **fields: float | None) -> Iterator[Shaping]:
        """`shape(**fields)` inside the block; the shaping before it is restored on exit."""
        before = self._shaping
        try:
            yield self.shape(**fields)
        finally:
            self._set_shaping(before)

    def _set_shaping(self, shaping: Shaping) -> Shaping:
        if self.proxy_port:
            self._control("POST", "shaping", shaping.to_json())
        self._shaping = shaping
        return shaping

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds (user + system) the proxy and the emulator have used since they started.

        Both are Python: on a small machine their CPU competes with the code under test, so a
        measurement through the twin should subtract or at least report it.
        """
        import psutil

        out = {}
        for name, proc in (("proxy", self._proxy), ("emulator", self._emulator)):
            if proc is None:
                raise RuntimeError("LocalGCS is not running: use `with LocalGCS() as gcs:`")
            times = psutil.Process(proc.pid).cpu_times()
            out[name] = times.user + times.system
        return out

    @property
    def requests(self) -> list[ProxiedRequest]:
        """Every request the proxy answered, oldest first (control calls excluded)."""
        return self._requests_since(0)

    @contextlib.contextmanager
    def recording(self) -> Iterator[list[ProxiedRequest]]:
        """Yields a list that holds the requests answered inside the block, once it exits."""
        start, rec = self._control("GET", "requests/count"), list[ProxiedRequest]()
        try:
            yield rec
        finally:
            rec.extend(self._requests_since(start))

    def _requests_since(self, start: int) -> list[ProxiedRequest]:
        return [ProxiedRequest(**r) for r in self._control("GET", f"requests?since={start}")]

    def _control(self, method: str, what: str, obj: object = None) -> Any:
        body = json.dumps(obj).encode() if obj is not None else b""
        status, _, data = http_request(
            self.proxy_port,
            method,
            CONTROL_PREFIX + what,
            body,
            [("Content-Type", "application/json")],
            timeout=10.0,
        )
        if status != 200:
            raise RuntimeError(f"LocalGCS control {method} {what}: HTTP {status} {data[:300]!r}")
        return json.loads(data)


# TF reads these when `import tensorflow` creates its gs:// filesystem (see the module doc).
TF_GCS_TEST_ENV = {
    # Tests rewrite objects and expect to see the new size at once.
    "GCS_STAT_CACHE_MAX_AGE": "0",
    "GCS_MATCHING_PATHS_CACHE_MAX_AGE": "0",
    # TF's defaults: 10 retries backing off from 1 s up to 32 s. TF adds 0-1 s of random
    # jitter to every retry whatever these say, so fewer retries is what keeps tests short.
    "GCS_RETRY_CONFIG_INIT_DELAY_TIME_US": "10000",
    "GCS_RETRY_CONFIG_MAX_DELAY_TIME_US": "100000",
    "GCS_RETRY_CONFIG_MAX_RETRIES": "3",
}
