"""Command line: python -m fightlab {train, evaluate, export, render, reproduce, describe, slots, profile, figures, batch, sweep, bench,
compare-backends, survey}.

The command line's parser: a table of every command's flags, one function per command or group
of commands (`fightlab.cli` runs them; `fightlab.clidoc` writes docs/cli.md from it). Its usage
errors are one line, as every other error of the command line (`_Parser`).
"""

from __future__ import annotations

import argparse
import re


class _Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """Adds "(default: X)" only where the help text does not already say the default and the
    default means something (not None)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or action.default in (None, argparse.SUPPRESS) or action.default is False:
            return text
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """argparse's parser whose usage errors are one line, as every other error of the command
    line (`fightlab: error: …`, exit 2), pointing at --help instead of printing the usage."""

    def error(self, message):
        message = re.sub(r"'([^'\n]{80,})'", lambda m: f"'{m.group(1)[:59]}…' ({len(m.group(1))} characters)", message)
        self.exit(2, f"fightlab: error: {_cut(message)} (see `{self.prog} --help`)\n")


def _cut(message: str, limit: int = 400) -> str:
    """``message`` with every run of ``limit`` or more non-blank characters (a 5000-digit value
    echoed back, in any quotes or none) cut to its first 60 and its length: one readable line."""
    return re.sub(r"\S{%d,}" % limit, lambda m: f"{m.group(0)[:60]}… ({len(m.group(0))} characters)", message)


def _bodies() -> str:
    """The body names, as help lists them."""
    from fightlab.bodies import BODY_NAMES

    return ", ".join(BODY_NAMES)


def _parser() -> argparse.ArgumentParser:
    """The command line's parser: every command's flags, one table per command, in the order of
    `--help`."""
    fmt = _Formatter
    p = _Parser(prog="python -m fightlab", description=__doc__.split("\n\n")[0], formatter_class=fmt)
    sub = p.add_subparsers(dest="cmd", required=True)
    for add in (_train_parser, _evaluate_parser, _export_parser, _render_parser, _reproduce_parser, _measure_parsers,
                _figures_parser, _batch_parser, _sweep_parser, _bench_parser, _compare_parser,
                _survey_parser):
        add(sub, fmt)
    return p


def _train_parser(sub, fmt) -> None:
    """train: its flags declared once, `run.launch.TRAIN_FLAGS`."""
    from fightlab.run.launch import TRAIN_FLAGS

    t = sub.add_parser("train", help="train PPO on the stance task", formatter_class=fmt,
                       description="Train from scratch, or continue a run with --resume CHECKPOINT "
                       "(then body, nworld, seed and the config come from the checkpoint, the run "
                       "stays in the checkpoint's folder, and --body/--nworld/--seed/--set are refused).")
    for f in TRAIN_FLAGS:  # declared once, in run.launch
        t.add_argument(f.option, **f.argparse)
    t.add_argument("--no-progress", action="store_true", help="no tqdm bar; a log line every 25 iterations")


def _evaluate_parser(sub, fmt) -> None:
    """evaluate: a checkpoint's policy (or the zero action), or its reference check."""
    e = sub.add_parser("evaluate", help="re-run a saved policy and print fall rate, tracking, episode length",
                       formatter_class=fmt)
    e.add_argument("checkpoint", nargs="?", default=None,
                   help="checkpoint to re-run (omit with --zero-action --body B)")
    e.add_argument("--body", default=None, help=f"with --zero-action and no checkpoint: one of {_bodies()}")
    e.add_argument("--seed", type=int, default=1, help="env seed of the fresh worlds")
    e.add_argument("--publish", action="store_true", help="append the row to data/results/evaluate.csv: from a "
                   "CUDA device, or MuJoCo's C engine (--policy P --backend cpu)")
    e.add_argument("--nworld", default=None, help="parallel worlds (default: the checkpoint's nworld; "
                   "without a checkpoint, --zero-action: 256)")
    e.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda:0 if present)")
    e.add_argument("--episodes", type=float, default=1.0,
                   help="how long each world runs, in episode lengths (10 s each), >= 1; a world that "
                        "falls starts a new episode, so the count printed (episodes ended, all worlds) "
                        "is at least nworld × this")
    e.add_argument("--timestep", type=float, default=None, help="physics timestep override, s (e.g. 0.002)")
    e.add_argument("--zero-action", action="store_true", help="run the zero-action policy instead")
    e.add_argument("--amplitude", type=float, default=1.0, help="rhythm amplitude a in [0, 1]")
    e.add_argument("--physics", default=None,
                   help="training (the default): the checkpoint's solver settings (without a checkpoint "
                        "today's defaults); reference: the reference physics (Newton 10 / 20 at the timestep)")
    e.add_argument("--reference-check", action="store_true",
                   help="the reference check of a CHECKPOINT instead: its mean action in the reference "
                        "physics at the task's timestep and at half of it, one episode per world, pushes "
                        "on (--nworld, default 256); exit 0 when both runs fall in <= 5 %% of episodes "
                        "with tracking >= 0.75 (the checkpoint's thresholds: these are the task's; a "
                        "training's own check ran with --seed = its seed + 1), else 1")
    e.add_argument("--policy", default=None, help="an exported policy.onnx (python -m fightlab export) instead "
                   "of a CHECKPOINT, run by onnxruntime in its run's task (needs the export extra)")
    e.add_argument("--backend", default=None, help="with --policy: gpu (MuJoCo Warp) or cpu (MuJoCo's C engine, "
                   "--device cpu); default: its run's")
    e.add_argument("--no-progress", action="store_true", help="no tqdm bar over the env steps")


