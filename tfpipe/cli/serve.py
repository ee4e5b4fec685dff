"""`tfpipe serve dispatcher|worker`: run a tf.data service server until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import os
import sys

from tfpipe import cli

_EPILOG = """\
TensorFlow's tf.data servers listen on all interfaces ([::]:PORT) whatever --host says;
--host is the address the server is reached at (127.0.0.1 by default). Firewall the ports
on a shared network. The server prints "ready" once it serves, and "stopped" after
SIGINT (Ctrl-C) or SIGTERM, exiting 0.

Example:
  tfpipe serve dispatcher --port 5050
  tfpipe serve worker --dispatcher 127.0.0.1:5050 --port 5051
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
        epilog="Example: tfpipe serve dispatcher --port 5050 --work-dir /var/tmp/dispatcher",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d.add_argument("--port", type=int, default=0, help="port to listen on; 0 picks a free one")
    _add_host(d)
    d.add_argument(
        "--work-dir",
        default=None,
        help="journal the dispatcher's state here (local or gs://), so a restarted dispatcher "
        "resumes its jobs",
    )
    cli.add_common(d)
    d.set_defaults(run=run)

    w = roles.add_parser(
        "worker",
        help="run a worker: it runs the pipelines a dispatcher assigns",
        epilog="Example: tfpipe serve worker --dispatcher 127.0.0.1:5050 --port 5051",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    w.add_argument("--dispatcher", required=True, help="the dispatcher's HOST:PORT")
    w.add_argument("--port", type=int, default=0, help="port to listen on; 0 picks a free one")
    _add_host(w)
    w.add_argument(
        "--connect-timeout",
        type=float,
        default=30.0,
        help="seconds to wait for the dispatcher before giving up (default: 30)",
    )
    cli.add_common(w)
    w.set_defaults(run=run)


def _add_host(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address clients reach this server at (default: 127.0.0.1); TensorFlow listens "
        "on all interfaces regardless",
    )


def run(args: argparse.Namespace) -> int:
    from tfpipe import service

    if args.role is None:
        args.parser.print_help(sys.stderr)
        return 2
    if args.role == "dispatcher":
        config: service.DispatcherConfig | service.WorkerConfig = service.DispatcherConfig(
            port=args.port, host=args.host, work_dir=args.work_dir
        )
    else:
        config = service.WorkerConfig(
            dispatcher=args.dispatcher,
            port=args.port,
            host=args.host,
            connect_timeout=args.connect_timeout,
        )
    name = f"tfpipe serve {args.role}"

    def on_ready(server: service.Server) -> None:
        if isinstance(config, service.DispatcherConfig) and config.work_dir:
            mode = "fault tolerant" if config.fault_tolerant_mode else "not fault tolerant"
            print(f"{name}: work dir {config.work_dir} ({mode})")
        if isinstance(config, service.WorkerConfig):
            print(f"{name}: registered with dispatcher {config.dispatcher_address.address}")
        print(f"{name}: listening on {server.listening_on} (all interfaces)")
        print(f"{name}: ready at {server.target}", flush=True)

    def on_waiting(dispatcher: service.ServiceAddress) -> None:
        print(f"{name}: waiting for dispatcher {dispatcher.address}", flush=True)

    # A dispatcher's stop takes milliseconds. A worker's only tears down in-process state,
    # which exiting discards anyway, and can hold the GIL for tens of seconds (Server.stop):
    # the worker process exits instead, and its peers see the connection close either way.
    is_worker = isinstance(config, service.WorkerConfig)
    try:
        service.serve(config, on_ready=on_ready, on_waiting=on_waiting, stop=not is_worker)
    except InterruptedError:  # a signal before the server started
        is_worker = False
    print(f"{name}: stopped", flush=True)
    if is_worker:
        sys.stderr.flush()
        os._exit(0)  # skips the TF server's destructor, which would stop it after all
    return 0
