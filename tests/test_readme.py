"""README.md runs itself: every ``sh``, ``python`` and ``toml`` block is run as written, or
says next to it why it is not; and the LoCoMo table is the JSON its commands wrote.

Each such block carries a marker on the line before its fence:

* ``<!-- readme: run in examples/workspace -->``: a shell block run line by line in a copy
  of the sample workspace;
* ``<!-- readme: run from the checkout -->``: run in a folder holding a copy of
  ``examples/`` (the checkout's paths), ``.venv/bin/`` being this test's venv;
* ``<!-- readme: run in an empty folder -->``;
* ``<!-- readme: run as memmw.toml of examples/workspace -->``: a configuration block,
  written as the sample workspace's ``memmw.toml``; ``memmw index`` and ``memmw search``
  must then succeed;
* ``<!-- readme: not run: REASON -->``: the reason is shown to the reader of the source.

Blocks run network-free (``HF_HUB_OFFLINE=1``, no API key, a temporary ``HOME`` and state
root) with ``memmw`` on ``PATH`` from this interpreter's venv and this checkout first on
``PYTHONPATH``. Every command must exit 0, and a search, facts or get must find something;
a line whose comment says it runs "until Ctrl-C" gets a SIGINT once it has printed
something and must exit 130. A ``print(...)``
whose comment shows a value must print it. Every Python block, run or not, must compile
and use no undefined name (ruff's F821).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
CHECKED = {"sh", "python", "toml"}
# Blocks no test runs by nature: the diagram (no language), JSON client configurations
# (parsed below) and the Markdown syntax example.
KNOWN = CHECKED | {"", "json", "markdown"}
RUN_SETUPS = {
    "run in examples/workspace",
    "run from the checkout",
    "run in an empty folder",
    "run as memmw.toml of examples/workspace",
}
MARKER = re.compile(r"^<!-- readme: (.+?) -->$")
TIMEOUT = 180
QUERIES = ("memmw search ", "memmw facts ", "memmw get ")


@dataclass(frozen=True)
class Block:
    lang: str
    line: int  # of the opening fence
    text: str
    marker: str | None

    @property
    def id(self) -> str:
        return f"L{self.line}-{self.lang}"


def readme_blocks(text: str) -> tuple[list[Block], list[int]]:
    """The fenced blocks in order, and the line numbers of markers that precede no block."""
    lines = text.split("\n")
    blocks: list[Block] = []
    stray: list[int] = []
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\S*)\s*$", lines[i])
        if fence is None:
            if MARKER.match(lines[i]) and not (
                i + 1 < len(lines) and lines[i + 1].startswith("```")
            ):
                stray.append(i + 1)
            i += 1
            continue
        start = i
        i += 1
        while i < len(lines) and lines[i].rstrip() != "```":
            i += 1
        marker = MARKER.match(lines[start - 1]) if start else None
        blocks.append(Block(fence.group(1), start + 1, "\n".join(lines[start + 1 : i]) + "\n",
                            marker.group(1) if marker else None))
        i += 1
    return blocks, stray


BLOCKS, STRAY_MARKERS = readme_blocks(README.read_text(encoding="utf-8"))
RUN = [b for b in BLOCKS if b.lang in CHECKED and b.marker in RUN_SETUPS]


def test_every_block_is_run_or_says_why_not() -> None:
    assert BLOCKS, "no fenced block found in README.md"
    problems = [f"README.md:{line}: a marker with no block after it" for line in STRAY_MARKERS]
    for b in BLOCKS:
        where = f"README.md:{b.line} ({b.lang or 'no language'})"
        if b.lang not in KNOWN:
            problems.append(f"{where}: unknown block language; use one of {sorted(KNOWN)}")
        elif b.lang in CHECKED:
            if b.marker is None:
                problems.append(f"{where}: no '<!-- readme: ... -->' marker before the block")
            elif b.marker not in RUN_SETUPS and not re.fullmatch(r"not run: \S.{9,}", b.marker):
                problems.append(f"{where}: marker {b.marker!r} is neither a run setup "
                                f"{sorted(RUN_SETUPS)} nor 'not run: <reason>'")
        elif b.marker is not None:
            problems.append(f"{where}: a marker on a block this test never runs")
    assert not problems, "\n".join(problems)
    # The setups used for the TOML blocks fit them, and the shell/Python ones fit theirs.
    for b in RUN:
        assert (b.lang == "toml") == (b.marker == "run as memmw.toml of examples/workspace"), b.id


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "python"], ids=lambda b: b.id)
def test_python_blocks_compile_and_define_every_name(block: Block) -> None:
    """Run or not, a Python block is complete: it compiles and uses no undefined name."""
    compile(block.text, f"README.md:{block.line}", "exec")
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "F821,F822,F823",
         "--output-format", "concise", "--stdin-filename", f"README_L{block.line}.py", "-"],
        input=block.text, capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 0, f"README.md:{block.line}:\n{proc.stdout}{proc.stderr}"


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang in ("toml", "json")],
                         ids=lambda b: b.id)
def test_configuration_blocks_parse(block: Block) -> None:
    if block.lang == "json":
        json.loads(block.text)
        return
    data = tomllib.loads(block.text)
    named = re.search(r"examples/config/[\w.-]+\.toml", block.marker or "")
    if named:  # a worked configuration: the README shows the file the stub test runs
        assert data == tomllib.loads((ROOT / named.group(0)).read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------------------
# Running the blocks


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One HOME and state root for the module: later blocks reuse earlier embeddings."""
    root = tmp_path_factory.mktemp("readme")
    (root / "home").mkdir()
    return root