def _export_parser(sub, fmt) -> None:
    """export: a checkpoint's policy as ONNX (`run.export`)."""
    x = sub.add_parser("export", help="a checkpoint's policy as policy.onnx, checked against torch",
                       formatter_class=fmt,
                       description="Write the checkpoint's deterministic policy (observation normalisation "
                       "and mean action) as policy.onnx, its body, sizes, run and commit in the file's "
                       "metadata, after checking onnxruntime's actions against torch's on >= 1000 "
                       "observations recorded by stepping the body's env (refused above 1e-5). Needs "
                       "the export extra: pip install -e '.[export]'.")
    x.add_argument("checkpoint", help="a fightlab checkpoint")
    x.add_argument("--out", default=None, help="the folder to write policy.onnx into (default: the checkpoint's)")
    x.add_argument("--device", default=None, help="where the env records observations (default: the run's "
                   "device when here, else cpu)")
    x.add_argument("--no-progress", action="store_true", help="no tqdm bar over the env steps")


def _render_parser(sub, fmt) -> None:
    """render: one world's episode to MP4 and GIF."""
    from fightlab.figures.video import MAX_FPS, MAX_SIDE

    rn = sub.add_parser("render", help="an MP4 (and a small GIF) of one world's episode with its pushes",
                        formatter_class=fmt,
                        description="Run one world of a saved policy (its mean action, amplitude fixed) "
                        "or of the zero-action policy, with the env's pushes, falls and resets, and draw "
                        "it with MuJoCo's renderer (OSMesa on a CPU: apt-get install -y libosmesa6) into "
                        "an H.264 MP4 and a downscaled GIF (imageio with imageio-ffmpeg). Default output: "
                        "<run folder>/video/episode-it<N>-seed<S>.mp4 (+ .gif) beside a checkpoint in a "
                        "fightlab run folder, else under runs/video/. An existing output is refused "
                        "unless --force.")
    rn.add_argument("checkpoint", nargs="?", default=None,
                    help="checkpoint to render (omit with --zero-action --body B)")
    rn.add_argument("--body", default=None, help=f"with --zero-action and no checkpoint: one of {_bodies()}")
    rn.add_argument("--out", default=None, help="the .mp4 to write (the GIF goes beside it, .gif)")
    rn.add_argument("--seconds", type=float, default=5.0, help="simulated seconds, in (0, 600]")
    rn.add_argument("--fps", type=int, default=30, help=f"frames per second of the MP4, 1..{MAX_FPS}")
    rn.add_argument("--width", type=int, default=640, help=f"MP4 width in pixels, even, 16..{MAX_SIDE}")
    rn.add_argument("--height", type=int, default=480, help=f"MP4 height in pixels, even, 16..{MAX_SIDE}")
    rn.add_argument("--gif-width", type=int, default=320, help="GIF width in pixels (height keeps the aspect)")
    rn.add_argument("--gif-fps", type=int, default=10, help="GIF frames per second")
    rn.add_argument("--seed", type=int, default=1, help="env seed (initial joint noise, the pushes)")
    rn.add_argument("--no-gif", action="store_true", help="write only the MP4")
    rn.add_argument("--device", default="cpu",
                    help="the env's device: cpu, cuda or cuda:N (one world: the CPU is fine)")
    rn.add_argument("--zero-action", action="store_true", help="run the zero-action policy instead")
    rn.add_argument("--amplitude", type=float, default=1.0, help="rhythm amplitude a in [0, 1]")
    rn.add_argument("--force", action="store_true", help="overwrite existing outputs")
    rn.add_argument("--no-progress", action="store_true", help="no tqdm bars")


