"""TensorFlow is the user's choice of distribution: none is a one-line error naming the extras,
an unsupported or mixed install is refused by name, and the installed one is checked once."""

import subprocess
import sys
import warnings

import pytest

from tfpipe import _tf
from tfpipe.errors import MissingExtraError

from support.without import run_without


def test_supported_releases_pass_quietly():
    assert _tf.check_release("2.20.0", {"tensorflow-tpu": "2.20.0"}) is None
    assert _tf.check_release("2.21.0", {"tensorflow": "2.21.0"}) is None
    assert _tf.check_release("2.21.0rc1", {}) is None  # built from source: no distribution
    # Windows: `tensorflow` is a shim over `tensorflow-intel` of the same release.
    assert _tf.check_release("2.21.0", {"tensorflow": "2.21.0", "tensorflow-intel": "2.21.0"}) is None


def test_an_older_release_is_refused_by_version_and_distribution():
    with pytest.raises(_tf.UnsupportedTensorFlowError) as e:
        _tf.check_release("2.19.1", {"tensorflow-cpu": "2.19.1"})
    assert str(e.value).startswith("tfpipe needs TensorFlow 2.20 or 2.21. Received: TensorFlow 2.19.1 ")
    assert "(the tensorflow-cpu distribution)" in str(e.value)
    assert 'pip install "tfpipe[tensorflow]"' in str(e.value)


def test_a_newer_release_is_a_warning_not_an_error():
    message = _tf.check_release("2.22.0", {"tf-nightly": "2.22.0.dev20261120"})
    assert message == (
        "tfpipe is tested on TensorFlow 2.20 or 2.21; this is TensorFlow 2.22.0 (the tf-nightly "
        "distribution), which it was not tested on"
    )


def test_two_distributions_of_different_releases_are_refused_naming_both():
    # What `pip install tensorflow-tpu==2.20.0 tfpipe` did while tfpipe required tensorflow 2.21.
    with pytest.raises(_tf.UnsupportedTensorFlowError) as e:
        _tf.check_release("2.21.0", {"tensorflow": "2.21.0", "tensorflow-tpu": "2.20.0"})
    text = str(e.value)
    assert "Received: several, of different releases, installed over each other: " in text
    assert "tensorflow 2.21.0, tensorflow-tpu 2.20.0" in text
    assert "pip uninstall -y tensorflow tensorflow-tpu" in text


def test_two_distributions_of_one_release_are_a_warning():
    message = _tf.check_release("2.21.0", {"tensorflow": "2.21.0", "tensorflow-cpu": "2.21.0"})
    assert message.startswith("several TensorFlow distributions are installed over each other ")
    assert "(tensorflow 2.21.0, tensorflow-cpu 2.21.0)" in message


def test_an_unreadable_version_is_refused():
    with pytest.raises(_tf.UnsupportedTensorFlowError, match="Received: 'unknown'"):
        _tf.check_release("unknown", {})


def test_this_environment_has_one_supported_tensorflow():
    with warnings.catch_warnings():
        warnings.simplefilter("error", _tf.UntestedTensorFlowWarning)
        tf = _tf.tf()
    dists = _tf.installed_distributions()
    assert len(dists) == 1, dists
    (version,) = dists.values()
    assert tf.__version__ == version
    assert _tf._release(version) in _tf.SUPPORTED


@pytest.mark.slow
def test_without_tensorflow_the_library_raises_one_line_naming_the_extras(tmp_path):
    out = run_without(
        "tensorflow",
        """
        import tfpipe
        from tfpipe import _tf
        try:
            _tf.tf()
        except tfpipe.TfpipeError as e:
            print(type(e).__name__, "|", e)
        """,
        tmp_path,
    )
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip()
    assert "\n" not in line
    assert line.startswith(
        "MissingExtraError | this part of tfpipe needs TensorFlow 2.20 or 2.21, and none is installed."
    )
    for choice in ('"tfpipe[tensorflow]"', '"tfpipe[cpu]"', '"tfpipe[tpu]"'):
        assert choice in line
    assert line.endswith("Received: No module named 'tensorflow'")
    assert issubclass(MissingExtraError, ImportError)


@pytest.mark.slow
def test_without_tensorflow_the_cli_fails_in_one_line_and_convert_still_works(tmp_path):
    src, out_dir = tmp_path / "table.csv", tmp_path / "out"
    src.write_text("x,label\n" + "".join(f"{i},{i % 2}\n" for i in range(7)))
    out = run_without(
        "tensorflow",
        f"""
        import sys
        from tfpipe.cli import main

        # convert needs no TensorFlow: it encodes records in pure Python.
        assert main(["convert", {str(src)!r}, {str(out_dir)!r}, "--label", "label", "--quiet"]) == 0
        assert "tensorflow" not in sys.modules
        sys.exit(main(["bench", "--pipeline", "tabular", "--data", {str(out_dir)!r}, "--batch-size", "4", "--quiet"]))
        """,
        tmp_path,
    )
    assert out.returncode == 1, out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("tfpipe bench: error: this part of tfpipe needs TensorFlow 2.20 or 2.21")
    assert 'pip install "tfpipe[tensorflow]"' in line


@pytest.mark.slow
def test_pip_check_is_clean_beside_this_tensorflow():
    # The extras (beam, profile) and the test tools installed beside this TensorFlow release
    # within every package's declared bounds.
    out = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "No broken requirements found.", out.stdout
