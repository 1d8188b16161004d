"""NO_REPLY fuzz: generated reply forms through every delivery mode; what reaches a person.

Usage::

    python benchmarks/noreply_fuzz.py [--forms 400] [--seed 19] [--json OUT]

Generates ``--forms`` replies with a seeded generator (independent of the test suite's
hypothesis strategies): the token in nested wrappers (quotes, typographic quotes,
brackets, emphasis, inline code, code fences with random info strings, HTML, JSON
envelopes with random extra keys, reasons), with invisible format characters inserted
anywhere, fullwidth / mathematical letters, Markdown escapes, random case, special tokens
before and after and whitespace around ("silent" forms); an ordinary text followed by a
trailing token or special token ("cut" forms: only the text may show, nothing when it
has no letter or digit and a token was cut); whitespace or
special tokens only ("blank" forms); ordinary text, sometimes mentioning the token inside
a sentence ("ordinary" forms: shown unchanged).

Each form is the model's reply in four modes: the custom loop invoked and streamed (random
chunk sizes through ``on_delta``), and a LangChain ``create_agent`` invoked and streamed
(``stream_mode="messages"``, random chunk size). Counted per form and per (form, mode), target 0:

* ``token_shown``: the shown text still holds the token (decision text, case-insensitive)
  for a silent, cut or blank form;
* ``special_shown``: the shown text holds a special token;
* ``blank_message``: a message that is empty or whitespace reached the person (a
  LangChain reply dropped as silent is the flagged placeholder, not a message);
* ``stream_differs``: the streamed text differs from the invoked text;
* ``wrong_text``: a cut form did not show exactly its text, or an ordinary form was
  changed, or a silent form showed anything.

Prints, per counter, how many forms hit it in at least one mode and the count per mode,
and writes them (with the settings and a few examples) to ``--json``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import unicodedata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

TOKEN = "NO_REPLY"
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u180e", "\u200e"]
SPECIAL_END = [
    "<|endoftext|>",
    "<|im_end|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<|end|>",
    "<|return|>",
    "</s>",
    "<eos>",
    "<end_of_turn>",
    "<｜end▁of▁sentence｜>",
]
SPECIAL_START = ["<s>", "<|im_start|>assistant\n", "<start_of_turn>model\n", "<|begin_of_text|>"]
PAIRS = [
    ('"', '"'), ("'", "'"), ("“", "”"), ("‘", "’"), ("«", "»"), ("‹", "›"), ("„", "“"),
    ("「", "」"), ("(", ")"), ("[", "]"), ("<", ">"), ("*", "*"), ("**", "**"), ("_", "_"),
    ("__", "__"), ("~~", "~~"), ("`", "`"), ("``", "``"),
]  # fmt: skip
WORDS = (
    "the gateway runs on port 8443 I saved your note about tea Lisbon meeting tomorrow "
    "reply no yes done noted thanks Ada billing service deployed café naïve 東京 😀"
).split()


def token_variant(rng: random.Random) -> str:
    out = []
    for ch in TOKEN:
        ch = ch.lower() if rng.random() < 0.3 else ch
        roll = rng.random()
        if roll < 0.15 and 0x21 <= ord(ch) < 0x7F:
            ch = chr(ord(ch) + 0xFEE0)  # fullwidth
        elif roll < 0.25 and ch.isalpha():
            base = 0x1D400 if ch.isupper() else 0x1D41A  # mathematical bold
            ch = chr(base + ord(ch) - (65 if ch.isupper() else 97))
        out.append(ch)
    text = "".join(out)
    return text.replace("_", "\\_") if rng.random() < 0.1 else text


def info_string(rng: random.Random) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789+-. {}:=\"") for _ in range(rng.randint(0, 10)))


def wrap(rng: random.Random, inner: str) -> str:
    kind = rng.choice(["pair", "pair", "pair", "fence", "html", "json", "prefix", "suffix", "space"])
    if kind == "pair":
        left, right = rng.choice(PAIRS)
        return left + inner + right
    if kind == "fence":
        fence = rng.choice(["```", "````", "~~~"])
        return f"{fence}{info_string(rng)}\n{inner}\n{fence}"
    if kind == "html":
        tag = rng.choice(["b", "i", "p", "span", "code", "strong"])
        return f"<{tag}>{inner}</{tag}>"
    if kind == "json":
        items: list[tuple[str, Any]] = [
            (rng.choice(["reason", "note", "why", "confidence", "meta", "x"]) + str(i),
             rng.choice([None, True, 3, "nothing new", [1, "a"], {"k": "v"}]))
            for i in range(rng.randint(0, 3))
        ]  # fmt: skip
        key = rng.choice(["action", "reply", "response", "status", "result", "decision"])
        items.insert(rng.randint(0, len(items)), (key, inner))
        return json.dumps(dict(items), ensure_ascii=rng.random() < 0.5)
    if kind == "prefix":
        return rng.choice(["> ", "# ", "- ", "* ", "\n"]) + inner
    if kind == "suffix":
        return inner + rng.choice([".", "!", "...", "\n", "。"])
    return rng.choice([" ", "\n", "\t"]) + inner


def sprinkle(rng: random.Random, text: str, count: int) -> str:
    for _ in range(count):
        at = rng.randint(0, len(text))
        text = text[:at] + rng.choice(INVISIBLE) + text[at:]
    return text


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(1, 9))]
    text = " ".join(words)
    return text[0].upper() + text[1:] + rng.choice([".", "!", "?", ""])


def silent_form(rng: random.Random) -> str:
    text = token_variant(rng)
    if rng.random() < 0.25:
        text += rng.choice([": ", " - ", " — "]) + sentence(rng)
    for _ in range(rng.randint(0, 4)):
        text = wrap(rng, text)
    text = sprinkle(rng, text, rng.randint(0, 3))
    if rng.random() < 0.3:
        text = rng.choice(SPECIAL_START) + text
    if rng.random() < 0.4:
        text += rng.choice(SPECIAL_END)
    return rng.choice(["", " ", "\n"]) + text + rng.choice(["", " ", "\n\n"])


def cut_form(rng: random.Random) -> tuple[str, str]:
    body = sentence(rng)
    tail = ""
    if rng.random() < 0.7:
        token = token_variant(rng).replace("\\_", "_")
        left, right = rng.choice([("", ""), ("**", "**"), ("“", "”"), ("`", "`"), ("(", ")")])
        tail += rng.choice([" ", "\n\n", " "]) + sprinkle(rng, left + token + right, rng.randint(0, 2))
    if rng.random() < 0.6 or not tail:
        tail += rng.choice(["", "\n"]) + rng.choice(SPECIAL_END)
    return body + tail, body


def blank_form(rng: random.Random) -> str:
    parts = [rng.choice([" ", "\n", "\t", *INVISIBLE]) for _ in range(rng.randint(0, 4))]
    parts += [rng.choice(SPECIAL_END + SPECIAL_START) for _ in range(rng.randint(0, 2))]
    rng.shuffle(parts)
    return "".join(parts)


def ordinary_form(rng: random.Random) -> str:
    text = sentence(rng)
    if rng.random() < 0.4:
        text = f"{sentence(rng)} The {rng.choice([TOKEN, '`NO_REPLY`', 'no_reply'])} token {sentence(rng).lower()}"
    return sprinkle(rng, text, 1) if rng.random() < 0.2 else text


def generate(count: int, seed: int) -> list[tuple[str, str, str | None]]:
    """``(kind, reply, expected shown text or None)`` for ``count`` forms."""
    rng = random.Random(seed)
    out: list[tuple[str, str, str | None]] = []
    for i in range(count):
        kind = ["silent", "silent", "cut", "blank", "ordinary"][i % 5]
        if kind == "silent":
            out.append((kind, silent_form(rng), None))
        elif kind == "cut":
            reply, body = cut_form(rng)
            # The rule: a reply left without a letter or digit once the token is cut is
            # silent ("😀 NO_REPLY").
            shown = body if "no_reply" not in decision(reply) or any(c.isalnum() for c in body) else None
            out.append((kind, reply, shown))
        elif kind == "blank":
            out.append((kind, blank_form(rng), None))
        else:
            text = ordinary_form(rng)
            out.append((kind, text, text))
    return out


def decision(text: str) -> str:
    kept = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return unicodedata.normalize("NFKC", kept).replace("\\_", "_").casefold()


def chunks(rng: random.Random, text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        step = rng.randint(1, 7)
        out.append(text[pos : pos + step])
        pos += step
    return out


class Harness:
    """One workspace; a custom loop and a LangChain agent whose model replies ``self.reply``."""

    def __init__(self, root: Path, seed: int) -> None:
        from langchain.agents import create_agent
        from langgraph.checkpoint.memory import InMemorySaver

        from memmw import Memory, MemoryConfig
        from memmw.adapters.custom_loop import MemoryAgent
        from memmw.adapters.langchain import LangChainMemoryMiddleware
        from memmw.config import FlushConfig
        from memmw.middleware import MemoryMiddleware
        from memmw.text.tokens import TokenCounter
        from tests.adapters.lc_fakes import scripted

        ws = root / "ws"
        (ws / "memory").mkdir(parents=True)
        (ws / "MEMORY.md").write_text("# Memory\n- The gateway runs on port 8443.\n")
        config = MemoryConfig(provider="none", flush=FlushConfig(enabled=False))
        self.memory = Memory(workspace=ws, state_dir=root / "state", config=config)
        core = MemoryMiddleware(self.memory, token_counter=TokenCounter(use_tiktoken=False))
        self.reply = ""
        self.rng = random.Random(seed)

        def loop_model(messages: list[dict[str, Any]], tools: Any = None) -> Any:
            return self.reply

        def stream_model(messages: list[dict[str, Any]], tools: Any = None) -> Any:
            return iter(chunks(self.rng, self.reply))

        self.loop = MemoryAgent(loop_model, self.memory, middleware=core)
        self.stream_loop = MemoryAgent(stream_model, self.memory, middleware=core)
        self.model = scripted(lambda messages: self.reply)
        mw = LangChainMemoryMiddleware(middleware=core)
        self.agent = create_agent(self.model, middleware=[mw], checkpointer=InMemorySaver())
        self.threads = 0

    def close(self) -> None:
        self.memory.close()

    def custom_invoke(self) -> list[str]:
        self.loop.messages = []
        shown = self.loop.chat("hi")
        return [] if shown is None else [shown]

    def custom_stream(self) -> list[str]:
        self.stream_loop.messages = []
        deltas: list[str] = []
        self.stream_loop.chat("hi", on_delta=deltas.append)
        return ["".join(deltas)] if deltas else []

    def _cfg(self) -> dict[str, Any]:
        self.threads += 1
        return {"configurable": {"thread_id": f"fuzz-{self.threads}"}}

    def langchain_invoke(self) -> list[str]:
        from langchain_core.messages import AIMessage, HumanMessage

        from memmw.adapters.langchain_no_reply import is_dropped_reply

        result = self.agent.invoke({"messages": [HumanMessage("hi")]}, self._cfg())
        last = result["messages"][-1]
        if not isinstance(last, AIMessage) or is_dropped_reply(last):
            return []
        return [last.text]

    def langchain_stream(self) -> list[str]:
        from langchain_core.messages import HumanMessage

        self.model.chunk_chars = self.rng.randint(1, 7)
        pieces = [
            chunk.text
            for chunk, _meta in self.agent.stream(
                {"messages": [HumanMessage("hi")]}, self._cfg(), stream_mode="messages"
            )
            if chunk.type == "AIMessageChunk"
        ]
        text = "".join(pieces)
        return [text] if text else []


MODES = ("custom_invoke", "custom_stream", "langchain_invoke", "langchain_stream")
COUNTERS = ("token_shown", "special_shown", "blank_message", "stream_differs", "wrong_text")


def run(count: int, seed: int) -> dict[str, Any]:
    forms = generate(count, seed)
    by_mode = {mode: dict.fromkeys(COUNTERS, 0) for mode in MODES}
    forms_with = dict.fromkeys(COUNTERS, 0)
    examples: dict[str, list[dict[str, Any]]] = {c: [] for c in COUNTERS}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        h = Harness(Path(tmp), seed)
        try:
            for kind, reply, expected in forms:
                h.reply = reply
                shown = {mode: getattr(h, mode)() for mode in MODES}
                hit_here: set[str] = set()
                for mode, messages in shown.items():
                    text = "".join(messages)
                    found = {
                        "token_shown": kind != "ordinary" and "no_reply" in decision(text),
                        "special_shown": any(s in text for s in (*SPECIAL_END, *SPECIAL_START, "<|")),
                        "blank_message": any(not m.strip() for m in messages),
                        "stream_differs": mode.endswith("stream")
                        and text != "".join(shown[mode.replace("stream", "invoke")]),
                        "wrong_text": text != (expected or ""),
                    }
                    for name, hit in found.items():
                        if hit:
                            by_mode[mode][name] += 1
                            hit_here.add(name)
                            if len(examples[name]) < 5:
                                examples[name].append({"mode": mode, "kind": kind, "reply": reply, "shown": text})
                for name in hit_here:
                    forms_with[name] += 1
        finally:
            h.close()
    return {
        "forms": count,
        "seed": seed,
        "modes": list(MODES),
        "kinds": {k: sum(1 for f in forms if f[0] == k) for k in ("silent", "cut", "blank", "ordinary")},
        "forms_with": forms_with,
        "by_mode": by_mode,
        "examples": examples,
        "seconds": round(time.perf_counter() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--forms", type=int, default=400)
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument("--json", type=Path, default=None, help="write the report here")
    args = parser.parse_args(argv)
    report = run(args.forms, args.seed)
    print(f"{report['forms']} forms x {len(MODES)} modes, seed {report['seed']}, {report['kinds']}")
    for name in COUNTERS:
        modes = ", ".join(f"{m} {report['by_mode'][m][name]}" for m in MODES)
        print(f"{name}: {report['forms_with'][name]} forms ({modes})")
    print(f"seconds: {report['seconds']}")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
