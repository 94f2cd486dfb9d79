"""The GPU survey launcher (fightlab.survey_launch), on the CPU and offline:
the task YAML through SkyPilot's own parser, the upload set, the host check, the Vast offer
filter on a recorded offer list (tests/data/vast_offers.json, hand-written in the vastai SDK's
shape), and the launcher's runs with a fake runner (teardown always, clusters in parallel, rows
collected without touching anything else). Nothing here reaches a cloud."""

import json
import re
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from fightlab import cli, hosts
from fightlab import survey_launch as sl
from fightlab.config import ConfigError
from fightlab.measure import bench
from fightlab.paths import REPO_ROOT
from fightlab.survey import hostcheck, offers
from fightlab.survey import options as survey_options, task as survey_task, tries as survey_tries
from fightlab.survey.reference import GPU_TYPES

OFFERS = Path(__file__).parent / "data" / "vast_offers.json"
#: the study's 9 GPU types (original-study.md, Survey)
NINE = "RTX5080,L40S,RTX3090,RTX4090,RTX5090,T4,L4,A100,RTXPRO6000"


def options(gpus="RTX4090", **k):
    k.setdefault("min_cuda", "13.4")
    k.setdefault("survey_id", "t1")
    return survey_options.make_options(gpus, **k)


# --- the task YAML, read by SkyPilot itself ---------------------------------------------------
# SkyPilot lives in its own environment (.venv-survey, made by scripts/test.sh from pyproject.toml's
# survey extra): it pins click < 8.2, which .venv must not get. These tests send it JSON requests
# and check its answers here. Without that environment they skip, naming it; scripts/test.sh sets
# FIGHTLAB_SURVEY_PYTHON, and then a missing interpreter fails instead.

#: run by SkyPilot's interpreter: a JSON list of requests on stdin, a JSON list of answers on stdout
SKY_PROBE = r"""
import json, sys
import sky
from sky.data import storage_utils

def summary(task):
    (res,) = task.resources
    return dict(workdir=task.workdir, name=task.name, setup=task.setup, run=task.run, envs=dict(task.envs),
                disk_size=res.disk_size, accelerators=sorted(res.accelerators or {}))

out = []
for q in json.load(sys.stdin):
    try:
        if q["op"] == "yaml":
            out.append(summary(sky.Task.from_yaml(q["path"])))
        elif q["op"] == "config":
            out.append(summary(sky.Task.from_yaml_config(q["config"], env_overrides=[tuple(e) for e in q["envs"]])))
        elif q["op"] == "zip":
            storage_utils.zip_files_and_folders([q["root"]], q["zip"])
            out.append(None)
    except Exception as e:  # a refusal is an answer
        out.append({"error": f"{type(e).__name__}: {e}"})
print(json.dumps(out))
"""


def survey_python() -> str:
    """SkyPilot's interpreter: $FIGHTLAB_SURVEY_PYTHON (scripts/test.sh sets it: must exist), else
    .venv-survey/bin/python (a skip without it)."""
    import os

    want = os.environ.get("FIGHTLAB_SURVEY_PYTHON", "")
    path = Path(want) if want else REPO_ROOT / ".venv-survey" / "bin" / "python"
    if not path.is_file():
        if want:
            pytest.fail(f"FIGHTLAB_SURVEY_PYTHON={want!r} is not a file (scripts/test.sh makes .venv-survey)")
        pytest.skip(f"SkyPilot's environment {path.parent.parent} is missing: bash scripts/test.sh makes it")
    return str(path)


