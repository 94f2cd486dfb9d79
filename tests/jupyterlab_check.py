"""A real JupyterLab in headless chromium: does running a notebook write it without a save?

Starts a JupyterLab server, opens a notebook in chromium (selenium), runs all its cells from the
Run menu, waits past autosave's interval (120 s by default in JupyterLab), closes the tab with
"Discard", stops the server, and reports whether the notebook file changed on disk.

  --mode lab-sh   `bash scripts/lab.sh` on the repository itself (the README's way): the committed
                  notebook must stay byte-identical and `git status --porcelain notebooks/` as it was.
  --mode plain    `.venv/bin/jupyter lab` without the repository's settings, on a copy of the
                  notebook in a temporary root (the control: there autosave writes the file; the
                  committed one is never touched).

Runs outside fightlab's .venv (stdlib and selenium only): e.g.
  python3 -m venv /tmp/selvenv && /tmp/selvenv/bin/pip install selenium
  apt-get install -y chromium chromium-driver
  /tmp/selvenv/bin/python tests/jupyterlab_check.py --mode lab-sh --json out.json
Every Jupyter folder (config, data, runtime) and the runs folder (FIGHTLAB_RUNS, unless set) are
temporary, so the user's settings and runs/ play no part. Prints one JSON object (also to --json);
exit code 0 when the check ran to its end (the outcome is in the object), 2 when it could not.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1400,1000"]

#: the notebook's state as the page shows it: prompts of the code cells, the kernel indicator,
#: whether its tab is marked dirty, the first output text of each code cell
STATE_JS = """
const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
if (!nb) return null;
const cells = [...nb.querySelectorAll('.jp-Cell.jp-CodeCell')];
const ind = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator');
const tab = [...document.querySelectorAll('.lm-TabBar-tab')].find(t => t.textContent.includes(arguments[0]));
return {
  prompts: cells.map(c => (c.querySelector('.jp-InputArea-prompt') || {}).textContent || ''),
  outputs: cells.map(c => { const o = c.querySelector('.jp-OutputArea-output'); return o ? o.textContent : ''; }),
  kernel: ind ? ind.getAttribute('data-status') : null,
  dirty: tab ? tab.classList.contains('jp-mod-dirty') : null,
};
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _git_status(root: Path) -> str:
    r = subprocess.run(["git", "status", "--porcelain", "notebooks/"], cwd=root, capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else f"git failed: {r.stderr.strip()}"


def _wait_http(url: str, proc: subprocess.Popen, timeout: float) -> None:
    import urllib.request

    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode} before answering")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"no answer from {url.split('?')[0]} within {timeout:.0f} s")


