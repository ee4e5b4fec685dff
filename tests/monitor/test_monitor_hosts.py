"""`tfpipe.monitor.InputWait` across hosts: two real JAX processes on this machine
(`jax.distributed.initialize` on 127.0.0.1), training one model data-parallel, each running
tests/support/jax_monitor_host.py. Host 1's producer holds every batch back; host 0's is far
faster than the model.

Checked: each host measures its own wait (host 0's time spent at the step's collective, waiting
for host 1, is not input wait on host 0); every host reports every host's figure and the job's,
the same on both; the job's is set by the slowest host at each step.
"""

from __future__ import annotations

import pytest

import support.jax_monitor_host as monitor_host
from support.jax_processes import run_two_hosts

pytest.importorskip("jax", reason='two-host JAX: pip install "jax[cpu]"')

pytestmark = [pytest.mark.slow, pytest.mark.jax]


@pytest.fixture(scope="module")
def hosts() -> list[dict]:
    """What each of the two processes' monitors reported (process 0's first)."""
    return run_two_hosts(monitor_host.__file__, devices=1)


def test_each_host_measures_its_own_wait(hosts):
    fast, held = hosts[0]["host"], hosts[1]["host"]
    assert held["input_wait"] > 0.5, hosts
    assert fast["input_wait"] < 0.05, hosts
    # One job: both hosts' steps take as long.
    assert fast["step_ms"] == pytest.approx(held["step_ms"], rel=0.1)


def test_every_host_reports_every_hosts_figure_and_the_jobs(hosts):
    assert [h["process"] for h in hosts] == [0, 1]
    assert hosts[0]["hosts"] == hosts[1]["hosts"]
    assert hosts[0]["job"] == hosts[1]["job"]
    assert [h["host"] for h in hosts] == hosts[0]["hosts"]


def test_the_slowest_host_sets_the_jobs_wait(hosts):
    job, each = hosts[0]["job"], hosts[0]["hosts"]
    assert job["input_wait"] >= max(h["input_wait"] for h in each) - 0.01
    assert job["input_wait"] == pytest.approx(each[1]["input_wait"], abs=0.03)
    # The calls both hosts measured (a host whose step ends were taken out of order leaves one out).
    assert min(h["steps"] for h in each) - 2 <= job["steps"] <= min(h["steps"] for h in each)
