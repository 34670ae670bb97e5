#!/usr/bin/env python3
"""Oracle for ragd's Jinja interpreter (tests/engine_io/jinja_parity_test.cpp).

Renders templates the way transformers renders a model's chat_template: python jinja2's
ImmutableSandboxedEnvironment with trim_blocks=True, lstrip_blocks=True, the loopcontrols
extension and a {% generation %} block (HF's AssistantTracker renders its body through a call
block), the globals raise_exception(msg) and strftime_now(fmt), and HF's own tojson filter
(json.dumps with ensure_ascii=False, keys in insertion order, no HTML escaping). strftime_now
formats a fixed naive datetime, 2024-07-26 09:05:03.123456, so both sides agree.

Usage: render_jinja.py IN.json OUT.json
  IN:  {"cases": [{"template": "...", "context": {...}}, ...]}
  OUT: [{"ok": true, "out": "..."} | {"ok": false, "error": "..."}, ...] in case order
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

FIXED_NOW = datetime(2024, 7, 26, 9, 5, 3, 123456)


class GenerationBlock(Extension):
    """{% generation %}...{% endgeneration %} renders its body, as HF's AssistantTracker does."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render_body"), [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return FIXED_NOW.strftime(fmt)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlock, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    env = make_env()
    results = []
    for case in cases:
        try:
            out = env.from_string(case["template"]).render(**case.get("context", {}))
            results.append({"ok": True, "out": out})
        except Exception as e:  # noqa: BLE001 - every failure is a result
            results.append({"ok": False, "error": f"{type(e).__name__}: {e}"})
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(results, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