def _click_menu(driver, menu: str, command: str) -> None:
    from selenium.webdriver.common.by import By

    [item] = [e for e in driver.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item") if e.text.strip() == menu]
    item.click()
    time.sleep(1)
    driver.find_element(By.CSS_SELECTOR, f'.lm-Menu-item[data-command="{command}"]').click()


def check(mode: str, notebook: str, wait_s: float, run_timeout_s: float, work: Path) -> dict:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    name = Path(notebook).name
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(work / "config"), JUPYTER_DATA_DIR=str(work / "data"),
               JUPYTER_RUNTIME_DIR=str(work / "runtime"))
    env.pop("JUPYTER_CONFIG_PATH", None)
    env.pop("JUPYTER_TOKEN", None)
    env.setdefault("FIGHTLAB_RUNS", str(work / "runs"))
    port, token = _free_port(), "fightlab-check"
    args = ["--no-browser", "--ip", "127.0.0.1", "--port", str(port), f"--IdentityProvider.token={token}"]
    if os.geteuid() == 0:
        args.append("--allow-root")
    if mode == "lab-sh":
        root = REPO
        cmd = ["bash", str(REPO / "scripts" / "lab.sh"), *args]
    else:
        root = work / "root"
        (root / "notebooks").mkdir(parents=True)
        shutil.copy2(REPO / notebook, root / notebook)
        cmd = [str(REPO / ".venv" / "bin" / "jupyter"), "lab", f"--ServerApp.root_dir={root}", *args]
    target = root / notebook
    # JupyterLab copies a notebook it opens to .ipynb_checkpoints/ (git-ignored) when it has no
    # checkpoint yet: noted, and removed again only where this check made it
    checkpoint = target.parent / ".ipynb_checkpoints" / f"{target.stem}-checkpoint{target.suffix}"
    made_dir, made_file = not checkpoint.parent.exists(), not checkpoint.exists()
    before = {"sha256": _sha(target), "git_status": _git_status(REPO)}
    out = {"mode": mode, "notebook": notebook, "file": str(target), "command": " ".join(cmd[:2]),
           "wait_s": wait_s}
    log = (work / f"server-{mode}.log").open("w")
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    driver = None
    t_start = time.time()
    try:
        _wait_http(f"http://127.0.0.1:{port}/api?token={token}", proc, 180)
        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for flag in CHROMIUM_FLAGS + [f"--user-data-dir={work / 'chromium'}"]:
            opts.add_argument(flag)
        driver = webdriver.Chrome(options=opts, service=Service(executable_path=CHROMEDRIVER))
        driver.get(f"http://127.0.0.1:{port}/lab/tree/{notebook}?token={token}")
        deadline = time.time() + 180
        state = None
        while time.time() < deadline:
            state = driver.execute_script(STATE_JS, name)
            if state and state["prompts"] and state["kernel"] == "idle":
                break
            time.sleep(1)
        else:
            raise RuntimeError(f"the notebook did not open with an idle kernel within 180 s: {state}")
        driver.find_element(By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook").click()
        _click_menu(driver, "Run", "runmenu:run-all")
        t_run = time.time()
        while time.time() - t_run < run_timeout_s:
            time.sleep(3)
            state = driver.execute_script(STATE_JS, name)
            done = all(p.strip("[]: ").isdigit() for p in state["prompts"])
            if done or (state["kernel"] == "idle" and time.time() - t_run > 10
                        and not any("*" in p for p in state["prompts"])):
                break
        out["run_s"] = round(time.time() - t_run, 1)
        out["prompts"] = state["prompts"]
        out["ran_all"] = all(p.strip("[]: ").isdigit() for p in state["prompts"])
        out["first_output_line"] = (state["outputs"][1].splitlines() or [""])[0] if len(state["outputs"]) > 1 else ""
        while time.time() - t_run < wait_s:  # past autosave's interval
            time.sleep(2)
        state = driver.execute_script(STATE_JS, name)
        out["dirty_before_close"] = state["dirty"]
        out["changed_before_close"] = _sha(target) != before["sha256"]
        [tab] = [t for t in driver.find_elements(By.CSS_SELECTOR, ".lm-TabBar-tab") if name in t.text]
        tab.find_element(By.CSS_SELECTOR, ".lm-TabBar-tabCloseIcon").click()
        time.sleep(2)
        discard = [b for b in driver.find_elements(By.CSS_SELECTOR, ".jp-Dialog-button")
                   if b.text.strip().lower() in ("discard", "don't save")]
        out["closed_with"] = "discard" if discard else "no dialog"
        if discard:
            discard[0].click()
            time.sleep(2)
    finally:
        if driver is not None:
            driver.quit()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the server and what it started, this check's own
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        log.close()
    out["server_exit"] = proc.returncode
    out["elapsed_s"] = round(time.time() - t_start, 1)
    out["changed"] = _sha(target) != before["sha256"]
    out["git_status_before"] = before["git_status"]
    out["git_status_after"] = _git_status(REPO)
    out["checkpoint_made"] = made_file and checkpoint.exists()
    if out["checkpoint_made"]:
        out["checkpoint_same_as_before"] = _sha(checkpoint) == before["sha256"]
        checkpoint.unlink()
        if made_dir and not any(checkpoint.parent.iterdir()):
            checkpoint.parent.rmdir()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("lab-sh", "plain"), required=True)
    ap.add_argument("--notebook", default="notebooks/06_train.ipynb", help="path in the repository")
    ap.add_argument("--wait-s", type=float, default=150.0,
                    help="seconds from Run All to closing the tab (JupyterLab autosaves every 120 s)")
    ap.add_argument("--run-timeout-s", type=float, default=900.0)
    ap.add_argument("--json", help="also write the result here")
    a = ap.parse_args(argv)
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    if missing:
        print(f"jupyterlab_check: error: missing {', '.join(missing)} (apt-get install -y chromium chromium-driver)",
              file=sys.stderr)
        return 2
    if not (REPO / a.notebook).is_file():
        print(f"jupyterlab_check: error: no notebook {a.notebook!r} in {REPO}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="jupyterlab-check-"))
    try:
        out = check(a.mode, a.notebook, a.wait_s, a.run_timeout_s, work)
    except Exception as e:  # noqa: BLE001 - one line, the server log's tail beside it
        logs = sorted(work.glob("server-*.log"))
        tail = logs[0].read_text()[-2000:] if logs else ""
        print(f"jupyterlab_check: error: {type(e).__name__}: {e}\n{tail}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(work, ignore_errors=True)  # this check's own temporary folder
    text = json.dumps(out, indent=1)
    print(text)
    if a.json:
        Path(a.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
