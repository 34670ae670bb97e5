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


def main(path):
    counts = {}
    failures = []
    checker = make_checker()
    for line in open(path, encoding="utf-8"):
        rec = json.loads(line)
        kind, spec, out, finish = rec["kind"], rec["spec"], rec["output"], rec["finish"]
        c = counts.setdefault(kind, [0, 0])
        c[0] += 1
        ok, why = True, ""
        if finish != "stop":
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
        if ok:
            c[1] += 1
        else:
            failures.append("%s %s: %r -> %s" % (kind, json.dumps(spec)[:200], out[:200], why))
    formats = sorted(checker.checkers.keys())
    for kind, (n, good) in sorted(counts.items()):
        print("%s: %d/%d outputs valid" % (kind, good, n))
    print("format checks active: %s" % ", ".join(f for f in formats if f in ("date", "time", "date-time", "uuid", "email", "ipv4")))
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
