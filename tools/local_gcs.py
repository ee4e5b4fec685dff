"""Runs a local GCS (emulator + TLS proxy) by hand and prints the environment to use it.

Typical use, in one terminal:
    python tools/local_gcs.py --bucket demo
and in another, paste the printed exports, then run anything that uses gs://demo:
    tfpipe convert ./images gs://demo/imagenet
    python -c "import tensorflow as tf; print(tf.io.gfile.listdir('gs://demo/imagenet'))"

TensorFlow reads the GCS_* variables when it is imported, and the proxy/CA/token variables
per request, so export them before starting Python. Ctrl-C stops the emulator and proxy;
objects live in memory and are gone afterwards.

--like-gcs shapes storage requests like a regional bucket seen from its region (latency to
the first byte, bandwidth per connection, 429 above the request rate: see
tfpipe.testing.gcs.LIKE_GCS); the other shaping flags set or override one figure each.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import signal
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tfpipe.testing.gcs import LIKE_GCS, LocalGCS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Examples:\n  python tools/local_gcs.py --bucket demo\n"
        "  python tools/local_gcs.py --bucket demo --like-gcs --mbps-per-stream 20",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--bucket", action="append", default=[], help="create this bucket at start (repeatable)"
    )
    parser.add_argument(
        "--log-requests", action="store_true", help="print each request the proxy answers, to stderr"
    )
    shaping = parser.add_argument_group("shaping (all off by default)")
    shaping.add_argument(
        "--like-gcs",
        action="store_true",
        help="published GCS figures: 30 ms to the first byte, 150 MB/s a connection, "
        "5000 requests/s, 1000 writes/s",
    )
    shaping.add_argument("--first-byte-ms", type=float, help="delay before each response's first byte")
    shaping.add_argument("--mbps-per-stream", type=float, help="MB/s per connection, each direction")
    shaping.add_argument("--max-requests-per-s", type=float, help="answer 429 above this request rate")
    shaping.add_argument("--max-writes-per-s", type=float, help="answer 429 above this write rate")
    args = parser.parse_args(argv)
    fields = ("first_byte_ms", "mbps_per_stream", "max_requests_per_s", "max_writes_per_s")
    shape = dataclasses.asdict(LIKE_GCS) if args.like_gcs else {}
    shape |= {f: getattr(args, f) for f in fields if getattr(args, f) is not None}

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        gcs = LocalGCS(**shape)
    except ValueError as e:
        parser.error(str(e))
    with gcs:
        for name in args.bucket:
            print(f"# created {gcs.create_bucket(name)}", file=sys.stderr)
        for key, value in gcs.env.items():
            print(f"export {key}={shlex.quote(value)}")
        sys.stdout.flush()
        print(
            f"# LocalGCS on {gcs.endpoint} (emulator on 127.0.0.1:{gcs.emulator_port}); Ctrl-C to stop",
            file=sys.stderr,
        )
        if gcs.shaping.active:
            print(f"# {gcs.shaping}", file=sys.stderr)
        seen = 0
        try:
            while not stop.wait(1.0):
                if args.log_requests:
                    requests = gcs.requests
                    for r in requests[seen:]:
                        mark = " (injected)" if r.injected else " (throttled)" if r.throttled else ""
                        print(f"{r.status} {r.method} {r.host}{r.path}{mark}", file=sys.stderr)
                    seen = len(requests)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
