"""pyproject.toml and environment.yml list the same dependencies; the CI/test scripts hang together."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib

import pytest

from fightlab.paths import REPO_ROOT as ROOT
TEST_COMMAND = "bash scripts/test.sh"


def _norm(req: str) -> str:
    """Normalise a requirement: lower-case, '_'/'.' -> '-' in the name, no spaces."""
    req = req.strip().replace(" ", "")
    m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(.*)$", req)
    assert m, f"cannot parse requirement {req!r}"
    return re.sub(r"[-_.]+", "-", m.group(1)).lower() + m.group(2)


def pyproject_dependencies() -> set[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {_norm(r) for r in data["project"]["dependencies"]}


def environment_yml() -> tuple[list[str], list[str]]:
    """(conda dependencies, pip dependencies) of environment.yml, parsed by hand (no pyyaml).

    Handles the shape used here: a top-level ``dependencies:`` list whose items are strings or one
    ``- pip:`` item holding an indented list. Comments and blank lines are ignored.
    """
    conda, pip = [], []
    section = None  # None | "deps" | "pip"
    pip_indent = None
    for raw in (ROOT / "environment.yml").read_text().splitlines():
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        text = line.strip()
        if indent == 0:
            section = "deps" if text == "dependencies:" else None
            continue
        if section is None:
            continue
        if section == "pip" and indent > pip_indent and text.startswith("- "):
            pip.append(text[2:].strip().strip("'\""))
            continue
        if text.startswith("- "):
            item = text[2:].strip()
            if item == "pip:":
                section, pip_indent = "pip", indent
            else:
                section = "deps"
                conda.append(item.strip("'\""))
    return conda, pip


def test_environment_yml_matches_pyproject():
    conda, pip = environment_yml()
    assert "pip" in conda
    assert any(re.fullmatch(r"python>=3\.11", c.replace(" ", "")) for c in conda), conda
    assert "-e ." in pip, "environment.yml must install fightlab itself with '-e .'"
    env_deps = {_norm(p) for p in pip if p != "-e ."}
    py_deps = pyproject_dependencies()
    assert env_deps == py_deps, (
        f"only in pyproject.toml: {sorted(py_deps - env_deps)}; only in environment.yml: {sorted(env_deps - py_deps)}"
    )


def test_requires_python_matches():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert data["project"]["requires-python"].replace(" ", "") == ">=3.11"


@pytest.mark.parametrize("script", [".ci/run", "scripts/setup.sh", "scripts/test.sh"])
def test_scripts_are_executable_and_strict(script):
    path = ROOT / script
    assert os.access(path, os.X_OK), f"{script} is not executable"
    text = path.read_text()
    assert text.startswith("#!/usr/bin/env bash\n"), f"{script} needs a bash shebang"
    assert "set -euo pipefail" in text


def test_ci_runs_the_readme_test_command():
    lines = [l.strip() for l in (ROOT / ".ci/run").read_text().splitlines() if l.strip() and not l.startswith("#")]
    assert lines[-1] == TEST_COMMAND
    readme = ROOT / "README.md"
    if not readme.exists():
        pytest.skip("README.md not written yet")
    assert TEST_COMMAND in readme.read_text(), f"README.md must give the test command {TEST_COMMAND!r}"


def test_test_sh_fails_on_no_tests():
    text = (ROOT / "scripts/test.sh").read_text()
    assert re.search(r'"\$rc"\s*-eq\s*5', text) and "exit 5" in text
    assert "bash scripts/setup.sh" in text and '"$@"' in text


def test_test_sh_keeps_skypilot_out_of_the_project_venv():
    """.venv is set up as scripts/run.sh sets it up (same extras, same stamp: neither reinstalls
    after the other); SkyPilot goes into .venv-survey from pyproject.toml's survey pin (never .venv:
    it downgrades click), and the launcher's tests are told to use it."""
    test_sh = (ROOT / "scripts/test.sh").read_text()
    run_sh = (ROOT / "scripts/run.sh").read_text()
    setup_line = re.compile(r"^(.*)bash scripts/setup\.sh(?! --check-disk)(.*)$", re.M)  # the set-up, not the disk check
    assert setup_line.findall(test_sh) == setup_line.findall(run_sh) == [("", "")]
    assert "EXTRAS" not in re.sub(r"#.*", "", test_sh)
    assert '"optional-dependencies"]["survey"]' in test_sh and "skypilot==" not in test_sh
    assert 'SURVEY_VENV="$ROOT/.venv-survey"' in test_sh and "FORCE" in test_sh
    assert 'export FIGHTLAB_SURVEY_PYTHON="$SURVEY_VENV/bin/python"' in test_sh
    survey = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["survey"]
    assert [r for r in survey if r.startswith("skypilot")] == ["skypilot==0.14.1"]
    assert ".venv-survey/" in (ROOT / ".gitignore").read_text().splitlines()
    assert "/.venv-survey" in (ROOT / ".skyignore").read_text().splitlines()  # never uploaded


