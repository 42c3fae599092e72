"""A learner's first minutes, in a real browser: JupyterLab started the way ``make course`` starts it, a notebook
run from the *Run → Run All Cells* menu in headless Chromium, and the course's fine-tuning bar drawn as a widget.

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them) and ``selenium`` (the ``test``
extra). Without them the test is skipped, except in CI (``CI=true``), where it fails.
"""

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).parent / "browser" / "progress_bar.ipynb"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1280,900")
# Upper bounds in seconds for each stage; on a busy 2-core machine the whole test takes 75-90 s.
SERVER_START_S, KERNEL_START_S, RUN_ALL_S = 60, 90, 120
STDERR_OUTPUT = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
# Records, at every change of the page, each progress bar that ipywidgets draws into an output area (its row's text
# and the bar's filled width; even a bar removed again when it closes, as tqdm's leave=False does) and each tqdm bar
# printed as text ("… 2/4 [00:04<00:04, …]"), which JupyterLab overwrites in place and a saved notebook no longer
# shows.
WATCH_BARS = f"""
window.__bars = [];
window.__textBars = [];
const remember = (list, text) => {{ if (list[list.length - 1] !== text) list.push(text); }};
new MutationObserver(() => {{
  for (const bar of document.querySelectorAll('.jp-OutputArea-output .jupyter-widgets .progress-bar')) {{
    const row = bar.closest('.widget-hbox') || bar.closest('.jupyter-widgets');
    remember(window.__bars, row.textContent.replace(/\\s+/g, ' ').trim() + ' | width ' + bar.style.width);
  }}
  for (const out of document.querySelectorAll('{STDERR_OUTPUT}'))
    if (/\\d+\\/\\d+ \\[/.test(out.textContent)) remember(window.__textBars, out.textContent.trim());
}}).observe(document.body, {{childList: true, subtree: true, characterData: true, attributes: true}});
"""
NOTEBOOK_STATE = """
const indicator = document.querySelector('.jp-Notebook-ExecutionIndicator');
const kernel = document.querySelector('.jp-NotebookPanel-toolbar .jp-Toolbar-kernelName');
return {status: indicator ? indicator.dataset.status : null, kernel: kernel ? kernel.textContent.trim() : null,
        prompts: [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')]
                   .map(p => p.textContent.trim())};
"""


def _tools() -> tuple[str, str]:
    """Paths of the browser (Debian's chromium, or the Google Chrome that GitHub's runners ship) and its
    chromedriver; skip (fail in CI) when a piece is missing."""
    chromium, driver = shutil.which("chromium") or shutil.which("google-chrome"), shutil.which("chromedriver")
    missing = [name for name, path in (("chromium", chromium), ("chromium-driver", driver)) if path is None]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (pip install -e '.[test]')")
    if missing:
        reason = f"the browser test needs {', '.join(missing)}: apt-get install chromium chromium-driver"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"{reason} (CI=true: not skipped)")
        pytest.skip(reason)
    return chromium, driver


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def jupyterlab(tmp_path):
    """``jupyter lab FOLDER`` (as ``make course`` runs it) on a copy of the notebook: (base url, token, folder)."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    shutil.copy(NOTEBOOK, folder)
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MLM_COURSE_QUICK": "1",
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    log = tmp_path / "jupyterlab.log"
    command = [str(Path(sys.executable).parent / "jupyter"), "lab", str(folder), "--no-browser",
               "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
               f"--IdentityProvider.token={token}", "--ServerApp.allow_root=True",
               f"--LabApp.user_settings_dir={tmp_path / 'settings'}", f"--LabApp.workspaces_dir={tmp_path / 'ws'}"]
    base = f"http://127.0.0.1:{port}"
    with open(log, "w") as out:
        server = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start:\n{log.read_text()[-3000:]}")
                time.sleep(0.5)
        yield base, token, folder
    finally:
        try:  # shuts the kernels down too
            request = urllib.request.Request(f"{base}/api/shutdown", method="POST",
                                             headers={"Authorization": f"token {token}"})
            urllib.request.urlopen(request, timeout=10)
            server.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def chromium_driver(profile: Path, capabilities: dict | None = None):
    """A headless Chromium driven by selenium, its profile in ``profile``, with ``capabilities`` set."""
    chromium, driver_path = _tools()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    for name, value in (capabilities or {}).items():
        options.set_capability(name, value)
    return webdriver.Chrome(service=Service(driver_path), options=options)


@pytest.fixture
def browser(tmp_path):
    driver = chromium_driver(tmp_path / "chromium")
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver, seconds: float, done, what: str, tmp_path: Path):
    """Poll ``done(driver)`` until it returns something truthy; fail with a screenshot path after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not (result := done(driver)):
        if time.monotonic() > deadline:
            shot = tmp_path / "screenshot.png"
            driver.save_screenshot(str(shot))
            pytest.fail(f"{what} within {seconds} s (screenshot: {shot}; state: {driver.execute_script(NOTEBOOK_STATE)})")
        time.sleep(0.5)
    return result


