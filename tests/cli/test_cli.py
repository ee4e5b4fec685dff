"""The CLI through its real entry points: help for every command, no TensorFlow at start-up."""

import logging
import shutil
import subprocess
import sys

import pytest

from tfpipe.cli import COMMANDS

from support.cli import CLI_TIMEOUT, environment, run_cli


def run(*args):
    return run_cli(*args)


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_an_example(command):
    out = run(command, "--help")
    assert out.returncode == 0, out.stderr
    assert f"usage: tfpipe {command}" in out.stdout
    assert "example" in out.stdout.lower() and f"tfpipe {command}" in out.stdout.split("xample", 1)[1]


@pytest.mark.slow
def test_top_level_help_lists_every_command():
    out = run("--help")
    assert out.returncode == 0
    for command in COMMANDS:
        assert command in out.stdout


@pytest.mark.slow
def test_console_script_is_the_same_cli():
    script = shutil.which("tfpipe")
    assert script, "the tfpipe console script is not installed (pip install -e .)"
    via_script = subprocess.run([script, "--help"], capture_output=True, text=True)
    assert via_script.stdout == run("--help").stdout
    assert subprocess.run([script, "--version"], capture_output=True, text=True).stdout.startswith("tfpipe ")


@pytest.mark.slow
def test_import_and_help_do_not_start_tensorflow():
    code = (
        "import sys, tfpipe, tfpipe.cli\n"
        "tfpipe.cli.make_parser().format_help()\n"
        "for name in tfpipe.__all__: getattr(tfpipe, name)\n"
        "assert 'tensorflow' not in sys.modules, sorted(m for m in sys.modules if 'tensorflow' in m)[:5]\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def _python_without_tf_log_settings(code):
    """Runs `code` in a fresh Python whose environment sets none of TensorFlow's log variables
    (the session removed the shell's: `support.cli.SHELL_VARIABLES`)."""
    env = environment()
    assert not {"TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS"} & set(env)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT
    )


@pytest.mark.slow
def test_tensorflow_log_noise_is_hidden_by_the_cli():
    # cli.main opts in to quiet TensorFlow; TF is imported afterwards, as a command would.
    code = (
        "import contextlib, io, logging, os\n"
        "from tfpipe import cli\n"
        "from tfpipe._tf import tf\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert cli.main(['bench', '--list-accelerators']) == 0\n"
        "t = tf()\n"
        "print(int(t.constant(2) + 1), os.environ['TF_CPP_MIN_LOG_LEVEL'], t.get_logger().level)\n"
    )
    out = _python_without_tf_log_settings(code)
    assert out.returncode == 0 and out.stdout.split() == ["3", "3", str(logging.ERROR)], out.stderr
    for noise in ("cuInit", "cuda_platform", "cudart_stub", "oneDNN", "absl::InitializeLog"):
        assert noise not in out.stderr


@pytest.mark.slow
def test_library_leaves_tensorflow_logging_as_the_user_set_it():
    code = (
        "import logging, os\n"
        "logging.getLogger('tensorflow').setLevel(logging.INFO)\n"
        "from tfpipe._tf import tf\n"
        "t = tf()\n"
        "print(int(t.constant(2) + 1), os.environ.get('TF_CPP_MIN_LOG_LEVEL'), t.get_logger().level)\n"
    )
    out = _python_without_tf_log_settings(code)
    assert out.returncode == 0 and out.stdout.split() == ["3", "None", str(logging.INFO)], out.stderr


@pytest.mark.slow
def test_no_command_prints_help_and_fails():
    out = run()
    assert out.returncode == 2 and "usage: tfpipe" in out.stdout


@pytest.mark.slow
def test_errors_are_one_line_not_tracebacks(tmp_path):
    out = run("inspect", str(tmp_path))
    assert out.returncode == 1
    assert out.stderr.startswith("tfpipe inspect: error: Expected a tfpipe dataset at")
    assert "Traceback" not in out.stderr


def test_a_missing_command_module_of_tfpipe_is_an_error_not_a_missing_command(monkeypatch):
    import tfpipe.cli

    monkeypatch.setattr(tfpipe.cli, "COMMANDS", (*COMMANDS, "no_such_command"))
    with pytest.raises(ImportError, match=r"tfpipe.cli.no_such_command cannot be imported.*reinstall tfpipe"):
        tfpipe.cli.make_parser()


def test_a_command_whose_optional_dependency_is_missing_names_it(monkeypatch, tmp_path, capsys):
    import tfpipe.cli

    (tmp_path / "needs_extra.py").write_text("import tfpipe_test_absent_package\n")
    monkeypatch.setattr(tfpipe.cli, "__path__", [*tfpipe.cli.__path__, str(tmp_path)])
    monkeypatch.setattr(tfpipe.cli, "COMMANDS", (*COMMANDS, "needs_extra"))
    assert "needs the 'tfpipe_test_absent_package' package" in tfpipe.cli.make_parser().format_help()
    assert tfpipe.cli.main(["needs_extra"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "tfpipe needs_extra: error: this command needs the Python package 'tfpipe_test_absent_package'"
    )
    assert "pip install tfpipe_test_absent_package" in err