def sky_answers(requests: list[dict]) -> list:
    """SkyPilot's answers to ``requests`` (:data:`SKY_PROBE`), run from the repository (the task's
    workdir "." is the repository, as the launcher runs sky)."""
    r = subprocess.run([survey_python(), "-c", SKY_PROBE], input=json.dumps(requests), cwd=REPO_ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_task_yaml_valid_for_skypilot():
    o = options(NINE)
    cfg = survey_task.read_task()
    per_gpu = [dict(op="config", envs=survey_options.task_envs(o, gpu),  # what the launcher's command line adds
                    config=dict(cfg, resources=dict(cfg["resources"], infra="vast",
                                                    accelerators=f"{survey_options.accelerator(gpu)}:1")))
               for gpu in o.gpus]
    task, *gpus = sky_answers([dict(op="yaml", path=str(survey_task.TASK_YAML)), *per_gpu])
    assert "error" not in task, task
    assert task["workdir"] == "." and task["name"] == "fightlab-bench"
    assert task["setup"].index("fightlab/survey/hostcheck.py") < task["setup"].index("pip install -q -e .")
    assert "python\" -m fightlab bench" in task["run"]
    assert task["disk_size"] == cfg["resources"]["disk_size"]
    assert {k for k, _ in survey_options.task_envs(o, "RTX 4090")} == set(task["envs"])  # every --env is declared
    assert len(gpus) == len(o.gpus) == 9
    for gpu, t in zip(o.gpus, gpus):
        assert "error" not in t, (gpu, t)
        assert t["envs"]["FIGHTLAB_GPU"] == gpu and t["envs"]["FIGHTLAB_MIN_CUDA"] == "13.4"
        assert t["accelerators"] == [survey_options.accelerator(gpu)]


def test_skypilot_refuses_a_broken_task(tmp_path):
    text = survey_task.TASK_YAML.read_text()
    paths = []
    for i, bad in enumerate((text.replace("\nsetup:", "\nsetpu:"), text.replace("disk_size: 40", "disk_size: -40"),
                             text + "resources:\n  infra: nosuchcloud\n")):
        assert bad != text
        paths.append(tmp_path / f"bad{i}.yaml")
        paths[-1].write_text(bad)
    good, *bad = sky_answers([dict(op="yaml", path=str(p)) for p in (survey_task.TASK_YAML, *paths)])
    assert "error" not in good, good  # the probe tells a good task from a broken one
    assert all("error" in b for b in bad), bad


def test_read_task_refuses_a_task_without_setup(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text("name: x\nrun: echo\nresources:\n  disk_size: 10\n")
    with pytest.raises(ConfigError, match="setup"):
        survey_task.read_task(p)


# --- the upload ---------------------------------------------------------------------------------

def test_upload_is_small_and_only_what_bench_needs():
    n, total = survey_task.check_upload(REPO_ROOT)
    names = {p for p, _ in survey_task.upload_set(REPO_ROOT)}
    assert n == len(names) and total <= survey_task.UPLOAD_LIMIT_BYTES
    # a margin below the limit, so a growing package is caught before a launch is refused
    assert total <= 0.95 * survey_task.UPLOAD_LIMIT_BYTES, f"the upload is {total / 1e6:.2f} MB: trim .skyignore's set"
    for need in ("pyproject.toml", "README.md", "fightlab/cli.py", "fightlab/survey/hostcheck.py",
                 "fightlab/survey/bench.sky.yaml", "data/results/train.csv"):
        assert need in names, need
    tops = {p.split("/")[0] for p in names}
    assert not tops & {"runs", "tests", "notebooks", "figures", "bench", ".venv", ".venv-survey", ".git",
                       "docs", "DESIGN.md", "jupyter"}
    assert not [p for p in names if p.endswith(".pyc") or "__pycache__" in p]


def test_upload_set_is_what_skypilot_zips(tmp_path):
    z = tmp_path / "up.zip"
    assert sky_answers([dict(op="zip", root=str(REPO_ROOT), zip=str(z))]) == [None]  # what `sky launch` uploads (0.14.1)
    top = str(REPO_ROOT).lstrip("/") + "/"  # the zip names files by their full path
    with zipfile.ZipFile(z) as f:
        zipped = {n[len(top):] for n in f.namelist() if n.startswith(top) and not n.endswith("/")}
    assert zipped == {p for p, _ in survey_task.upload_set(REPO_ROOT)}


def _tree(root: Path, skyignore: str) -> Path:
    for rel, size in (("pyproject.toml", 100), ("fightlab/__init__.py", 100), ("data/results/train.csv", 100),
                      ("data/results/factor.csv", 100), ("runs/train/a/latest.pt", 3_000_000)):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"x" * size)
    (root / ".skyignore").write_text(skyignore)
    return root


def test_upload_check_catches_runs_results_and_size(tmp_path):
    good = survey_task.SKYIGNORE.read_text()
    n, total = survey_task.check_upload(_tree(tmp_path / "ok", good))
    assert n == 4 and total == 300 + len(good.encode())  # pyproject, fightlab, train.csv, .skyignore
    with pytest.raises(ConfigError, match="runs/train/a/latest.pt"):
        survey_task.check_upload(_tree(tmp_path / "runs", good.replace("\n/runs\n", "\n")))
    with pytest.raises(ConfigError, match="data/results/factor.csv"):
        survey_task.check_upload(_tree(tmp_path / "results", good.replace("/data/results/factor.csv\n", "")))
    new = _tree(tmp_path / "new", good)
    (new / "data/results/energy.csv").write_text("a new table\n")  # not listed in .skyignore yet
    with pytest.raises(ConfigError, match="energy.csv"):
        survey_task.check_upload(new)
    big = _tree(tmp_path / "big", good)
    (big / "fightlab/blob.bin").write_bytes(b"x" * 3_500_000)
    with pytest.raises(ConfigError, match=r"3\.50 MB, over the 3 MB limit.*blob\.bin"):
        survey_task.check_upload(big)
    (big / ".skyignore").unlink()
    with pytest.raises(ConfigError, match=".skyignore is missing"):
        survey_task.check_upload(big)


# --- the host check (setup's first step) ------------------------------------------------------

SMI = """+-----------------------------------------------------------------------------+
| NVIDIA-SMI 570.133.07   Driver Version: 570.133.07   CUDA Version: 12.8         |
+-----------------------------------------------------------------------------+"""


def test_hostcheck_rules():
    assert hostcheck.parse_cuda_version(SMI) == "12.8" and hostcheck.parse_cuda_version("no GPU") is None
    assert hostcheck.parse_gpus("NVIDIA GeForce RTX 4090, 570.133.07\n") == [("NVIDIA GeForce RTX 4090", "570.133.07")]
    for asked, name, same in (("RTX 4090", "NVIDIA GeForce RTX 4090", True), ("RTX4090", "NVIDIA GeForce RTX 4090", True),
                              ("H100", "NVIDIA H100 80GB HBM3", True), ("A100", "NVIDIA A100-SXM4-80GB", True),
                              ("T4", "Tesla T4", True), ("L4", "NVIDIA L40S", False), ("RTX 40", "RTX 4090", False),
                              ("RTX 3090", "NVIDIA GeForce RTX 3090 Ti", False), ("RTX 5090", "RTX 5090 D", False),
                              ("RTX PRO 6000", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", True)):
        assert hosts.same_gpu(asked, name) is same, (asked, name)
    for have in ("11.8", "12.4", "12.8", "13.0", "13.4", "13.10", "14.0"):  # the same rule as bench's
        for toolkit in (12.8, 13.4):
            ours = hostcheck.cuda_check(have, f"{bench.min_driver_cuda(toolkit):.1f}") is None
            major, minor = (int(x) for x in have.split("."))
            theirs = bench.driver_check(major + minor / 10, toolkit) is None if minor < 10 else True
            assert ours is theirs, (have, toolkit)
    # warp's minor-version compatibility: its 13.4 build runs on a driver of CUDA 13.0 (the H200's)
    assert hostcheck.cuda_check("13.0", "13.0") is None and hostcheck.cuda_check("12.9", "13.0")
    assert hostcheck.driver_check("570.133.07", "580.65.06") and hostcheck.driver_check("580.65.06", "580.65.06") is None
    assert hostcheck.cuda_check(None, "13.4") is None  # unknown: not judged here (bench judges after install)


def fake_smi(cuda="13.4", name="NVIDIA GeForce RTX 4090", driver="580.95.05"):
    def smi(args):
        return f"{name}, {driver}\n" if args else SMI.replace("12.8", cuda).replace("570.133.07", driver)
    return smi


def test_hostcheck_each_check_fails_alone():
    env = dict(FIGHTLAB_GPU="RTX 4090", FIGHTLAB_MIN_CUDA="13.4", FIGHTLAB_MIN_DRIVER="580.65.06",
               FIGHTLAB_MIN_MBIT_S="500", FIGHTLAB_BANDWIDTH_URL="http://example.invalid/x")
    fast = lambda url: 900.0  # noqa: E731
    lines, why = hostcheck.run_checks(env, smi=fake_smi(), bandwidth=fast)
    assert why == "" and any("900 Mbit/s" in ln for ln in lines)
    cases = [(dict(smi=fake_smi(cuda="12.8"), bandwidth=fast), "CUDA >= 13.4"),
             (dict(smi=fake_smi(driver="575.57.08", cuda="13.4"), bandwidth=fast), "older than the 580.65.06"),
             (dict(smi=fake_smi(name="NVIDIA L40S"), bandwidth=fast), "asked for a RTX 4090"),
             (dict(smi=fake_smi(), bandwidth=lambda url: 87.0), "87 Mbit/s is below the 500"),
             (dict(smi=lambda args: "", bandwidth=fast), "lists no GPU")]
    for fakes, want in cases:
        assert want in hostcheck.run_checks(env, **fakes)[1]


def test_setup_fails_fast_on_the_host_check(tmp_path):
    """The task's setup, run as the host runs it: a driver too old for warp stops it at its
    first line, exit 3 and the FAILED line, before any venv or install."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "nvidia-smi").write_text("#!/bin/sh\nif [ $# -gt 0 ]; then echo 'NVIDIA GeForce RTX 5080, 575.57.08'; "
                                     "else echo '| NVIDIA-SMI 575.57.08  Driver Version: 575.57.08  CUDA Version: 12.9 |'; fi\n")
    (bin_ / "nvidia-smi").chmod(0o755)
    # the host's python3 has no fightlab: -S leaves site-packages (and the editable install) out
    (bin_ / "python3").write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    (bin_ / "python3").chmod(0o755)
    script = tmp_path / "task.sh"
    script.write_text(survey_task.task_script(survey_task.read_task(), survey_options.task_envs(options("RTX5080"), "RTX 5080")))
    env = dict(PATH=f"{bin_}:/usr/bin:/bin", HOME=str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    r = subprocess.run(["bash", str(script)], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == hostcheck.EXIT_FAILED, r.stdout + r.stderr
    assert f"{hostcheck.FAILED_MARK} the driver supports CUDA 12.9 but fightlab's warp needs CUDA >= 13.4" in r.stdout
    assert not list((tmp_path / "home").iterdir())  # no venv, no install record


# --- Vast offers (recorded list) ---------------------------------------------------------------

def test_offer_filter_on_recorded_offers():
    found = offers.read_offers(OFFERS)
    req = offers.OfferRequirements(min_cuda="13.4")
    ok, bad = offers.rank_offers(found, "RTX4090", req)
    assert [o["id"] for o in ok] == [9100002, 9100001, 9100007]  # cheapest first, all pass
    prices = [o["dph_total"] for o in ok]
    assert prices == sorted(prices)
    why = {o["id"]: w for o, w in bad}
    assert why[9100003] == "CUDA 12.8 < 13.4" and "87.2 Mbit/s < 500" in why[9100004]
    assert "reliability 0.81" in why[9100005] and "2 GPUs" in why[9100006] and "is not a RTX 4090" in why[9500001]
    ids = lambda **k: [o["id"] for o in offers.rank_offers(found, "RTX 4090", offers.OfferRequirements(**k))[0]]  # noqa: E731
    assert ids(min_cuda="13.4", max_usd_per_h=0.40) == [9100002]
    assert ids(min_cuda="13.4", min_driver="585") == [9100002]  # driver 590.44.01
    assert 9100003 in ids(min_cuda="12.8") and 9100004 in ids(min_cuda="13.4", min_mbit_s=50)
    assert [o["id"] for o in offers.rank_offers(found, "RTX 4090", req, exclude_machines=[51002])[0]][0] == 9100001
    assert [o["id"] for o in offers.rank_offers(found, "T4", req)[0]] == [9300001]  # "Tesla T4"
    ok5080, bad5080 = offers.rank_offers(found, "RTX 5080", req)
    assert not ok5080 and any(w == "CUDA 13.0 < 13.4" for _, w in bad5080)  # the study's 5080
    table = offers.offers_table(found, "RTX 4090", req)
    assert list(table["ok"][:3]) == [True] * 3 and not table["ok"][3:].any()


def test_vast_query_and_names():
    assert set(offers.VAST_GPU_NAMES) == set(GPU_TYPES)
    q = offers.vast_query("RTX4090", offers.OfferRequirements(min_cuda="13.4", min_driver="580.65.06",
                                                                max_usd_per_h=0.5))
    for part in ('gpu_name in ["RTX 4090"]', "num_gpus=1", "cuda_max_good>=13.4", "driver_version>=580.65.06",
                 "inet_down>=500", "reliability>=0.95", "dph_total<=0.5"):
        assert part in q
    with pytest.raises(ConfigError, match="unknown GPU"):
        offers.vast_query("GTX 1080", offers.OfferRequirements())
    with pytest.raises(ConfigError, match="min_driver"):
        offers.OfferRequirements(min_driver="new")
    with pytest.raises(ConfigError, match="expected a list"):
        bad = OFFERS.parent / "_not_offers.json"
        try:
            bad.write_text('{"a": 1}')
            offers.read_offers(bad)
        finally:
            bad.unlink()


# --- the launcher, with a fake runner ---------------------------------------------------------

class Fake:
    """A runner that records every call (with its thread) and answers from ``script``: a
    function (call, n) -> Result or None (None: success), n = the call's index for its step."""

    def __init__(self, script=None, rows_ok=True, reason=""):
        self.calls, self.threads, self._lock = [], [], threading.Lock()
        self.script, self.rows_ok, self.reason = script or (lambda c, n: None), rows_ok, reason
        self.seen: dict = {}

    def __call__(self, call):
        with self._lock:
            self.calls.append(call)
            self.threads.append(threading.current_thread().name)
            n = self.seen[call.what] = self.seen.get(call.what, 0) + 1
        r = self.script(call, n)
        if r is not None:
            return r
        if call.what == "collect":  # what rsync would bring back: bench's JSON and CSV
            dest = Path(call.argv[-1])
            ok = self.rows_ok(call) if callable(self.rows_ok) else self.rows_ok
            rows = [dict(run_id="x", ok=ok, params=json.dumps(dict(reason="" if ok else self.reason)))]
            (dest / "bench.json").write_text(json.dumps(dict(rows=rows)))
            (dest / "bench.csv").write_text("run_id,ok\nx,%s\n" % ok)
        return survey_tries.Result(0, "")

    def argvs(self, what):
        return [c.argv for c in self.calls if c.what == what]


def test_dry_run_plan_of_nine_gpu_types_shows_every_command(tmp_path):
    o = options(NINE)
    state = sl.run_survey(o, dry_run=True, data_dir=tmp_path, log=lambda s: None)
    text = sl.format_plan(o, state["calls"], upload=survey_task.check_upload(), data_dir=tmp_path)
    assert not (tmp_path / o.survey_id).exists() and not list(tmp_path.iterdir())  # nothing written
    assert len(o.gpus) == 9
    for gpu in o.gpus:
        c = survey_options.cluster_name(o.survey_id, gpu, 1)
        block = text.split(f"[{gpu}] {c}\n")[1].split("\n\n")[0]
        steps = [ln.split()[0] for ln in block.splitlines() if not ln.startswith(("    $", "  a failed"))]
        assert steps == ["provision", "task", "collect", "teardown"], block
        assert f"sky launch -c {c} --infra vast --gpus {survey_options.accelerator(gpu)}:1" in block
        assert "-i 10 --down -y" in block and "limit 300 s; give up after 300 s" in block
        assert f"sky launch -c {c} fightlab/survey/bench.sky.yaml" in block and f"rsync -az '{c}:~/sky_workdir" in block
        assert block.splitlines()[-2].strip() == f"$ sky down {c} -y"
    assert "upload:" in text and "MB (limit 3 MB" in text


def test_dry_run_vastai_picks_the_cheapest_recorded_offer(tmp_path):
    o = options("RTX4090,L40S", picker="vastai", offers_json=OFFERS)
    state = sl.run_survey(o, dry_run=True, data_dir=tmp_path, log=lambda s: None)
    rents = [c.argv[3] for c in state["calls"] if c.what == "rent"]
    assert sorted(rents) == ["9100002", "9200001"]
    text = sl.format_plan(o, state["calls"], data_dir=tmp_path)
    assert "vastai search offers" in text and "-o dph_total" in text and text.count("vastai destroy instance") == 2


def test_recorded_offers_are_for_dry_runs_only(tmp_path):
    with pytest.raises(ConfigError, match="--offers-json is for --dry-run"):
        sl.run_survey(options(picker="vastai", offers_json=OFFERS), runner=Fake(), data_dir=tmp_path)
    assert not list(tmp_path.iterdir())


def test_teardown_when_the_host_does_not_answer(tmp_path):
    said = ("Waiting for instances to be ready\n\x1b[1m\u2699\ufe0e Request will continue running asynchronously."
            "\x1b[0m\n  To cancel the request, run: \x1b[1msky api cancel 1a2b3c4d\x1b[0m\n")
    fake = Fake(lambda c, n: survey_tries.Result(124, said) if c.what == "provision" else None)
    state = sl.run_survey(options("RTX4090,L40S", tries=2), runner=fake, data_dir=tmp_path, log=lambda s: None)
    assert len(fake.argvs("provision")) == 4 and not fake.argvs("task")  # 2 types x 2 tries
    assert fake.argvs("cancel") == [("sky", "api", "cancel", "1a2b3c4d", "-y")] * 4  # the server's request too
    for gpu in ("RTX 4090", "L40S"):  # per cluster: give up, cancel, tear down, in that order
        c = survey_options.cluster_name("t1", gpu, 1)
        assert [x.what for x in fake.calls if x.cluster == c] == ["provision", "cancel", "teardown"]
    assert sorted(a[2] for a in fake.argvs("teardown")) == sorted(a[3] for a in fake.argvs("provision"))
    for tries in state["results"].values():
        assert [t["status"] for t in tries] == ["gave up", "gave up"] and all(t["teardown"] == "ok" for t in tries)
    assert all(c.timeout_s == survey_options.GIVE_UP_S for c in fake.calls if c.what == "provision")


def test_teardown_when_setup_or_the_runner_fails(tmp_path):
    def script(c, n):
        if c.what == "task" and n == 1:
            return survey_tries.Result(3, "Running setup\nfightlab host check: GPU RTX 4090\n"
                                f"{hostcheck.FAILED_MARK} download bandwidth 80 Mbit/s is below the 500 Mbit/s required\n")
        if c.what == "task":
            raise RuntimeError("the runner itself broke")
    fake = Fake(script)
    state = sl.run_survey(options("RTX4090", tries=3), runner=fake, data_dir=tmp_path, log=lambda s: None)
    tries = state["results"]["RTX 4090"]
    assert tries[0]["status"] == "host check failed" and "80 Mbit/s" in tries[0]["reason"]
    assert tries[-1]["status"] == "error" and "runner itself broke" in tries[-1]["reason"]
    assert len(tries) == 2 and all(t["teardown"] == "ok" for t in tries)  # an error ends the type's tries
    assert not fake.argvs("collect")  # a host that failed its check has no rows
    assert [a[2] for a in fake.argvs("teardown")] == [survey_options.cluster_name("t1", "RTX 4090", k) for k in (1, 2)]


def test_clusters_run_in_parallel(tmp_path):
    o = options("RTX4090,L40S,T4,A100")
    gate = threading.Barrier(len(o.gpus), timeout=20)

    def script(c, n):
        if c.what == "provision":
            gate.wait()  # every type's provisioning in flight at once, or this breaks
    fake = Fake(script)
    state = sl.run_survey(o, runner=fake, data_dir=tmp_path, log=lambda s: None)
    assert all(t[-1]["status"] == "done" for t in state["results"].values())
    assert len({th for th, c in zip(fake.threads, fake.calls) if c.what == "provision"}) == len(o.gpus)


def test_rows_land_in_data_survey_without_overwriting(tmp_path):
    data = tmp_path / "data" / "survey"
    (data / "bench" / "old").mkdir(parents=True)
    (data / "reference.csv").write_text("machine,provider\nL4,vast.ai\n")
    (data / "bench" / "old" / "bench.csv").write_text("an earlier survey's rows\n")
    before = {p: p.read_bytes() for p in data.rglob("*") if p.is_file()}
    fake = Fake(rows_ok=lambda c: Path(c.argv[-1]).name == "rtx4090-2", reason="bad host: speed 0.10 × the expected")
    state = sl.run_survey(options("RTX4090"), runner=fake, data_dir=data / "bench", log=lambda s: None)
    assert {p: p.read_bytes() for p in before} == before  # untouched
    tries = state["results"]["RTX 4090"]
    assert [t["status"] for t in tries] == ["bad host", "done"] and "0.10" in tries[0]["reason"]
    out = data / "bench" / "t1"
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == [
        "rtx4090-1/bench.csv", "rtx4090-1/bench.json", "rtx4090-2/bench.csv", "rtx4090-2/bench.json", "survey.json"]
    assert json.loads((out / "survey.json").read_text())["results"]["RTX 4090"][1]["status"] == "done"
    with pytest.raises(ConfigError, match="exists"):
        sl.run_survey(options("RTX4090"), runner=Fake(), data_dir=data / "bench", log=lambda s: None)


def test_vastai_picker_rents_the_next_offer_and_destroys_each(tmp_path):
    polls = {"n": 0}

    def script(c, n):
        if c.what == "search":
            return survey_tries.Result(0, "Warning: Unrecognized field: reliability\n" + json.dumps(offers.read_offers(OFFERS)))
        if c.what == "rent":
            return survey_tries.Result(0, json.dumps(dict(success=True, new_contract=f"77{n}")))
        if c.argv[:3] == ("vastai", "show", "instance"):
            polls["n"] += 1
            st = "running" if polls["n"] % 3 == 0 else "loading"
            return survey_tries.Result(0, json.dumps(dict(actual_status=st, ssh_host="ssh4.vast.ai", ssh_port=2222)))
        if c.what == "task" and n == 1:
            return survey_tries.Result(1, f"{hostcheck.FAILED_MARK} asked for a RTX 4090 but the host has a NVIDIA L40S")
    fake = Fake(script)
    t = {"now": 0.0}
    state = sl.run_survey(options("RTX4090", picker="vastai"), runner=fake, data_dir=tmp_path, log=lambda s: None,
                          sleep=lambda s: t.update(now=t["now"] + s), clock=lambda: t["now"])
    assert [a[3] for a in fake.argvs("rent")] == ["9100002", "9100001"]  # the cheapest, then the next machine
    assert [a[3] for a in fake.argvs("teardown")] == ["771", "772"]  # each rented instance destroyed
    tries = state["results"]["RTX 4090"]
    assert [x["status"] for x in tries] == ["host check failed", "done"]
    assert tries[1]["offer"]["dph_total"] == 0.412 and tries[1]["instance"] == "772"
    task = [c for c in fake.calls if c.what == "task"][0]
    assert task.stdin and "export FIGHTLAB_GPU='RTX 4090'" in Path(task.stdin).read_text()
    assert ("--filter=dir-merge,- .skyignore") in fake.argvs("upload")[0]


def test_vastai_gives_up_on_a_silent_host(tmp_path):
    def script(c, n):
        if c.what == "search":
            return survey_tries.Result(0, json.dumps(offers.read_offers(OFFERS)))
        if c.what == "rent":
            return survey_tries.Result(0, json.dumps(dict(new_contract=f"88{n}")))
        if c.what == "wait":
            return survey_tries.Result(0, json.dumps(dict(actual_status="loading")))
    fake = Fake(script)
    t = {"now": 0.0}
    state = sl.run_survey(options("L40S", picker="vastai"), runner=fake, data_dir=tmp_path, log=lambda s: None,
                          sleep=lambda s: t.update(now=t["now"] + s), clock=lambda: t["now"])
    tries = state["results"]["L40S"]
    assert tries[0]["status"] == "gave up" and t["now"] >= survey_options.GIVE_UP_S
    assert tries[1]["status"] == "no offer"  # the only L40S was tried
    assert [a[3] for a in fake.argvs("teardown")] == ["881"] and not fake.argvs("upload")


# --- bad input: one line each -----------------------------------------------------------------

@pytest.mark.parametrize("args, want", [
    (["--gpus", "GTX1080"], "--gpus: unknown GPU type 'GTX1080'; valid: T4, L4, A100, L40S"),
    (["--gpus", ""], "--gpus must name one or more GPU types"),
    (["--gpus", " , "], "--gpus must name one or more GPU types"),
    (["--gpus", "RTX4090,rtx 4090"], "--gpus names RTX 4090 twice"),
    (["--gpus", "L40S", "--infra", "gcp"], "--infra must be one of vast, runpod, lambda, aws"),
    (["--gpus", "L40S", "--infra", "aws", "--picker", "vastai"], "--picker vastai rents from Vast only"),
    (["--gpus", "L40S", "--picker", "cheapest"], "--picker must be one of sky, vastai"),
    (["--gpus", "L40S", "--min-driver", "latest"], "--min-driver must be a driver version"),
    (["--gpus", "L40S", "--survey-id", "A B"], "--survey-id must be"),
    (["--gpus", "L40S", "--infra", "vast/"], "--infra must be one of vast, runpod, lambda, aws"),
    (["--gpus", "L40S", "--infra", "vast/a//b"], "got 'vast/a//b'"),
    (["--gpus", "L40S", "--gpus", "T4"], "--gpus given twice ('L40S' and 'T4')"),
    (["--gpus", "L40S", "--time-limit-s", "100"], "--time-limit-s 100 is too short for bench of 2 bodies: at least"),
    (["--gpus", "L40S", "--bodies", "simple,simple"], "--bodies names simple twice"),
    (["--gpus", "L40S", "--bodies", "simple,nosuch"], "--bodies: unknown body 'nosuch'; valid: "),
    (["--gpus", "L40S", "--bandwidth-url", "ftp://example.com/x"], "--bandwidth-url must be an http:// or https:// URL"),
    (["--gpus", "L40S", "--bandwidth-url", "speed.cloudflare.com"], "got 'speed.cloudflare.com'"),
    (["--gpus", "L40S", "--min-cuda", "99"], "--min-cuda must be a CUDA version x.y with x in 11..20"),
    (["--gpus", "L40S", "--min-cuda", "13"], "got '13'"),
    (["--gpus", "L40S", "--tries", "11"], "--tries must be an integer in 1..10, got 11"),
    (["--gpus", "L40S", "--tries", "0"], "--tries must be an integer in 1..10, got 0"),
    (["--gpus", "L40S", "--tries", "x"], "--tries must be an integer, got 'x'"),
    (["--gpus", "L40S", "--time-limit-s", "1h"], "--time-limit-s must be a number, got '1h'"),
    (["--gpus", "L40S", "--min-mbit-s", "nan"], "--min-mbit-s must be a number >= 0, got nan"),
    (["--gpus", "L40S", "--max-price", "1"], "--max-price 1 needs --picker vastai"),
    (["--gpus", "L40S", "--picker", "vastai", "--max-price", "0"], "--max-price must be a number > 0, got 0.0"),
    (["--gpus", "L40S", "--min-mbit-s", "-1"], "--min-mbit-s must be a number >= 0"),
    (["--gpus", "L40S", "--picker", "vastai", "--offers-json", ""], "--offers-json is empty"),
    (["--gpus", "L40S", "--picker", "vastai", "--offers-json", "tests"], "tests: a folder, not an offer list"),
])
def test_bad_input_is_one_line(args, want, capsys):
    assert cli.main(["survey", "launch", "--min-cuda", "13.4", *args, "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fightlab: error: ") and want in err[0], err


def test_cli_dry_run_prints_the_plan(capsys):
    assert cli.main(["survey", "launch", "--gpus", NINE, "--min-cuda", "13.4", "--dry-run", "--survey-id", "d1"]) == 0
    out = capsys.readouterr().out
    assert out.count("$ sky down fl-d1-") == 9 and out.count("--down -y") == 18
    assert not (sl.SURVEY_DATA / "d1").exists()


def test_flags_not_internal_fields_in_errors():
    for k, v in (("min_mbit_s", -1.0), ("max_usd_per_h", -2.0), ("min_cuda", "x"), ("min_driver", "y")):
        kw = dict(picker="vastai") if k == "max_usd_per_h" else {}
        with pytest.raises(ConfigError) as e:
            options(**{k: v}, **kw)
        assert "--" + k.replace("max_usd_per_h", "max_price").replace("_", "-") in str(e.value)
        assert k not in str(e.value)


def test_non_utf8_offers_file_is_one_line(tmp_path, capsys):
    bad = tmp_path / "offers.json"
    bad.write_bytes(b"\xff\xfe[{\"id\": 1}]")
    assert cli.main(["survey", "launch", "--gpus", "L40S", "--picker", "vastai", "--min-cuda", "13.4",
                     "--offers-json", str(bad), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fightlab: error: ") and "not UTF-8" in err[0] and str(bad) in err[0]


# --- up-front checks: local tools, cloud access, the API server ----------------------------------

def test_local_tools_are_checked_before_anything_is_rented(tmp_path, monkeypatch, capsys):
    with pytest.raises(ConfigError, match="not on PATH: ssh .*--picker vastai runs vastai, ssh, rsync"):
        sl.check_tools("vastai", which=lambda t: None if t == "ssh" else "/usr/bin/" + t)
    sl.check_tools("sky", which=lambda t: "/usr/bin/" + t)
    monkeypatch.setattr(sl.shutil, "which", lambda t: None if t == "rsync" else "/usr/bin/" + t)
    with pytest.raises(ConfigError, match="not on PATH: rsync"):
        sl.run_survey(options(), data_dir=tmp_path, log=lambda s: None)
    assert not list(tmp_path.iterdir())
    assert cli.main(["survey", "launch", "--gpus", "RTX4090", "--min-cuda", "13.4", "--survey-id", "zq9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fightlab: error: not on PATH: rsync") and "apt-get install rsync" in err[0]
    assert not (sl.SURVEY_DATA / "zq9").exists()


@pytest.mark.parametrize("rc", [127, 23])
def test_a_collect_failure_rents_no_other_host(tmp_path, rc):
    fake = Fake(lambda c, n: survey_tries.Result(rc, "rsync: command not found") if c.what == "collect" else None)
    state = sl.run_survey(options("RTX4090", tries=3), runner=fake, data_dir=tmp_path, log=lambda s: None)
    (t,) = state["results"]["RTX 4090"]
    assert t["status"] == "collect failed" and f"rsync of the rows failed (exit {rc})" in t["reason"]
    assert len(fake.argvs("provision")) == 1 and t["teardown"] == "ok"


def sky_check(enabled=("Vast",), rc=0):
    out = "Checking credentials\n" + json.dumps({"default": {c: ["compute"] for c in enabled}})
    return lambda c, n: survey_tries.Result(rc, out if rc == 0 else "Error: no cloud access") if c.what == "check" else None


def test_no_cloud_access_stops_before_anything_is_written(tmp_path):
    for script, want in ((sky_check(rc=1), "`sky check vast` failed (exit 1): Error: no cloud access"),
                         (sky_check(("AWS",)), "SkyPilot has no access to vast (enabled: aws)")):
        fake = Fake(script)
        with pytest.raises(ConfigError, match=re.escape(want)):
            sl.run_survey(options(), runner=fake, data_dir=tmp_path, log=lambda s: None, check=True,
                          sky_server_up=lambda: True)
        assert [c.what for c in fake.calls] == ["check"] and not list(tmp_path.iterdir())
    fake = Fake(lambda c, n: survey_tries.Result(1, "failed with error 401") if c.what == "check" else None)
    with pytest.raises(ConfigError, match="vastai show user.*vastai set api-key"):
        sl.run_survey(options(picker="vastai"), runner=fake, data_dir=tmp_path, log=lambda s: None, check=True)
    assert fake.argvs("check") == [("vastai", "show", "user", "--raw")] and not list(tmp_path.iterdir())


def test_the_api_server_this_run_started_is_stopped(tmp_path):
    fake = Fake(sky_check())
    state = sl.run_survey(options(survey_id="a1"), runner=fake, data_dir=tmp_path, log=lambda s: None, check=True,
                          sky_server_up=lambda: False)
    assert state["results"]["RTX 4090"][-1]["status"] == "done"
    assert [c.what for c in fake.calls][0] == "check" and fake.calls[-1].argv == ("sky", "api", "stop")
    fake = Fake(sky_check(rc=1))  # stopped when the check fails too
    with pytest.raises(ConfigError):
        sl.run_survey(options(survey_id="a2"), runner=fake, data_dir=tmp_path, log=lambda s: None, check=True,
                      sky_server_up=lambda: False)
    assert [c.what for c in fake.calls] == ["check", "api-stop"]
    for up in (True, None):  # running before, or another server: not this run's to stop
        fake = Fake(sky_check())
        sl.run_survey(options(survey_id=f"b{up}".lower()), runner=fake, data_dir=tmp_path, log=lambda s: None,
                      check=True, sky_server_up=lambda: up)
        assert not fake.argvs("api-stop")


# --- what the plan says --------------------------------------------------------------------------

def test_plan_says_what_is_checked(capsys):
    assert cli.main(["survey", "launch", "--gpus", "L40S", "--min-cuda", "13.4", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"download >= 500 Mbit/s (timed on the host from {survey_options.BANDWIDTH_URL})" in out and "$" not in out.split("\n")[2]
    assert cli.main(["survey", "launch", "--gpus", "L40S", "--min-cuda", "13.4", "--bandwidth-url", "", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "download >= 500 Mbit/s (not timed on the host (--bandwidth-url ''))" in out
    assert cli.main(["survey", "launch", "--gpus", "L40S", "--min-cuda", "13.4", "--picker", "vastai",
                     "--max-price", "0.5", "--dry-run"]) == 0
    line = capsys.readouterr().out.splitlines()[2]
    assert "<= $0.5/h (offer filter)" in line and "(offer filter; timed on the host" in line


def test_dry_run_without_a_passing_offer_says_so(tmp_path, capsys):
    empty = tmp_path / "none.json"
    empty.write_text("[]")
    for f, extra, why in ((empty, [], "none of 0 offers passes"),
                          (OFFERS, ["--max-price", "0.01"], "/h > $0.01/h")):
        assert cli.main(["survey", "launch", "--gpus", "L40S", "--min-cuda", "13.4", "--picker", "vastai",
                         "--offers-json", str(f), *extra, "--dry-run"]) == 2
        out = capsys.readouterr().out
        assert "no offer passes: nothing would be rented" in out and why in out and "vastai create" not in out


# --- Ctrl-C ----------------------------------------------------------------------------------------

def test_ctrl_c_tears_down_and_says_so(tmp_path, monkeypatch, capsys):
    import _thread

    stop = threading.Event()

    def script(c, n):
        if c.what == "provision":
            _thread.interrupt_main()
            stop.wait(20)
            return survey_tries.Result(130, "")
    fake = Fake(script)
    fake.stop = stop
    state = sl.run_survey(options("RTX4090", tries=3), runner=fake, data_dir=tmp_path, log=lambda s: None)
    assert state["interrupted"] and fake.argvs("teardown") == [("sky", "down", "fl-t1-rtx4090-1", "-y")]
    assert len(state["results"]["RTX 4090"]) == 1
    monkeypatch.setattr(sl, "run_survey", lambda o, **k: state)
    assert cli.main(["survey", "launch", "--gpus", "RTX4090", "--min-cuda", "13.4", "--survey-id", "t1"]) == 130
    assert "check for clusters left running" in capsys.readouterr().err


def test_interrupted_dry_run_does_not_talk_of_resume(monkeypatch, capsys):
    def stop(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(sl, "run_survey", stop)
    assert cli.main(["survey", "launch", "--gpus", "RTX4090", "--min-cuda", "13.4", "--dry-run"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "fightlab: interrupted" and "--resume" not in err