def _reproduce_parser(sub, fmt) -> None:
    """reproduce (the main job) and describe."""
    r = sub.add_parser("reproduce", help="run the notebooks with papermill into runs/", formatter_class=fmt)
    r.add_argument("--only", action="append", default=None, help="notebook number, e.g. 06 (repeatable)")
    r.add_argument("--size", choices=("auto", "smoke", "full"), default=None,
                   help="smoke (CPU-sized) or full (the measurement); auto, the default: full on a GPU, smoke on a CPU")
    r.add_argument("--publish", action="store_true",
                   help="let the notebooks write data/ and figures/ (GPU only, except 01's rendering)")
    r.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda:0 if present)")
    r.add_argument("--log-output", action="store_true",
                   help="stream the cells' output (a training's progress bar included) instead of "
                        "a progress bar over each notebook's cells")
    r.add_argument("--publish-times", action="store_true",
                   help="also write the job's own rows (each notebook's wall time and peak GPU "
                        "memory) to data/results/reproduce.csv (full size on a GPU only; they always "
                        "go to runs/notebooks/data/results/)")

    d = sub.add_parser("describe", help="print a body's facts", formatter_class=fmt)
    d.add_argument("body", help=f"one of: {_bodies()}")


def _measure_parsers(sub, fmt) -> None:
    """profile and slots: measurements of the physics."""
    from fightlab.config import TrainConfig
    from fightlab.config.rules import SOLVER_LOOPS

    pr = sub.add_parser("profile", help="per-kernel GPU timing of physics (or env) steps, by stage",
                        formatter_class=fmt)
    pr.add_argument("--body", default="muscular-fast", help=f"one of: {_bodies()}")
    pr.add_argument("--nworld", default="1024", help="parallel worlds")
    pr.add_argument("--nstep", type=int, default=20, help="profiled steps")
    pr.add_argument("--what", choices=("physics", "env"), default="physics",
                    help="physics: one mujoco_warp.step; env: one StanceEnv step (pre-step, "
                         "physics substeps with contact checks, post-step, reset, observation)")
    pr.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda:0 if present)")
    pr.add_argument("--top", type=int, default=12, help="kernels to list")
    pr.add_argument("--physics", choices=("training", "reference"), default="training",
                    help="training: today's training physics (M factored only inside Newton); "
                         "reference: Newton 10 / 20 with qacc_smooth and eulerdamp (the reference "
                         "check's, which factors M twice per step)")
    pr.add_argument("--tree-factor", action=argparse.BooleanOptionalAction,
                    default=TrainConfig.tree_factor,
                    help="factor M of trees over 64 DOF (muscular-fast) with fightlab's single-launch "
                         f"kernel (default: {'on' if TrainConfig.tree_factor else 'off'}, as in training); "
                         "--no-tree-factor: MuJoCo Warp's per-level sparse factor. The table names the "
                         "path measured")
    pr.add_argument("--solver-loop", choices=SOLVER_LOOPS, default="auto",
                    help="how the Newton solve runs (train's --set solver_loop=...): single_launch is "
                         "fightlab's one-launch solve (where the body is taken; else MuJoCo Warp's, "
                         "with a line saying why); auto takes it as training does (on a GPU, the "
                         "training physics), and with --physics reference MuJoCo Warp's. The summary "
                         "names the loop measured")
    pr.add_argument("--no-progress", action="store_true", help="no tqdm bar over the profile's phases")
    pr.add_argument("--publish", action="store_true",
                    help="GPU, --what physics only: append the row to data/results/profile.csv "
                         "(notebook 02's figure: MuJoCo Warp's solve; notebook 09: each solve)")

    sl = sub.add_parser("slots", help="measure contacts / constraint rows of bodies pushed over",
                        formatter_class=fmt)
    sl.add_argument("--body", action="append", default=None, help="body (repeatable; default both)")
    sl.add_argument("--nworld", default="4096", help="pushed-over worlds per body")
    sl.add_argument("--seconds", type=float, default=3.0, help="simulated seconds after the push")
    sl.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda:0 if present)")
    sl.add_argument("--limp", action="store_true", help="servos off while falling (bodies lie flatter)")
    sl.add_argument("--publish", action="store_true", help="GPU only: append rows to data/results/slots.csv")
    sl.add_argument("--no-progress", action="store_true", help="no tqdm bar over the physics steps")


