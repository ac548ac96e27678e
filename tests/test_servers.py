"""tests/servers.py: a server-backed test whose program is missing is skipped with one line naming
the package outside CI, and fails under CI, where skipping it would hide a server never tested. The
README and .ci/run give the one test command that installs those packages, and the README names them."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.servers import debian_program, hydra_launcher, python_program


@pytest.mark.parametrize("ci", ["", "0", "false"])
def test_a_missing_program_is_a_skip_naming_its_package_outside_ci(monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception) as skipped:
        debian_program("evoharness-no-such-server", "evoharness-no-such-package")
    assert str(skipped.value) == ("evoharness-no-such-server not found: install Debian's evoharness-no-such-package package "
                                  "(apt-get install evoharness-no-such-package)")


@pytest.mark.parametrize("ci", ["true", "1", "yes"])
def test_a_missing_program_fails_under_ci(monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match="apt-get install evoharness-no-such-package.*CI is set"):
        debian_program("evoharness-no-such-server", "evoharness-no-such-package", folders="/nonexistent/*/bin")
    with pytest.raises(pytest.fail.Exception, match="install the dev extras"):
        python_program("evoharness-no-such-program")
    with pytest.raises(pytest.fail.Exception, match="pip install nothing"):
        hydra_launcher("evoharness_no_such_launcher", "pip install nothing")


def test_a_program_that_is_there_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    assert debian_program("sh", "dash").endswith("/sh")
    assert python_program(Path(sys.executable).name) == sys.executable


def test_the_readme_and_ci_give_one_test_command_and_name_its_packages() -> None:
    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text(encoding="utf-8")
    setup = readme.split("\n## Set up and run\n", 1)[1].split("\n## ", 1)[0]
    commands = [block.strip() for block in re.findall(r"```bash\n(.*?)```", setup, flags=re.S)]
    assert len(commands) == 2 and commands[1] == "scripts/test", f"README's set-up commands are not (main job, scripts/test): {commands}"
    assert re.search(r"^CI=\S+ exec scripts/test ", (root / ".ci" / "run").read_text(encoding="utf-8"), flags=re.M), \
        ".ci/run must run scripts/test, the README's test command, with CI set"
    packages = re.findall(r"missing\+=\((\S+)\)", (root / "scripts" / "test").read_text(encoding="utf-8"))
    unnamed = [p for p in packages if p not in setup]
    assert packages and not unnamed, f"README's Set up and run does not name the Debian packages scripts/test installs: {unnamed}"
