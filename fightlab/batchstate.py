"""A batch's state, batch.json, read back for a resume: every field a resume uses checked first, so
a damaged file is one line naming it and what is wrong, before anything in the batch folder changes."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fightlab.batchjobs import BatchError, Job

#: batch.json's format; a job's kinds and statuses (fightlab.batch's docstring says what each means)
FORMAT = "fightlab-batch-1"
KINDS = ("fightlab", "notebook", "python")
STATUSES = ("pending", "running", "done", "paused", "failed", "timeout", "budget", "interrupted")
_NUM, _NONE = (int, float), type(None)
_JOB_TYPES = dict(id=str, kind=str, argv=list, notebook=(str, _NONE), params=dict, status=str, lane=(str, _NONE),
                  attempts=int, seconds=_NUM, rc=(int, _NONE), started=(*_NUM, _NONE), ended=(*_NUM, _NONE),
                  tail=str, run_dir=(str, _NONE), pid=(int, _NONE))
#: the options and counters a resume reads from batch.json, when there
_STATE_TYPES = dict(concurrent=int, gpus=(str, _NONE), job_timeout_s=(*_NUM, _NONE), budget_s=(*_NUM, _NONE),
                    min_left_s=(*_NUM, _NONE), no_mps=(bool, _NONE), with_checkpoints=(bool, _NONE),
                    resumes=int, lanes_down=(dict, _NONE))
_JSON = {str: "string", int: "integer", float: "number", list: "array", dict: "object", bool: "boolean",
         _NONE: "null"}


def _is(v, types) -> bool:
    types = types if isinstance(types, tuple) else (types,)
    return bool in types if isinstance(v, bool) else isinstance(v, types)  # JSON true is no integer


def read_state(path: Path) -> tuple[dict, list[Job]]:
    """A batch's state (its batch.json, ``path``) and its jobs, each field a resume uses checked.

    Raises:
      BatchError: one line naming the file and what is wrong: unreadable, not JSON, not an object,
        another format, an option of the wrong type, jobs not a list of job objects (a field
        unknown, missing or of the wrong type, an unknown kind or status, an id twice)."""
    def bad(what: str) -> BatchError:
        return BatchError(f"{path}: {what}; not a batch state this batch can resume (nothing in its folder changed)")

    try:
        state = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise bad(f"unreadable ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise bad(f"not UTF-8 text (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise bad(f"not JSON ({e.msg}, line {e.lineno} column {e.colno})") from None
    except (ValueError, RecursionError) as e:
        raise bad(f"not JSON ({e})") from None
    if not isinstance(state, dict):
        raise bad(f"holds a JSON {_JSON.get(type(state), '?')}, not an object")
    if state.get("format") != FORMAT:
        raise bad(f"format {state['format']!r:.40}, not {FORMAT!r}" if "format" in state else f"no format {FORMAT!r}")
    for key, types in _STATE_TYPES.items():
        if key in state and not _is(state[key], types):
            raise bad(f"{key} {state[key]!r:.40} is not {' or '.join(_JSON[t] for t in types)}")
    if not isinstance(state.get("jobs"), list):
        raise bad("no list of jobs" if "jobs" not in state else f"jobs is a JSON {_JSON.get(type(state['jobs']))}, not a list")
    jobs: list[Job] = []
    for i, j in enumerate(state["jobs"]):
        where = f"jobs[{i}]"
        if not isinstance(j, dict):
            raise bad(f"{where} is a JSON {_JSON.get(type(j), '?')}, not a job object")
        if unknown := sorted(set(j) - set(_JOB_TYPES)):
            raise bad(f"{where} has an unknown field {unknown[0]!r:.40}; a job's fields: {', '.join(_JOB_TYPES)}")
        if missing := [k for k in ("id", "kind") if k not in j]:
            raise bad(f"{where} has no {missing[0]!r}")
        for k, v in j.items():
            types = _JOB_TYPES[k] if isinstance(_JOB_TYPES[k], tuple) else (_JOB_TYPES[k],)
            if not _is(v, types):
                raise bad(f"{where}.{k} {v!r:.40} is not {' or '.join(dict.fromkeys(_JSON[t] for t in types))}")
        if not re.fullmatch(r"[A-Za-z0-9_.=-]+", j["id"]) or j["id"] in (".", "..") or j["id"] in {x.id for x in jobs}:
            raise bad(f"{where}.id {j['id']!r:.40} is not one job's folder name (letters, digits, _.=-; once)")
        if j["kind"] not in KINDS or j.get("status", "pending") not in STATUSES:
            raise bad(f"{where}: kind {j['kind']!r:.20} / status {j.get('status', 'pending')!r:.20}; kinds: "
                      f"{', '.join(KINDS)}; statuses: {', '.join(STATUSES)}")
        what = [j.get("notebook")] if j["kind"] == "notebook" else j.get("argv") or [None]
        if not all(isinstance(a, str) and a for a in what):
            raise bad(f"{where}: a {j['kind']} job needs " + ("its notebook" if j["kind"] == "notebook"
                                                               else "argv, a list of words"))
        jobs.append(Job(**j))
    return state, jobs