def _figures_parser(sub, fmt) -> None:
    """figures: redraw from data/."""
    from fightlab.figures import FIGURES

    fg = sub.add_parser("figures", help="redraw the committed figures from data/ (no measurement; CPU is fine)",
                        formatter_class=fmt,
                        description="Redraw every data-driven figure from ROOT/data/results and "
                        "ROOT/data/curves into ROOT/figures (png + svg). A figure whose data file is "
                        "absent or empty is skipped with a message.")
    fg.add_argument("--only", action="extend", nargs="+", default=None, metavar="NAME",
                    help=f"figures to draw (repeatable; default all): {', '.join(FIGURES)}")
    fg.add_argument("--root", default=None,
                    help="folder holding data/ (figures go to ROOT/figures; default: the repository)")


def _batch_parser(sub, fmt) -> None:
    """batch: many jobs over the GPUs."""
    b = sub.add_parser("batch", help="run many jobs, K at once per GPU over every GPU (CUDA MPS), resumable",
                       formatter_class=fmt, description="Jobs: fightlab commands ('train --body simple'), "
                       "notebooks ('notebook 06 size=smoke') or scripts ('python bench/x.py'), from "
                       "--jobs FILE (one per line) and --job, each expanded over the cross product of "
                       "the --grid values. State, logs, run folders, executed notebooks and one "
                       "batch.tar.gz go to runs/batch/<batch_id>/. See fightlab/batch.py.")
    b.add_argument("--jobs", default=None, metavar="FILE", help="jobs file: one job per line, # comments")
    b.add_argument("--job", action="append", default=[], metavar="'CMD ARGS'",
                   help="one job (repeatable), e.g. --job 'train --body simple --nworld 1024'")
    b.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                   help="run every job once per value (repeatable: the cross product); commas inside "
                        "[...] do not split. KEY: a flag (seed → --seed), env.x / ppo.x (→ --set), "
                        "or a notebook parameter")
    b.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="one value for every job, never split (e.g. --set env.push_impulse_ns=[20,40])")
    b.add_argument("--concurrent", default=None, help="jobs at once per GPU (lane) (default 1, or "
                   "the resumed batch's; at most 48 per GPU, CUDA MPS's clients per device)")
    b.add_argument("--gpus", default=None, help="GPU indices to use, e.g. 0,1, or all (default: every "
                   "GPU nvidia-smi -L lists; none: one CPU lane, its jobs see no GPU; with --resume: "
                   "lanes set aside before are used again)")
    b.add_argument("--job-timeout-s", type=float, default=None, help="kill a job (its process group) after this")
    b.add_argument("--budget-s", type=float, default=None,
                   help="the whole batch's seconds: trainings get --segment-s to stop with a checkpoint")
    b.add_argument("--min-left-s", type=float, default=None,
                   help="with --budget-s: start a job only with more than this left")
    b.add_argument("--resume", default=None, metavar="BATCH_ID",
                   help="continue a batch (id under runs/batch/ or its folder): finished jobs skipped, "
                        "trainings resumed from their latest.pt")
    b.add_argument("--retry-failed", action="store_true", help="with --resume: run failed jobs again")
    b.add_argument("--batch-dir", default=None, help="batch folder (default runs/batch/<new id>)")
    b.add_argument("--with-checkpoints", action="store_true", help="put checkpoints (*.pt) in batch.tar.gz")
    b.add_argument("--no-mps", action="store_true", help="do not start CUDA MPS (jobs time-slice)")
    b.add_argument("--no-progress", action="store_true", help="no tqdm bar over the jobs")


