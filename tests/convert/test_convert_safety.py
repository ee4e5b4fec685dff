"""Runs that are killed, raced, starved or pointed at bad destinations: real processes, real
signals, real files. `TFPIPE_TEST_PAUSE_AT=<step>` makes a real `tfpipe convert` stop itself
(SIGSTOP) at that step, so a test can SIGKILL it exactly there."""

import json
import os
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest

import tfpipe
from tfpipe.convert.writer import PAUSE_ENV
from tfpipe.errors import DestinationError
from tfpipe.format.manifest import Manifest
from tfpipe.format.verify import verify
from tfpipe.storage import StorageError
from tfpipe.testing import fake_data

import support.cli
from support.cli import CLI_TIMEOUT, as_unprivileged, process_state, start_cli, wait_paused

SHARDS = 3
N_IMAGES = 21


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    root = tmp_path_factory.mktemp("safety") / "train"
    fake_data.write_image_folder(root, classes=3, per_class=[7, 6, 8], size=(32, 24))
    return str(root)


@pytest.fixture(scope="module")
def reference(src, tmp_path_factory):
    return tfpipe.convert(src, str(tmp_path_factory.mktemp("ref")), num_shards=SHARDS, workers=1)


def cli(*args, pause=None, **kwargs):
    """`tfpipe ARGS` started (see `support.cli.start_cli`), told to pause itself at step `pause`."""
    return start_cli(*args, env={PAUSE_ENV: pause} if pause else None, **kwargs)


def run_cli(*args, **kwargs):
    proc = cli(*args, **kwargs)
    out, err = proc.communicate(timeout=CLI_TIMEOUT)
    return proc.returncode, out, err


def convert_args(src, dest, *extra):
    return ("convert", src, str(dest), "--num-shards", str(SHARDS), "--workers", "2", "--quiet", *extra)


