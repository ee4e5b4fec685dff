"""Running code in a fresh interpreter where one package cannot be imported, as on a machine
that never installed it (the package is in this venv, so uninstalling is not an option)."""

import os
import subprocess
import sys
import textwrap

_BLOCK = """
import sys

class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name == {package!r} or name.startswith({package!r} + "."):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Blocked())
"""


def run_without(package, code, tmp_path):
    """`code` run by `python` with `package` (and its submodules) unimportable."""
    script = tmp_path / f"no_{package}.py"
    script.write_text(_BLOCK.format(package=package) + textwrap.dedent(code))
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)},
    )