def _survey_parser(sub, fmt) -> None:
    # defaults live in fightlab.survey_launch (imported when the command runs, not by the parser)
    sv = sub.add_parser("survey", formatter_class=fmt, help="the GPU survey on rented machines (SkyPilot)",
                        description="The GPU survey: `survey launch` rents one host per GPU type "
                        "in parallel, runs `python -m fightlab bench` there and collects its rows into "
                        "data/survey/bench/<survey id>/. See fightlab/survey_launch.py.")
    ssub = sv.add_subparsers(dest="survey_cmd", required=True, metavar="ACTION")
    la = ssub.add_parser("launch", formatter_class=fmt, help="one cluster per GPU type, bench on each",
                         description="Per GPU type, at once: rent a host (SkyPilot, or with --picker vastai "
                         "the cheapest Vast offer that passes fightlab's filter), give up on one that does "
                         "not answer within 5 minutes, run the task fightlab/survey/bench.sky.yaml (setup: "
                         "host check, pip install -e .; run: bench), collect the rows, and always tear "
                         "the host down (autostop -i N --down, and sky down / vastai destroy in finally); "
                         "a failed host is replaced by the next, up to --tries. --dry-run prints every "
                         "command and runs nothing.")
    la.add_argument("--gpus", required=True, action="append", help="comma-separated GPU types, e.g. "
                    "RTX4090,L40S (fightlab.survey.cost.GPU_TYPES; case and spaces ignored; once)")
    la.add_argument("--infra", default="vast", help="where to rent: vast, runpod, lambda or aws, "
                    "optionally /region[/zone] (SkyPilot's --infra)")
    la.add_argument("--picker", default="sky", help="who picks the host: sky (SkyPilot, any infra) or "
                    "vastai (fightlab: the vastai SDK's search, filtered on driver, CUDA, bandwidth and "
                    "price, cheapest first; --infra vast only)")
    la.add_argument("--bodies", default="simple,muscular-fast", help="bench's bodies, comma-separated")
    la.add_argument("--tries", default=None, help="hosts tried per GPU type, 1-10 (default 2)")
    la.add_argument("--min-cuda", default=None, help="the driver's CUDA version x.y, at least, e.g. 13.0; "
                    "'' not checked (default: warp's CUDA toolkit, bench's rule)")
    la.add_argument("--min-driver", default=None, help="the NVIDIA driver version, at least, e.g. "
                    "580.65.06 (default: not checked)")
    la.add_argument("--min-mbit-s", default=None, help="download bandwidth, at least "
                    "[Mbit/s] (default 500)")
    la.add_argument("--max-price", default=None, help="--picker vastai only: $/h at most, > 0 "
                    "(SkyPilot's Vast backend cannot filter by price)")
    la.add_argument("--bandwidth-url", default=None, help="an http(s) URL the host check downloads to "
                    "time the bandwidth (default: Cloudflare's speed test; '' not timed on the host)")
    la.add_argument("--time-limit-s", default=None,
                    help="bench's hard limit per host [s], at least bench's shortest for the "
                         "bodies (default: twice that)")
    la.add_argument("--offers-json", default=None, metavar="FILE",
                    help="--picker vastai: a recorded offer list (vastai search offers --raw) instead "
                         "of a live search (for a dry run)")
    la.add_argument("--survey-id", default=None, help="1-16 of a-z 0-9 (default: a new id)")
    la.add_argument("--dry-run", action="store_true", help="print every command it would run, run nothing")