def _env(shared: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items()
        if not k.startswith("MEMMW") and k not in (
            "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "PYTHONPATH",
        )
    }
    env.update(
        HOME=str(shared / "home"), XDG_STATE_HOME=str(shared / "state"),
        HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
        PATH=str(BIN) + os.pathsep + env.get("PATH", ""),
        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    )
    return env


def _folder(block: Block, tmp_path: Path) -> Path:
    if block.marker in ("run in examples/workspace", "run as memmw.toml of examples/workspace"):
        cwd = tmp_path / "workspace"
        shutil.copytree(ROOT / "examples" / "workspace", cwd)
    elif block.marker == "run from the checkout":
        cwd = tmp_path / "checkout"
        shutil.copytree(ROOT / "examples", cwd / "examples")
    else:
        cwd = tmp_path / "empty"
        cwd.mkdir()
    return cwd


def _commands(text: str) -> list[str]:
    """Shell lines, continuation lines joined; blank and comment-only lines dropped."""
    out: list[str] = []
    pending = ""
    for line in text.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        line = pending + line
        pending = ""
        if line.strip() and not line.lstrip().startswith("#"):
            out.append(line)
    return out


def _check(cmd: str, proc: subprocess.CompletedProcess[str], expected: int = 0) -> None:
    assert proc.returncode == expected, (
        f"{cmd!r} exited {proc.returncode} (expected {expected})\n"
        f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    )


def _run_until_ctrl_c(cmd: str, cwd: Path, env: dict[str, str]) -> None:
    # exec: the command itself gets the SIGINT and gives the exit code, as from a terminal.
    proc = subprocess.Popen(["sh", "-c", "exec " + cmd], cwd=cwd,
                            env={**env, "PYTHONUNBUFFERED": "1"},
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    # A command that never prints is killed after TIMEOUT (and the test fails).
    guard = threading.Timer(TIMEOUT, os.killpg, (proc.pid, signal.SIGKILL))
    guard.start()
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # it started and said what it does
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        guard.cancel()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert first, f"{cmd!r} printed nothing: {out}"
    _check(cmd, subprocess.CompletedProcess(cmd, proc.returncode, first + out, ""), 130)


def _run_shell(block: Block, cwd: Path, env: dict[str, str]) -> None:
    for cmd in _commands(block.text):
        cmd = re.sub(r"(?<![\w/.])\.venv/bin/", str(BIN) + "/", cmd)
        if "until Ctrl-C" in cmd:
            _run_until_ctrl_c(cmd, cwd, env)
            continue
        proc = subprocess.run(["sh", "-c", cmd], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=TIMEOUT, check=False)
        _check(cmd, proc)
        # A query finds something: the example fits its folder.
        if cmd.startswith(QUERIES):
            assert proc.stdout.strip(), f"{cmd!r} found nothing: {proc.stderr[-3000:]}"


def _run_python(block: Block, cwd: Path, env: dict[str, str], tmp_path: Path) -> None:
    script = tmp_path / f"readme_{block.id}.py"
    script.write_text(block.text, encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script)], cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)
    _check(f"README.md:{block.line}", proc)
    for shown in re.findall(r"^\s*print\(.*\)\s+#\s*(.+?)\s*$", block.text, re.M):
        assert shown in proc.stdout, f"README.md:{block.line} shows {shown!r}:\n{proc.stdout}"


