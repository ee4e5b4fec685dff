"""`tfpipe serve dispatcher|worker`: run a tf.data service server until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import os
import sys

from tfpipe import cli, service

_EPILOG = """\
TensorFlow's tf.data servers listen on every interface ([::]:PORT) with no authentication:
anyone who can reach the port can run TensorFlow graphs on this machine. Starting one
therefore needs --allow-remote; firewall the ports first (docs/guides/scale.md, "Securing
tf.data service"). --advertise-host is only the address clients and workers are told to use
(default 127.0.0.1). The server prints "ready" once it serves, and "stopped" after SIGINT
(Ctrl-C) or SIGTERM, exiting 0.

Example:
  tfpipe serve dispatcher --port 5050 --allow-remote
  tfpipe serve worker --dispatcher 127.0.0.1:5050 --port 5051 --allow-remote
  # in Python: tfpipe.build(data, preset="imagenet", batch_size=256,
  #                         service="grpc://127.0.0.1:5050")
"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "serve",
        help="run a tf.data service dispatcher or worker",
        description="Run a tf.data service dispatcher or worker, so build(service=...) can\n"
        "move preprocessing off the training host.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(run=run, role=None, parser=p)
    roles = p.add_subparsers(dest="role", metavar="ROLE")

    d = roles.add_parser(
        "dispatcher",
        help="run a dispatcher: it registers datasets and hands work to workers",
        epilog="Example: tfpipe serve dispatcher --port 5050 --work-dir /var/tmp/dispatcher --allow-remote",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_listening(d)
    d.add_argument(
        "--work-dir",
        default=None,
        help="journal the dispatcher's state here (local or gs://), so a restarted dispatcher "
        "resumes its jobs",
    )
    cli.add_common(d)
    d.set_defaults(run=run, parser=d)

    w = roles.add_parser(
        "worker",
        help="run a worker: it runs the pipelines a dispatcher assigns",
        epilog="Example: tfpipe serve worker --dispatcher 127.0.0.1:5050 --port 5051 --allow-remote",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    w.add_argument("--dispatcher", required=True, help="the dispatcher's HOST:PORT")
    _add_listening(w)
    w.add_argument(
        "--connect-timeout",
        type=float,
        default=30.0,
        help="seconds to wait for the dispatcher to answer before giving up (default: 30)",
    )
    cli.add_common(w)
    w.set_defaults(run=run, parser=w)


def _add_listening(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--port", type=int, default=0, help="port to listen on, on every interface; 0 picks a free one"
    )
    p.add_argument(
        "--advertise-host",
        default="127.0.0.1",
        help="the address clients and workers reach this server at (default: 127.0.0.1). It "
        "does not limit where the server listens: TensorFlow listens on every interface",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="required: start although the server is reachable, without authentication, from "
        "every network this machine is on (firewall the port first)",
    )
    # Renamed: `--host 127.0.0.1` read as if it bound loopback only, which TF cannot do.
    p.add_argument("--host", dest="old_host", default=None, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    if args.role is None:
        args.parser.print_help(sys.stderr)
        return 2
    if args.old_host is not None:
        args.parser.error(
            f"--host was renamed --advertise-host: it only sets the address clients and workers "
            f"are told to use; TensorFlow listens on every interface whatever it says. "
            f"Received: --host {args.old_host}"
        )
    if args.role == "dispatcher":
        config: service.DispatcherConfig | service.WorkerConfig = service.DispatcherConfig(
            port=args.port,
            advertise_host=args.advertise_host,
            work_dir=args.work_dir,
            allow_remote=args.allow_remote,
        )
    else:
        config = service.WorkerConfig(
            dispatcher=args.dispatcher,
            port=args.port,
            advertise_host=args.advertise_host,
            connect_timeout=args.connect_timeout,
            allow_remote=args.allow_remote,
        )
    name = f"tfpipe serve {args.role}"

    def on_ready(server: service.Server) -> None:
        if isinstance(config, service.DispatcherConfig) and config.work_dir:
            mode = "fault tolerant" if config.fault_tolerant_mode else "not fault tolerant"
            cli.say(f"{name}: work dir {config.work_dir} ({mode})")
        if isinstance(config, service.WorkerConfig):
            cli.say(f"{name}: registered with dispatcher {config.dispatcher_address.address}")
        cli.say(f"{name}: listening on {server.exposure}")
        cli.say(f"{name}: ready at {server.target}")

    def on_waiting(dispatcher: service.ServiceAddress) -> None:
        cli.say(f"{name}: waiting for dispatcher {dispatcher.address}")

    # A dispatcher's stop takes milliseconds and closes its journal, which is written through
    # anyway: a crashed dispatcher restarts from it. A worker's stop only tears down in-process
    # state, which exiting discards, and can hold the GIL for tens of seconds (Server.stop), so
    # a worker is not stopped. Then either process exits at once: the interpreter's teardown
    # with TensorFlow loaded took 1.6-2.0 s after a dispatcher's stop on a loaded 2-core
    # machine, and over 15 s once in CI, for nothing a peer can see.
    is_worker = isinstance(config, service.WorkerConfig)
    try:
        service.serve(config, on_ready=on_ready, on_waiting=on_waiting, stop=not is_worker)
    except InterruptedError:  # a signal before the server started: nothing of TF's to skip
        cli.say(f"{name}: stopped")
        return 0
    cli.say(f"{name}: stopped")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skips the servers' destructors and the interpreter's teardown