def _bench_parser(sub, fmt) -> None:
    bn = sub.add_parser("bench", formatter_class=fmt,
                        help="this machine: host check, set-up phases, speed test, a 2-minute training "
                             "per body, estimated time to solve",
                        description="On this machine, under one hard wall-clock limit: a host check (GPU "
                        "visible, driver vs warp's CUDA, download bandwidth with --bandwidth-url, bad host "
                        "against earlier rows of the same GPU), then per body the set-up phases timed "
                        "apart, a speed test and a timed training; one bench row per body (CSV + JSON in "
                        "--out) with an estimated time to solve. See fightlab/measure/bench.py.")
    bn.add_argument("--bodies", default="simple,muscular-fast", help="comma-separated bodies")
    bn.add_argument("--nworld", default=None,
                    help="worlds, a positive integer, or auto (GPU only); default 1024 (smoke: 8)")
    bn.add_argument("--train-s", type=float, default=None, help="seconds of timed training per body "
                    "(default measure.bench.TRAIN_S: 120; smoke: 3)")
    bn.add_argument("--time-limit-s", type=float, default=None,
                    help="hard wall-clock limit for the whole job (default: twice the shortest accepted)")
    bn.add_argument("--out", default=None, help="folder for bench.json and data/results/bench.csv: new, "
                    "empty or an earlier bench's (default runs/bench/<id>)")
    bn.add_argument("--size", choices=("auto", "smoke", "full"), default=None,
                    help="smoke (tiny nworld, a few seconds, CPU-sized) or full; auto, the default: full on "
                         "a GPU, smoke on a CPU")
    bn.add_argument("--device", default=None, help="cuda, cuda:N or cpu (default: the GPU if any)")
    bn.add_argument("--bandwidth-url", default=None, help="a URL to time a download from (else not measured)")
    bn.add_argument("--publish", action="store_true", help="GPU, full size: also append to data/results/bench.csv")
    bn.add_argument("--no-progress", action="store_true", help="no progress bar")


def _compare_parser(sub, fmt) -> None:
    from fightlab.run.launch import layout_flags

    # defaults live in fightlab.measure.backends (imported when the command runs, not by the parser)
    cb = sub.add_parser("compare-backends", formatter_class=fmt,
                        help="the CPU baseline vs MuJoCo Warp: env steps/s and s/iteration of both "
                             "bodies on the CPU MuJoCo backend and on the GPU, their ratio, the same-state error",
                        description="Per body, a short solo training on the CPU MuJoCo backend (MuJoCo's "
                        "C engine, every core by default) and one on MuJoCo Warp on the GPU (--nworld "
                        "worlds); medians after warm-up; the ratio; one env step from the same state on "
                        "both (the same-state error). One backends row per (body, backend) under "
                        "runs/backends/<id>/ (with --publish also data/results/backends.csv). Without a "
                        "GPU only the CPU backend is measured, unless --gpu-device cpu asks for MuJoCo "
                        "Warp on warp's CPU device (a smoke check, never published). See "
                        "fightlab/measure/backends.py.")
    cb.add_argument("--body", action="append", default=None,
                    help=f"a body, one of {_bodies()} (repeat for several; default every body)")
    cb.add_argument("--nworld", default=None,
                    help="MuJoCo Warp's worlds on the GPU, and the CPU backend's unless --cpu-nworld or "
                         "--workers × --worlds-per-worker say otherwise (default 1024)")
    cb.add_argument("--gpu-device", default=None,
                    help="MuJoCo Warp's device: cuda, cuda:N, or cpu (warp's CPU device: a smoke "
                         "check) (default: cuda:0 if present, else none: the CPU backend only)")
    cb.add_argument("--cpu-nworld", default=None, help="the CPU backend's worlds (default --nworld)")
    for option, kw in layout_flags("--cpu-nworld").items():  # train's, for the CPU backend's worlds
        cb.add_argument(option, **kw)
    cb.add_argument("--cpu-policy-device", default=None,
                    help="also time the CPU backend with its policy and update on this device (cuda:N; "
                         "cpu: the same copies on the CPU, a smoke check; none: not at all) "
                         "(default: the GPU of --gpu-device when it is one, else none)")
    cb.add_argument("--iterations", type=int, default=None, help="iterations per training (default 8)")
    cb.add_argument("--skip", type=int, default=None,
                    help="iterations left out of the medians, warm-up (default 3)")
    cb.add_argument("--seed", type=int, default=0, help="seed of every training")
    cb.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a learner field for every training, as train's --set (e.g. ppo.num_steps=8)")
    cb.add_argument("--publish", action="store_true",
                    help="append the rows to data/results/backends.csv (CPU backend and GPU rows; "
                         "never MuJoCo Warp on warp's CPU device)")
    cb.add_argument("--no-progress", action="store_true", help="no tqdm bars")


