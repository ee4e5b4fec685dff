"""Runs a local GCS (emulator + TLS proxy) by hand and prints the environment to use it.

Typical use, in one terminal:
    python tools/local_gcs.py --bucket demo
and in another, paste the printed exports, then run anything that uses gs://demo:
    tfpipe convert ./images gs://demo/imagenet
    python -c "import tensorflow as tf; print(tf.io.gfile.listdir('gs://demo/imagenet'))"

TensorFlow reads the GCS_* variables when it is imported, and the proxy/CA/token variables
per request, so export them before starting Python. Ctrl-C stops the emulator and proxy;
objects live in memory and are gone afterwards.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tfpipe.testing.gcs import LocalGCS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Example: python tools/local_gcs.py --bucket demo",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--bucket", action="append", default=[], help="create this bucket at start (repeatable)"
    )
    parser.add_argument(
        "--log-requests", action="store_true", help="print each request the proxy answers, to stderr"
    )
    args = parser.parse_args(argv)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with LocalGCS() as gcs:
        for name in args.bucket:
            print(f"# created {gcs.create_bucket(name)}", file=sys.stderr)
        for key, value in gcs.env.items():
            print(f"export {key}={shlex.quote(value)}")
        sys.stdout.flush()
        print(
            f"# LocalGCS on {gcs.endpoint} (emulator on 127.0.0.1:{gcs.emulator_port}); Ctrl-C to stop",
            file=sys.stderr,
        )
        seen = 0
        try:
            while not stop.wait(1.0):
                if args.log_requests:
                    requests = gcs.requests
                    for r in requests[seen:]:
                        mark = " (injected)" if r.injected else ""
                        print(f"{r.status} {r.method} {r.host}{r.path}{mark}", file=sys.stderr)
                    seen = len(requests)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