def _run_config(block: Block, cwd: Path, env: dict[str, str]) -> None:
    (cwd / "memmw.toml").write_text(block.text, encoding="utf-8")
    for cmd in (["memmw", "index"], ["memmw", "search", "which machine runs the gateway?"]):
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=TIMEOUT, check=False)
        _check(" ".join(cmd) + f" with README.md:{block.line} as memmw.toml", proc)


@pytest.mark.parametrize("block", RUN, ids=lambda b: b.id)
def test_readme_block_runs_as_written(block: Block, shared: Path, tmp_path: Path) -> None:
    cwd = _folder(block, tmp_path)
    env = _env(shared)
    if block.lang == "sh":
        _run_shell(block, cwd, env)
    elif block.lang == "python":
        _run_python(block, cwd, env, tmp_path)
    else:
        _run_config(block, cwd, env)


# ---------------------------------------------------------------------------------------
# The LoCoMo table is the JSON its commands wrote


def _tables() -> Any:
    spec = importlib.util.spec_from_file_location(
        "readme_tables", ROOT / "benchmarks" / "readme_tables.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_locomo_table_equals_the_committed_results() -> None:
    """benchmarks/readme_tables.py writes the table from the results; the README holds
    exactly what it writes, and every results file is a row."""
    tables = _tables()
    results = ROOT / "benchmarks" / "results"
    assert {p.name for p in results.glob("locomo-*.json")} == set(tables.LOCOMO_ROWS.values())
    text = README.read_text(encoding="utf-8")
    assert tables.with_table(text, tables.locomo_table()) == text, (
        "README's LoCoMo table differs from benchmarks/results: run"
        " python benchmarks/readme_tables.py"
    )


def test_the_table_writer_notices_a_changed_figure(tmp_path: Path) -> None:
    tables = _tables()
    for name in tables.LOCOMO_ROWS.values():
        shutil.copy(ROOT / "benchmarks" / "results" / name, tmp_path / name)
    one = tmp_path / "locomo-keyword.json"
    data = json.loads(one.read_text(encoding="utf-8"))
    data["metrics"]["temporal"]["snippet_hit"] += 0.01
    one.write_text(json.dumps(data), encoding="utf-8")
    text = README.read_text(encoding="utf-8")
    changed = tables.with_table(text, tables.locomo_table(tmp_path))
    assert changed != text and len(changed.splitlines()) == len(text.splitlines())


# ---------------------------------------------------------------------------------------
# The parser every check above relies on


_prose = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=30).filter(
    lambda t: not t.startswith(("```", "<!--"))
)
_item = st.one_of(
    st.tuples(st.just("prose"), st.lists(_prose, min_size=1, max_size=3)),
    st.tuples(st.just("stray"), st.sampled_from(["not run: a reason here", "run in x"])),
    st.tuples(
        st.just("block"),
        st.sampled_from(["", "sh", "python", "toml", "json", "bash"]),
        st.lists(_prose, max_size=4),
        st.one_of(st.none(), st.sampled_from(["run in an empty folder", "not run: because"])),
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_item, max_size=8))
def test_property_the_parser_finds_every_block_and_every_stray_marker(items: list) -> None:
    lines: list[str] = []
    blocks: list[tuple[str, int, str, str | None]] = []
    stray: list[int] = []
    for item in items:
        lines.append("")  # a blank line between items, as Markdown wants
        if item[0] == "prose":
            lines.extend(item[1])
        elif item[0] == "stray":
            stray.append(len(lines) + 1)
            lines += [f"<!-- readme: {item[1]} -->", "text"]
        else:
            _, lang, body, marker = item
            if marker is not None:
                lines.append(f"<!-- readme: {marker} -->")
            blocks.append((lang, len(lines) + 1, "\n".join(body) + "\n", marker))
            lines += ["```" + lang, *body, "```"]
    found, found_stray = readme_blocks("\n".join(lines) + "\n")
    assert [(b.lang, b.line, b.text, b.marker) for b in found] == blocks
    assert found_stray == stray