def _sweep_parser(sub, fmt) -> None:
    # defaults live in fightlab.measure.sweep (imported when the command runs, not by the parser)
    sw = sub.add_parser("sweep", help="the world-count sweep: seconds per iteration and env steps/s "
                        "against nworld (short solo runs), resumable; --solve: its solve trainings",
                        formatter_class=fmt, description="Time one short solo training per (body, "
                        "nworld) into runs/sweep/<sweep_id>/ (sweep.json, data/results/sweep.csv; "
                        "a rerun of the same command skips finished points); --publish also writes "
                        "data/results/sweep.csv. --solve prints (with --run: runs) the fightlab "
                        "batch of trainings to the solve criterion over nworld and seed; --summary "
                        "prints time to solve against nworld from data/. See fightlab/measure/sweep.py.")
    sw.add_argument("--body", action="append", default=None, help=f"body (repeatable; default both: "
                    f"{_bodies()})")
    sw.add_argument("--nworld-list", default=None,
                    help="world counts to time, comma-separated positive integers (default "
                         "measure.sweep.NWORLDS: 128,256,…,16384)")
    sw.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda:0 if present)")
    sw.add_argument("--iterations", type=int, default=12, help="iterations per point")
    sw.add_argument("--skip", type=int, default=3, help="iterations left out of the medians (warm-up)")
    sw.add_argument("--seed", type=int, default=0, help="seed of the timing runs")
    sw.add_argument("--sweep-id", default=None,
                    help="folder under runs/sweep/ (default: the device and a hash of the options)")
    sw.add_argument("--publish", action="store_true", help="GPU only: append the rows to data/results/sweep.csv")
    sw.add_argument("--solve", action="store_true",
                    help="the solve trainings instead: print their fightlab batch command")
    sw.add_argument("--solve-nworld-list", default=None,
                    help="with --solve: world counts of the trainings to the solve criterion "
                         "(default measure.sweep.SOLVE_NWORLDS: 256,512,1024,4096)")
    sw.add_argument("--seeds", default=None, help="with --solve: seeds (default measure.sweep.SOLVE_SEEDS: 0,1)")
    sw.add_argument("--concurrent", type=int, default=4, help="with --solve: trainings at once per GPU")
    sw.add_argument("--max-iterations", type=int, default=None,
                    help="with --solve: a training stops unsolved after this many iterations "
                         "(default measure.sweep.SOLVE_MAX_ITERATIONS: 3000)")
    sw.add_argument("--run", action="store_true", help="with --solve: run the batch, not only print it")
    sw.add_argument("--summary", action="store_true",
                    help="print time to solve against nworld from data/ (sweep rows × train rows); no measurement")
    sw.add_argument("--no-progress", action="store_true", help="no tqdm bar per point")