def _kernel_started(base: str, token: str, driver) -> bool:
    """The server has an idle kernel for the notebook and the page shows it as idle."""
    with urllib.request.urlopen(f"{base}/api/sessions?token={token}", timeout=5) as response:
        sessions = json.load(response)
    idle = any(s["path"].endswith(NOTEBOOK.name) and (s.get("kernel") or {}).get("execution_state") == "idle"
               for s in sessions)
    state = driver.execute_script(NOTEBOOK_STATE)  # the notebook's toolbar names its kernel, its indicator is idle
    return idle and state["kernel"] not in (None, "", "No Kernel") and state["status"] == "idle"


def _finished(driver) -> dict | None:
    """The notebook's state once Run All is over: kernel idle and every code cell run, or a cell failed."""
    state = driver.execute_script(NOTEBOOK_STATE)
    ran = all(re.fullmatch(r"\[\d+\]:", p) for p in state["prompts"])
    failed = "[*]:" not in state["prompts"] and driver.execute_script(
        f"return [...document.querySelectorAll('{STDERR_OUTPUT}')].some(o => o.textContent.includes('Traceback'))")
    return state if state["status"] == "idle" and (ran or failed) else None


def test_run_all_in_jupyterlab_shows_a_widget_progress_bar(browser, jupyterlab, tmp_path):
    from selenium.webdriver.common.by import By

    base, token, folder = jupyterlab
    browser.get(f"{base}/lab/tree/{NOTEBOOK.name}?token={token}")
    _wait(browser, KERNEL_START_S, lambda d: _kernel_started(base, token, d), "the notebook's kernel did not start",
          tmp_path)
    browser.execute_script(WATCH_BARS)
    # make the notebook the current document (JupyterLab 4.6 in headless Chromium does not focus it on load), as a
    # learner's first click in it does: the Run menu acts on the current document
    browser.find_element(By.CSS_SELECTOR, ".jp-NotebookPanel .jp-Cell").click()

    run_menu = next(item for item in browser.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item")
                    if item.text.strip() == "Run")
    run_menu.click()
    run_all = "//li[contains(@class, 'lm-Menu-item')][div[@class='lm-Menu-itemLabel' and text()='Run All Cells']]"
    _wait(browser, 10, lambda d: d.find_elements(By.XPATH, run_all), "the Run menu did not open", tmp_path)[0].click()
    _wait(browser, RUN_ALL_S, _finished, "Run All Cells did not finish", tmp_path)
    bars, text_bars = browser.execute_script("return [window.__bars, window.__textBars]")

    # Save as a learner would, then read what every cell produced from the file.
    browser.find_element(By.CSS_SELECTOR, 'jp-button[data-command="docmanager:save"]').click()
    _wait(browser, 30, lambda d: not d.find_elements(By.CSS_SELECTOR, ".lm-TabBar-tab.jp-mod-current.jp-mod-dirty"),
          "the notebook was not saved", tmp_path)
    cells = [c for c in json.loads((folder / NOTEBOOK.name).read_text())["cells"] if c["cell_type"] == "code"]
    outputs = [o for c in cells for o in c["outputs"]]
    errors = [f"{o['ename']}: {o['evalue']}" for o in outputs if o["output_type"] == "error"]
    assert not errors, f"cells raised {errors}"
    assert all(c["execution_count"] for c in cells), "Run All Cells left cells unexecuted"
    assert not text_bars, f"a progress bar was printed as text, not drawn as a widget: {text_bars[-1]!r}"
    assert bars, "no progress bar was drawn as a widget"
    # tqdm's meter ("k/4 [elapsed<left, rate]") beside a bar filled k/4 (the row's parts update one after another, so
    # look for one consistent state; k > 0 only where a step takes longer than tqdm's 0.1 s refresh interval).
    drawn = [m for row in bars if (m := re.search(r"\b(\d)/4 \[.*\| width (\d+(?:\.\d+)?)%$", row))
             and float(m.group(2)) == 25 * int(m.group(1))]
    assert drawn, f"no widget bar showed tqdm's meter beside a bar filled to match; seen: {bars}"
