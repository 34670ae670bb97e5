#!/usr/bin/python3
"""Independent check of structured outputs: reads the JSON lines the structured-output test wrote
({"kind", "spec", "output", "finish"}) and validates every output with Debian's python3-jsonschema
(Draft 2020-12, format checks on), Python's re.fullmatch and list membership. Prints a summary
line per kind and one line per failure; exit status 1 when any output fails, 77 when jsonschema
is missing (the test reports a skip)."""
import datetime
import json
import re
import sys

try:
    import jsonschema
except ImportError:
    print("SKIP: python3-jsonschema is not installed")
    sys.exit(77)


def make_checker():
    """Draft 2020-12's format checker. Without Debian's (absent) rfc3339-validator it does not check
    date-time and time: those are checked here with datetime.fromisoformat (Python 3.11 reads
    RFC 3339 with "Z" and offsets), stricter than RFC 3339 where they differ."""
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    if "date-time" not in checker.checkers:
        def is_datetime(instance):
            if not isinstance(instance, str):
                return True
            return "T" in instance and bool(datetime.datetime.fromisoformat(instance))

        def is_time(instance):
            if not isinstance(instance, str):
                return True
            return bool(datetime.datetime.fromisoformat("1970-01-01T" + instance))

        checker.checks("date-time", raises=ValueError)(is_datetime)
        checker.checks("time", raises=ValueError)(is_time)
    return checker


# The tool-call formats, read independently of ragd's parser: the calls' opening, each call's
# opening / closing, the separator between calls, the closing of the list, the arguments' key.
TOOL_FORMATS = {
    "hermes": ("<tool_call>", "<tool_call>\n", "\n</tool_call>", "\n", "", "arguments"),
    "llama3_json": ("{", "", "", "; ", "", "parameters"),
    "mistral": ("[TOOL_CALLS][", "", "", ", ", "]", "arguments"),
}


def read_tool_calls(fmt, out):
    """(text before the calls, [(name, arguments)]); raises ValueError when the calls are malformed."""
    trigger, begin, end, sep, list_end, args_key = TOOL_FORMATS[fmt]
    at = out.find(trigger) if fmt != "llama3_json" else (0 if out.startswith("{") else -1)
    if at < 0:
        return out, []
    s, i, calls = out[at:], 0, []
    if fmt == "mistral":
        i = len(trigger)
    dec = json.JSONDecoder()
    while True:
        if not s.startswith(begin, i):
            raise ValueError("no call opening at %d" % i)
        obj, i = dec.raw_decode(s, i + len(begin))
        if not s.startswith(end, i):
            raise ValueError("no call closing at %d" % i)
        i += len(end)
        if list(obj.keys()) != ["name", args_key]:
            raise ValueError("call keys %r" % list(obj.keys()))
        calls.append((obj["name"], obj[args_key]))
        if s.startswith(sep, i) and i + len(sep) < len(s):
            i += len(sep)
            continue
        if s[i:] != list_end:
            raise ValueError("text after the calls: %r" % s[i:][:40])
        return out[:at], calls


def text_only(spec, out):
    """An answer of free text that started no call (tool_choice auto)."""
    if not spec.get("text"):
        return False
    if spec["format"] == "llama3_json":
        return not out.lstrip().startswith("{")
    return TOOL_FORMATS[spec["format"]][0] not in out


def check_tool_calls(spec, out, checker):
    text, calls = read_tool_calls(spec["format"], out)
    if not spec.get("text") and (text or not calls):
        raise ValueError("calls required, got text %r" % text[:40])
    if calls and not (spec["min_calls"] <= len(calls) and (spec["max_calls"] == 0 or len(calls) <= spec["max_calls"])):
        raise ValueError("%d calls outside [%d, %d]" % (len(calls), spec["min_calls"], spec["max_calls"]))
    tools = {t["name"]: t.get("parameters", {"type": "object", "properties": {}, "additionalProperties": False}) for t in spec["tools"]}
    for name, args in calls:
        if name not in tools:
            raise ValueError("unknown tool %r" % name)
        jsonschema.Draft202012Validator(tools[name], format_checker=checker).validate(args)
        extra = set(args) - set(tools[name].get("properties", {}))
        if extra:
            raise ValueError("arguments not in the schema: %r" % sorted(extra))
    return len(calls)


def main(path):
    counts = {}
    failures = []
    checker = make_checker()
    tool_calls = [0, 0]  # calls, answers with calls
    for line in open(path, encoding="utf-8"):
        rec = json.loads(line)
        kind, spec, out, finish = rec["kind"], rec["spec"], rec["output"], rec["finish"]
        c = counts.setdefault(kind, [0, 0])
        c[0] += 1
        ok, why = True, ""
        if finish != "stop" and kind == "tool_calls" and text_only(spec, out):
            pass  # free text (tool_choice auto) cut by max_tokens before any call: valid text
        elif finish != "stop":
            ok, why = False, "finish_reason " + finish
        elif kind == "json_schema" or kind == "json_object":
            try:
                value = json.loads(out)
                schema = spec if kind == "json_schema" else {"type": "object"}
                jsonschema.Draft202012Validator(schema, format_checker=checker).validate(value)
            except Exception as e:  # noqa: BLE001 - any parse or validation error is a failure
                ok, why = False, str(e).splitlines()[0]
        elif kind == "regex":
            if re.fullmatch(spec, out) is None:
                ok, why = False, "re.fullmatch failed"
        elif kind == "choice":
            if out not in spec:
                ok, why = False, "not one of the choices"
        elif kind == "tool_calls":
            try:
                n = check_tool_calls(spec, out, checker)
                tool_calls[0] += n
                tool_calls[1] += n > 0
            except Exception as e:  # noqa: BLE001 - any parse or validation error is a failure
                ok, why = False, str(e).splitlines()[0]
        if ok:
            c[1] += 1
        else:
            failures.append("%s %s: %r -> %s" % (kind, json.dumps(spec)[:200], out[:200], why))
    formats = sorted(checker.checkers.keys())
    for kind, (n, good) in sorted(counts.items()):
        print("%s: %d/%d outputs valid" % (kind, good, n))
    if "tool_calls" in counts:
        print("tool_calls: %d calls in %d answers" % (tool_calls[0], tool_calls[1]))
    print("format checks active: %s" % ", ".join(f for f in formats if f in ("date", "time", "date-time", "uuid", "email", "ipv4")))
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