def descendants(pid):
    """Pids of every live descendant of `pid`."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def wait_gone(pids, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in pids if process_state(p) not in ("gone", "Z")]
        if not alive:
            return []
        time.sleep(0.05)
    return alive


def visible(dest):
    return sorted(n for n in os.listdir(dest) if not n.startswith("."))


# ---- workers die with their parent ----


@pytest.mark.slow
@pytest.mark.parametrize("start_method", ["fork", "forkserver"])
def test_sigkill_takes_the_encode_workers_with_it(src, tmp_path, start_method):
    """A SIGKILLed convert once left its workers running under PID 1 indefinitely."""
    script = "from tfpipe.cli import main; sys.exit(main(sys.argv[1:]))"
    if start_method == "forkserver":  # what a process that has loaded TensorFlow uses
        script = "sys.modules['tensorflow'] = types.ModuleType('tensorflow'); " + script  # a cheap stub
    # `python -c`, not support.cli's `python -m tfpipe`: the forkserver case stubs tensorflow before
    # tfpipe is imported. The environment is still support.cli's (this tree on PYTHONPATH).
    env = support.cli.environment({PAUSE_ENV: "shard-committed"})
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys, types; " + script, *convert_args(src, tmp_path / "out")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_paused(proc)
    workers = descendants(proc.pid)
    assert len(workers) >= 2, workers
    proc.kill()
    proc.wait()
    survivors = wait_gone(workers)
    for pid in survivors:  # don't leave them behind when the test fails
        os.kill(pid, signal.SIGKILL)
    assert survivors == [], "encode workers outlived the killed convert"


def test_fork_server_workers_see_the_callers_current_environment(monkeypatch):
    """A fork server started earlier keeps its old environment; its gs:// workers once ran
    without STORAGE_EMULATOR_HOST (or credentials) set later in the caller."""
    import types

    from tfpipe.convert.parallel import ordered_map, worker_context

    monkeypatch.setitem(
        sys.modules, "tensorflow", sys.modules.get("tensorflow") or types.ModuleType("tensorflow")
    )
    assert worker_context().get_start_method() == "forkserver"
    list(ordered_map(os.getenv, ["HOME"], 2))  # the fork server is running now
    monkeypatch.setenv("TFPIPE_PROBE", "set later")
    assert list(ordered_map(os.getenv, ["TFPIPE_PROBE"] * 5, 2)) == ["set later"] * 5


@pytest.mark.slow
def test_sigterm_cleans_up_and_resume_finishes(src, reference, tmp_path):
    dest = tmp_path / "out"
    proc = cli(*convert_args(src, dest), pause="shard-committed")
    wait_paused(proc)
    workers = descendants(proc.pid)
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert "terminated (SIGTERM)" in err and "--resume" in err
    assert wait_gone(workers) == []
    left = os.listdir(dest)
    assert ".tfpipe.lock" not in left and not [n for n in left if ".tmp-" in n], left
    assert visible(dest) == ["train-00000-of-00003"]
    m = tfpipe.convert(src, str(dest), num_shards=SHARDS, workers=2, resume=True)
    assert [s.checksum for s in m.splits["train"].shards] == [
        s.checksum for s in reference.splits["train"].shards
    ]


# ---- one writer per destination ----


@pytest.mark.slow
def test_second_writer_is_refused_naming_the_first(src, reference, tmp_path):
    """Run B with --overwrite 1.5 s after run A once deleted shards A had committed."""
    dest = tmp_path / "out"
    a = cli(*convert_args(src, dest), pause="shard-committed")
    wait_paused(a)  # A holds the lock and has committed shard 0
    code, _, err = run_cli(*convert_args(src, dest, "--overwrite"))
    assert code == 1
    assert f"is being written by another tfpipe convert (pid {a.pid} on host " in err, err
    assert err.count("\n") == 1
    assert visible(dest) == ["train-00000-of-00003"]  # B deleted nothing
    with pytest.raises(DestinationError, match=f"pid {a.pid}"):
        tfpipe.convert(src, str(dest), num_shards=SHARDS, overwrite=True)
    a.send_signal(signal.SIGCONT)
    assert a.wait(timeout=60) == 0, a.communicate()
    m = Manifest.load(str(dest))
    assert [s.checksum for s in m.splits["train"].shards] == [
        s.checksum for s in reference.splits["train"].shards
    ]
    assert verify(str(dest)).ok
    assert sorted(os.listdir(dest)) == ["tfpipe.json", *visible(dest)[1:]]  # lock released


@pytest.mark.slow
def test_a_killed_writers_lock_does_not_block_resume(src, reference, tmp_path):
    dest = tmp_path / "out"
    a = cli(*convert_args(src, dest), pause="shard-committed")
    wait_paused(a)
    a.kill()
    a.communicate(timeout=30)
    assert ".tfpipe.lock" in os.listdir(dest)  # the file stays; the kernel released the lock
    code, _, err = run_cli(*convert_args(src, dest, "--resume"))
    assert code == 0, err
    assert sorted(os.listdir(dest)) == ["tfpipe.json", *(s.name for s in reference.splits["train"].shards)]


# ---- --overwrite un-commits before it deletes ----


@pytest.mark.slow
def test_kill_between_uncommit_and_delete_leaves_no_finished_dataset_without_shards(src, tmp_path):
    dest = tmp_path / "out"
    tfpipe.convert(src, str(dest), num_shards=SHARDS, workers=1)
    proc = cli(*convert_args(src, dest, "--overwrite"), pause="overwrite-uncommitted")
    wait_paused(proc)
    proc.kill()
    proc.communicate(timeout=30)
    assert not os.path.exists(dest / "tfpipe.json")  # un-committed: no reader takes the old shards
    assert visible(dest) == [f"train-0000{i}-of-00003" for i in range(3)]
    code, _, err = run_cli(*convert_args(src, dest))
    assert code == 1 and "3 shard file(s)" in err and "--overwrite" in err
    assert run_cli(*convert_args(src, dest, "--overwrite"))[0] == 0
    assert verify(str(dest)).ok


def test_failure_while_deleting_old_shards_leaves_the_manifest_consistent(src, tmp_path):
    """The old order deleted shards first: a failure halfway left a manifest listing them."""
    dest = tmp_path / "out"
    tfpipe.convert(src, str(dest), num_shards=SHARDS, workers=1)
    tfpipe.convert(src, str(dest), num_shards=2, workers=1, split="other")
    stuck = dest / "train-00001-of-00003"
    os.remove(stuck)
    os.mkdir(stuck)  # a directory: removing it fails, like a file on a failing disk would
    (stuck / "x").write_bytes(b"x")
    with pytest.raises(StorageError, match=r"Is a directory: .*train-00001-of-00003"):
        tfpipe.convert(src, str(dest), num_shards=SHARDS, workers=1, overwrite=True)
    m = Manifest.load(str(dest))
    assert "train" not in m.splits and "other" in m.splits
    assert verify(str(dest)).ok


# ---- what a killed run leaves is cleaned by the next run ----


@pytest.mark.slow
def test_next_run_removes_leftovers_of_killed_runs(src, tmp_path):
    dest = tmp_path / "out"
    proc = cli(*convert_args(src, dest), pause="manifest-committed")
    wait_paused(proc)
    proc.kill()  # after the commit, before the progress files were cleared
    proc.communicate()
    names = set(os.listdir(dest))
    assert {"tfpipe.json", ".tfpipe-train.plan.json", ".train-00000-of-00003.done"} <= names
    (dest / ".tfpipe.json.tmp-123-0123abcdxyz12345").write_bytes(b"{half")  # a kill mid-commit
    (dest / ".other-00000-of-00001.done").write_text("{}")  # a kill while clearing: no plan
    code, _, err = run_cli(*convert_args(src, dest))
    assert code == 1 and "already holds a finished dataset with split 'train'" in err
    assert sorted(os.listdir(dest)) == ["tfpipe.json", *(f"train-0000{i}-of-00003" for i in range(3))]


# ---- destinations that cannot be written ----


@pytest.mark.slow
def test_dest_is_a_file_or_inside_src(src, tmp_path):
    (tmp_path / "afile").write_text("x")
    code, _, err = run_cli(*convert_args(src, tmp_path / "afile"))
    assert (
        code == 1 and "expected a directory (or a new path) for the output. Received: a regular file" in err
    )
    code, _, err = run_cli(*convert_args(src, os.path.join(src, "n01440764", "out")))
    assert code == 1 and "Expected a destination outside the source" in err
    assert not os.path.exists(os.path.join(src, "n01440764", "out"))
    with pytest.raises(DestinationError, match="outside the source"):
        tfpipe.convert(src, src)


@pytest.mark.slow
def test_full_disk_says_resume_continues(src, reference, tmp_path):
    """A real file-size limit (RLIMIT_FSIZE) makes every write past 12 KB fail with EFBIG,
    as ENOSPC does on a full disk."""
    dest = tmp_path / "out"

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
        resource.setrlimit(resource.RLIMIT_FSIZE, (12_000, 12_000))

    out = support.cli.run_cli(
        *convert_args(src, dest, "--num-shards", "2"), env={"PYTHONDONTWRITEBYTECODE": "1"}, preexec_fn=limit
    )
    assert out.returncode == 1, out.stderr
    assert out.stderr.count("\n") == 1, out.stderr
    assert "out of space while writing (File too large" in out.stderr
    assert "Free some space" in out.stderr and "--resume" in out.stderr
    assert not [n for n in os.listdir(dest) if ".tmp-" in n]
    m = tfpipe.convert(src, str(dest), num_shards=2, workers=1, resume=True)
    assert m.splits["train"].examples == N_IMAGES and verify(str(dest)).ok


@pytest.mark.slow
def test_unwritable_dest_is_one_line(src, tmp_path):
    dest = tmp_path / "ro"
    dest.mkdir()
    dest.chmod(0o555)
    try:
        code, _, err = run_cli(*convert_args(src, dest), prefix=as_unprivileged())
    finally:
        dest.chmod(0o755)
    assert code == 1 and err.count("\n") == 1, err
    assert "cannot write the output there: Permission denied" in err


# ---- resume with damaged progress files ----


def kill_after_first_shard(src, dest):
    proc = cli(*convert_args(src, dest), pause="shard-committed")
    wait_paused(proc)
    proc.kill()
    proc.communicate(timeout=30)


@pytest.mark.slow
def test_corrupt_plan_is_one_line_and_overwrite_recovers(src, tmp_path):
    dest = tmp_path / "out"
    kill_after_first_shard(src, dest)
    (dest / ".tfpipe-train.plan.json").write_text('{"n_shards": ')
    code, _, err = run_cli(*convert_args(src, dest, "--resume"))
    assert code == 1 and err.count("\n") == 1, err
    assert "the plan of the interrupted conversion is corrupt" in err and "--overwrite" in err
    assert run_cli(*convert_args(src, dest, "--overwrite"))[0] == 0


@pytest.mark.slow
def test_corrupt_done_record_redoes_that_shard(src, reference, tmp_path):
    dest = tmp_path / "out"
    kill_after_first_shard(src, dest)
    (dest / ".train-00000-of-00003.done").write_text(json.dumps({"shard": {"name": 5}}))
    m = tfpipe.convert(src, str(dest), num_shards=SHARDS, workers=1, resume=True)
    assert [s.checksum for s in m.splits["train"].shards] == [
        s.checksum for s in reference.splits["train"].shards
    ]


@pytest.mark.slow
def test_real_full_disk_then_resume_after_space_is_freed(src, tmp_path):
    """ENOSPC from a 24 KB tmpfs in a private mount namespace; then the tmpfs grows."""
    if (
        not shutil.which("unshare")
        or subprocess.run(
            ["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=4k tmpfs {tmp_path}"], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("needs unshare -m and mount (root or CAP_SYS_ADMIN)")
    mnt, dest = tmp_path / "mnt", tmp_path / "mnt" / "out"
    mnt.mkdir()
    # The commands run in a shell inside `unshare -m` (its own tmpfs), not by support.cli's runner: its
    # command lines and environment all the same.
    tfpipe_cmd = shlex.join(
        support.cli.command("convert", src, dest, "--num-shards", 3, "--workers", 1, "--quiet")
    )
    inspect_cmd = shlex.join(support.cli.command("inspect", dest, "--verify", "--quiet"))
    script = (
        f"mount -t tmpfs -o size=24k tmpfs {mnt} && {{ {tfpipe_cmd}; echo rc=$?; ls -a {dest}; "
        f"mount -o remount,size=2m {mnt} && {tfpipe_cmd} --resume && echo rc=$? && "
        f"{inspect_cmd}; }}"
    )
    out = subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env=support.cli.environment(),
    )
    assert "rc=1" in out.stdout and "rc=0" in out.stdout, out
    first_error = out.stderr.splitlines()[0]
    assert "out of space while writing (No space left on device" in first_error
    assert "Free some space" in first_error and "--resume" in first_error
    assert "train-00000-of-00003" in out.stdout and ".tmp-" not in out.stdout  # kept; no half-written file
    assert "verify: 3 of 3 shards ok" in out.stdout