# --- the suite never writes the user's runs/ (tests/conftest.py) ---------------------------------

def test_the_suite_runs_in_a_temporary_runs_folder():
    import subprocess
    import sys

    import conftest
    from fightlab import paths

    assert paths.RUNS == conftest.TEST_RUNS and os.environ[paths.RUNS_ENV] == str(conftest.TEST_RUNS)
    assert ROOT not in paths.RUNS.parents and paths.RUNS.name == "runs"
    # what the suite starts (papermill's kernels, python -m fightlab) inherits it
    out = subprocess.run([sys.executable, "-c", "from fightlab.paths import RUNS; print(RUNS)"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == str(conftest.TEST_RUNS)
    assert paths.runs_folder("") == paths.runs_folder("  ") == ROOT / "runs"
    assert paths.runs_folder("/x/runs") == paths.Path("/x/runs")
    assert paths.runs_folder("runs/alt") == ROOT / "runs" / "alt"
    assert paths.runs_folder("~/runs") == paths.Path.home() / "runs"


def test_the_runs_check_sees_what_was_created_changed_or_removed(tmp_path):
    import conftest

    (tmp_path / "train" / "a").mkdir(parents=True)
    (tmp_path / "train" / "a" / "rows.csv").write_text("x\n1\n")
    (tmp_path / "old.txt").write_text("keep")
    before = conftest.tree_state(tmp_path)
    assert conftest.state_changes(before, conftest.tree_state(tmp_path)) == []
    (tmp_path / "train" / "a" / "rows.csv").write_text("x\n1\n2\n")
    (tmp_path / "train" / "b").mkdir()
    (tmp_path / "old.txt").unlink()
    assert conftest.state_changes(before, conftest.tree_state(tmp_path)) == [
        "created train/b", "changed train/a/rows.csv", "removed old.txt"]
    assert conftest.tree_state(tmp_path / "absent") == {}


def test_the_session_fails_when_a_test_writes_the_users_runs_folder(tmp_path):
    """The guard itself, end to end: a child pytest session with this suite's conftest whose one
    test writes into the user's runs folder (here a FIGHTLAB_RUNS the caller set) exits 1 and
    names the file; the same session writing nothing there passes."""
    import subprocess
    import sys

    user_runs = tmp_path / "user" / "runs"
    user_runs.mkdir(parents=True)
    (tmp_path / "test_child.py").write_text(
        "import os, pathlib\n"
        "def test_writes():\n"
        "    if os.environ.get('CHILD_WRITES'):\n"
        "        (pathlib.Path(os.environ['CHILD_USER_RUNS']) / 'oops.txt').write_text('x')\n")
    env = {**os.environ, "FIGHTLAB_RUNS": str(user_runs), "CHILD_USER_RUNS": str(user_runs),
           "PYTHONPATH": str(ROOT / "tests")}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider",
           str(tmp_path / "test_child.py")]
    quiet = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    loud = subprocess.run(cmd, env={**env, "CHILD_WRITES": "1"}, cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert loud.returncode == 1, loud.stdout + loud.stderr
    assert "FAILED: the user's runs folder changed" in loud.stdout and "created oops.txt" in loud.stdout


def test_setup_waits_for_apts_lock_and_retries_update(tmp_path):
    """setup.sh's libosmesa6 install: apt-get waits for apt's lock (DPkg::Lock::Timeout) and a
    failed `update` (the lists lock held a moment by another apt) is tried again, not given up."""
    text = (ROOT / "scripts/setup.sh").read_text()
    block = re.search(r"^    APT=.*?^    }$", text, re.S | re.M)
    assert block, "setup.sh's apt block (APT=..., apt_update) not found"
    fake = tmp_path / "apt-get"  # fails `update` twice, as when another apt holds the lock
    fake.write_text('#!/bin/bash\necho "$*" >> "$LOG"\n'
                    'n=$(grep -c " update" "$LOG")\n'
                    '[[ " $* " == *" update "* && $n -le 2 ]] && exit 100\nexit 0\n')
    fake.chmod(0o755)
    script = ('say() { echo "[setup] $*"; }; SUDO=""\n' + block.group(0).replace("sleep 15", "sleep 0")
              + '\napt_update && $APT install -y libosmesa6 && echo INSTALLED\n')
    log = tmp_path / "log"
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "LOG": str(log)})
    calls = log.read_text().splitlines()
    assert r.returncode == 0 and "INSTALLED" in r.stdout, r.stdout + r.stderr
    assert [c.split()[-1] for c in calls] == ["update", "update", "update", "libosmesa6"]
    assert all("-o DPkg::Lock::Timeout=120" in c for c in calls)
    assert r.stdout.count("apt-get update failed") == 2


