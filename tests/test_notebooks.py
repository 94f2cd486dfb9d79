"""Notebooks as a researcher opens them: committed clean with complete metadata, paths from the
repository whatever the working directory (JupyterLab starts kernels in notebooks/), every
refusal in the first code cell, JupyterLab serving them; the main job's guards and progress."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from fightlab import reproduce as rep
from fightlab import results
from fightlab.config import ConfigError
from fightlab.paths import NOTEBOOKS, REPO_ROOT, RUNS
from fightlab.reproduce import notebooks, reproduce


def _code(nb) -> list[dict]:
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def _src(cell) -> str:
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def test_notebooks_are_committed_clean():
    nbs = notebooks()
    assert "06" in nbs
    for key, path in nbs.items():
        nb = json.loads(path.read_text())
        code = _code(nb)
        assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), path
        assert nb["cells"][0]["cell_type"] == "markdown", path
        tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1 and tagged[0] is nb["cells"][1], path
        src = "".join(_src(c) for c in code)
        assert "@wp.kernel" not in src and "\nclass " not in src, f"{path}: logic belongs in fightlab"
        ids = [c.get("id") for c in nb["cells"]]
        assert all(ids) and len(set(ids)) == len(ids), f"{path}: every cell needs its own id"
        assert (nb["nbformat"], nb["nbformat_minor"]) == (4, 5), path


def test_notebooks_have_the_same_complete_metadata():
    """JupyterLab rewrites a notebook's kernelspec and language_info with the kernel's on open
    and marks the notebook modified when they differ: commit what the kernel reports."""
    from ipykernel.ipkernel import IPythonKernel

    metas = {key: json.loads(p.read_text())["metadata"] for key, p in notebooks().items()}
    first = next(iter(metas.values()))
    for key, meta in metas.items():
        assert meta == first, f"notebook {key}'s metadata differs from the others: {meta}"
    assert first["kernelspec"] == {"display_name": "Python 3 (ipykernel)", "language": "python",
                                   "name": "python3"}
    kernel = dict(IPythonKernel.language_info)
    info = first["language_info"]
    assert set(info) == set(kernel), f"language_info keys {sorted(info)} != the kernel's {sorted(kernel)}"
    assert {k: v for k, v in info.items() if k != "version"} == \
        {k: v for k, v in kernel.items() if k != "version"}
    assert re.fullmatch(r"3\.\d+\.\d+", info["version"]), info["version"]


#: path literals a notebook must not use: they resolve from the kernel's working directory
_CWD_PATHS = re.compile(r"""Path\(\s*["']|["']\.{1,2}/?["']|["'](?:runs|data|figures|notebooks)/[^"' ]*["']|read_csv\(\s*["']""")


def test_notebook_paths_come_from_the_repository():
    for key, path in notebooks().items():
        for cell in _code(json.loads(path.read_text())):
            src = _src(cell)
            hits = _CWD_PATHS.findall(src)
            assert not hits, f"notebook {key} cell {cell['id']}: {hits} resolves from the cwd; use fightlab.paths"
            assert "fightlab.cli" not in src, f"notebook {key} imports the private CLI module"


@pytest.mark.parametrize("key, params, refused", [
    ("00", dict(publish=True, device="cpu"), "device 'cpu' is not a GPU"),
    ("01", dict(publish=True, device="cpu"), "size 'smoke' is not 'full'"),
    ("01", dict(publish=True, size="smoke"), "size 'smoke' is not 'full'"),
    ("02", dict(publish=True, device="cpu"), "device 'cpu' is not a GPU"),
    ("02", dict(physics="ref", device="cpu"), "physics must be 'training' or 'reference', got 'ref'"),
    ("03", dict(publish=True, device="cpu"), "device 'cpu' is not a GPU"),
    ("04", dict(publish=True, device="cpu"), "device 'cpu' is not a GPU"),
    ("04", dict(nworlds=[128, 128], device="cpu"), "nworlds: 128 is listed twice"),
    ("04", dict(iterations=3, skip=3, device="cpu"), "iterations must exceed skip"),
    ("05", dict(publish=True, device="cpu"), "device 'cpu' is not a GPU"),
    ("05", dict(settings=["all", "fast"], device="cpu"), "unknown graph setting 'fast'"),
    ("05", dict(bodies=[], device="cpu"), "bodies must be a non-empty list"),
    ("05", dict(iterations=3, skip=3, device="cpu"), "iterations must exceed skip"),
    ("06", dict(publish=True, size="full", device="cpu"), "device 'cpu' is not a GPU"),
    ("06", dict(publish=True, device="cpu"), "device 'cpu' is not a GPU"),
    ("06", dict(size="medium", device="cpu"), "size must be one of 'auto', 'smoke', 'full', got 'medium'"),
    ("06", dict(video_seconds=0, device="cpu"), "seconds must be a number in (0, 600]"),
    ("07", dict(publish=True, device="cpu"), "size 'smoke' is not 'full'"),
    ("07", dict(price_per_hour=0), "price_per_hour must be a positive number, got 0.0"),
    ("07", dict(price_per_hour=-2.5), "price_per_hour must be a positive number, got -2.5"),
    ("07", dict(cpu_price_per_hour=0), "cpu_price_per_hour must be a positive number, got 0.0"),
    ("07", dict(bands=[0, 2, 1]), "bands must increase: 1 follows 2"),
    ("07", dict(tol=0), "tol must be a relative tolerance in (0, 1)"),
    ("08", dict(publish=True, device="cpu"), "size 'smoke' is not 'full'"),
    ("08", dict(body="boxer", device="cpu"), "unknown body 'boxer'"),
    ("08", dict(demo_iterations=0, device="cpu"), "demo_iterations must be a positive integer, got 0"),
    ("08", dict(gpu="NVIDIA B300", device="cpu"), "gpu 'NVIDIA B300' has no side-by-side training"),
    ("09", dict(publish=True, device="cpu"), "device 'cpu' is not a GPU"),
    ("09", dict(bodies=["boxer"], device="cpu"), "bodies: unknown body 'boxer'"),
    ("09", dict(variants=["all", "fast"], device="cpu"), "variants: 'fast' is not 'all', 'default', 'none'"),
    ("09", dict(nworlds=[32, 32], device="cpu"), "nworlds: 32 is listed twice"),
])
def test_every_refusal_comes_in_the_first_code_cell(key, params, refused, tmp_path):
    """Before any work: the cell after the parameters raises ConfigError, nothing else ran; its
    first output line, before the refusal, is the size it chose and why (size "auto", the
    default, is smoke on this CPU device)."""
    import papermill as pm

    src = notebooks()[key]
    first = _code(json.loads(src.read_text()))[1]["id"]  # the first code cell after the parameters
    out = tmp_path / "out.ipynb"
    with pytest.raises(pm.PapermillExecutionError) as e:
        pm.execute_notebook(str(src), str(out), parameters=params, cwd=str(NOTEBOOKS),
                            kernel_name="python3", progress_bar=False)
    assert e.value.ename == "ConfigError" and refused in e.value.evalue, e.value.evalue
    cells = json.loads(out.read_text())["cells"]
    failed = [c["id"] for c in cells if c.get("metadata", {}).get("papermill", {}).get("status") == "failed"]
    assert failed == [first]
    if "size" in params:
        return  # a size given: its own line (or its refusal) is test_size_note's
    [cell] = [c for c in cells if c["id"] == first]
    text = "".join("".join(o["text"]) for o in cell["outputs"]
                   if o["output_type"] == "stream" and o["name"] == "stdout")
    assert text.splitlines()[0] == \
        "size = smoke (auto: no GPU, device cpu): a check of the code path, not a measurement", text


def test_every_notebook_defaults_to_size_auto_and_prints_it_first():
    """size = "auto" in every parameters cell; the first code cell resolves it with the config's
    one rule and prints the line before any other statement can print."""
    for key, path in notebooks().items():
        params, first = _code(json.loads(path.read_text()))[:2]
        assert re.search(r'^size = "auto" ', _src(params), re.M), f"notebook {key}: size is not \"auto\""
        body = [ln for ln in _src(first).splitlines() if ln.strip() and not ln.startswith(("#", "from ", "import ", " "))]
        assert body[:3] == ["device = resolve_device(device)",
                            f"print(size_note(size, device{', needs_gpu=False' if key in ('01', '07') else ''}))",
                            "size = resolve_size(size, device)"], f"notebook {key}: {body[:3]}"


@pytest.mark.parametrize("size, device, resolved, line", [
    ("auto", "cpu", "smoke", "size = smoke (auto: no GPU, device cpu): a check of the code path, not a measurement"),
    ("auto", "cuda:0", "full", "size = full (auto: GPU, device cuda:0): the measurement"),
    ("auto", "cuda:1", "full", "size = full (auto: GPU, device cuda:1): the measurement"),
    ("smoke", "cuda:0", "smoke", "size = smoke (as set: GPU, device cuda:0): a check of the code path, not a measurement"),
    ("full", "cpu", "full", "size = full (as set: no GPU, device cpu): the GPU measurement's sizes on a CPU: "
                            "slow, and not a measurement (size 'smoke' or 'auto' checks the code path)"),
])
def test_size_note(size, device, resolved, line):
    from fightlab.sizes import resolve_size, size_note

    assert resolve_size(size, device) == resolved
    assert size_note(size, device) == line
    # a rendering or a table at full size on a CPU is the result itself
    assert size_note(size, device, needs_gpu=False).endswith(
        "a check of the code path, not a measurement" if resolved == "smoke" else "the full-size result")


@pytest.mark.parametrize("bad", ["medium", "AUTO", "", None, 1])
def test_resolve_size_refuses_in_one_line(bad):
    from fightlab.sizes import resolve_size

    with pytest.raises(ConfigError) as e:
        resolve_size(bad, "cpu")
    assert str(e.value) == f"size must be one of 'auto', 'smoke', 'full', got {bad!r}"


def _tracked_changes() -> str:
    """git status of what a notebook must never touch unpublished (data/, figures/, notebooks/)."""
    r = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "data", "figures",
                        "notebooks"], cwd=REPO_ROOT, capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else "no git"


def test_train_notebook_from_its_own_folder(tmp_path):
    """The issue's reproduction: papermill with --cwd notebooks (JupyterLab's working directory),
    parameters through -p, -r and -y. The run goes under the repository's runs/, the published
    runs are read from the repository's data/, and nothing appears under notebooks/."""
    before = _tracked_changes()
    stray = NOTEBOOKS / "runs"
    stray_before = stray.exists()
    out = tmp_path / "06.ipynb"
    t0 = time.time()
    r = subprocess.run([sys.executable, "-m", "papermill", "notebooks/06_train.ipynb", str(out),
                        "--cwd", "notebooks", "-p", "size", "smoke", "-r", "device", "cpu",
                        "-y", "publish: false", "--no-progress-bar"],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    nb = json.loads(out.read_text())
    outputs = json.dumps([c.get("outputs", []) for c in nb["cells"]])
    # what it wrote: this run's folder under the repository's runs/, nothing in notebooks/
    run_dir = RUNS / "train" / "nb06-simple-4-s0-smoke"
    assert (run_dir / "rows.csv").stat().st_mtime >= t0 - 1
    row = results.read_rows("train", run_dir)  # ids as text (an all-digit id too)
    assert len(row) == 1 and row["run_id"][0] in outputs
    assert stray_before or not stray.exists(), f"{stray} was written (a path from the cwd)"
    assert _tracked_changes() == before
    # what it read: every committed published run, and the with/without-the-kernel table
    # (every training to the solve criterion; the runs stopped after stage 0 count in the
    # learner-study table, by variant, not one by one)
    from fightlab.measure.report import published_runs

    published = published_runs(REPO_ROOT)
    assert len(published) > 0
    assert all(run_id in outputs for run_id in published["run_id"])
    assert "solved" in outputs and "env_steps_per_s" in outputs
    assert "stock_over_this" in outputs and "tree factor, shared" in outputs
    # the trained policy on video (or one line saying what to install)
    from fightlab.figures.video import render_available

    if render_available()[0]:
        clips = sorted((run_dir / "video").glob("episode-it*-seed1.mp4"))
        assert clips and clips[-1].stat().st_mtime >= t0 - 1 and str(clips[-1]) in outputs
        assert "video/mp4" in outputs or "data:video/mp4;base64" in outputs
    else:
        assert "no video of the policy" in outputs


def _tiny_notebook(folder: Path) -> Path:
    """99_tiny.ipynb: a parameters cell and one cell that prints its working directory."""
    cells = [dict(cell_type="markdown", id="m", metadata={}, source="# tiny"),
             dict(cell_type="code", id="p", metadata={"tags": ["parameters"]}, execution_count=None,
                  outputs=[], source="size = 'full'\ndevice = 'cpu'\npublish = False"),
             dict(cell_type="code", id="c", metadata={}, execution_count=None, outputs=[],
                  source="import os\nprint('tiny ran in', os.getcwd(), size)")]
    meta = json.loads(notebooks()["06"].read_text())["metadata"]
    path = folder / "99_tiny.ipynb"
    path.write_text(json.dumps(dict(cells=cells, metadata=meta, nbformat=4, nbformat_minor=5)))
    return path


def test_reproduce_shows_progress_and_where_each_notebook_went(tmp_path, monkeypatch, capfd):
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    _tiny_notebook(nbdir)
    monkeypatch.setattr(rep, "NOTEBOOK_DIR", nbdir)
    out = tmp_path / "out"
    assert reproduce(only=["99"], size="smoke", device="cpu", out_dir=out) == 0
    o = capfd.readouterr()
    dst = out / "99_tiny-smoke.ipynb"
    assert re.search(r"99_tiny: 100%\|.*\| (\d+)/\1 ", o.err), o.err  # papermill's bar, per notebook
    assert "done in" in o.out and str(dst) in o.out
    cell = json.loads(dst.read_text())["cells"][-1]
    assert f"tiny ran in {nbdir} smoke" in json.dumps(cell["outputs"])  # run in its own folder
    # log_output: the cells' output streams as they run, instead of the bar
    assert reproduce(only=["99"], size="smoke", device="cpu", out_dir=out, log_output=True) == 0
    o = capfd.readouterr()
    assert f"tiny ran in {nbdir} smoke" in o.out and "99_tiny: 100%" not in o.err


def test_reproduce_names_the_failing_cell(tmp_path, monkeypatch, capsys):
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    path = _tiny_notebook(nbdir)
    nb = json.loads(path.read_text())
    nb["cells"][-1]["source"] = "raise ValueError('broken on purpose')"
    path.write_text(json.dumps(nb))
    monkeypatch.setattr(rep, "NOTEBOOK_DIR", nbdir)
    from fightlab.cli import main

    monkeypatch.setattr(rep, "OUT_DIR", tmp_path / "out")
    assert main(["reproduce", "--only", "99", "--device", "cpu"]) == 1
    err = capsys.readouterr().err.splitlines()[-1]  # after the notebook's progress bar
    assert err.startswith("fightlab: error: notebook 99_tiny.ipynb failed at In [3] (ValueError: broken on purpose)"), err
    assert "ValueError: broken on purpose" in err and str(tmp_path / "out" / "99_tiny-smoke.ipynb") in err
    assert "Traceback" not in err


def test_reproduce_guards():
    # every refusal before any notebook runs (one publish rule: the plans the command line checks)
    from fightlab.publish import refuse_publish
    from fightlab.reproduce import publish_plans

    with pytest.raises(ConfigError, match="device 'cpu' is not a GPU"):
        refuse_publish(publish_plans(["06"], "full", True, "cpu"))
    with pytest.raises(ConfigError, match="size 'smoke' is not 'full'"):
        refuse_publish(publish_plans(["06"], "smoke", True, "cuda:0"))
    with pytest.raises(ConfigError, match="size 'smoke' is not 'full'"):
        refuse_publish(publish_plans(["01"], "smoke", True, "cpu"))  # a rendering: size only
    with pytest.raises(ConfigError, match="device 'cpu' is not a GPU"):
        refuse_publish(publish_plans(["01", "02"], "full", True, "cpu"))
    with pytest.raises(ConfigError, match="unknown notebook 99"):
        reproduce(only=["99"], size="smoke")
    with pytest.raises(ConfigError, match="size must be one of 'auto', 'smoke', 'full', got 'huge'"):
        reproduce(only=["06"], size="huge")
    with pytest.raises(ConfigError, match="publish must be True or False"):
        refuse_publish(publish_plans(["06"], "full", "False", "cpu"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_jupyterlab_serves_the_notebooks(tmp_path):
    """README's command (`bash scripts/lab.sh`, with --allow-root as root) on a free loopback
    port: the server starts, serves notebook 06 as the file on disk with autosave off by default
    (the repository's jupyter/ settings), and stops."""
    jupyter = Path(sys.executable).parent / "jupyter"
    if not jupyter.exists():
        pytest.skip(f"no {jupyter}")
    port, token = _free_port(), "fightlab-test"
    cmd = ["bash", str(REPO_ROOT / "scripts" / "lab.sh"), "--no-browser", "--ip", "127.0.0.1",
           "--port", str(port), f"--IdentityProvider.token={token}"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")  # jupyter lab exits at once as root without it (README)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), JUPYTER_DATA_DIR=str(tmp_path / "data"))
    env.pop("JUPYTER_TOKEN", None)
    log = (tmp_path / "lab.log").open("w")
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline, doc = time.time() + 120, None
        while time.time() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"{url}/api/contents/notebooks/06_train.ipynb?token={token}",
                                            timeout=5) as r:
                    doc = json.load(r)
                break
            except OSError:
                time.sleep(0.5)
        assert doc is not None, (tmp_path / "lab.log").read_text()[-3000:]
        assert doc["type"] == "notebook" and doc["path"] == "notebooks/06_train.ipynb"
        on_disk = json.loads((NOTEBOOKS / "06_train.ipynb").read_text())
        assert [c["id"] for c in doc["content"]["cells"]] == [c["id"] for c in on_disk["cells"]]
        with urllib.request.urlopen(f"{url}/lab/tree/notebooks/06_train.ipynb?token={token}", timeout=10) as r:
            assert r.status == 200 and "JupyterLab" in r.read().decode()
        plugin = "@jupyterlab/docmanager-extension:plugin"
        with urllib.request.urlopen(f"{url}/lab/api/settings/{plugin}?token={token}", timeout=10) as r:
            settings = json.load(r)
        assert settings["schema"]["properties"]["autosave"]["default"] is False, settings["schema"]
        assert "autosave" not in settings["settings"]  # a default: the user's own settings may still set it
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
    assert proc.returncode is not None
    with pytest.raises(OSError):  # stopped: nothing answers on the port
        urllib.request.urlopen(f"{url}/api?token={token}", timeout=3)
    shutil.rmtree(tmp_path / "runtime", ignore_errors=True)


def _selenium_python() -> str | None:
    """An interpreter with selenium: $FIGHTLAB_SELENIUM_PYTHON, else this one if it has it."""
    given = os.environ.get("FIGHTLAB_SELENIUM_PYTHON", "").strip()
    if given:
        return given
    import importlib.util

    return sys.executable if importlib.util.find_spec("selenium") else None


def _jupyterlab_check_missing() -> str | None:
    missing = [p for p in ("/usr/bin/chromium", "/usr/bin/chromedriver") if not Path(p).exists()]
    if missing:
        return f"no {' or '.join(missing)} (apt-get install -y chromium chromium-driver)"
    if _selenium_python() is None:
        return ("no selenium: set FIGHTLAB_SELENIUM_PYTHON to a python that has it (python3 -m venv "
                "/tmp/selvenv && /tmp/selvenv/bin/pip install selenium)")
    return None


@pytest.mark.slow
@pytest.mark.skipif(_jupyterlab_check_missing() is not None, reason=str(_jupyterlab_check_missing()))
def test_jupyterlab_does_not_write_a_notebook_unasked(tmp_path):
    """A real JupyterLab in headless chromium (tests/jupyterlab_check.py): notebook 06 opened,
    Run All, 150 s (past autosave's 120 s), closed with Discard, the server stopped. Started by
    scripts/lab.sh the committed file stays byte-identical and git status clean; plain
    `jupyter lab` on a copy of it (the control) writes the copy, so the check can fail."""
    script = Path(__file__).with_name("jupyterlab_check.py")
    got = {}
    for mode in ("lab-sh", "plain"):
        out = tmp_path / f"{mode}.json"
        r = subprocess.run([_selenium_python(), str(script), "--mode", mode, "--json", str(out)],
                           cwd=REPO_ROOT, capture_output=True, text=True, timeout=1500)
        assert r.returncode == 0, r.stderr[-3000:]
        got[mode] = json.loads(out.read_text())
        assert got[mode]["ran_all"], got[mode]  # every cell ran, at size auto = smoke here
        assert got[mode]["first_output_line"] == \
            "size = smoke (auto: no GPU, device cpu): a check of the code path, not a measurement"
    lab, plain = got["lab-sh"], got["plain"]
    assert lab["file"] == str(NOTEBOOKS / "06_train.ipynb")
    assert not lab["changed"] and lab["git_status_after"] == lab["git_status_before"], lab
    assert plain["changed"], f"the control: plain jupyter lab did not autosave the copy ({plain})"
