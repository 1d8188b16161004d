"""Write the README's LoCoMo table from the JSON ``benchmarks/locomo.py --json`` wrote.

    python benchmarks/readme_tables.py          # rewrite the table in README.md
    python benchmarks/readme_tables.py --check  # exit 1 when README.md differs

Each row is one ``benchmarks/results/locomo-*.json`` file, which records the command that
produced it; re-run that command, then this script. ``tests/test_readme.py`` fails when
the README and the committed results differ.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RESULTS = ROOT / "benchmarks" / "results"

#: README row label -> the results file it shows; the row in bold is the default.
LOCOMO_ROWS = {
    "keyword-only (default: bounded decay)": "locomo-keyword.json",
    "keyword-only, the original's decay (`TemporalDecayConfig.classic()`)": (
        "locomo-keyword-classic-decay.json"
    ),
    "keyword-only, no decay": "locomo-keyword-no-decay.json",
    'keyword-only, `keyword_backend="fts5"`': "locomo-keyword-fts5.json",
    "hybrid, offline model, `normalized` fusion (default)": "locomo-hybrid.json",
    "hybrid, offline model, `rrf`": "locomo-hybrid-rrf.json",
    "hybrid, offline model, the original merge (`HybridConfig.classic()`)": (
        "locomo-hybrid-classic.json"
    ),
}
BOLD = "hybrid, offline model, `normalized` fusion (default)"
LOCOMO_COLUMNS = ["overall", "multi-hop", "temporal", "open-domain", "single-hop", "adversarial"]
HEADER = "| configuration | " + " | ".join(LOCOMO_COLUMNS) + " |"


def locomo_table(results: Path = RESULTS) -> str:
    """The table's Markdown, header included, from the results files."""
    lines = [HEADER, "|" + "---|" * (len(LOCOMO_COLUMNS) + 1)]
    for label, name in LOCOMO_ROWS.items():
        metrics = json.loads((results / name).read_text(encoding="utf-8"))["metrics"]
        cells = [f"{metrics[c]['snippet_hit']:.3f}" for c in LOCOMO_COLUMNS]
        if label == BOLD:
            label, cells[0] = f"**{label}**", f"**{cells[0]}**"
        lines.append("| " + " | ".join([label, *cells]) + " |")
    return "\n".join(lines)


def with_table(readme: str, table: str) -> str:
    """``readme`` with its LoCoMo table (the one under ``HEADER``) replaced by ``table``."""
    start = readme.index(HEADER)
    end = start
    for line in readme[start:].splitlines(keepends=True):
        if not line.startswith("|"):
            break
        end += len(line)
    return readme[:start] + table + "\n" + readme[end:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if README.md differs")
    args = parser.parse_args()
    text = README.read_text(encoding="utf-8")
    new = with_table(text, locomo_table())
    if args.check:
        if new != text:
            print("README.md's LoCoMo table differs from benchmarks/results", file=sys.stderr)
            return 1
        return 0
    if new != text:
        README.write_text(new, encoding="utf-8")
        print("README.md: LoCoMo table rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
