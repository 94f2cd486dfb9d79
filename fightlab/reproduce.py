"""The main job: run the numbered notebooks with papermill into runs/notebooks/.

`reproduce(only=["06"], size="smoke", publish=False, device="cpu")`. Each notebook takes the
parameters `size` ("smoke": CPU-sized, seconds; "full": the GPU measurement), `device` and
`publish`; only with `publish` do notebooks write the committed data/ and figures/, and publishing
a smoke run is refused, so a CPU smoke run never overwrites GPU results. Executed copies go to
runs/notebooks/<name>-<size>.ipynb (git-ignored).
"""

from __future__ import annotations

import time
from pathlib import Path

from fightlab.config import ConfigError

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = REPO_ROOT / "notebooks"
OUT_DIR = REPO_ROOT / "runs" / "notebooks"


def notebooks() -> dict[str, Path]:
    """Numbered notebooks present: {"06": Path(".../06_train.ipynb"), ...}."""
    return {p.name[:2]: p for p in sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))}


def reproduce(only: list[str] | None = None, size: str = "smoke", publish: bool = False,
              device: str = "cpu", out_dir: Path | None = None, extra: dict | None = None) -> int:
    """Execute notebooks with papermill.

    Args:
      only: notebook numbers ("06"), default all; size: "smoke" or "full"; publish: let the
        notebooks write data/ and figures/ (refused with size="smoke"); device: "cpu"/"cuda:N";
      out_dir: where executed copies go (default runs/notebooks); extra: more parameters.

    Returns:
      0 when every notebook ran. Raises ConfigError for an unknown notebook/size or a smoke
      publish; papermill's PapermillExecutionError propagates a failing cell.
    """
    import papermill as pm

    if size not in ("smoke", "full"):
        raise ConfigError(f"size must be 'smoke' or 'full', got {size!r}")
    if publish and size == "smoke":
        raise ConfigError("--publish writes the committed data/ and figures/; it needs --size full "
                          "(a smoke run must never overwrite GPU results)")
    # data/ holds GPU measurements: publishing from the CPU is only for renderings (Figure 1)
    render_only = {"01"}
    if publish and not str(device).startswith("cuda"):
        chosen_now = {o.zfill(2) for o in only} if only else set(notebooks())
        if not chosen_now <= render_only:
            raise ConfigError(f"--publish on device {device!r} may only run notebook 01 (a rendering); "
                              f"the others publish GPU measurements: {', '.join(sorted(chosen_now - render_only))}")
    nbs = notebooks()
    chosen = list(nbs) if not only else [o.zfill(2) for o in only]
    unknown = [c for c in chosen if c not in nbs]
    if unknown:
        raise ConfigError(f"unknown notebook {', '.join(unknown)}; notebooks: {', '.join(nbs) or 'none'}")
    out = Path(out_dir) if out_dir else OUT_DIR
    out.mkdir(parents=True, exist_ok=True)
    for key in chosen:
        src = nbs[key]
        dst = out / f"{src.stem}-{size}.ipynb"
        params = dict(size=size, device=device, publish=publish, **(extra or {}))
        t0 = time.perf_counter()
        print(f"[reproduce] {src.name} size={size} device={device} publish={publish} -> {dst}", flush=True)
        pm.execute_notebook(str(src), str(dst), parameters=params, cwd=str(REPO_ROOT),
                            kernel_name="python3", progress_bar=False)
        print(f"[reproduce] {src.name} done in {time.perf_counter() - t0:.1f} s", flush=True)
    return 0
