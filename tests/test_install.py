"""Install without make: the wheel and sdist build, and the wheel alone (with the ``offline``
extra) is all a new virtual environment needs to index and search a workspace offline; and
`make demo` says how to run what it installed.

The install test is slow (one to three minutes: a build, a fresh venv, pip). pip fetches the dependencies from
the configured package index (CI has PyPI; pip's cache makes a second run fast).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
         timeout: float = 900) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert proc.returncode == 0, (
        f"{' '.join(cmd)} exited {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\n"
        f"stderr:\n{proc.stderr[-4000:]}"
    )
    return proc


def _clean_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a new user: no memmw settings, keys or source checkout on the path."""
    env = {
        k: v for k, v in os.environ.items()
        if not k.startswith("MEMMW") and k not in (
            "PYTHONPATH", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "VIRTUAL_ENV",
        )
    }
    env.update(HOME=str(tmp_path / "home"), XDG_STATE_HOME=str(tmp_path / "state"),
               HF_HUB_OFFLINE="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


@pytest.mark.slow
def test_wheel_with_the_offline_extra_indexes_and_searches_offline(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    src = tmp_path / "src"
    # Build from a copy, so the checkout gets no build/ or egg-info folders.
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".venv", ".git", ".cache", "__pycache__", "*.egg-info", "build", "dist",
        ".mypy_cache", ".ruff_cache", ".pytest_cache", ".memmw-demo", "benchmarks",
    ))
    env = _clean_env(tmp_path)
    # The build runs with this interpreter's path (where the test extra installed `build`).
    _run([sys.executable, "-m", "build", "--outdir", str(dist), str(src)],
         env={**env, "PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    wheels = sorted(dist.glob("memmw-*.whl"))
    sdists = sorted(dist.glob("memmw-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in dist.iterdir())
    with zipfile.ZipFile(wheels[0]) as whl:
        names = set(whl.namelist())
    assert "memmw/py.typed" in names and "memmw/cli/__init__.py" in names
    assert not any(n.startswith(("tests/", "benchmarks/")) for n in names)

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], env=env)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    _run([str(bindir / "python"), "-m", "pip", "install", "--quiet", f"{wheels[0]}[offline]"],
         env=env)

    workspace = tmp_path / "workspace"
    shutil.copytree(ROOT / "examples" / "workspace", workspace)
    memmw = str(bindir / "memmw")
    run_env = {**env, "HTTPS_PROXY": "http://127.0.0.1:9",
               "HTTP_PROXY": "http://127.0.0.1:9"}  # any network use fails fast
    index = _run([memmw, "-w", str(workspace), "index", "--json"], env=run_env, cwd=tmp_path)
    report = json.loads(index.stdout)
    assert report["provider"] == "offline" and report["pendingVectors"] == 0
    assert report["sync"]["chunksTotal"] > 0 and report["embedded"] == report["sync"]["chunksTotal"]
    search = _run([memmw, "-w", str(workspace), "search", "which machine runs the gateway?",
                   "--json"], env=run_env, cwd=tmp_path)
    payload = json.loads(search.stdout)
    assert payload["mode"] == "hybrid" and payload["provider"] == "offline"
    assert payload["results"][0]["path"] == "MEMORY.md"
    assert "Mac Studio" in payload["results"][0]["snippet"]


def test_make_demo_ends_by_saying_how_to_run_memmw(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.fail("this test needs make (the README's quick start uses it)")
    proc = subprocess.run(["make", "-n", "demo", "VENV=/opt/venv-x"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=True)
    tail = proc.stdout.strip().splitlines()[-5:]
    assert any(". /opt/venv-x/bin/activate" in line for line in tail), tail
    assert any("/opt/venv-x/bin/memmw" in line for line in tail), tail
