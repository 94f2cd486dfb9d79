"""The CPU baseline against MuJoCo Warp on the GPU, on one machine, in one command:
``python -m fightlab compare-backends``.

Per body, two short solo trainings (default 8 iterations, medians of the iterations after the
first 3, as `measure.sweep.time_point` and `measure.graphs` time them):

- **cpu**: the CPU MuJoCo backend (`fightlab.sim.cpu`: MuJoCo's C engine on a thread pool, the
  env's kernels on warp's CPU device, the policy and the update in torch on the CPU) at its
  layout, W workers × K worlds (default: every core, the worlds spread over them);
- **gpu**: MuJoCo Warp at ``nworld`` worlds (default 1024) on a CUDA device; on a machine
  without one this point is left out with one line, unless MuJoCo Warp on warp's CPU device is
  asked for (``gpu_device="cpu"``: a smoke check, never published);
- **cpu, policy on the GPU** (where there is one, ``cpu_policy_device``): the CPU backend's
  layout with torch's policy and update on the GPU (`TrainConfig.policy_device`: the
  observation copied there and the action back at every env step), the original's CPU machine
  had no GPU, so the **cpu** row (policy on the CPU) stays the baseline every ratio divides by.

Each gives seconds per iteration (rollout / update apart) and env steps/s; the ratios are each
row's over the CPU backend's of the same body (`env_steps_ratio_vs_cpu_backend`,
`s_per_iter_ratio_vs_cpu_backend`; 1 on the CPU row). Beside them the **same-state error**
(`same_state_error`): one env step from the same state and action, CPU backend vs MuJoCo Warp,
next to MuJoCo Warp's own change under a 1-ulp change of the state.

One ``backends`` row per (body, backend) (`results.EXPERIMENTS["backends"]`), under
``runs/backends/<compare_id>/`` always and, with ``publish``, in the repository's
data/results/backends.csv (the publish rule, before any work in `cli.publish_plans`: the CPU backend's rows and a GPU's publish,
MuJoCo Warp on warp's CPU device never). The hardware: the `gpu` column names the GPU for a
GPU row and the CPU model and cores for a CPU-backend row (`fightlab.meta.cpu_label`); params
hold backend, device, layout, workers, worlds_per_worker, cores and cpu (the CPU's model) on
every row, so each row names the machine's CPU.

Reading the rows (pure pandas): `backend_ratios`, `policy_device_effect` and
`estimated_time_to_solve`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from fightlab import results
from fightlab.bodies import BODY_NAMES
from fightlab.config import ConfigError, TrainConfig, validate_body, with_body
from fightlab.meta import cpu_count, cpu_model, gpu_name, new_run_id
from fightlab.paths import REPO_ROOT, RUNS

#: MuJoCo Warp's world count on the GPU (the original study's best, its Figure 2)
GPU_NWORLD = 1024
#: iterations per training and those left out of the medians (warm-up)
ITERATIONS, SKIP = 8, 3
#: the same-state check: worlds, random-action steps on MuJoCo Warp before the compared step
SAME_STATE_NWORLD, SAME_STATE_WARM_STEPS = 4, 20

ROOT = RUNS / "backends"


def same_state_error(body: str, device: str = "cpu", nworld: int = SAME_STATE_NWORLD,
                     warm_steps: int = SAME_STATE_WARM_STEPS, seed: int = 3,
                     threads: int | None = None) -> dict:
    """One env step from the same state and action on the CPU backend and on MuJoCo Warp.

    The state: `warm_steps` env steps of uniform random actions in [-1, 1] on MuJoCo Warp
    (amplitude 0.5), loaded into a CPU-backend env of the same seed (`StanceEnv.load_state_dict`);
    then both take the same random action. Both run the reference physics (`config.reference_env`:
    a converged Newton solve, which both engines have; a training physics capped at a few
    iterations depends on where each engine starts Newton, and the C engine always computes
    qacc_smooth).

    Args:
      body: a fightlab body; device: MuJoCo Warp's device ("cpu" = warp's CPU, "cuda:N");
      nworld, warm_steps, seed: the worlds, the steps before, the env seed;
      threads: the CPU backend's threads (default every core).

    Returns:
      dict of max abs differences over worlds and entries: qpos (qpos units: m, rad,
      quaternion), qvel (m/s, rad/s), obs (the observation's units), reward (per env step);
      ulp_qpos, ulp_qvel: MuJoCo Warp's own change after the same step when its state's qpos and
      qvel move by 1 ulp (float32), the scale the differences compare to.
    """
    import torch

    from fightlab.config import EnvConfig, reference_env
    from fightlab.envs.stance import StanceEnv

    physics = reference_env(EnvConfig())
    ref = StanceEnv(body, nworld, device, seed=seed, cfg=physics)
    cpu = StanceEnv(body, nworld, "cpu", seed=seed, cfg=physics, backend="cpu", threads=threads or cpu_count())
    for e in (ref, cpu):
        e.set_amplitude(0.5, immediate=True)
        e.reset()
    g = torch.Generator().manual_seed(0)
    acts = [torch.rand(nworld, ref.nu, generator=g) * 2 - 1 for _ in range(warm_steps + 1)]
    for a in acts[:-1]:
        ref.step(a.to(ref.obs.device))
    state = ref.state_dict()
    cpu.load_state_dict(state)
    a = acts[-1]
    og, rg, _, _ = ref.step(a.to(ref.obs.device))
    og, rg = og.cpu().clone(), rg.cpu().clone()
    oc, rc, _, _ = cpu.step(a)
    sg, sc = ref.state_dict(), cpu.state_dict()
    out = dict(qpos=float(np.abs(sg["qpos"] - sc["qpos"]).max()),
               qvel=float(np.abs(sg["qvel"] - sc["qvel"]).max()),
               obs=float((og - oc).abs().max()), reward=float((rg - rc).abs().max()))
    bump = {k: np.nextafter(state[k], np.float32(np.inf)) for k in ("qpos", "qvel")}  # 1 ulp up
    ref.load_state_dict(dict(state, **bump))
    ref.step(a.to(ref.obs.device))
    sb = ref.state_dict()
    out.update({f"ulp_{k}": float(np.abs(sg[k] - sb[k]).max()) for k in ("qpos", "qvel")})
    for e in (ref, cpu):
        e.close()
    return out


def plan(bodies=None, gpu_device: str | None = "cuda:0", nworld: int = GPU_NWORLD,
         cpu_layout: tuple[int, int | None, int] | None = None,
         cpu_policy_device: str | None = None) -> list[dict]:
    """The trainings to time, CPU backend first per body: dicts of body, backend ("cpu" /
    "gpu"), device, nworld, workers, worlds_per_worker (None on "gpu"; K None: nworld spread
    over W, the last worker short), policy_device (None: the policy on the run's device).

    Args:
      bodies: body names (default every body); gpu_device: MuJoCo Warp's device ("cuda:N";
        "cpu" = warp's CPU device; None: no MuJoCo Warp point); nworld: MuJoCo Warp's worlds;
      cpu_layout: (workers, worlds_per_worker, nworld) of the CPU backend (default every core,
        `nworld` worlds spread over them: `fightlab.sim.cpu.layout`);
      cpu_policy_device: also the CPU backend with its policy on this device ("cuda:N"; "cpu":
        the same copies on the CPU, a smoke check of the path), after its CPU-policy point.

    Raises:
      ConfigError: an unknown body or a body named twice, a bad nworld.
    """
    from fightlab.config import validate_nworld

    bodies = list(BODY_NAMES) if bodies is None else [validate_body(b) for b in bodies]
    if not bodies or len(set(bodies)) != len(bodies):
        raise ConfigError(f"bodies must name each body once, got {bodies!r}; bodies: {', '.join(BODY_NAMES)}")
    nworld = validate_nworld(nworld)
    w, k, n = (cpu_count(), None, nworld) if cpu_layout is None else cpu_layout
    out = []
    for b in bodies:
        out.append(cpu := dict(body=b, backend="cpu", device="cpu", nworld=int(n), workers=int(w),
                               worlds_per_worker=None if k is None else int(k), policy_device=None))
        if cpu_policy_device is not None:
            out.append(dict(cpu, policy_device=cpu_policy_device))
        if gpu_device is not None:
            out.append(dict(body=b, backend="gpu", device=gpu_device, nworld=nworld, workers=None,
                            worlds_per_worker=None, policy_device=None))
    return out


def compare(bodies=None, gpu_device: str | None = "cuda:0", nworld: int = GPU_NWORLD,
            cpu_layout: tuple[int, int | None, int] | None = None,
            cpu_policy_device: str | None = "auto", iterations: int = ITERATIONS,
            skip: int = SKIP, seed: int = 0, publish: bool = False, root: Path | str = REPO_ROOT,
            out_dir: Path | str | None = None, base: "TrainConfig | dict | None" = None,
            progress: bool = False, log: Callable[[str], None] = print,
            point: Callable[..., dict] | None = None) -> pd.DataFrame:
    """Time every planned training (`plan`), measure the same-state error per body, and write
    one ``backends`` row per (body, backend).

    Args:
      bodies, gpu_device, nworld, cpu_layout, cpu_policy_device: as `plan`'s; cpu_policy_device
        "auto" (the default): ``gpu_device`` when it is a CUDA device, else none;
      iterations (> skip), skip, seed: each training (`measure.sweep.time_point`); base: a
        TrainConfig whose learner (ppo, env) every training keeps (e.g. a tiny PPOConfig at smoke
        size; moved to each body with `config.with_body`), or {body: TrainConfig} (each body's
        own, e.g. its `--set`s applied to that body's defaults);
      publish: also write the repository's data/results/backends.csv (the publish rule
        on every planned row: the command line's `cli.publish_plans`, before any work);
      root: the repository (tests: a temporary folder); out_dir: the comparison's folder
        (default runs/backends/<compare_id>); log: where the lines go; point: the timing
        function (default `measure.sweep.time_point`; tests pass a fake).

    Returns:
      the rows, a DataFrame (`results.columns("backends")`), CPU backend first per body.

    Raises:
      ConfigError: a bad body, nworld, iterations / skip (all before any training).
    """
    from fightlab.measure.sweep import time_point, validate_timing

    validate_timing(iterations, skip)
    if cpu_policy_device == "auto":
        cpu_policy_device = gpu_device if str(gpu_device).startswith("cuda") else None
    points = plan(bodies, gpu_device, nworld, cpu_layout, cpu_policy_device)
    if publish:
        results.read_rows("backends", root)  # a torn results file: said before any training
    compare_id = new_run_id()
    out_dir = Path(out_dir) if out_dir else ROOT / compare_id
    point = point or time_point
    base = base or TrainConfig()
    cores, model = cpu_count(), cpu_model()
    rows: list[dict] = []
    errors: dict[str, dict] = {}
    for p in points:
        body = p["body"]
        if body not in errors:
            ref = gpu_device if gpu_device is not None else "cpu"
            e = errors[body] = dict(same_state_error(body, ref, seed=3), device=ref)
            log(f"compare-backends {body}: same state, one env step, CPU backend vs MuJoCo Warp on "
                f"{ref}: qpos {e['qpos']:.1e}, qvel {e['qvel']:.1e}, obs {e['obs']:.1e}, reward "
                f"{e['reward']:.1e} (MuJoCo Warp's own 1-ulp change: qpos {e['ulp_qpos']:.1e}, "
                f"qvel {e['ulp_qvel']:.1e})")
        kw: dict[str, Any] = {}
        run_name = f"{body}-{p['backend']}"
        if p["backend"] == "cpu":
            kw = dict(backend="cpu", workers=p["workers"], worlds_per_worker=p["worlds_per_worker"])
            if p["policy_device"] is not None:
                kw["policy_device"] = p["policy_device"]
                run_name += "-policy-" + p["policy_device"].replace(":", "")
        mine = base[body] if isinstance(base, dict) else with_body(base, body)  # this body's learner
        r = point(body, p["nworld"], p["device"], iterations=iterations, skip=skip, seed=seed,
                  run_dir=out_dir / "runs" / run_name, progress=progress,
                  base=dataclasses.replace(mine, backend="gpu", workers=None, worlds_per_worker=None),
                  **kw)
        rows.append(_row(p, r, errors[body], iterations, skip, seed, compare_id, cores, model,
                         substeps=mine.env.substeps))
        name = "CPU backend" if p["backend"] == "cpu" else f"MuJoCo Warp on {p['device']}"
        if p["policy_device"] is not None:
            name += f", policy on {p['policy_device']}"
        log(f"compare-backends {body}, {name}, {p['nworld']} worlds: {r['s_per_iter']:.3f} s/iteration "
            f"(rollout {r['rollout_s_per_iter']:.3f} + update {r['update_s_per_iter']:.3f}), "
            f"{r['env_steps_per_s']:.0f} env steps/s")
    for row in rows:  # the ratios: each row over the CPU backend's (its policy on the CPU) of its body
        cpu = next(x for x, q in zip(rows, points) if q["body"] == row["body"] and q["backend"] == "cpu"
                   and q["policy_device"] is None)
        row["env_steps_ratio_vs_cpu_backend"] = row["env_steps_per_s"] / cpu["env_steps_per_s"]
        row["s_per_iter_ratio_vs_cpu_backend"] = row["s_per_iter"] / cpu["s_per_iter"]
    for row in rows:
        results.append_row("backends", row, out_dir)
    log(f"compare-backends: {len(rows)} rows in {results.results_path('backends', out_dir)}")
    if publish:
        with results.publish_lock(root):
            for row in rows:
                results.append_row("backends", row, root)
        log(f"compare-backends: {len(rows)} rows in {results.results_path('backends', root)}")
    return pd.DataFrame(rows, columns=list(results.columns("backends")))


def _row(p: dict, r: dict, err: dict, iterations: int, skip: int, seed: int, compare_id: str,
         cores: int, model: str, substeps: int) -> dict:
    from fightlab.sim.cpu import layout_record

    layout = layout_record(p["workers"], p["nworld"]) if p["backend"] == "cpu" else None
    params = dict(compare_id=compare_id, backend=p["backend"], device=p["device"],
                  policy_device=p.get("policy_device"),
                  policy_gpu=gpu_name(p["policy_device"]) if p.get("policy_device") else None, layout=layout,
                  workers=p["workers"], worlds_per_worker=p["worlds_per_worker"], cores=cores,
                  cpu=model, iterations=iterations, skip=skip, num_steps=r["num_steps"],
                  learner=r["learner"], same_state_device=err["device"],
                  smoke=p["backend"] == "gpu" and not str(p["device"]).startswith("cuda"))
    meta = results.run_metadata(body=p["body"], nworld=p["nworld"], seed=seed, params=params,
                                device=p["device"], backend=p["backend"], cores=cores)
    return {**meta,
            **{c: r[c] for c in ("iterations", "s_per_iter", "rollout_s_per_iter", "update_s_per_iter",
                                 "env_steps_per_s", "host_reads_per_iter", "graph_fallbacks",
                                 "compile_s", "s_per_iter_min", "s_per_iter_max")},
            "physics_steps_per_s": r["env_steps_per_s"] * substeps,
            "env_steps_ratio_vs_cpu_backend": None, "s_per_iter_ratio_vs_cpu_backend": None,
            "same_state_qpos_err": err["qpos"], "same_state_qvel_err": err["qvel"],
            "same_state_obs_err": err["obs"], "same_state_reward_err": err["reward"],
            "ulp_qpos_sensitivity": err["ulp_qpos"], "ulp_qvel_sensitivity": err["ulp_qvel"]}


def flag_devices(gpu_device=None, cpu_policy_device=None, say: bool = False) -> tuple:
    """(MuJoCo Warp's device or None, the CPU policy device: "auto", "none" or a device) of
    compare-backends' --gpu-device and --cpu-policy-device; ``say``: print the line of a machine
    without a GPU. Raises ConfigError naming the flag."""
    from fightlab import devices

    if gpu_device is None:
        gpu = devices.default_device()
        if not gpu.startswith("cuda"):
            if say:
                print("compare-backends: no CUDA GPU here: measuring the CPU backend only "
                      "(--gpu-device cpu adds MuJoCo Warp on warp's CPU device, a smoke check)", flush=True)
            gpu = None
    else:
        gpu = devices.validate_device(gpu_device)
    pol = "auto" if cpu_policy_device is None else cpu_policy_device.strip().lower()
    if pol not in ("auto", "none"):
        try:
            pol = devices.validate_device(pol, hint="")
        except ConfigError as e:
            raise ConfigError(f"--cpu-policy-device {cpu_policy_device!r}: {e} (choices: auto, none, cpu, "
                              "cuda, cuda:N)") from None
    return gpu, pol


def publish_plans(gpu_device=None, cpu_policy_device=None, publish: bool = False) -> list[dict]:
    """What compare-backends would publish, as `publish.check_publish`'s keywords: one per
    planned training's backend, device and policy device (:func:`plan`)."""
    gpu, pol = flag_devices(gpu_device, cpu_policy_device)
    if pol == "auto":
        pol = gpu if str(gpu).startswith("cuda") else None
    points = {(p["backend"], p["device"], p["policy_device"]): p
              for p in plan(None, gpu, cpu_policy_device=None if pol == "none" else pol)}
    return [dict(publish=publish, device=d, backend=b, policy_device=pd, what="backends rows"
                 + (" (MuJoCo Warp on warp's CPU device)" if b == "gpu" else "")) for b, d, pd in points]


def compare_from_flags(bodies=None, *, nworld=None, gpu_device=None, cpu_nworld=None, workers=None,
                       worlds_per_worker=None, cpu_layout=None, cpu_policy_device=None, overrides=(),
                       iterations=None, skip=None, seed: int = 0, publish: bool = False,
                       progress: bool = True) -> pd.DataFrame:
    """`python -m fightlab compare-backends`: its flags (text as typed, None: not given) checked
    and turned into a :func:`compare` call; returns its rows.

    nworld: MuJoCo Warp's worlds (default :data:`GPU_NWORLD`), also the CPU backend's unless
    `cpu_nworld` or a whole layout says otherwise (train's layout rules, `run.launch.cpu_layout`);
    gpu_device None: cuda:0 when there is one, else the CPU backend only (said in one line);
    cpu_policy_device: "auto" (None), "none", or a device; overrides: train's `--set` items, the
    learner only. Raises ConfigError: one line naming the flag and the value."""
    from fightlab.config import validate_nworld
    from fightlab.run.launch import TrainRequest, cpu_layout as layout_of, plan_overrides, positive

    nworld = validate_nworld(positive("--nworld", nworld) or GPU_NWORLD)
    gpu = flag_devices(gpu_device, say=True)[0]
    # the learner only, train's --set rules, applied to each body's own defaults (config.BODY_PPO)
    base = {b: plan_overrides(TrainConfig(body=b), overrides) for b in dict.fromkeys(bodies or BODY_NAMES)}
    if any(c.backend != "gpu" or c.workers is not None for c in base.values()):
        raise ConfigError("--set cannot set the backend or its layout; use --workers / --worlds-per-worker")
    fixed = cpu_layout == "original" or (workers is not None and worlds_per_worker is not None)
    cpu_n = cpu_nworld if cpu_nworld is not None else (None if fixed else str(nworld))
    try:
        n, lay = layout_of(TrainRequest(nworld=cpu_n, workers=workers, worlds_per_worker=worlds_per_worker,
                                        cpu_layout=cpu_layout), "cpu")
    except ConfigError as e:
        raise ConfigError(str(e).replace("--nworld", "--cpu-nworld").replace("nworld must", "--cpu-nworld must")) from None
    pol = flag_devices(gpu_device, cpu_policy_device)[1]
    return compare(bodies, gpu, nworld, (lay["workers"], lay["worlds_per_worker"], n),
                   cpu_policy_device=None if pol == "none" else pol,
                   iterations=ITERATIONS if iterations is None else iterations,
                   skip=SKIP if skip is None else skip, seed=seed, publish=publish,
                   base=base, progress=progress)


def summary_lines(rows: pd.DataFrame) -> list[str]:
    """Per body, the ratio line: MuJoCo Warp's env steps/s and seconds per iteration against
    the CPU backend's (one line per body; 'CPU backend only' where no MuJoCo Warp row), then a
    line per CPU-backend row with its policy on another device against the CPU-policy row."""
    out = []
    for body, g in _checked(rows).groupby("body", sort=False):
        cpu = g[g["baseline"]].iloc[0]
        gpu = g[g["backend"] == "gpu"]
        head = (f"{body}: CPU backend ({cpu['gpu']}, {cpu['nworld']} worlds) "
                f"{cpu['env_steps_per_s']:.0f} env steps/s, {cpu['s_per_iter']:.3f} s/iteration")
        extra = []
        for _, x in g[g["policy_device"] != ""].iterrows():
            extra.append(f"{body}: CPU backend with its policy on {x['policy_device']}: {x['env_steps_per_s']:.0f} "
                         f"env steps/s, {x['s_per_iter']:.3f} s/iteration (rollout {x['rollout_s_per_iter']:.3f} "
                         f"+ update {x['update_s_per_iter']:.3f}; policy on the CPU: "
                         f"{cpu['rollout_s_per_iter']:.3f} + {cpu['update_s_per_iter']:.3f}): "
                         f"{x['env_steps_ratio_vs_cpu_backend']:.2f}x env steps/s")
        if gpu.empty:
            out.append(head + "; no MuJoCo Warp row (CPU backend only)")
        else:
            x = gpu.iloc[0]
            out.append(head + f"; MuJoCo Warp ({x['gpu']}, {x['nworld']} worlds) {x['env_steps_per_s']:.0f} "
                       f"env steps/s, {x['s_per_iter']:.3f} s/iteration: ratio "
                       f"{x['env_steps_ratio_vs_cpu_backend']:.2f}x env steps/s, "
                       f"{x['s_per_iter_ratio_vs_cpu_backend']:.2f}x s/iteration")
        out += extra
    return out


# --- reading the rows: ratios and the CPU backend's time to solve --------------------------------

#: the columns :func:`backend_ratios` and :func:`estimated_time_to_solve` read
_NEEDED = ("run_id", "time", "commit", "gpu", "body", "nworld", "params", "s_per_iter", "env_steps_per_s")


def _need(rows: pd.DataFrame, cols) -> None:
    missing = [c for c in cols if c not in rows.columns]
    if missing:
        raise ConfigError(f"backends rows need column(s) {', '.join(missing)} "
                          "(data/results/backends.csv, results.read_rows('backends', root))")


def _checked(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with ``backend``, ``compare_id``, ``learner``, ``policy_device`` ("" for none),
    ``policy_gpu`` from params and ``baseline`` (the CPU backend with its policy on the CPU).
    Raises ConfigError (one line) when a needed column is missing or a params is not a JSON object
    with a backend."""
    import json

    _need(rows, _NEEDED)
    params = []
    for rid, p in zip(rows["run_id"], rows["params"]):
        try:
            d = json.loads(p)
        except (TypeError, ValueError):
            d = None
        if not isinstance(d, dict) or d.get("backend") not in ("cpu", "gpu"):
            raise ConfigError(f"backends row {rid}: params must be a JSON object with backend 'cpu' or "
                              f"'gpu', got {p!r}")
        params.append(d)
    return rows.assign(backend=[d["backend"] for d in params],
                       compare_id=[str(d.get("compare_id") or "") for d in params],
                       learner=[str(d.get("learner") or "") for d in params],
                       policy_device=[str(d.get("policy_device") or "") for d in params],
                       policy_gpu=[d.get("policy_gpu") for d in params],
                       baseline=[d["backend"] == "cpu" and not d.get("policy_device") for d in params])


def _beside_baseline(rows: pd.DataFrame, cols: list[str], pick: Callable, line: Callable,
                     one_baseline: bool) -> pd.DataFrame:
    """``line(compare_id, body, baseline row, row)`` for each row ``pick(group)`` selects of each
    (comparison, body) group that has a baseline row (:func:`_checked`), oldest first; empty with
    ``cols`` without any. ``one_baseline``: a group with two baselines is refused (ConfigError)."""
    out = []
    if rows is not None and not rows.empty:
        for (cid, body), g in _checked(rows).groupby(["compare_id", "body"], sort=False):
            cpu = g[g["baseline"]]
            if one_baseline and len(cpu) > 1:
                raise ConfigError(f"backends comparison {cid!r}, {body}: {len(cpu)} CPU-backend rows "
                                  f"({', '.join(cpu['run_id'])}); expected one")
            if not cpu.empty:
                out += [line(cid, body, cpu.iloc[0], x) for _, x in pick(g).iterrows()]
    if not out:
        return pd.DataFrame(columns=cols)
    return pd.DataFrame(out, columns=cols).sort_values("time", kind="stable").reset_index(drop=True)


def backend_ratios(rows: pd.DataFrame) -> pd.DataFrame:
    """MuJoCo Warp against the CPU backend, from ``backends`` rows (data/results/backends.csv):
    one line per MuJoCo Warp row, beside the CPU-backend row of the same comparison
    (params.compare_id) and body whose policy ran on the CPU (the baseline; a CPU-backend row with
    its policy on a GPU is `policy_device_effect`'s). Columns: compare_id, time (the GPU row's), commit, body,
    cpu (the CPU row's `gpu` column: model and cores), cpu_nworld, cpu_env_steps_per_s,
    cpu_s_per_iter [s], gpu, gpu_nworld, gpu_env_steps_per_s, gpu_s_per_iter [s],
    env_steps_ratio (GPU env steps/s over the CPU backend's: above 1, MuJoCo Warp is faster) and
    s_per_iter_ratio (GPU seconds per iteration over the CPU backend's). A MuJoCo Warp row
    without a CPU-backend row in its comparison is left out. Oldest comparison first.

    Raises:
      ConfigError: a missing column or a params without a backend (:func:`_checked`); a
        comparison with more than one CPU-backend row of a body.
    """
    cols = ["compare_id", "time", "commit", "body", "cpu", "cpu_nworld", "cpu_env_steps_per_s",
            "cpu_s_per_iter", "gpu", "gpu_nworld", "gpu_env_steps_per_s", "gpu_s_per_iter",
            "env_steps_ratio", "s_per_iter_ratio"]

    def line(cid, body, c, x):  # c: the CPU-backend row, x: the MuJoCo Warp row
        return dict(compare_id=cid, time=x["time"], commit=x["commit"], body=body, cpu=c["gpu"],
                    cpu_nworld=int(c["nworld"]), cpu_env_steps_per_s=float(c["env_steps_per_s"]),
                    cpu_s_per_iter=float(c["s_per_iter"]), gpu=x["gpu"], gpu_nworld=int(x["nworld"]),
                    gpu_env_steps_per_s=float(x["env_steps_per_s"]), gpu_s_per_iter=float(x["s_per_iter"]),
                    env_steps_ratio=float(x["env_steps_per_s"]) / float(c["env_steps_per_s"]),
                    s_per_iter_ratio=float(x["s_per_iter"]) / float(c["s_per_iter"]))

    return _beside_baseline(rows, cols, lambda g: g[g["backend"] == "gpu"], line, one_baseline=True)


def policy_device_effect(rows: pd.DataFrame) -> pd.DataFrame:
    """The CPU backend with its policy on the CPU against the same with its policy on a GPU
    (`TrainConfig.policy_device`), from ``backends`` rows of one comparison and body.

    Returns:
      one line per CPU-backend row with a policy device, beside its comparison's CPU-policy row:
      compare_id, time, commit, body, cpu (the `gpu` column: CPU model and cores), nworld,
      policy_device, policy_gpu, cpu_policy_s_per_iter, cpu_policy_rollout_s, cpu_policy_update_s,
      gpu_policy_s_per_iter, gpu_policy_rollout_s, gpu_policy_update_s [s per iteration] and
      env_steps_ratio (policy on the GPU over on the CPU: above 1, the GPU policy is faster);
      oldest comparison first. Empty (same columns) without such rows.

    Raises:
      ConfigError: as :func:`backend_ratios` for bad rows.
    """
    cols = ["compare_id", "time", "commit", "body", "cpu", "nworld", "policy_device", "policy_gpu",
            "cpu_policy_s_per_iter", "cpu_policy_rollout_s", "cpu_policy_update_s", "gpu_policy_s_per_iter",
            "gpu_policy_rollout_s", "gpu_policy_update_s", "env_steps_ratio"]
    if rows is not None and not rows.empty:
        _need(rows, ("rollout_s_per_iter", "update_s_per_iter"))

    def line(cid, body, c, x):  # c: the CPU-policy row, x: the row with its policy on another device
        return dict(compare_id=cid, time=x["time"], commit=x["commit"], body=body, cpu=x["gpu"],
                    nworld=int(x["nworld"]), policy_device=x["policy_device"], policy_gpu=x["policy_gpu"],
                    cpu_policy_s_per_iter=float(c["s_per_iter"]),
                    cpu_policy_rollout_s=float(c["rollout_s_per_iter"]),
                    cpu_policy_update_s=float(c["update_s_per_iter"]),
                    gpu_policy_s_per_iter=float(x["s_per_iter"]),
                    gpu_policy_rollout_s=float(x["rollout_s_per_iter"]),
                    gpu_policy_update_s=float(x["update_s_per_iter"]),
                    env_steps_ratio=float(x["env_steps_per_s"]) / float(c["env_steps_per_s"]))

    return _beside_baseline(rows, cols, lambda g: g[(g["backend"] == "cpu") & (g["policy_device"] != "")],
                            line, one_baseline=False)


def estimated_time_to_solve(rows: pd.DataFrame, runs: pd.DataFrame,
                            log: Callable[[str], None] = print) -> pd.DataFrame:
    """The CPU backend's time to solve per body, estimated: the newest CPU-backend ``backends``
    row of the body with its policy on the CPU (the GPU-less baseline) (``rows``: data/results/backends.csv; the newest by its time, nworld as
    recorded) × the median iterations to solve on MuJoCo Warp of the learner that row ran
    (its params' ``learner``, `report.learner_id`: PPO settings and training physics) at the
    nworld it ran: the body's headline (`report.headline` of `report.solve_summary` of
    ``runs``, `report.published_runs`) when the headline ran that learner at that nworld, else
    that learner's own solo solved runs of the task on a GPU at that nworld. Iterations to solve
    depend on nworld and on the learner, and a learner's cost per iteration on the CPU differs
    too (its network, its physics): a body whose newest CPU-backend row has no such solves, or
    that has no headline, is left out; each said through ``log`` in one line.

    Returns:
      one row per body estimated: body, run_id, commit, time (the backends row's), cpu (its
      `gpu` column: CPU model and cores), nworld, s_per_iter [s], compile_s [s], learner (its
      params.learner), iterations_to_solve (the median of the solves used), iterations_of
      ("headline", or "learner": that learner's own solo solves), headline_commit (the commits
      of the solves used), headline_nworld, headline_n_solo (how many solves), headline_learner
      (the headline group's learner ids, joined by "/"), time_to_solve_s [s] = s_per_iter ×
      iterations_to_solve.

    Raises:
      ConfigError: as :func:`backend_ratios` for bad rows.
    """
    from fightlab.config import DEFAULT_TASK
    from fightlab.measure.report import SUMMARY_KEYS, commits_in, headline, no_headline_note, solve_summary, with_code
    from fightlab.meta import is_cpu_label

    cols = ["body", "run_id", "commit", "time", "cpu", "nworld", "s_per_iter", "compile_s", "learner",
            "iterations_to_solve", "iterations_of", "headline_commit", "headline_nworld", "headline_n_solo",
            "headline_learner", "time_to_solve_s"]
    if rows is None or rows.empty:
        return pd.DataFrame(columns=cols)
    t = _checked(rows)
    cpu = t[t["baseline"]].sort_values("time", kind="stable").drop_duplicates("body", keep="last")
    runs = with_code(runs) if runs is not None and not runs.empty else runs
    heads = headline(solve_summary(runs)) if runs is not None and not runs.empty else pd.DataFrame()
    by_body = {k[SUMMARY_KEYS.index("body")]: (dict(zip(SUMMARY_KEYS, k)), h) for k, h in heads.iterrows()}
    out = []
    for _, r in cpu.iterrows():
        body = r["body"]
        sp = pd.to_numeric(pd.Series([r["s_per_iter"]]), errors="coerce").iloc[0]
        if not (np.isfinite(sp) and sp > 0):
            log(f"CPU backend {body}: backends row {r['run_id']} (data/results/backends.csv) has s_per_iter "
                f"{r['s_per_iter']!r}, not a positive number: not estimated")
            continue
        if body not in by_body:
            log(f"CPU backend {body}: no MuJoCo Warp headline ({no_headline_note(body, runs)}) for its "
                f"iterations to solve; backends row {r['run_id']} not estimated")
            continue
        k, h = by_body[body]
        g = runs[np.logical_and.reduce([runs[c] == v for c, v in k.items()])]
        learners = sorted(set(g["learner"])) if "learner" in g else []
        same_nworld = int(r["nworld"]) == int(k["nworld"])
        if same_nworld and (not learners or r["learner"] in learners):
            it, of, commits, n = float(h["iterations_median"]), "headline", h["commits"], int(h["n_solo"])
        else:  # the learner the CPU ran, at its nworld: its own solo solves of the task on a GPU
            own = runs[(runs["body"] == body) & (runs["nworld"] == int(r["nworld"]))
                       & (runs["learner"] == r["learner"]) & (runs["solved"] == True)  # noqa: E712
                       & (runs["concurrent"] == 1) & (runs["task"] == DEFAULT_TASK)
                       & np.array([not is_cpu_label(x) for x in runs["gpu"]], dtype=bool)] \
                if "learner" in runs else runs.iloc[:0]
            if own.empty:
                why = (f"ran {int(r['nworld'])} worlds, the headline {int(k['nworld'])}" if not same_nworld else
                       f"ran learner {r['learner'] or 'unrecorded'}, the headline {'/'.join(learners)}")
                log(f"CPU backend {body}: backends row {r['run_id']} {why}, and that learner has no solo "
                    f"solve on a GPU at {int(r['nworld'])} worlds: iterations to solve depend on both, not "
                    "estimated (`compare-backends` with today's learner)")
                continue
            it, of, commits, n = float(own["iterations"].median()), "learner", commits_in(own), len(own)
        out.append(dict(body=body, run_id=r["run_id"], commit=r["commit"], time=r["time"], cpu=r["gpu"],
                        nworld=int(r["nworld"]), s_per_iter=float(r["s_per_iter"]),
                        compile_s=float(r["compile_s"]) if "compile_s" in r else float("nan"),
                        learner=r["learner"], iterations_to_solve=it, iterations_of=of, headline_commit=commits,
                        headline_nworld=int(k["nworld"]), headline_n_solo=n,
                        headline_learner="/".join(learners), time_to_solve_s=float(r["s_per_iter"]) * it))
    return pd.DataFrame(out, columns=cols)