def _setup_copy(tmp_path, free_kib: int) -> tuple[str, dict]:
    """A copy of setup.sh and pyproject.toml in ``tmp_path/repo``, and an environment whose PATH
    puts first a `df` that reports ``free_kib`` KiB free and an `apt-get` that does nothing."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "scripts/setup.sh").write_text((ROOT / "scripts/setup.sh").read_text())
    (repo / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "df").write_text("#!/bin/bash\necho 'Filesystem 1024-blocks Used Available Capacity Mounted on'\n"
                             f"echo '/dev/x 999999999 1 {free_kib} 1% /'\n")
    (bin_ / "apt-get").write_text("#!/bin/bash\nexit 0\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "TORCH_CPU": "0"}
    return str(repo), env


def test_setup_refuses_to_install_on_a_full_disk(tmp_path):
    """Too little room for the .venv: one line naming the free space and the bar, exit 1, before
    pip runs (a disk that fills mid-install leaves a half-made .venv)."""
    repo, env = _setup_copy(tmp_path, free_kib=300 * 1024)
    r = subprocess.run(["bash", f"{repo}/scripts/setup.sh"], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    err = [ln for ln in r.stderr.splitlines() if "[setup] error" in ln]
    assert len(err) == 1 and "300 MiB free" in err[0] and "4 GiB" in err[0], r.stderr
    assert "pip install -e" not in r.stdout and "Traceback" not in r.stderr
    assert not (tmp_path / "repo/.venv").exists()  # refused before the venv was made
    r = subprocess.run(["bash", f"{repo}/scripts/setup.sh"], capture_output=True, text=True, timeout=300,
                       env={**env, "SETUP_MIN_FREE_GB": "lots"})
    assert r.returncode == 2 and "SETUP_MIN_FREE_GB must be a whole number of GiB from 0 to 9999999, got 'lots'" in r.stderr


def test_the_disk_check_alone_guards_the_survey_environment(tmp_path):
    """`setup.sh --check-disk WHAT` runs only the check (no venv, no pip); test.sh runs it before it
    makes or fills .venv-survey."""
    repo, env = _setup_copy(tmp_path, free_kib=300 * 1024)
    r = subprocess.run(["bash", f"{repo}/scripts/setup.sh", "--check-disk", "the survey env"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 1 and "300 MiB free" in r.stderr and "the survey env needs about 4 GiB" in r.stderr
    repo, env = _setup_copy(tmp_path / "roomy", free_kib=50 * 1024 * 1024)
    r = subprocess.run(["bash", f"{repo}/scripts/setup.sh", "--check-disk", "x"], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 0 and r.stderr == "" and not (tmp_path / "roomy/repo/.venv").exists()
    text = (ROOT / "scripts/test.sh").read_text()
    assert 0 < text.index("setup.sh --check-disk") < text.index('-m venv "$SURVEY_VENV"')


@pytest.mark.parametrize("value,free_mib,code,words", [
    (None, 300, 1, "300 MiB free on the disk of /tmp; x needs about 4 GiB"),
    ("08", 300, 1, "x needs about 8 GiB"),              # decimal, not octal
    ("010", 9 * 1024, 1, "x needs about 10 GiB"),
    ("0", 300, 0, None),                                 # the check off
    ("4", 5 * 1024, 0, None),
    ("99999999999999999999", 300, 2, "from 0 to 9999999, got '99999999999999999999'"),
    ("-1", 300, 2, "got '-1'"),
    ("4", "fail", 0, None),                              # a df that fails skips the check, not the setup
])
def test_the_disk_check_reads_its_bar_in_decimal_and_survives_a_failing_df(tmp_path, value, free_mib, code, words):
    """setup.sh's ``need_disk`` on its own (the block cut from the script), with a fake ``df``."""
    text = (ROOT / "scripts/setup.sh").read_text()
    block = re.search(r'^MIN_FREE_GB=.*?^need_disk\(\).*?^}$', text, re.S | re.M)
    assert block, "setup.sh's disk check (MIN_FREE_GB=..., need_disk) not found"
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    body = "exit 1" if free_mib == "fail" else (f"echo 'Filesystem 1024-blocks Used Available Capacity Mounted on'\n"
                                                f"echo '/dev/x 999999999 1 {free_mib * 1024} 1% /'")
    (bin_ / "df").write_text(f"#!/bin/bash\n{body}\n")
    (bin_ / "df").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "SETUP_MIN_FREE_GB"}
    if value is not None:
        env["SETUP_MIN_FREE_GB"] = value
    script = "set -euo pipefail\nROOT=/tmp\n" + block.group(0) + '\nneed_disk "x"\necho PASSED\n'
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                       env={**env, "PATH": f"{bin_}:{os.environ['PATH']}"})
    assert r.returncode == code, r.stdout + r.stderr
    if code == 0:
        assert "PASSED" in r.stdout and not r.stderr
    else:
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("[setup] error: ") and words in lines[0], lines
